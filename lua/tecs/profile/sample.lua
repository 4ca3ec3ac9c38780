--- Sampling sessions: `profile.sample(opts)` and the `SampleSession` object.
-- The sampling itself is native (`tecs.profile.native`): LuaJIT's profiler
-- calls into Rust, which reads the zone path and the stack and counts them.
-- No Lua code runs per sample.
-- @module tecs.profile.sample

local check = require("tecs.profile.check")
local once = require("tecs.profile.once")
local session_base = require("tecs.profile.session")
-- What a running session keeps loaded stays on the program's heap, so the
-- rest loads when used: the start and the stop
-- (`tecs.profile.sample_lifecycle`, not kept: see `tecs.profile.once`),
-- the time line read back (`tecs.profile.timeline`), files
-- (`tecs.profile.session_output`).

local M = {}

--- The session object returned by `profile.sample`: `stop`, `pause`,
-- `resume`, `collapsed` and `isRunning` come from `tecs.profile.session`.
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

--- Start a sampling session.
-- Errors if a sample session is already active (in this Lua state, or in
-- another one of the process: LuaJIT has a single profiler).
-- @tparam[opt] table opts options `intervalMs`, `zone`, `stackDepth`,
--   `clock`, `precision`, `flushTraces`, `maxStacks`, `resolveC`, `skipStartingThread`, `skipThread`,
--   `format`, `timelineSamples`, `slowFrameMs`, `autosavePath`,
--   `autosaveSeconds`, `loveZones`: their defaults,
--   the values each accepts and what it does are declared once, in the
--   native module (`native.options.sample`), and tabled in the docs
-- @treturn SampleSession
function M.start(opts)
  return once("tecs.profile.sample_lifecycle").start(M, opts)
end

--- The running session of this Lua state, or nil.
function M.active()
  return active
end

-- Sets the running session (`tecs.profile.sample_lifecycle`).
function M._set_active(session)
  active = session
end

-- Stops sampling; returns the final text (`tecs.profile.sample_lifecycle`).
function lifecycle.finish(self)
  return once("tecs.profile.sample_lifecycle").finish(M, self)
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
