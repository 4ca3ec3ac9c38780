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

--- Start a trace-abort tracker (see `tecs.profile.trace`).
-- @function trace
profile.trace = require("tecs.profile.trace").start

--- The zone stack used to tag samples: `jit.zone`, or a compatible fallback
-- when this LuaJIT ships without it.
function profile.zone()
  return (jitinfo.zone())
end

return profile
