--- Trace-abort tracker: `profile.trace(opts)`, `TraceSession` and `TraceReport`.
--
-- Listens to LuaJIT's "trace" event and counts aborts per
-- (severity, reason, location, zone). The handler chains to a trace handler
-- that was attached before (such as `-jv`), which keeps working during the
-- session and is put back at stop.
--
-- Severities:
--
-- * `blacklist`: LuaJIT blacklisted the start bytecode of the aborted trace
--   with this abort (seen as its opcode turning into the interpreter-only
--   `I*` form, since blacklisting sends no event of its own), or recording
--   ran into code that was blacklisted before (reason "blacklisted").
-- * `info`: benign trace-formation events (leaving a loop, inner loop,
--   down-recursion, retry); left out unless `includeBenign` is set.
-- * `warn`: everything else.
-- @module tecs.profile.trace

local check = require("tecs.profile.check")
local fs = require("tecs.profile.fs")
local jitinfo = require("tecs.profile.jitinfo")
local traceerr = require("tecs.profile.traceerr")
local vmevent = require("tecs.profile.vmevent")
local csv = require("tecs.profile.csv")
local clock = require("tecs.profile.clock")

local jutil_ok, jutil = pcall(require, "jit.util")
if not jutil_ok then jutil = nil end

local M = {}

--- The session object returned by `profile.trace`.
-- @type TraceSession
local TraceSession = {}
TraceSession.__index = TraceSession
M.TraceSession = TraceSession

--- The report returned by `TraceSession:stop`.
-- @type TraceReport
local TraceReport = {}
TraceReport.__index = TraceReport
M.TraceReport = TraceReport

--- CSV columns, in order.
M.COLUMNS = { "severity", "count", "reason", "location", "zone" }

local SEVERITY_RANK = { blacklist = 1, warn = 2, info = 3 }

local option_spec = {
  includeBenign = check.boolean,
}
M.option_names = option_spec

local active -- the running trace session of this Lua state, if any

