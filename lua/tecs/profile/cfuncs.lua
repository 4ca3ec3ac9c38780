--- C functions of loaded modules, by the Lua path that reaches them (and
-- the Lua functions, to name recorded functions the same way).
--
-- A sample inside a C function (not a builtin) shows in LuaJIT's stack dump
-- as the address of the function. `love.graphics.present` or `lfs.attributes`
-- is what a user wants to read there: this module walks the loaded modules
-- (`package.loaded`) and the globals, a few tables deep, and lists every C
-- function it meets with the first path that reaches it; then the methods
-- of the objects whose metatables the registry holds by name
-- (`Font:getHeight`), and the functions `remember` saw at paths that hold
-- something else now. The native side
-- turns each function into its address, and asks again only when a
-- session has recorded a function no walk looked for (every view of a
-- session, the live page's included, names frames through it).
--
-- The walk reads tables with `next` and `rawget` only (no metamethod runs),
-- skips builtins (named by `jit.vmdef` already) and stops after a bounded
-- number of entries, so a huge table cannot make it slow.
-- @module tecs.profile.cfuncs

local M = {}

-- The walk is the profiler's work, not the program's: it is never
-- compiled, so that it leaves no traces in the program's trace cache nor
-- takes the trace numbers the program's code would have had.
if jit then jit.off(true, true) end

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

-- The paths of the C functions as `remember` found them, by function
-- (weak: a function the program dropped goes).
local remembered = setmetatable({}, { __mode = "k" })

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
  -- The methods of objects: metatables the registry holds by their type's
  -- name, each its own `__index` (LÖVE's `Font`, `Source`...), named
  -- `Type:method`; a method several types share is named after the type
  -- with the fewest methods, the one it comes from (`Object:type`).
  local owners = {}
  local registry = debug.getregistry()
  for k, t in next, registry do
    budget = budget - 1
    if budget <= 0 then break end
    if type(k) == "string" and k:find(IDENTIFIER) and type(t) == "table" and rawget(t, "__index") == t then
      local methods = {}
      for name, f in next, t do
        budget = budget - 1
        if budget <= 0 then break end
        if type(name) == "string" and name:find(IDENTIFIER) and accept(f) and not seen_fn[f] then
          methods[#methods + 1] = { name, f }
        end
      end
      for _, m in ipairs(methods) do
        local o = owners[m[2]]
        if not o or #methods < o.count or (#methods == o.count and k .. ":" .. m[1] < o.path) then
          owners[m[2]] = { path = k .. ":" .. m[1], count = #methods }
        end
      end
    end
  end
  -- The type with the fewest methods first: one C function registered
  -- for several types (a distinct function for each) is named after it.
  local methods = {}
  for f, o in pairs(owners) do methods[#methods + 1] = { o.path, f, o.count } end
  table.sort(methods, function(a, b)
    if a[3] ~= b[3] then return a[3] < b[3] end
    return a[1] < b[1]
  end)
  for _, m in ipairs(methods) do
    seen_fn[m[2]] = true
    found[#found + 1] = { m[1], m[2], depth = M.MAX_DEPTH + 1 }
  end
  -- The functions named when the program started listening that no path
  -- reaches now: a module function the game saved and replaced with its
  -- own (a local `defaultClear` in place of `love.graphics.clear`).
  local kept = {}
  for f, path in pairs(remembered) do
    if accept(f) and not seen_fn[f] then kept[#kept + 1] = { path, f } end
  end
  table.sort(kept, function(a, b) return a[1] < b[1] end)
  for _, k in ipairs(kept) do found[#found + 1] = { k[1], k[2], depth = M.MAX_DEPTH + 2 } end
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

--- Remembers the paths of the C functions reachable now, for the walks
-- to come: a function the program replaces later with its own (keeping the
-- first in a local) is still named by the path it had. Called when the
-- program starts listening (in LÖVE before the game's main.lua runs, under
-- `tecs-profile love`).
function M.remember()
  for _, entry in ipairs(walk(is_c_function)) do
    if not remembered[entry[2]] then remembered[entry[2]] = entry[1] end
  end
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

--- Upvalues of a function read at most, over one walk's functions of
-- bytecode without lines.
M.MAX_UPVALUES = 20000

-- Whether `info` (debug.getinfo "S") is a function of bytecode loaded
-- without its debug information: defined at line 0, spanning none.
local function is_stripped(info)
  return info.what == "Lua" and info.linedefined == 0 and info.lastlinedefined == 0
end

--- Lists the Lua functions reachable the same way, each with where it is
-- defined, to name the functions a session recorded (`love.update` rather
-- than the `update` its caller used).
--
-- A function of bytecode without lines (Neovim 0.12's runtime) is listed
-- with the function itself, its frames being its prototype's
-- (`vim/shared.lua:@0x...`): reached by a path, or only as an upvalue of
-- such a function (a module's local functions), and placed in its source
-- file by its bytecode where that file can be read
-- (`tecs.profile.funcmap.stripped_spans`), at lines 0-0 where not.
-- @treturn table an array of `{ path, short_src, linedefined,
--   lastlinedefined }`, and `{ path or false, short_src, first, last, fn }`
--   for a function without lines
function M.collect_lua()
  local list, stripped, by_file = {}, {}, {}
  local function add_stripped(path, fn, info)
    stripped[#stripped + 1] = { path or false, info.short_src, 0, 0, fn }
    local fns = by_file[info.short_src] or {}
    by_file[info.short_src] = fns
    fns[#fns + 1] = fn
  end
  local seen = {}
  for _, entry in ipairs(walk(is_lua_function)) do
    local info = debug.getinfo(entry[2], "S")
    if is_stripped(info) then
      seen[entry[2]] = true
      add_stripped(entry[1], entry[2], info)
    else
      list[#list + 1] = { entry[1], info.short_src, info.linedefined, info.lastlinedefined }
    end
  end
  -- A module's local functions are upvalues of the functions it exports.
  local budget, i = M.MAX_UPVALUES, 1
  while stripped[i] and budget > 0 do
    local fn = stripped[i][5]
    for u = 1, 255 do
      budget = budget - 1
      local name, v = debug.getupvalue(fn, u)
      if name == nil or budget <= 0 then break end
      if type(v) == "function" and not seen[v] then
        seen[v] = true
        local info = is_lua_function(v) and debug.getinfo(v, "S")
        if info and is_stripped(info) then add_stripped(nil, v, info) end
      end
    end
    i = i + 1
  end
  if next(by_file) then
    local ok, funcmap = pcall(require, "tecs.profile.funcmap")
    for file, fns in pairs(by_file) do
      local spans = ok and funcmap.stripped_spans(file, fns) or {}
      for _, entry in ipairs(stripped) do
        local span = entry[2] == file and spans[entry[5]]
        if span then entry[3], entry[4] = span[1], span[2] end
      end
    end
    for _, entry in ipairs(stripped) do list[#list + 1] = entry end
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
