--- `require` without keeping: the module a session needs for a moment (at
-- its start, at its stop) is loaded for the call and left for the
-- collector, unless something had loaded it before.
--
-- What a program loads stays on its Lua heap, and a module's constants are
-- strings there. LuaJIT's collector sweeps the whole string table on every
-- cycle, so a program with a small live set that allocates strings fast
-- pays for each string on each cycle, and much more once a few hundred
-- more double the table: LuaJIT's life.lua runs 4% slower with 200 more
-- live strings, 15% with 300 (BENCHMARKS.md, "The module's footprint").
--
--    local m = require("tecs.profile.once")("tecs.profile.sample_lifecycle")
--
-- @module tecs.profile.once

return function(name)
  local had = package.loaded[name]
  local module = require(name)
  if not had then package.loaded[name] = nil end
  return module
end