-- `file:line` from a chunk name and a line: the whole chunk name without its
-- leading '@' or '=' (`-jv` shows only the file's base name), or Lua's short
-- form `[string "..."]` for chunks loaded from strings.
local function file_line(source, short_src, line)
  local first = source:sub(1, 1)
  if first == "@" or first == "=" then
    return source:sub(2) .. ":" .. line
  end
  return (short_src or "?") .. ":" .. line
end

-- How far up the stack to look for the frame of a builtin.
local MAX_STACK_LEVELS = 200

-- `file:line` of the Lua code that called `func` (a builtin or C function),
-- or nil. Some VMs (OpenResty's luajit2) report an abort inside a builtin
-- with the builtin itself rather than with the Lua function that called it.
-- The event handler `handler` runs on top of the stack being recorded (on
-- VMs that have such a stack at hand), so that Lua caller is the first Lua
-- frame outside the builtin's own frame, which is outside the handler's
-- frame. The levels up to the handler are the tracker's own calls (one of
-- them a pcall, itself a builtin) and are skipped.
local function lua_caller_location(func, handler)
  local level, state = 2, "handler"
  while level <= MAX_STACK_LEVELS do
    local info = debug.getinfo(level, "Slf")
    if not info then return nil end
    if state == "handler" then
      if rawequal(info.func, handler) then state = "builtin" end
    elseif state == "builtin" then
      if rawequal(info.func, func) then state = "caller" end
    elseif info.what == "Lua" or info.what == "main" then
      return file_line(info.source, info.short_src, info.currentline or info.linedefined or 0)
    end
    level = level + 1
  end
  return nil
end

-- Location of an abort in `func` at `pc`: `file:line` of the Lua function
-- being recorded, or of the Lua code that called the builtin being recorded;
-- the builtin's name when no such caller is on the stack.
local function location_of(funcinfo, fmt, func, pc, handler)
  local fi = funcinfo(func, pc)
  local src = fi.source
  if type(src) == "string" then
    local ok, info = pcall(debug.getinfo, func, "S")
    return file_line(src, (ok and info and info.short_src) or fi.loc, fi.currentline or fi.linedefined or 0)
  end
  return lua_caller_location(func, handler) or fmt:funcname(func)
end

-- The zone path: the zone stack joined with '/', or "" when empty.
local function zone_path(zones)
  local n = zones and #zones or 0
  if n == 0 then return "" end
  local ok, path = pcall(table.concat, zones, "/", 1, n)
  if ok then return path end
  local parts = {}
  for i = 1, n do parts[i] = tostring(zones[i]) end
  return table.concat(parts, "/")
end

-- Builds the trace-event handler of a session. Runs inside LuaJIT's event
-- dispatch (other events and hooks are off there), so it must not raise.
local function make_handler(self)
  local funcinfo, funcbc = jutil.funcinfo, jutil.funcbc
  local band = require("bit").band
  local fmt = self._fmt
  local zones = jitinfo.zone()
  local sites, counts = self._sites, self._counts
  local include_benign = self.includeBenign
  local link -- set after attaching
  local handler -- the event handler, defined below
  -- Start of the trace being recorded: function, pc, opcode name there.
  local start_tr, start_func, start_pc, start_op

  local function opname_at(func, pc)
    local ok, ins = pcall(funcbc, func, pc)
    if ok and ins then return fmt:opname(band(ins, 0xff)) end
    return nil
  end

  local function on_abort(tr, func, pc, err, info)
    counts.tracesAborted = counts.tracesAborted + 1
    local benign = fmt:is_benign(err)
    if benign then counts.benignAborts = counts.benignAborts + 1 end
    -- Blacklisting rewrites the start opcode to its I* form just before
    -- this event (ITERN becomes ITERC).
    local newly_blacklisted = false
    if start_tr == tr and start_op and fmt:knows_opcodes() then
      local now = opname_at(start_func, start_pc)
      newly_blacklisted = now ~= nil and now ~= start_op and
        (now == "I" .. start_op or (start_op == "ITERN" and now == "ITERC"))
    end
    -- A benign event that got its loop blacklisted is reported all the same.
    if benign and not include_benign and not newly_blacklisted then return end
    local severity
    if newly_blacklisted or fmt:is_blacklisted_reason(err) then
      severity = "blacklist"
    elseif benign then
      severity = "info"
    else
      severity = "warn"
    end
    if newly_blacklisted then counts.blacklistings = counts.blacklistings + 1 end
    local reason = fmt:reason(err, info)
    local location = location_of(funcinfo, fmt, func, pc, handler)
    local zone = zone_path(zones)
    local key = severity .. "\0" .. reason .. "\0" .. location .. "\0" .. zone
    local site = sites[key]
    if site then
      site.count = site.count + 1
    else
      sites[key] = { severity = severity, count = 1, reason = reason, location = location, zone = zone }
    end
  end

  function handler(what, tr, func, pc, a, b)
    local previous = link and link.previous
    if previous then
      -- Same contract as LuaJIT's own dispatch: report and carry on.
      local ok, err = pcall(previous, what, tr, func, pc, a, b)
      if not ok then
        io.stderr:write("VM handler failed: ", tostring(err), "\n")
      end
    end
    if what == "start" then
      start_tr, start_func, start_pc, start_op = tr, func, pc, nil
      if type(func) == "function" and type(pc) == "number" then
        start_op = opname_at(func, pc)
      end
      if not self._paused then counts.tracesStarted = counts.tracesStarted + 1 end
      self._recording = not self._paused
    elseif what == "stop" then
      if not self._paused then counts.tracesCompleted = counts.tracesCompleted + 1 end
      start_tr, self._recording = nil, false
    elseif what == "abort" then
      if not self._paused then
        local ok, err = pcall(on_abort, tr, func, pc, a, b)
        if not ok then counts.handlerErrors = counts.handlerErrors + 1; self._last_error = err end
      end
      start_tr, self._recording = nil, false
    elseif what == "flush" then
      start_tr, self._recording = nil, false
    end
  end

  return handler, function(l) link = l end
end

--- Start a trace-abort tracker.
-- Errors if a trace session is already active in this Lua state.
-- @tparam[opt] table opts `includeBenign` (boolean, default false): also
--   report benign trace-formation events as `info` rows
-- @treturn TraceSession
function M.start(opts)
  opts = check.options("profile.trace", opts, option_spec, 2)
  if type(jit) ~= "table" or type(jit.attach) ~= "function" or not (jutil and jutil.funcinfo) then
    error("profile.trace: needs LuaJIT with jit.attach and jit.util (this VM has no trace events)", 2)
  end
  if active then
    error("profile.trace: a trace session is already active; stop it before starting another", 2)
  end
  local session = setmetatable({
    includeBenign = opts.includeBenign == true,
    _fmt = traceerr.new(jitinfo.vmdef()),
    _sites = {},
    _counts = {
      tracesStarted = 0, tracesCompleted = 0, tracesAborted = 0,
      benignAborts = 0, blacklistings = 0, handlerErrors = 0,
    },
    _paused = false,
    _recording = false, -- a counted trace start whose outcome is not known yet
    _stopped = false,
    _started_at = clock.now(),
  }, TraceSession)
  local handler, set_link = make_handler(session)
  session._handler = handler
  session._link = vmevent.attach_trace(handler)
  set_link(session._link)
  active = session
  return session
end

--- The running trace session of this Lua state, or nil.
function M.active()
  return active
end

local function sorted_sites(sites)
  local list = {}
  for _, s in pairs(sites) do
    list[#list + 1] = { severity = s.severity, count = s.count, reason = s.reason,
                        location = s.location, zone = s.zone }
  end
  table.sort(list, function(x, y)
    local rx, ry = SEVERITY_RANK[x.severity], SEVERITY_RANK[y.severity]
    if rx ~= ry then return rx < ry end
    if x.count ~= y.count then return x.count > y.count end
    if x.reason ~= y.reason then return x.reason < y.reason end
    if x.location ~= y.location then return x.location < y.location end
    return x.zone < y.zone
  end)
  return list
end

local function build_report(self, duration)
  local c = self._counts
  local sites = sorted_sites(self._sites)
  local total, blacklisted = 0, 0
  for _, s in ipairs(sites) do
    total = total + s.count
    if s.severity == "blacklist" then blacklisted = blacklisted + s.count end
  end
  return setmetatable({
    durationSec = duration,
    totalAborts = total,
    blacklisted = blacklisted,
    sites = sites,
    includeBenign = self.includeBenign,
    -- The code that takes the report may itself be recorded into a trace
    -- (a side trace from a loop that just exited, say); such a trace ends
    -- after the report, so it is not counted as started yet either.
    tracesStarted = c.tracesStarted - (self._recording and 1 or 0),
    tracesCompleted = c.tracesCompleted,
    tracesAborted = c.tracesAborted,
    benignAborts = c.benignAborts,
    blacklistings = c.blacklistings,
  }, TraceReport)
end

local function finish(self)
  vmevent.detach_trace(self._handler, self._link)
  self._stopped = true
  self._report = build_report(self, clock.now() - self._started_at)
  if active == self then active = nil end
end

--- Stop the session and return its `TraceReport`.
-- If `filename` is given the report's CSV is also written there
-- (atomically). Errors if called twice or if the file cannot be written; in
-- the latter case the session is stopped and the report stays available from
-- `:report()` (and `report:write(path)` retries).
-- @tparam[opt] string filename
-- @treturn TraceReport
function TraceSession:stop(filename)
  check.self(self, TraceSession, "TraceSession", "stop", 2)
  check.filename("TraceSession:stop", filename, 2)
  if self._stopped then
    error("TraceSession:stop: session already stopped (its report is still available from :report())", 2)
  end
  finish(self)
  if filename then
    local ok, err = fs.write_atomic(filename, tostring(self._report))
    if not ok then
      error("TraceSession:stop: " .. err ..
        " (the session is stopped and nothing is lost: :report() returns the report, report:write(path) retries)", 2)
    end
  end
  return self._report
end

--- Stop counting aborts until `:resume()`. Idempotent. The handler stays
-- attached (a chained handler such as `-jv` keeps receiving events).
function TraceSession:pause()
  check.self(self, TraceSession, "TraceSession", "pause", 2)
  if self._stopped then error("TraceSession:pause: session already stopped", 2) end
  self._paused = true
end

--- Count aborts again after `:pause()`. Idempotent.
function TraceSession:resume()
  check.self(self, TraceSession, "TraceSession", "resume", 2)
  if self._stopped then error("TraceSession:resume: session already stopped", 2) end
  self._paused = false
end

--- The report: final after stop, a snapshot while running.
-- @treturn TraceReport
function TraceSession:report()
  check.self(self, TraceSession, "TraceSession", "report", 2)
  if self._stopped then return self._report end
  return build_report(self, clock.now() - self._started_at)
end

--- Whether the session is still running.
function TraceSession:isRunning()
  check.self(self, TraceSession, "TraceSession", "isRunning", 2)
  return not self._stopped
end

--- Whether the session is paused.
function TraceSession:isPaused()
  check.self(self, TraceSession, "TraceSession", "isPaused", 2)
  return self._paused and not self._stopped
end

function TraceSession:__tostring()
  return string.format("TraceSession(%s%s)", self._stopped and "stopped" or "running",
    (self._paused and not self._stopped) and ", paused" or "")
end

--- The report as RFC 4180 CSV (header `severity,count,reason,location,zone`,
-- CRLF after every record). Also what `tostring(report)` returns.
-- @treturn string
function TraceReport:csv()
  check.self(self, TraceReport, "TraceReport", "csv", 2, "report")
  local rows = {}
  for i, s in ipairs(self.sites) do
    rows[i] = { s.severity, s.count, s.reason, s.location, s.zone }
  end
  return csv.document(M.COLUMNS, rows)
end

TraceReport.__tostring = function(self) return TraceReport.csv(self) end

--- Write the CSV to `filename` (atomically).
-- @tparam string filename
-- @treturn string the text written
function TraceReport:write(filename)
  check.self(self, TraceReport, "TraceReport", "write", 2, "report")
  if type(filename) ~= "string" or filename == "" then
    check.fail(2, "TraceReport:write: bad argument #1 'filename' (non-empty string expected, got %s)",
      check.describe(filename))
  end
  local text = self:csv()
  local ok, err = fs.write_atomic(filename, text)
  if not ok then error("TraceReport:write: " .. err, 2) end
  return text
end

return M
