--- Sampling sessions: `profile.sample(opts)` and the `SampleSession` object.
-- The sampling itself is native (`tecs.profile.native`): LuaJIT's profiler
-- calls into Rust, which reads the zone path and the stack and counts them.
-- No Lua code runs per sample.
-- @module tecs.profile.sample

local callsite = require("tecs.profile.callsite")
local cfuncs = require("tecs.profile.cfuncs")
local check = require("tecs.profile.check")
local clock = require("tecs.profile.clock")
local jitinfo = require("tecs.profile.jitinfo")
local love_zones = require("tecs.profile.love_zones")
local session_base = require("tecs.profile.session")
local timeline = require("tecs.profile.timeline")

local native_ok, native = pcall(require, "tecs.profile.native")

local M = {}

--- The session object returned by `profile.sample`: `stop`, `pause`,
-- `resume`, `collapsed` and `isRunning` come from `tecs.profile.session`
-- (the hooks they call are below `M.active`).
-- @type SampleSession
local lifecycle = session_base.native_kind("SampleSession")
local SampleSession = session_base.class(lifecycle)
M.SampleSession = SampleSession
timeline.install(SampleSession)

local active -- the running session of this Lua state, if any

-- The options are declared (names, bounds, defaults) in the native module;
-- this layer passes the user's table through.
M.option_names = {}
if native_ok then
  for _, name in ipairs(native.options.sample.names) do M.option_names[name] = true end
end

--- Start a sampling session.
-- Errors if a sample session is already active (in this Lua state, or in
-- another one of the process: LuaJIT has a single profiler).
-- @tparam[opt] table opts options `intervalMs`, `zone`, `stackDepth`,
--   `clock`, `precision`, `maxStacks`, `resolveC`, `skipStartingThread`,
--   `format`, `timelineSamples`, `slowFrameMs`, `autosavePath`,
--   `autosaveSeconds`, `loveZones`: their defaults,
--   the values each accepts and what it does are declared once, in the
--   native module (`native.options.sample`), and tabled in the docs
-- @treturn SampleSession
function M.start(opts)
  if not native_ok then
    error("profile.sample: cannot load the native module tecs.profile.native: " .. tostring(native), 2)
  end
  -- Bad options are reported as such on every VM, before what this VM lacks.
  local ok, err = native.call(native.raw.check_options, "sample", opts)
  if not ok then error("profile.sample: " .. err, 2) end
  if opts and opts.autosaveSeconds and not opts.autosavePath then
    error("profile.sample: option 'autosaveSeconds' goes with option 'autosavePath' (the file to write)", 2)
  end
  local available, why = native.available()
  if not available then
    error("profile.sample: " .. why, 2)
  end
  if active then
    error("profile.sample: a sample session is already active; stop it before starting another", 2)
  end
  local handle, settings
  local zones = jitinfo.zone()
  -- Every view of the session, running or stopped, names C functions
  -- (`love.graphics.points`) and Lua functions by the Lua paths this walk
  -- finds, when it has recorded one it has no name for.
  native.raw.set_function_paths(cfuncs.paths)
  ok, handle, settings = native.call(native.raw.start, opts, {
    zones = zones,
    ffnames = jitinfo.ffnames(),
    callSite = callsite.resolver(),
  })
  if not ok then error("profile.sample: " .. handle, 2) end
  if settings.autosavePath then
    local saving, why = native.call(handle.autosave, handle, settings.autosavePath, settings.autosaveSeconds)
    if not saving then
      handle:stop()
      error("profile.sample: option 'autosavePath': " .. why, 2)
    end
  end
  local session = setmetatable({
    _native = handle,
    _stopped = false,
    _text = nil,
    intervalMs = settings.intervalMs,
    zone = settings.zone,
    stackDepth = settings.stackDepth,
    clock = settings.clock,
    precision = settings.precision,
    format = settings.format,
    timelineSamples = settings.timelineSamples,
    slowFrameMs = settings.slowFrameMs,
    _started_at = os.time(),
    _delta_wall = os.time(),
    _delta_at = clock.now(),
  }, SampleSession)
  active = session
  timeline.attach(handle)
  if settings.loveZones then love_zones.install(zones) end
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
  -- An allocation session attached to this one stops with it (its samples
  -- come through this session's profiler callback): its recording ends
  -- before this one's, its Lua work after, so none of it is sampled here.
  local alloc = rawget(self, "_allocations")
  if alloc and not alloc:isRunning() then alloc = nil end
  if alloc then alloc._native:stop() end
  timeline.detach(self._native)
  love_zones.uninstall()
  self._native:stop()
  -- The autosave file's last write holds every sample of the session.
  self._native:finishAutosave()
  if alloc then alloc:stop() end
  local warning = self._native:stats().warning
  if warning then
    self.warning = warning
    io.stderr:write("tecs.profile: warning: ", warning, "\n")
  end
  if active == self then active = nil end
  return self._native:collapsed()
end


session_base.profile_methods(SampleSession, {
  name = "SampleSession",
  meta = function(self, _, start_sec, duration_sec)
    return { intervalMs = self.intervalMs, clock = self.clock, startSec = start_sec, durationSec = duration_sec }
  end,
  timeline = function(self, format) return self:timeline(format) end,
})

--- Counters of the session: `samples`, `recordedSamples`, `pausedSamples`,
-- `filteredSamples`, `overflowSamples`, `stacks`, `durationSec`, `cpuSec`,
-- `rate` (samples per second achieved), `requestedRate`, `clock` (timer in
-- use: "thread-cpu", "wall" or "process-cpu-itimer"), `memoryBytes`,
-- `timelineSamples` and `timelineDroppedSamples` (held by the time line,
-- and overwritten once it was full), `timelineFastFrameSamples` (taken out
-- with their frame, shorter than `slowFrameMs`), `timelineEvents` and
-- `droppedTimelineEvents` (trace aborts on the time line), `timelineBytes`, `frames` and
-- `droppedFrames` (frame marks kept and dropped), and
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
