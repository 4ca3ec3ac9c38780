--- The start and the stop of a sampling session (`tecs.profile.sample`):
-- code a session runs twice, loaded for each and not kept
-- (`tecs.profile.once`), so that a running session keeps on the program's
-- heap little more than its object and its class.
-- @module tecs.profile.sample_lifecycle

local marks = require("tecs.profile.marks")
local once = require("tecs.profile.once")

local native_ok, native = pcall(require, "tecs.profile.native")

local M = {}

-- Which line the samples of a C call belong to, asked at the stop at line
-- precision only (see `tecs.profile.callsite`). The session keeps this
-- function, not this module.
local function call_site(fn, line, state)
  return require("tecs.profile.callsite").resolve(fn, line, state)
end

-- The Lua paths of C and Lua functions (`tecs.profile.cfuncs`), asked by a
-- view of a session that recorded a function it has no name for; the walk
-- is loaded for each ask, not kept.
local function function_paths()
  return once("tecs.profile.cfuncs").paths()
end

--- `profile.sample(opts)`: starts a session of `sample`
-- (`tecs.profile.sample`), which it makes the running one, and returns it.
-- Errors are raised at the level of `profile.sample`'s caller.
function M.start(sample, opts)
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
  if sample.active() then
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
    -- The clock of `tecs.profile.clock` where the native module loads.
    _delta_at = native.monotonic(),
  }, sample.SampleSession)
  sample._set_active(session)
  marks.attach(handle)
  if settings.loveZones and rawget(_G, "love") ~= nil then require("tecs.profile.host.love_zones").install(zones) end
  return session
end

--- Stops a session of `sample` and returns its final text. Data lost to
-- another sampler taking LuaJIT's profiler over is reported once, here;
-- stats().warning keeps the text.
function M.finish(sample, self)
  -- An allocation session attached to this one stops with it (its samples
  -- come through this session's profiler callback): its recording ends
  -- before this one's, its Lua work after, so none of it is sampled here.
  local alloc = rawget(self, "_allocations")
  if alloc and not alloc:isRunning() then alloc = nil end
  if alloc then alloc._native:stop() end
  marks.detach(self._native)
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
  if sample.active() == self then sample._set_active(nil) end
  return self._native:collapsed()
end

return M
