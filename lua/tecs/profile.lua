--- tecs-profile: the LuaJIT sampling profiler and trace-abort tracker.
--
--    local profile = require("tecs.profile")   -- or "tecs.utils.profile"
--    local s = profile.sample()                -- collapsed stacks with zones
--    ...
--    local text = s:stop("/tmp/game.collapsed")
--
-- @module tecs.profile

local sample = require("tecs.profile.sample")
local jitinfo = require("tecs.profile.jitinfo")

local profile = {}

profile._VERSION = "0.1.0"

--- Start a sampling session (see `tecs.profile.sample`).
-- @function sample
profile.sample = sample.start

--- Start an allocation session: bytes allocated, by the Lua stack that
-- allocated them (see `tecs.profile.allocations`).
-- @function allocations
function profile.allocations(opts)
  return require("tecs.profile.allocations").start(opts)
end

--- Start a trace-abort tracker (see `tecs.profile.trace`).
-- @function trace
profile.trace = require("tecs.profile.trace").start

--- Start a line-coverage session that keeps the JIT on (see
-- `tecs.profile.coverage`).
-- @function coverage
function profile.coverage(opts)
  return require("tecs.profile.coverage").start(opts)
end

--- Render a text view of a profile (see `tecs.profile.report`).
-- @function report
function profile.report(source, opts)
  return require("tecs.profile.report").report(source, opts)
end

--- Rank trace-abort sites by sampled time at their locations.
-- @function hotAborts
function profile.hotAborts(source, trace, opts)
  return require("tecs.profile.report").hotAborts(source, trace, opts)
end

--- Render an SVG flamegraph of a profile.
-- @function flamegraph
function profile.flamegraph(source, opts)
  return require("tecs.profile.report").flamegraph(source, opts)
end

--- Render a speedscope JSON document of a profile.
-- @function speedscope
function profile.speedscope(source, opts)
  return require("tecs.profile.report").speedscope(source, opts)
end

--- Render a gzipped pprof profile (`go tool pprof`, Pyroscope, Parca).
-- @function pprof
function profile.pprof(source, opts)
  return require("tecs.profile.report").pprof(source, opts)
end

--- Render a profile in any format of the registry written from a profile
-- ("svg", "speedscope", "pprof", "firefox", ...; see `tecs.profile.report`).
-- @function render
function profile.render(source, format, opts)
  return require("tecs.profile.report").render(source, format, opts)
end

--- Mark the start of a frame for `SampleSession:frames()` and
-- `:hitches(n)`; does nothing when no sampling session runs.
-- @function frame
profile.frame = require("tecs.profile.timeline").mark

--- Create a profiler with the classic `newProfiler(variant, sampledelay)`
-- API ("time" or "call"; see `tecs.profile.dst`).
-- @function newProfiler
profile.newProfiler = require("tecs.profile.dst").newProfiler

--- Open the control channel: `tecs-profile attach` can then start and
-- stop sessions in this process (see `tecs.profile.listen`).
-- @function listen
function profile.listen(opts)
  return require("tecs.profile.listen").listen(opts)
end

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
  return (jitinfo.zone())
end

return profile
