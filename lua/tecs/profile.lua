--- tecs-profile: the LuaJIT sampling profiler and trace-abort tracker.
--
--    local profile = require("tecs.profile")   -- or "tecs.utils.profile"
--    local s = profile.sample()                -- collapsed stacks with zones
--    ...
--    local text = s:stop("/tmp/game.collapsed")
--
-- Loading this module loads nothing else: each function below loads the
-- module that does its work when first called. What a program loads stays
-- on its Lua heap, which the collector marks on every cycle, so a program
-- that only samples does not pay for the views, the trace tracker or the
-- command line (the budgets are in docs/api.md, checked by
-- spec/footprint_spec.lua).
-- @module tecs.profile

local profile = {}

profile._VERSION = "0.1.0"

-- `name` of module `tecs.profile.<module>`, loaded on the first call (the
-- module's full name is made then: one string fewer kept). The call is a
-- tail call: an error the function raises at its caller's level still
-- points at the program's line.
local function on_use(module, name)
  return function(...)
    return require("tecs.profile." .. module)[name](...)
  end
end

--- Start a sampling session (see `tecs.profile.sample`).
-- @function sample
profile.sample = on_use("sample", "start")

--- Start an allocation session: bytes allocated, by the Lua stack that
-- allocated them (see `tecs.profile.allocations`).
-- @function allocations
profile.allocations = on_use("allocations", "start")

--- Start a trace-abort tracker (see `tecs.profile.trace`).
-- @function trace
profile.trace = on_use("trace", "start")

--- Start a line-coverage session that keeps the JIT on (see
-- `tecs.profile.coverage`).
-- @function coverage
profile.coverage = on_use("coverage", "start")

--- Render a text view of a profile (see `tecs.profile.report`).
-- @function report
profile.report = on_use("report", "report")

--- Rank trace-abort sites by sampled time at their locations.
-- @function hotAborts
profile.hotAborts = on_use("report", "hotAborts")

--- Render an SVG flamegraph of a profile.
-- @function flamegraph
profile.flamegraph = on_use("report", "flamegraph")

--- Render a speedscope JSON document of a profile.
-- @function speedscope
profile.speedscope = on_use("report", "speedscope")

--- Render a gzipped pprof profile (`go tool pprof`, Pyroscope, Parca).
-- @function pprof
profile.pprof = on_use("report", "pprof")

--- Render a profile in any format of the registry written from a profile
-- ("svg", "speedscope", "pprof", "firefox", ...; see `tecs.profile.report`).
-- @function render
profile.render = on_use("report", "render")

--- Mark the start of a frame for `SampleSession:frames()` and
-- `:hitches(n)`; does nothing when no sampling session runs. Loads
-- nothing: a program calls it every frame.
-- @function frame
function profile.frame()
  local sample = package.loaded["tecs.profile.sample"]
  if sample then sample.mark() end
end

--- Create a profiler with the classic `newProfiler(variant, sampledelay)`
-- API ("time" or "call"; see `tecs.profile.new_profiler`).
-- @function newProfiler
profile.newProfiler = on_use("new_profiler", "newProfiler")

--- Open the control channel: `tecs-profile attach` can then start and
-- stop sessions in this process (see `tecs.profile.listen`).
-- @function listen
profile.listen = on_use("listen", "listen")

--- Run the control channel's waiting commands (a LÖVE game polls once per
-- frame by itself); does nothing when not listening. Loads nothing: a
-- program may call it every frame.
-- @function poll
function profile.poll()
  local listen = package.loaded["tecs.profile.listen"]
  if listen then return listen.poll() end
  return 0
end

--- Close the control channel (its socket and discovery entry go).
-- @function close
function profile.close()
  local listen = package.loaded["tecs.profile.listen"]
  if listen then listen.close() end
end

--- The zone stack used to tag samples: `jit.zone`, or a compatible fallback
-- when this LuaJIT ships without it.
function profile.zone()
  return (require("tecs.profile.jitinfo").zone())
end

return profile
