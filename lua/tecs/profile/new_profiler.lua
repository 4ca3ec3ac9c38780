--- `newProfiler(variant, sampledelay)`: the profiler object API of the
-- classic `debug.sethook` profilers, on top of tecs-profile.
--
--    local profile = require("tecs.profile")
--    local p = profile.newProfiler("call")   -- or "time" (the default)
--    p:start() ... p:stop()
--    print(p:report())                      -- sorted by self time
--    local data = loadstring(p:lua_report())()
--
-- Code written against the global `newProfiler` runs after an explicit
-- `require("tecs.profile.new_profiler").install()`; requiring sets no
-- global.
--
-- "time" samples with `profile.sample` (no hook: the JIT keeps running);
-- `sampledelay`, an opcode count in the original, becomes an interval of
-- `sampledelay / 100000` milliseconds. "call" counts every call with a
-- `debug.sethook` hook (the JIT does not compile while it runs); see
-- `tecs.profile.new_profiler.calls` for how tail calls, errors, C functions and
-- coroutines are handled.
-- @module tecs.profile.new_profiler

local check = require("tecs.profile.check")
local calls = require("tecs.profile.new_profiler.calls")
local names = require("tecs.profile.new_profiler.names")
local samples = require("tecs.profile.new_profiler.samples")
local sample = require("tecs.profile.sample")

local M = {}

--- `sampledelay` when none is given (opcodes, as in the original).
M.DEFAULT_SAMPLEDELAY = 100000

local VARIANTS = { time = true, call = true }

local Profiler = {}
Profiler.__index = Profiler
M.Profiler = Profiler

local active -- the running profiler, if any

--- Create a profiler.
-- @tparam[opt="time"] string variant "time" (sampling) or "call" (call hook)
-- @tparam[opt=100000] number sampledelay opcodes between samples in the
--   original; here `sampledelay / 100000` ms between samples ("time" only)
-- @return the profiler; or nil and a message for an unknown variant or
--   while another profiler runs
function M.newProfiler(variant, sampledelay)
  if variant == nil then variant = "time" end
  if sampledelay ~= nil and (type(sampledelay) ~= "number" or not (sampledelay > 0) or sampledelay == math.huge) then
    check.fail(2, "newProfiler: bad argument #2 'sampledelay' (positive number of opcodes or nil expected, got %s)",
      check.describe(sampledelay))
  end
  if not VARIANTS[variant] then
    return nil, string.format('newProfiler: unknown variant %s ("time" or "call" expected)', check.describe(variant))
  end
  if active then
    return nil, "newProfiler: a profiler is already running; stop it first"
  end
  sampledelay = sampledelay or M.DEFAULT_SAMPLEDELAY
  return setmetatable({
    variant = variant,
    sampledelay = sampledelay,
    intervalMs = samples.interval_ms(sampledelay),
    _prevented = {},
    _running = false,
  }, Profiler)
end

--- Set the global `newProfiler`, for code written against the original
-- (which used a global). Nothing else is set.
-- @treturn function `newProfiler`
function M.install()
  rawset(_G, "newProfiler", M.newProfiler)
  return M.newProfiler
end

local function method_check(self, method)
  check.self(self, Profiler, "Profiler", method, 3, "profiler")
end

--- Start profiling. Returns true; or nil and a message when another
-- profiler runs (this one or another), when another debug hook is set
-- ("call"), or when sampling cannot start ("time").
function Profiler:start()
  method_check(self, "start")
  if active then return nil, "Profiler:start: a profiler is already running; stop it first" end
  if self.variant == "call" then
    if debug.gethook() then
      return nil, "Profiler:start: another debug hook is set (a coverage tool or debugger?); the \"call\" variant needs the hook"
    end
    local prevented = {}
    for fn, level in pairs(self._prevented) do prevented[fn] = level end
    -- The profiler's own calls are not profiled.
    prevented[Profiler.stop] = 2
    prevented[Profiler.report] = 2
    prevented[Profiler.lua_report] = 2
    self._recorder = calls.new(prevented)
    self._session = nil
    active = self
    self._running = true
    self._recorder.start()
  else
    local ok, session = pcall(sample.start, { intervalMs = self.intervalMs })
    if not ok then return nil, "Profiler:start: " .. tostring(session):gsub("^.-profile%.sample: ", "") end
    self._session = session
    self._recorder = nil
    active = self
    self._running = true
  end
  self._rows = nil
  return true
end

