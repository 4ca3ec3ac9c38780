--- Sampling sessions: `profile.sample(opts)` and the `SampleSession` object.
-- The sampling itself is native (`tecs.profile.native`): LuaJIT's profiler
-- calls into Rust, which reads the zone path and the stack and counts them.
-- No Lua code runs per sample.
-- @module tecs.profile.sample

local callsite = require("tecs.profile.callsite")
local check = require("tecs.profile.check")
local fs = require("tecs.profile.fs")
local jitinfo = require("tecs.profile.jitinfo")
local output = require("tecs.profile.output")
local session_base = require("tecs.profile.session")

local native_ok, native = pcall(require, "tecs.profile.native")

local M = {}

--- The session object returned by `profile.sample`: `stop`, `pause`,
-- `resume`, `collapsed` and `isRunning` come from `tecs.profile.session`
-- (the hooks they call are below `M.active`).
-- @type SampleSession
local lifecycle = {
  name = "SampleSession",
  result = "collapsed",
  stopped_hint = "its text is still available from :collapsed()",
  kept_hint = ":collapsed() returns the text, :write(path) retries",
}
local SampleSession = session_base.class(lifecycle)
M.SampleSession = SampleSession

local active -- the running session of this Lua state, if any

local option_spec = {
  intervalMs = check.number(0.1, 60000, "a number of milliseconds from 0.1 to 60000"),
  zone = function(v)
    if type(v) ~= "string" or v:gsub("/+$", "") == "" then
      return false, "a non-empty zone path string such as \"update/physics\""
    end
    return true
  end,
  stackDepth = check.integer(1, 1000, "an integer from 1 to 1000"),
  clock = check.oneof("cpu", "wall"),
  precision = check.oneof("function", "line"),
  maxStacks = check.integer(1, 100000000, "an integer from 1 to 100000000"),
  resolveC = check.boolean,
  format = check.oneof("auto", "collapsed", "svg", "speedscope"),
}
M.option_names = option_spec

--- Start a sampling session.
-- Errors if a sample session is already active (in this Lua state, or in
-- another one of the process: LuaJIT has a single profiler).
-- @tparam[opt] table opts `intervalMs` (default 1), `zone` (zone path prefix
--   filter), `stackDepth` (default 16), `clock` ("cpu" default, or "wall"),
--   `precision` ("function" default: compiled code is attributed to its
--   function, shown as `file:first-last`; "line": to its line, using
--   LuaJIT's line mode, which slows compiled code down),
--   `maxStacks` (unique stacks kept before folding into an overflow line,
--   default 100000), `resolveC` (name C functions with dladdr, default true),
--   `format` of files written by stop/write ("auto" default: by extension,
--   ".svg" SVG flamegraph, ".speedscope.json" speedscope, else collapsed;
--   or "collapsed", "svg", "speedscope")
-- @treturn SampleSession
function M.start(opts)
  opts = check.options("profile.sample", opts, option_spec, 2)
  if not native_ok then
    error("profile.sample: cannot load the native module tecs.profile.native: " .. tostring(native), 2)
  end
  local available, why = native.available()
  if not available then
    error("profile.sample: " .. why, 2)
  end
  if active then
    error("profile.sample: a sample session is already active; stop it before starting another", 2)
  end
  local zone_filter = opts.zone and opts.zone:gsub("/+$", "") or nil
  local zones = jitinfo.zone()
  local ok, handle = pcall(native.start, {
    interval_us = (opts.intervalMs or 1) * 1000,
    depth = opts.stackDepth or 16,
    filter = zone_filter,
    clock = opts.clock or "cpu",
    max_stacks = opts.maxStacks,
    zones = zones,
    ffnames = jitinfo.ffnames(),
    resolve_c = opts.resolveC,
    precision = opts.precision or "function",
    call_site = callsite.resolver(),
  })
  if not ok then
    -- Native errors may carry mlua's prefix and a traceback of this shim.
    local msg = tostring(handle):gsub("^runtime error: ", ""):gsub("\n*stack traceback:.*$", "")
    msg = msg:gsub("^tecs%.profile%.native%.start: ", "")
    error("profile.sample: " .. msg, 2)
  end
  local session = setmetatable({
    _native = handle,
    _stopped = false,
    _text = nil,
    intervalMs = opts.intervalMs or 1,
    zone = zone_filter,
    stackDepth = opts.stackDepth or 16,
    clock = opts.clock or "cpu",
    precision = opts.precision or "function",
    format = opts.format or "auto",
  }, SampleSession)
  active = session
  return session
end

--- The running session of this Lua state, or nil.
function M.active()
  return active
end

-- Stops sampling; returns the final text. Data lost to another sampler
-- taking LuaJIT's profiler over is reported once, here; stats().warning
-- keeps the text.
function lifecycle.finish(self)
  self._native:stop()
  local warning = self._native:stats().warning
  if warning then
    self.warning = warning
    io.stderr:write("tecs.profile: warning: ", warning, "\n")
  end
  if active == self then active = nil end
  return self._native:collapsed()
end

function lifecycle.snapshot(self)
  return self._native:collapsed()
end

function lifecycle.save(self, filename)
  return self:_write_file(filename, nil)
end

function lifecycle.set_paused(self, paused)
  if paused then self._native:pause() else self._native:resume() end
end

-- Writes the profile to `filename` in the session's format (or `format`),
-- atomically. Returns true, or nil and a message.
function SampleSession:_write_file(filename, format)
  local fmt = output.format_for(filename, format or self.format)
  local content, err
  if fmt == "collapsed" then
    content = self:collapsed()
  else
    content, err = output.render(self._native:profile(), fmt, { intervalMs = self.intervalMs })
    if not content then return nil, string.format("cannot write '%s': %s", filename, err) end
  end
  return fs.write_atomic(filename, content)
end

--- Write the profile to `filename` (atomically); for retrying a failed
-- `:stop(filename)` or saving a snapshot of a running session. The format
-- follows `format`, else the session's `format` option, else the extension
-- (`.svg`, `.speedscope.json`, anything else collapsed).
-- @tparam string filename
-- @tparam[opt] string format "collapsed", "svg", "speedscope" or "auto"
-- @treturn string the collapsed text
function SampleSession:write(filename, format)
  check.self(self, SampleSession, "SampleSession", "write", 2)
  if type(filename) ~= "string" or filename == "" then
    check.fail(2, "SampleSession:write: bad argument #1 'filename' (non-empty string expected, got %s)",
      check.describe(filename))
  end
  if format ~= nil then
    local ok, expected = check.oneof(unpack(output.formats))(format)
    if not ok then
      check.fail(2, "SampleSession:write: bad argument #2 'format' (%s expected, got %s)", expected, check.describe(format))
    end
  end
  local text = self:collapsed()
  local ok, err = self:_write_file(filename, format)
  if not ok then error("SampleSession:write: " .. err, 2) end
  return text
end

--- Counters of the session: `samples`, `recordedSamples`, `pausedSamples`,
-- `filteredSamples`, `overflowSamples`, `stacks`, `durationSec`, `cpuSec`,
-- `rate` (samples per second achieved), `requestedRate`, `clock` (timer in
-- use: "thread-cpu", "wall" or "process-cpu-itimer"), `memoryBytes`, and
-- `warning` when another sampler (jit.p, jit.profile) took LuaJIT's
-- profiler over.
-- @treturn table
function SampleSession:stats()
  check.self(self, SampleSession, "SampleSession", "stats", 2)
  return self._native:stats()
end

function SampleSession:__tostring()
  return string.format("SampleSession(%s, %gms)", self._stopped and "stopped" or "running", self.intervalMs)
end

return M
