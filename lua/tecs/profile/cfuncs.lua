--- C functions of loaded modules, by the Lua path that reaches them (and
-- the Lua functions, to name recorded functions the same way).
--
-- A sample inside a C function (not a builtin) shows in LuaJIT's stack dump
-- as the address of the function. `love.graphics.present` or `lfs.attributes`
-- is what a user wants to read there: this module walks the loaded modules
-- (`package.loaded`) and the globals, a few tables deep, and lists every C
-- function it meets with the first path that reaches it. The native side
-- turns each function into its address, and asks again only when a
-- session has recorded a function no walk looked for (every view of a
-- session, the live page's included, names frames through it).
--
-- The walk reads tables with `next` and `rawget` only (no metamethod runs),
-- skips builtins (named by `jit.vmdef` already) and stops after a bounded
-- number of entries, so a huge table cannot make it slow.
-- @module tecs.profile.cfuncs

local M = {}

--- How deep below a module table the walk goes (`love` -> `graphics` ->
-- `present` is depth 2).
M.MAX_DEPTH = 3
--- Table entries read at most, over the whole walk.
M.MAX_ENTRIES = 50000

local IDENTIFIER = "^[%a_][%w_]*$"

local function is_c_function(f)
  if type(f) ~= "function" then return false end
  -- Builtins print as "function: builtin#N" and have their own names.
  if tostring(f):find("builtin#", 1, true) then return false end
  local ok, info = pcall(debug.getinfo, f, "S")
  return ok and info ~= nil and info.what == "C"
end

local function is_lua_function(f)
  if type(f) ~= "function" then return false end
  local ok, info = pcall(debug.getinfo, f, "S")
  return ok and info ~= nil and info.what == "Lua"
end

-- The walk: every function reachable from `package.loaded` and `_G` for
-- which `accept(fn)` is true, as `{ path, fn }` (see `collect`).
local function walk(accept)
  local found, seen_fn, seen_table = {}, {}, {}
  local budget = M.MAX_ENTRIES
  -- Breadth first, so that a function is named by its shortest path.
  local queue, head = {}, 1
  -- A module that is also a global is named as the global is, the way
  -- programs call it (Neovim's `vim` is the module `vim._editor`).
  local global_name = {}
  for k, v in next, _G do
    if type(k) == "string" and type(v) == "table" and k:find(IDENTIFIER) and (not global_name[v] or k < global_name[v]) then
      global_name[v] = k
    end
  end
  local roots = {}
  for name, value in next, package.loaded do
    -- `_G` is walked last under no prefix, not as `_G.`.
    if type(name) == "string" and type(value) == "table" and value ~= _G then roots[#roots + 1] = name end
  end
  table.sort(roots)
  for _, name in ipairs(roots) do
    local t = rawget(package.loaded, name)
    queue[#queue + 1] = { path = global_name[t] or name, t = t, depth = 0 }
  end
  queue[#queue + 1] = { path = nil, t = _G, depth = 0 }
  while queue[head] and budget > 0 do
    local item = queue[head]
    head = head + 1
    if not seen_table[item.t] then
      seen_table[item.t] = true
      local keys = {}
      for k in next, item.t do
        budget = budget - 1
        if budget <= 0 then break end
        if type(k) == "string" and k:find(IDENTIFIER) then keys[#keys + 1] = k end
      end
      table.sort(keys)
      for _, k in ipairs(keys) do
        local v = rawget(item.t, k)
        local path = item.path and (item.path .. "." .. k) or k
        if accept(v) then
          if not seen_fn[v] then
            seen_fn[v] = true
            found[#found + 1] = { path, v, depth = item.depth }
          end
        elseif type(v) == "table" and item.depth < M.MAX_DEPTH and not seen_table[v] then
          queue[#queue + 1] = { path = path, t = v, depth = item.depth + 1 }
        end
      end
    end
  end
  for i, entry in ipairs(found) do
    entry.order = i
  end
  table.sort(found, function(a, b)
    if a.depth ~= b.depth then return a.depth < b.depth end
    return a.order < b.order
  end)
  local list = {}
  for i, entry in ipairs(found) do list[i] = { entry[1], entry[2] } end
  return list
end

--- Lists the C functions reachable from `package.loaded` and `_G`.
-- @treturn table an array of `{ path, fn }`, shortest paths first, then by
--   path; a function reachable by several paths is listed once, under the
--   first of them
function M.collect()
  return walk(is_c_function)
end

--- Lists the builtins (fast functions) reachable the same way, to name
-- them where `jit.vmdef` is missing or belongs to another build.
-- @treturn table an array of `{ path, fn }`, as `collect`
function M.collect_builtins()
  return walk(function(f) return type(f) == "function" and tostring(f):find("builtin#", 1, true) ~= nil end)
end

--- Lists the Lua functions reachable the same way, each with where it is
-- defined, to name the functions a session recorded (`love.update` rather
-- than the `update` its caller used).
-- @treturn table an array of `{ path, short_src, linedefined, lastlinedefined }`
function M.collect_lua()
  local list = {}
  for _, entry in ipairs(walk(is_lua_function)) do
    local info = debug.getinfo(entry[2], "S")
    list[#list + 1] = { entry[1], info.short_src, info.linedefined, info.lastlinedefined }
  end
  return list
end

--- What a session asks when it has recorded functions it has no name for
-- (set with `native.raw.setFunctionPaths`; see
-- src/lua_api/frame_names.rs): `collect()` and `collect_lua()`.
-- @treturn table the C functions, as `collect`
-- @treturn table the Lua functions, as `collect_lua`
function M.paths()
  return M.collect(), M.collect_lua()
end

return M
