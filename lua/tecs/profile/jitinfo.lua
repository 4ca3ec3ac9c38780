--- Access to LuaJIT's optional `jit.*` Lua modules with fallbacks.
-- `jit.zone` and `jit.vmdef` live in LuaJIT's `jit/` directory, which some
-- LÖVE builds do not ship and which a `LUA_PATH` without `;;` hides. The
-- profiler keeps working without them: zones fall back to
-- `tecs.profile.zone` (also registered as `jit.zone`, so user code that
-- requires it keeps working) and builtin names to `[builtin#N]`.
-- @module tecs.profile.jitinfo

local M = {}

local zone_cache, zone_is_fallback

--- The zone stack object shared with user code.
-- @return zone table, and true when it is the fallback
function M.zone()
  if zone_cache then return zone_cache, zone_is_fallback end
  local ok, z = pcall(require, "jit.zone")
  if ok and type(z) == "table" then
    zone_cache, zone_is_fallback = z, false
  else
    z = require("tecs.profile.zone")
    package.loaded["jit.zone"] = z
    zone_cache, zone_is_fallback = z, true
  end
  return zone_cache, zone_is_fallback
end

local vmdef_cache, vmdef_tried

--- `jit.vmdef` of the running VM, or nil when it cannot be loaded.
function M.vmdef()
  if not vmdef_tried then
    vmdef_tried = true
    local ok, v = pcall(require, "jit.vmdef")
    if ok and type(v) == "table" then vmdef_cache = v end
  end
  return vmdef_cache
end

--- Builtin (fast function) names indexed by id, or nil.
function M.ffnames()
  local v = M.vmdef()
  return v and v.ffnames or nil
end

return M