--- Stop profiling; does nothing unless this profiler is running.
function Profiler:stop()
  method_check(self, "stop")
  if active ~= self then return end
  if self._recorder then
    self._recorder.stop()
  else
    self._session:stop()
  end
  self._running = false
  self._rows = nil
  active = nil
end

--- Exclude `func`: level 1 the function itself (what it calls is counted,
-- under its caller), level 2 it and everything it calls. Takes effect at
-- the next `start` for "call"; at every report for "time". In "time", only
-- Lua functions can be excluded (samples name C functions by address).
-- Level 2 also covers what `func` reaches by a tail call (`return
-- helper(n)`), whose frame replaces `func`'s: "call" sees the replacement;
-- "time" finds the functions `func` tail-calls in its bytecode (callees
-- named by an upvalue, a global or a field of either) and leaves their
-- samples out wherever they were taken.
-- @tparam function func
-- @tparam[opt=1] number level 1 or 2
function Profiler:prevent(func, level)
  method_check(self, "prevent")
  if type(func) ~= "function" then
    check.fail(2, "Profiler:prevent: bad argument #1 'func' (function expected, got %s)", check.describe(func))
  end
  if level == nil then level = 1 end
  if level ~= 1 and level ~= 2 then
    check.fail(2, "Profiler:prevent: bad argument #2 'level' (1 or 2 expected, got %s)", check.describe(level))
  end
  self._prevented[func] = level
  self._rows = nil
end

