--- The trace-event handler of a trace session: counts trace starts, ends
-- and aborts, and sorts each counted abort into a site
-- (severity, reason, location, zone).
--
-- The handler runs inside LuaJIT's event dispatch (other events and hooks
-- are off there), so it never raises: a failure while placing an abort is
-- counted in `handlerErrors` instead.
-- @module tecs.profile.trace.tracker

local jitinfo = require("tecs.profile.jitinfo")
local linemap = require("tecs.profile.trace.lines")

local jutil_ok, jutil = pcall(require, "jit.util")
if not jutil_ok then jutil = nil end

-- Whether a location (`file:line`) is in the profiler's own files: the
-- rule by which no profile shows its frames (`native.isOwnFrame`). Without
-- the native module, no location is.
local native_ok, native = pcall(require, "tecs.profile.native")
local is_own = native_ok and native.isOwnFrame or function() return false end

local M = {}

--- Whether this VM can run the tracker (`jit.attach` and `jit.util`).
function M.available()
  return type(jit) == "table" and type(jit.attach) == "function" and jutil ~= nil and jutil.funcinfo ~= nil
end

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

-- `file:line` where a trace starts (always in a Lua function: a loop, a
-- function's entry or a side exit), or the function's name.
local function start_location(funcinfo, fmt, func, pc)
  if type(func) ~= "function" or type(pc) ~= "number" then return "?" end
  local fi = funcinfo(func, pc)
  if type(fi.source) == "string" then
    local ok, info = pcall(debug.getinfo, func, "S")
    return file_line(fi.source, (ok and info and info.short_src) or fi.loc, fi.currentline or fi.linedefined or 0)
  end
  return fmt:funcname(func)
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

--- The trace-event handler of `self`, a trace session.
-- The handler reads `self._paused` and `self.includeBenign`, and fills
-- `self._sites` (sites by key), `self._counts` and `self._lines` (a
-- `tecs.profile.trace.lines` map of the lines each completed trace covers);
-- it sets `self._recording` while a counted trace is being recorded.
-- @tparam table self the session (also needs `_fmt`, a `tecs.profile.trace.reasons` formatter)
-- @treturn function the handler, for `jit.attach`
-- @treturn function `set_link(link)`: gives the handler the link returned by
--   `tecs.profile.trace.vmevent.attach_trace`, whose `previous` handler it chains to
-- @treturn function the "record" event handler, which notes the bytecodes of
--   the trace being recorded (for `jit.attach(fn, "record")`)
-- @treturn function `set_record_link(link)`: its link, as for `set_link`
function M.handler(self)
  local funcinfo, funcbc = jutil.funcinfo, jutil.funcbc
  local band = require("bit").band
  local fmt = self._fmt
  local zones = jitinfo.zone()
  local sites, counts = self._sites, self._counts
  local lines = self._lines
  local traceinfo = jutil.traceinfo
  local include_benign = self.includeBenign
  local link -- set after attaching
  local handler -- the event handler, defined below
  -- Start of the trace being recorded: function, pc, opcode name there.
  local start_tr, start_func, start_pc, start_op
  -- Parent trace and exit of the side trace being recorded.
  local start_parent, start_exit
  -- The trace whose recorded bytecodes are noted: the one being recorded,
  -- when its start was counted.
  local collect_tr

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
    -- Aborts in the profiler's own files (its wrappers of a game's
    -- callbacks, its poll, its start) are left out, as samples leave out
    -- its frames: they are counted in `tracesAborted` only.
    local location = location_of(funcinfo, fmt, func, pc, handler)
    if is_own(location) then return end
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
    local zone = zone_path(zones)
    local key = severity .. "\0" .. reason .. "\0" .. location .. "\0" .. zone
    -- On the timeline of a sampling session running beside (nothing is
    -- made otherwise).
    local sample = package.loaded["tecs.profile.sample"]
    if sample and sample.active() then
      sample.event("trace abort", { reason = reason, location = location, severity = severity, zone = zone })
    end
    local site = sites[key]
    if site then
      site.count = site.count + 1
    else
      sites[key] = { severity = severity, count = 1, reason = reason, location = location, zone = zone }
    end
  end

  -- List a trace that completed with the lines it covers.
  local function on_stop(tr)
    local entry = {
      number = tr,
      start = start_location(funcinfo, fmt, start_func, start_pc),
      parent = start_parent,
      exit = start_exit,
    }
    local ok, info = pcall(traceinfo, tr)
    if ok and type(info) == "table" then
      entry.link, entry.linkTo = info.linktype, info.link
    end
    linemap.commit(lines, entry)
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
      start_parent, start_exit = a, b
      -- Nothing is pending here (every outcome drops it). The check saves
      -- a Lua call: calls in this event tick the VM's hot counters, which
      -- are still counting then (they stop while a trace is recorded,
      -- which covers the record, stop and abort events).
      if lines.n > 0 then linemap.drop(lines) end
      if type(func) == "function" and type(pc) == "number" then
        start_op = opname_at(func, pc)
      end
      if not self._paused then counts.tracesStarted = counts.tracesStarted + 1 end
      self._recording = not self._paused
      collect_tr = self._recording and tr or nil
    elseif what == "stop" then
      -- Counted and listed only when its start was: a trace started while
      -- paused (or before the tracker) and completed after is neither.
      if not self._paused and start_tr == tr and self._recording then
        counts.tracesCompleted = counts.tracesCompleted + 1
        local ok, err = pcall(on_stop, tr)
        if not ok then counts.handlerErrors = counts.handlerErrors + 1; self._last_error = err end
      end
      linemap.drop(lines)
      start_tr, collect_tr, self._recording = nil, nil, false
    elseif what == "abort" then
      if not self._paused then
        local ok, err = pcall(on_abort, tr, func, pc, a, b)
        if not ok then counts.handlerErrors = counts.handlerErrors + 1; self._last_error = err end
      end
      linemap.drop(lines)
      start_tr, collect_tr, self._recording = nil, nil, false
    elseif what == "flush" then
      if lines.n > 0 then linemap.drop(lines) end
      start_tr, collect_tr, self._recording = nil, nil, false
    end
  end

  local record_previous -- the record handler chained to, set after attaching
  local funcs, pcs, MAX_PENDING = lines.funcs, lines.pcs, linemap.MAX_PENDING
  -- Runs for every bytecode recorded, so it only appends, in place (see
  -- `tecs.profile.trace.lines`), with no call; only for `collect_tr`, a
  -- trace whose "start" was seen (a recording under way at attach time is
  -- skipped).
  local function record_handler(tr, func, pc, depth)
    if record_previous then
      local ok, err = pcall(record_previous, tr, func, pc, depth)
      if not ok then
        io.stderr:write("VM handler failed: ", tostring(err), "\n")
      end
    end
    if tr == collect_tr then
      local n = lines.n
      if n < MAX_PENDING then
        n = n + 1
        funcs[n], pcs[n] = func, pc
        lines.n = n
      else
        lines.truncated = true
      end
    end
  end

  return handler, function(l) link = l end, record_handler, function(l) record_previous = l.previous end
end

return M
