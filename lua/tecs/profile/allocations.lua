--- Allocation sessions: `profile.allocations(opts)` and the
-- `AllocationSession` object. Bytes allocated on the Lua heap, by the
-- interpreter or by compiled code, are charged to the Lua stack that
-- allocated them, sampled about every `bytesPerSample` bytes; the outputs
-- (collapsed text, flamegraph, speedscope, pprof `alloc_space`) count bytes.
-- The sampling is native (`tecs.profile.native`): no Lua code runs per
-- allocation or per sample.
-- @module tecs.profile.allocations

local check = require("tecs.profile.check")
local clock = require("tecs.profile.clock")
local jitinfo = require("tecs.profile.jitinfo")
local session_base = require("tecs.profile.session")

local native_ok, native = pcall(require, "tecs.profile.native")

local M = {}

local NAME = "AllocationSession"

--- The session object returned by `profile.allocations`: `stop`, `pause`,
-- `resume`, `collapsed` and `isRunning` come from `tecs.profile.session`.
-- @type AllocationSession
local lifecycle = session_base.native_kind(NAME)
local AllocationSession = session_base.class(lifecycle)
M.AllocationSession = AllocationSession

local active -- the running session of this Lua state, if any

-- The Lua paths of C and Lua functions (`tecs.profile.cfuncs`), asked by a
-- view of a session that recorded a function it has no name for; the walk
-- is loaded for each ask, not kept (`session.once`).
local function function_paths()
  return session_base.once("tecs.profile.cfuncs").paths()
end

