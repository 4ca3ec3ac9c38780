--- Sampling sessions: `profile.sample(opts)` and the `SampleSession` object.
-- The sampling itself is native (`tecs.profile.native`): LuaJIT's profiler
-- calls into Rust, which reads the zone path and the stack and counts them.
-- No Lua code runs per sample.
-- @module tecs.profile.sample

local check = require("tecs.profile.check")
local clock = require("tecs.profile.clock")
local jitinfo = require("tecs.profile.jitinfo")
local marks = require("tecs.profile.marks")
local session_base = require("tecs.profile.session")
-- What a session loads stays on the program's heap, so these load when
-- used: `tecs.profile.timeline` (the time line read back),
-- `tecs.profile.cfuncs` (at the stop: Lua paths of functions),
-- `tecs.profile.callsite` (at the stop, at line precision) and
-- `tecs.profile.love_zones` (in a LÖVE game).

local native_ok, native = pcall(require, "tecs.profile.native")

local M = {}

--- The session object returned by `profile.sample`: `stop`, `pause`,
-- `resume`, `collapsed` and `isRunning` come from `tecs.profile.session`
-- (the hooks they call are below `M.active`).
-- @type SampleSession
local lifecycle = session_base.native_kind("SampleSession")
local SampleSession = session_base.class(lifecycle)
M.SampleSession = SampleSession

-- `frames()`, `timeline(format)` and `hitches(n)`: the time line read
-- back, documented in `tecs.profile.timeline`.
for _, method in ipairs({ "frames", "timeline", "hitches" }) do
  SampleSession[method] = function(self, ...)
    check.self(self, SampleSession, "SampleSession", method, 2)
    return require("tecs.profile.timeline")[method](self, ...)
  end
end

local active -- the running session of this Lua state, if any

-- Which line the samples of a C call belong to, asked at the stop at line
-- precision only (see `tecs.profile.callsite`).
local function call_site(fn, line, state)
  return require("tecs.profile.callsite").resolve(fn, line, state)
end

--- Start a sampling session.
-- Errors if a sample session is already active (in this Lua state, or in
-- another one of the process: LuaJIT has a single profiler).
-- @tparam[opt] table opts options `intervalMs`, `zone`, `stackDepth`,
--   `clock`, `precision`, `maxStacks`, `resolveC`, `skipStartingThread`,
--   `format`, `timelineSamples`, `slowFrameMs`, `loveZones`: their defaults,
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
  local available, why = native.available()
  if not available then
    error("profile.sample: " .. why, 2)
  end
  if active then
    error("profile.sample: a sample session is already active; stop it before starting another", 2)
  end
  local handle, settings
  local zones = jitinfo.zone()
  ok, handle, settings = native.call(native.raw.start, opts, {
    zones = zones,
    -- Copied into the session's own memory: `jit.vmdef` is not kept.
    ffnames = jitinfo.ffnames(),
    callSite = call_site,
  })
  if not ok then error("profile.sample: " .. handle, 2) end
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
  marks.attach(handle)
  if settings.loveZones and rawget(_G, "love") ~= nil then require("tecs.profile.love_zones").install(zones) end
  return session
end

--- The running session of this Lua state, or nil.
function M.active()
  return active
end

-- Stops sampling; returns the final text. Data lost to another sampler
-- taking LuaJIT's profiler over is reported once, here; stats().warning
-- keeps the text. C functions and recorded Lua functions get their Lua
-- paths once, when the session stops (`tecs.profile.cfuncs`): snapshots
-- of a running session leave C functions to dladdr.

function lifecycle.finish(self)
  -- An allocation session attached to this one stops with it (its samples
  -- come through this session's profiler callback): its recording ends
  -- before this one's, its Lua work after, so none of it is sampled here.
  local alloc = rawget(self, "_allocations")
  if alloc and not alloc:isRunning() then alloc = nil end
  if alloc then alloc._native:stop() end
  marks.detach(self._native)
  local love_zones = package.loaded["tecs.profile.love_zones"]
  if love_zones then love_zones.uninstall() end
  self._native:stop()
  if alloc then alloc:stop() end
  require("tecs.profile.cfuncs").name_functions(self._native)
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
