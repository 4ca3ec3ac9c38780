--- Trace-abort tracker: `profile.trace(opts)` and `TraceSession`.
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
--
-- This module is the session; its parts live in the folder beside it
-- (`trace.lua` rather than `trace/init.lua`, so that a `package.path` with
-- only `?.lua` patterns, as LÖVE setups often have, finds it):
-- `tecs.profile.trace.tracker` (the event handler),
-- `tecs.profile.trace.reasons` (abort reasons worded like `-jv`),
-- `tecs.profile.trace.vmevent` (sharing the event with an earlier handler),
-- `tecs.profile.trace.lines` (the lines each completed trace covers),
-- `tecs.profile.trace.report` (`TraceReport` and its CSV).
-- @module tecs.profile.trace

local check = require("tecs.profile.check")
local clock = require("tecs.profile.clock")
local jitinfo = require("tecs.profile.jitinfo")
local linemap = require("tecs.profile.trace.lines")
local session_base = require("tecs.profile.session")
local reasons = require("tecs.profile.trace.reasons")
local tracker = require("tecs.profile.trace.tracker")
local vmevent = require("tecs.profile.trace.vmevent")
-- The report (`tecs.profile.trace.report`, with the CSV writer) and file
-- writing load when a report is first made: a running session needs
-- neither.

local M = {}

local function build_report(self, elapsed_sec)
  return require("tecs.profile.trace.report").build(self, elapsed_sec)
end

local native_ok, native = pcall(require, "tecs.profile.native")

-- Option names, accepted values and defaults are declared in the native
-- module with every other function's (`native.options.trace`).
-- The tracker needs nothing native, so a session without options starts
-- even where the native module cannot load; options need its declarations.
local function checked_options(opts, level)
  level = level + 1
  if opts == nil then return {} end
  if not native_ok then
    if type(opts) == "table" and next(opts) == nil then return opts end
    check.fail(level, "profile.trace: options need the native module tecs.profile.native, which cannot load: %s",
      tostring(native))
  end
  local ok, err = native.call(native.raw.checkOptions, "trace", opts)
  if not ok then check.fail(level, "profile.trace: %s", err) end
  return opts
end

local active -- the running trace session of this Lua state, if any

local function elapsed(self)
  return clock.now() - self._started_at
end

--- The session object returned by `profile.trace`: `stop`, `pause`,
-- `resume`, `report` and `isRunning` come from `tecs.profile.session`.
-- Pausing stops counting; the handler stays attached (a chained handler
-- such as `-jv` keeps receiving events).
-- @type TraceSession
local TraceSession = session_base.class({
  name = "TraceSession",
  result = "report",
  stopped_hint = "its report is still available from :report()",
  kept_hint = ":report() returns the report, report:write(path) retries",
  finish = function(self)
    vmevent.detach(self._record_handler, self._record_link)
    vmevent.detach_trace(self._handler, self._link)
    if active == self then active = nil end
    return build_report(self, elapsed(self))
  end,
  snapshot = function(self) return build_report(self, elapsed(self)) end,
  save = function(self, filename)
    return require("tecs.profile.fs").write_atomic(filename, tostring(self._result))
  end,
  set_paused = function() end, -- the handler reads `_paused`
})
M.TraceSession = TraceSession

--- Start a trace-abort tracker.
-- Errors if a trace session is already active in this Lua state.
-- @tparam[opt] table opts `includeBenign` (boolean, default false): also
--   report benign trace-formation events as `info` rows
-- @treturn TraceSession
function M.start(opts)
  opts = checked_options(opts, 2)
  if not tracker.available() then
    error("profile.trace: needs LuaJIT with jit.attach and jit.util (this VM has no trace events)", 2)
  end
  if active then
    error("profile.trace: a trace session is already active; stop it before starting another", 2)
  end
  local session = session_base.new(TraceSession, {
    includeBenign = opts.includeBenign == true,
    _fmt = reasons.new(jitinfo.vmdef()),
    _sites = {},
    _counts = {
      tracesStarted = 0, tracesCompleted = 0, tracesAborted = 0,
      benignAborts = 0, blacklistings = 0, handlerErrors = 0,
    },
    _recording = false, -- a counted trace start whose outcome is not known yet
    _lines = linemap.new(),
    _started_at = clock.now(),
  })
  local handler, set_link, record_handler, set_record_link = tracker.handler(session)
  session._handler = handler
  session._link = vmevent.attach_trace(handler)
  set_link(session._link)
  session._record_handler = record_handler
  session._record_link = vmevent.attach(record_handler, "record")
  set_record_link(session._record_link)
  active = session
  return session
end

--- The running trace session of this Lua state, or nil.
function M.active()
  return active
end

--- Whether the session is paused.
function TraceSession:isPaused()
  check.self(self, TraceSession, "TraceSession", "isPaused", 2)
  return session_base.is_paused(self)
end

function TraceSession:__tostring()
  return string.format("TraceSession(%s%s)", self._stopped and "stopped" or "running",
    session_base.is_paused(self) and ", paused" or "")
end

return M
