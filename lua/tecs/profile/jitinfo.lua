--- Access to LuaJIT's optional `jit.*` Lua modules with fallbacks.
-- `jit.zone` and `jit.vmdef` live in LuaJIT's `jit/` directory, which some
-- LÖVE builds do not ship and which a `LUA_PATH` without `;;` hides. The
-- profiler keeps working without them: zones fall back to
-- `tecs.profile.zone` (also registered as `jit.zone`, so user code that
-- requires it keeps working) and builtin names to `[builtin#N]`.
-- @module tecs.profile.jitinfo

local once = require("tecs.profile.session").once

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

-- Builtins every LuaJIT 2.1 has, by the name `jit.vmdef` gives them.
local KNOWN_BUILTINS = {
  ["os.clock"] = os.clock,
  ["string.format"] = string.format,
  ["debug.getmetatable"] = debug.getmetatable,
  ["coroutine.yield"] = coroutine.yield,
}

-- Whether `v` describes the running VM: a `jit.vmdef` found on the path
-- can be another build's (OpenResty's luajit2 numbers its builtins
-- differently from LuaJIT's), and would then name every builtin, bytecode
-- and abort reason wrongly.
local function describes_this_vm(v)
  local ok, util = pcall(once, "jit.util")
  if not ok or type(v.ffnames) ~= "table" then return ok end
  for name, f in pairs(KNOWN_BUILTINS) do
    local info = type(f) == "function" and util.funcinfo(f)
    -- A builtin replaced by a Lua function (no ffid) says nothing.
    if info and info.ffid and v.ffnames[info.ffid] ~= name then return false end
  end
  return true
end

--- `jit.vmdef` of the running VM, or nil when it cannot be loaded or
-- belongs to another LuaJIT build. Read afresh and not kept when the
-- program had not loaded it (`session.once`): its tables are about
-- 24 KB and 300 strings of live heap, which the program's collector
-- would go over on every cycle; a caller keeps what it needs (a session
-- copies its names into native memory).
function M.vmdef()
  local ok, v = pcall(once, "jit.vmdef")
  if ok and type(v) == "table" and describes_this_vm(v) then return v end
  return nil
end

local walked_names

-- Builtin names by id from the Lua paths that reach them (`os.clock`,
-- `string.format`, `pcall`): what `jit.vmdef` would say, for a VM whose
-- own `jit.vmdef` cannot be loaded. Nil without `jit.util`.
local function names_from_paths()
  local ok, util = pcall(once, "jit.util")
  if not ok then return nil end
  local names = {}
  for _, entry in ipairs(require("tecs.profile.cfuncs").collect_builtins()) do
    local info = util.funcinfo(entry[2])
    if info.ffid and names[info.ffid] == nil then names[info.ffid] = entry[1] end
  end
  return next(names) and names or nil
end

--- Builtin (fast function) names indexed by id: `jit.vmdef`'s, or where
-- that is missing or another build's, the Lua path that reaches each
-- builtin; nil when neither is known.
function M.ffnames()
  local v = M.vmdef()
  if v then return v.ffnames end
  if walked_names == nil then walked_names = names_from_paths() or false end
  return walked_names or nil
end

return M