-- The rows of the report, one per function, unsorted, with the totals.
local function rows_of_calls(self)
  local namer = names.namer()
  local records = self._recorder.records()
  local name_of, used = {}, {}
  for fn in pairs(records) do
    local name = namer(fn)
    if used[name] then
      local n = 2
      while used[name .. " #" .. n] do n = n + 1 end
      name = name .. " #" .. n
    end
    used[name] = true
    name_of[records[fn]] = name
  end
  local rows = {}
  for _, r in pairs(records) do
    local row = { name = name_of[r], calls = r.calls, self = r.self, total = r.total, timed = r.timed,
      callers = {}, callees = {} }
    for other, e in pairs(r.callers) do row.callers[name_of[other]] = { calls = e.calls } end
    for other, e in pairs(r.callees) do row.callees[name_of[other]] = { calls = e.calls, time = e.time } end
    rows[#rows + 1] = row
  end
  return rows
end

local function rows_of_samples(self)
  local records, kept, dropped = samples.aggregate(self._session, self._prevented)
  local seconds = self.intervalMs / 1000
  local rows = {}
  for _, r in pairs(records) do
    local row = { name = r.name, selfSamples = r.selfSamples, totalSamples = r.totalSamples,
      self = r.selfSamples * seconds, total = r.totalSamples * seconds, callers = {}, callees = {} }
    for other, n in pairs(r.callers) do row.callers[other] = { samples = n } end
    for other, n in pairs(r.callees) do row.callees[other] = { samples = n } end
    rows[#rows + 1] = row
  end
  return rows, { samples = kept, droppedSamples = dropped }
end

local function rows(self, by_total)
  if not (self._recorder or self._session) then return {}, {} end
  local list, meta
  if self.variant == "call" then list, meta = rows_of_calls(self), {} else list, meta = rows_of_samples(self) end
  local key = by_total and "total" or "self"
  local other = by_total and "self" or "total"
  table.sort(list, function(a, b)
    if a[key] ~= b[key] then return a[key] > b[key] end
    if a[other] ~= b[other] then return a[other] > b[other] end
    return a.name < b.name
  end)
  return list, meta
end

local function pct(part, whole)
  if whole <= 0 then return 0 end
  return 100 * part / whole
end

--- The report: one line per function, sorted by self time (by total time
-- with `sort_by_total_time`). "call": calls, total and self seconds (C
-- functions: calls only). "time": sample counts, shares and the time they
-- stand for; calls are not known.
-- @tparam[opt] boolean sort_by_total_time
-- @treturn string
function Profiler:report(sort_by_total_time)
  method_check(self, "report")
  local list, meta = rows(self, sort_by_total_time)
  local width = #"function"
  for _, row in ipairs(list) do
    if #row.name > width then width = #row.name end
  end
  local out = {}
  local sorted = sort_by_total_time and "total time" or "self time"
  if self.variant == "call" then
    local n, all = 0, 0
    for _, row in ipairs(list) do n, all = n + row.calls, all + row.self end
    out[1] = string.format('# newProfiler "call": %d functions, %d calls, %.6f s of self time; sorted by %s',
      #list, n, all, sorted)
    out[2] = "# seconds on a monotonic clock; C functions: calls counted, time not measured (it is in their callers' self time)"
    out[3] = string.format("%-" .. width .. "s  %10s  %12s  %12s  %7s", "function", "calls", "total s", "self s", "self %")
    for _, row in ipairs(list) do
      if row.timed then
        out[#out + 1] = string.format("%-" .. width .. "s  %10d  %12.6f  %12.6f  %6.2f%%", row.name, row.calls,
          row.total, row.self, pct(row.self, all))
      else
        out[#out + 1] = string.format("%-" .. width .. "s  %10d  %12s  %12s  %7s", row.name, row.calls, "-", "-", "-")
      end
    end
  else
    local n = meta.samples or 0
    out[1] = string.format('# newProfiler "time": %d samples, one every %g ms of CPU time; sorted by %s%s',
      n, self.intervalMs, sorted,
      (meta.droppedSamples or 0) > 0 and string.format("; %d samples in prevented functions left out", meta.droppedSamples) or "")
    local note = self._session and samples.few_samples_note(self._session, n, self.intervalMs)
    if note then out[#out + 1] = "# " .. note end
    out[#out + 1] = "# calls are not known (sampling counts no calls); seconds are samples times the interval"
    out[#out + 1] = string.format("%-" .. width .. "s  %10s  %10s  %8s  %8s  %10s  %10s", "function", "self smp", "total smp",
      "self %", "total %", "self s", "total s")
    for _, row in ipairs(list) do
      out[#out + 1] = string.format("%-" .. width .. "s  %10d  %10d  %7.2f%%  %7.2f%%  %10.4f  %10.4f", row.name,
        row.selfSamples, row.totalSamples, pct(row.selfSamples, n), pct(row.totalSamples, n), row.self, row.total)
    end
  end
  return table.concat(out, "\n") .. "\n"
end

-- Lua source for a value made of tables, strings, numbers and booleans.
local function serialize(v, indent, out)
  local t = type(v)
  if t == "string" then
    out[#out + 1] = string.format("%q", v)
  elseif t == "number" then
    if v == math.floor(v) and math.abs(v) < 2 ^ 53 then
      out[#out + 1] = string.format("%d", v)
    else
      out[#out + 1] = string.format("%.17g", v)
    end
  elseif t == "boolean" then
    out[#out + 1] = tostring(v)
  else
    local inner = indent .. "  "
    out[#out + 1] = "{\n"
    local keys = {}
    for k in pairs(v) do
      if type(k) ~= "number" or k > #v or k < 1 or k ~= math.floor(k) then keys[#keys + 1] = k end
    end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for i = 1, #v do
      out[#out + 1] = inner
      serialize(v[i], inner, out)
      out[#out + 1] = ",\n"
    end
    for _, k in ipairs(keys) do
      out[#out + 1] = inner
      if type(k) == "string" and k:find("^[%a_][%w_]*$") then
        out[#out + 1] = k
      else
        out[#out + 1] = "["
        serialize(k, inner, out)
        out[#out + 1] = "]"
      end
      out[#out + 1] = " = "
      serialize(v[k], inner, out)
      out[#out + 1] = ",\n"
    end
    out[#out + 1] = indent .. "}"
  end
end

--- The data of `report` as loadable Lua source (`loadstring(s)()` gives
-- the table): `variant`, `intervalMs`, `samples` and, when they are too few
-- to rank functions, `note` saying why and what to do ("time"), and
-- `functions`, in the report's order (by self time), each with `name`,
-- `self` and `total` (seconds), `calls` and `timed` ("call") or
-- `selfSamples` and `totalSamples` ("time"), and `callers` and `callees`
-- (name -> `{ calls, time }` or `{ samples }`).
-- @treturn string
function Profiler:lua_report()
  method_check(self, "lua_report")
  local list, meta = rows(self, false)
  local data = { variant = self.variant, functions = list }
  if self.variant == "time" then
    data.intervalMs = self.intervalMs
    data.samples = meta.samples or 0
    data.droppedSamples = meta.droppedSamples or 0
    data.note = self._session and samples.few_samples_note(self._session, data.samples, self.intervalMs)
  else
    data.clock = "monotonic"
  end
  local out = { "-- newProfiler report (tecs-profile); times in seconds\nreturn " }
  serialize(data, "", out)
  out[#out + 1] = "\n"
  return table.concat(out)
end

function Profiler:__tostring()
  return string.format('Profiler("%s", %s)', self.variant, self._running and "running" or "stopped")
end

return M