-- What a profile object of an allocation session is, for the outputs that
-- label their values (pprof's sample types): its clock, bytes per sample,
-- and objects (and live bytes and objects) per stack. Weak keys: the entry
-- goes with the profile.
local profile_meta = setmetatable({}, { __mode = "k" })

--- Start an allocation session.
-- Errors if an allocation session is already active. Started while a
-- sampling session of this Lua state runs (with its own tick source, the
-- default on Linux), it is attached to that session: both record at once,
-- the sampling session's frames and timeline count the bytes sampled in
-- each frame and name what allocated before each GC run, and the
-- allocation session stops when that session stops, if not before. A
-- sampling session cannot start while an allocation session runs (LuaJIT
-- has one profiler per process): start the sampling session first.
-- @tparam[opt] table opts options `bytesPerSample`, `zone`, `stackDepth`,
--   `precision`, `maxStacks`, `resolveC`, `format`, `maxLiveBlocks`: their
--   defaults, the values each accepts and what it does are declared once,
--   in the native module (`native.options.allocations`), and tabled in the
--   docs
-- @treturn AllocationSession
function M.start(opts)
  if not native_ok then
    error("profile.allocations: cannot load the native module tecs.profile.native: " .. tostring(native), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    check.fail(2, "profile.allocations: bad argument #1 'opts' (table or nil expected, got %s)", check.describe(opts))
  end
  local available, why = native.available()
  if not available then error("profile.allocations: " .. why, 2) end
  if active then
    error("profile.allocations: an allocation session is already active; stop it before starting another", 2)
  end
  -- The clock's first reading sets it up (allocating): done before the
  -- wrapper counts, so the session's own start is not charged.
  local started = clock.now()
  -- Functions named by their Lua paths in every view (see profile.sample).
  native.raw.setFunctionPaths(function_paths)
  local ok, handle, settings = native.call(native.raw.startAllocations, opts, {
    zones = jitinfo.zone(),
    ffnames = jitinfo.ffnames(),
  })
  if not ok then error("profile.allocations: " .. handle, 2) end
  local session = session_base.new(AllocationSession, {
    _native = handle,
    bytesPerSample = settings.bytesPerSample,
    zone = settings.zone,
    stackDepth = settings.stackDepth,
    precision = settings.precision,
    format = settings.format,
    _started_at = os.time(),
    _delta_wall = os.time(),
    _delta_at = started,
  })
  -- Beside a sampling session of this state the session is attached to
  -- it (LuaJIT has one profiler, which that session holds): its timeline
  -- then names what allocated before each GC run, and its frames their
  -- bytes; it ends, at the latest, when that session stops.
  if handle:isAttached() then
    local sampling = require("tecs.profile.sample").active()
    if sampling then sampling._allocations = session end
  end
  active = session
  return session
end

function lifecycle.finish(self)
  self._native:stop()
  if active == self then active = nil end
  return self._native:collapsed()
end


-- What the outputs need to label bytes: pprof's `alloc_space` sample type,
-- whose period (bytes per sample) travels as the interval.
function AllocationSession:_meta(start_sec, duration_sec)
  return { clock = "alloc_space", intervalMs = self.bytesPerSample / 1e6, startSec = start_sec,
    durationSec = duration_sec, title = "tecs-profile allocations (bytes)" }
end

-- pprof's values beside the bytes: objects per stack, and the live bytes
-- and objects when blocks are tracked.
function AllocationSession:_heap_meta(meta)
  meta.objects = self._native:objectProfile()
  meta.inuseSpace, meta.inuseObjects = self._native:liveProfiles()
  return meta
end

-- write, delta and the file stop(filename) writes; counts are bytes.
session_base.profile_methods(AllocationSession, {
  name = NAME,
  -- What the counts of its files are; the functions file says it.
  unit = "bytes",
  meta = function(self, format, start_sec, duration_sec, objects)
    local meta = self:_meta(start_sec, duration_sec)
    -- pprof's `alloc_objects` values: the objects estimated per stack (for
    -- a delta, those of its bytes); and `inuse_*`, what is not freed (the
    -- other formats have no place for them).
    if objects then
      meta.objects = objects
    elseif format == "pprof" then
      self:_heap_meta(meta)
    end
    return meta
  end,
  delta_profile = function(_, prof, meta) profile_meta[prof] = meta end,
})

--- The profile (bytes per stack) so far, as a profile object that every
-- view and output takes (`profile.report(s:profile())`); `profile.pprof`
-- gives it the session's objects and live values too.
function AllocationSession:profile()
  check.self(self, AllocationSession, NAME, "profile", 2)
  local prof = self._native:profile()
  profile_meta[prof] = self:_heap_meta(self:_meta())
  return prof
end

--- What is still live: the bytes of sampled blocks allocated while the
-- session ran and not freed (at the stop, or now while it runs), per stack
-- that allocated them, as a profile object (`profile.pprof` writes it as
-- `inuse_space` and `inuse_objects`). Not freed is not reachable: garbage
-- the GC has not swept yet counts; run `collectgarbage()` before the stop
-- for what is reachable. Nil when the session tracks no block
-- (`maxLiveBlocks = 0`).
-- @return profile object or nil
function AllocationSession:live()
  check.self(self, AllocationSession, NAME, "live", 2)
  local bytes, objects, points = self._native:liveProfiles()
  if bytes then
    local meta = self:_meta()
    meta.clock, meta.objects, meta.samples = "inuse_space", objects, points
    profile_meta[bytes] = meta
  end
  return bytes
end

--- The profile in sample points of a profile object from `live()`, which
-- the text views rank (so that each share carries the error of its sample
-- count), or nil.
function M.sample_profile(prof)
  local meta = profile_meta[prof]
  return meta and meta.samples
end

--- The pprof labels of `source` if it is an allocation session or one of
-- its profile objects: `clock`, `intervalMs`, and the profiles of
-- `objects`, `inuseSpace`, `inuseObjects` (each may be nil); else nil.
function M.pprof_meta(source)
  if getmetatable(source) == AllocationSession then
    return source:_heap_meta(source:_meta())
  end
  return profile_meta[source]
end

--- A text view of the profile (see `profile.report`): shares of the bytes,
-- each with its sampling error, under a line giving the bytes allocated.
-- @tparam[opt] table opts the options of `profile.report`
-- @treturn string
function AllocationSession:report(opts)
  check.self(self, AllocationSession, NAME, "report", 2)
  local ok, text = pcall(require("tecs.profile.report").report, self._native:sampleProfile(), opts)
  if not ok then error((tostring(text):gsub("^[^:]*:%d+: ", "")), 2) end
  local st = self:stats()
  return string.format("# allocations: %d bytes in %d blocks; one sample per %d bytes on average\n",
    st.allocatedBytes, st.allocatedObjects, self.bytesPerSample) .. text
end

--- Counters of the session: `allocatedBytes` and `allocatedObjects`
-- (counted exactly while recording, paused or not), `bytesPerSample`,
-- `triggeredSamples` (sample points crossed), `samples` (handed to the
-- session by LuaJIT), `pendingSamples` (triggered but not handed over: a
-- `__gc` finaliser or vmevent handler was running, the next sample carries
-- them; those still pending at the stop are lost), `recordedSamples`,
-- `pausedSamples`, `filteredSamples`, `overflowSamples`, `stacks`,
-- `durationSec`, `cpuSec`, `memoryBytes`, `precision`; `liveBlocks` and
-- `liveSamples` (sampled blocks not freed, and their sample points: the
-- `live` profile), `liveDroppedSamples` (points whose blocks are not
-- tracked: `maxLiveBlocks` reached, or no stack given before the stop),
-- `liveTableBytes`; after the stop,
-- `allocator`: "restored" (the VM's allocator is the one the session
-- wrapped) or "pass-through" (another library wrapped the session's
-- wrapper meanwhile, which then stays, counting nothing).
-- @treturn table
function AllocationSession:stats()
  check.self(self, AllocationSession, NAME, "stats", 2)
  local st = self._native:stats()
  for _, k in ipairs({ "intervalMs", "requestedRate", "rate", "clock", "signal", "clockNote", "interruptsWaits",
    "timelineSamples", "timelineDroppedSamples", "timelineBytes", "frames", "droppedFrames", "linesCorrected",
    "hooksRearmed", "hooksRearmedNote" }) do
    st[k] = nil
  end
  for k, v in pairs(self._native:allocStats()) do st[k] = v end
  return st
end

function AllocationSession:__tostring()
  return string.format("AllocationSession(%s, %d bytes per sample)", self._stopped and "stopped" or "running",
    self.bytesPerSample)
end

--- The running allocation session of this Lua state, or nil.
function M.active()
  return active
end

return M
