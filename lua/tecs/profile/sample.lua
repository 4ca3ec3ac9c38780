--- Sampling sessions: `profile.sample(opts)`, the `SampleSession` object,
-- its start and stop, and what a running session puts on its timeline.
-- The sampling itself is native (`tecs.profile.native`): LuaJIT's profiler
-- calls into Rust, which reads the zone path and the stack and counts them.
-- No Lua code runs per sample.
--
-- This module owns the running session of the Lua state (`active`) and
-- the native handle its frame marks go to. What a running session keeps
-- loaded stays on the program's heap, so the rest loads when used: the
-- jit.* fallbacks at the start (`tecs.profile.jitinfo`, not kept: see
-- `session.once`), the timeline read back (`tecs.profile.timeline`),
-- files (`session.profile_methods`).
-- @module tecs.profile.sample

local check = require("tecs.profile.check")
local session_base = require("tecs.profile.session")

local once = session_base.once

local M = {}

--- The session object returned by `profile.sample`: `stop`, `pause`,
-- `resume`, `collapsed` and `isRunning` come from `tecs.profile.session`.
-- @type SampleSession
local lifecycle = session_base.native_kind("SampleSession")
local SampleSession = session_base.class(lifecycle)
M.SampleSession = SampleSession

-- `frames()`, `timeline(format)` and `hitches(n)`: the timeline read
-- back, documented in `tecs.profile.timeline`.
for _, method in ipairs({ "frames", "timeline", "hitches" }) do
  SampleSession[method] = function(self, ...)
    check.self(self, SampleSession, "SampleSession", method, 2)
    return require("tecs.profile.timeline")[method](self, ...)
  end
end

local active -- the running session of this Lua state, if any

-- The native handle of the running session, while one runs: the only
-- state `mark` reads, so that a mark without a session costs one test.
local marking
-- How the handle marks a frame (its `frame` method, looked up once).
local mark_frame

--- Mark the start of a frame (and the end of the previous one), for
-- `profile.frame()`. Does nothing when no sampling session runs.
function M.mark()
  if marking then mark_frame(marking) end
end

--- Put an event on the timeline of the running sampling session (a trace
-- abort): `details` is a table of strings. Does nothing without a session.
-- @tparam string name
-- @tparam[opt] table details
function M.event(name, details)
  if marking then marking:event(name, details) end
end

-- Marks a frame, registered with LÖVE's one wrapper of `love.timer.step`
-- (`tecs.profile.host.love`, which LÖVE's standard `love.run` calls once
-- per frame) while a session runs inside LÖVE.
local function mark_step()
  if marking then mark_frame(marking) end
end

-- Which line the samples of a C call belong to, asked at the stop at line
-- precision only (see `tecs.profile.callsite`). The session keeps this
-- function, not that module.
local function call_site(fn, line, state)
  return require("tecs.profile.callsite").resolve(fn, line, state)
end

-- The Lua paths of C and Lua functions (`tecs.profile.cfuncs`), asked by a
-- view of a session that recorded a function it has no name for; the walk
-- is loaded for each ask, not kept.
local function function_paths()
  return once("tecs.profile.cfuncs").paths()
end

--- Start a sampling session.
-- Errors if a sample session is already active (in this Lua state, or in
-- another one of the process: LuaJIT has a single profiler). Errors are
-- raised at the level of `profile.sample`'s caller.
-- @tparam[opt] table opts options `intervalMs`, `zone`, `stackDepth`,
--   `clock`, `precision`, `flushTraces`, `maxStacks`, `resolveC`, `nativeFrames`, `skipStartingThread`, `skipThread`,
--   `format`, `timelineSamples`, `slowFrameMs`, `autosavePath`,
--   `autosaveSeconds`, `loveZones`: their defaults,
--   the values each accepts and what it does are declared once, in the
--   native module (`native.options.sample`), and tabled in the docs
-- @treturn SampleSession
function M.start(opts)
  local native_ok, native = pcall(require, "tecs.profile.native")
  if not native_ok then
    error("profile.sample: cannot load the native module tecs.profile.native: " .. tostring(native), 2)
  end
  -- Bad options are reported as such on every VM, before what this VM lacks.
  local ok, err = native.call(native.raw.checkOptions, "sample", opts)
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
  local jitinfo = once("tecs.profile.jitinfo")
  local handle, settings
  local zones = jitinfo.zone()
  -- Every view of the session, running or stopped, names C functions
  -- (`love.graphics.points`) and Lua functions by the Lua paths this walk
  -- finds, when it has recorded one it has no name for.
  native.raw.setFunctionPaths(function_paths)
  ok, handle, settings = native.call(native.raw.start, opts, {
    zones = zones,
    -- Copied into the session's own memory: `jit.vmdef` is not kept.
    ffnames = jitinfo.ffnames(),
    callSite = call_site,
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
    -- The clock of `tecs.profile.clock` where the native module loads.
    _delta_at = native.monotonic(),
  }, SampleSession)
  active = session
  marking, mark_frame = handle, handle.frame
  -- LÖVE's host modules load inside LÖVE alone.
  if rawget(_G, "love") ~= nil then
    require("tecs.profile.host.love").on_step(mark_step)
    if settings.loveZones then require("tecs.profile.host.love_zones").install(zones) end
  end
  return session
end

--- The running session of this Lua state, or nil.
function M.active()
  return active
end

-- Stops sampling and returns the final text. Data lost to another sampler
-- taking LuaJIT's profiler over is reported once, here; stats().warning
-- keeps the text.
function lifecycle.finish(self)
  -- An allocation session attached to this one stops with it (its samples
  -- come through this session's profiler callback): its recording ends
  -- before this one's, its Lua work after, so none of it is sampled here.
  local alloc = rawget(self, "_allocations")
  if alloc and not alloc:isRunning() then alloc = nil end
  if alloc then alloc._native:stop() end
  if marking == self._native then
    marking, mark_frame = nil, nil
    local love_host = package.loaded["tecs.profile.host.love"]
    if love_host then love_host.off_step(mark_step) end
  end
  local love_zones = package.loaded["tecs.profile.host.love_zones"]
  if love_zones then love_zones.uninstall() end
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
-- `timelineSamples` and `timelineDroppedSamples` (held by the timeline,
-- and overwritten once it was full), `timelineFastFrameSamples` (taken out
-- with their frame, shorter than `slowFrameMs`), `timelineEvents` and
-- `droppedTimelineEvents` (trace aborts on the timeline), `timelineBytes`, `frames` and
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
