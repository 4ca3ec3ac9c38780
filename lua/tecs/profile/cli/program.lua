--- What a program run by the command line sees: the same `arg` and the
-- same `package.path` and `package.cpath` as under plain `luajit`.
--
-- `luajit script.lua a b` gives the script `arg[-1] = "luajit"`, `arg[0] =
-- "script.lua"`, `arg[1] = "a"`; libraries read the interpreter from the
-- lowest index (Penlight's `app.lua()` runs Lua subprocesses with it). The
-- launcher puts this package's directories first on the search paths, and
-- the command line may add LuaJIT's own `jit/` directory; the program gets
-- the paths back as the launcher found them. The package's modules (loaded
-- later by the profiler itself, at the stop) are still found, for this
-- package's names only, and LuaJIT's `jit.*` modules the command line found
-- as a last resort: through a metatable on `package.preload`, so that
-- `package.loaders` stays as the program knows it (a program may replace
-- or remove an entry by its index) and `package.preload` holds no new keys.
--
-- Installed by `luarocks make`, the command is started by the wrapper
-- script luarocks writes: `luajit -e '<path setup>' <the command> ...`. The
-- chunk is the wrapper's, not the user's: the program gets neither its
-- `-e` arguments (its `arg[-1]` is the interpreter, as under plain
-- `luajit`), nor the directories it put first on the paths, nor the
-- searcher of `luarocks.loader`, which it loaded.
-- @module tecs.profile.cli.program

local M = {}

-- The interpreter's own arguments (the negative indices of the launcher's
-- `arg`) and the search paths as the launcher found them.
local interpreter = {}
local program_path, program_cpath
-- Whether a luarocks wrapper started the command (see `capture`).
local from_wrapper = false

-- Whether `chunk` is the one the wrapper script of this package's rock
-- runs before the command (luarocks' `wrap_script`).
local function wrapper_chunk(chunk)
  return type(chunk) == "string" and chunk:find("luarocks.loader", 1, true) ~= nil and
    chunk:find('add_context("tecs-profile"', 1, true) ~= nil
end

-- The search paths plain `interpreter` starts with in this environment
-- (`LUA_PATH`, `LUA_CPATH`, its defaults), asked of it: what the wrapper's
-- chunk did cannot be undone from what it left, since `luarocks.loader`
-- also adds the user's rocks trees to the paths and drops the entries it
-- finds twice. Nil when the interpreter cannot be asked.
local function plain_paths(interpreter)
  local command = "'" .. interpreter:gsub("'", "'\\''") .. "'" ..
    [[ -e "io.write('\0', package.path, '\0', package.cpath, '\0')" 2>/dev/null]]
  local ok, p = pcall(io.popen, command)
  if not ok or not p then return nil end
  local out = p:read("*a") or ""
  p:close()
  return out:match("%z([^%z]*)%z([^%z]*)%z$")
end

--- Records what the program must see, before anything changes it.
-- @tparam table args the launcher's `arg`
-- @tparam[opt] table paths `{ path = ..., cpath = ... }` as they were before
-- the launcher changed them (default: as they are now)
function M.capture(args, paths)
  interpreter = {}
  local list = {}
  local i = -1
  while args and args[i] ~= nil do
    list[#list + 1] = args[i]
    i = i - 1
  end
  program_path = paths and paths.path or package.path
  program_cpath = paths and paths.cpath or package.cpath
  -- `list` holds arg[-1], arg[-2], ...: the wrapper's chunk comes right
  -- after its `-e`, so before it here.
  from_wrapper = false
  for j = 1, #list - 1 do
    if list[j + 1] == "-e" and wrapper_chunk(list[j]) then
      table.remove(list, j)
      table.remove(list, j)
      from_wrapper = true
      local path, cpath = plain_paths(list[#list])
      if path then program_path, program_cpath = path, cpath end
      break
    end
  end
  for j, v in ipairs(list) do interpreter[-j] = v end
end

-- Takes out what the wrapper's `luarocks.loader` added: its searcher and
-- the luarocks modules it loaded.
local function undo_wrapper_loader()
  local loader = package.loaded["luarocks.loader"]
  local searcher = type(loader) == "table" and loader.luarocks_loader
  for k = #package.loaders, 1, -1 do
    if searcher and package.loaders[k] == searcher then table.remove(package.loaders, k) end
  end
  for name in pairs(package.loaded) do
    if type(name) == "string" and name:find("^luarocks%.") then package.loaded[name] = nil end
  end
end

--- Adds directories to the program's search paths (a path the program
-- would have needed under plain `luajit` too).
function M.extend(path, cpath)
  if path then program_path = (program_path or package.path) .. ";" .. path end
  if cpath then program_cpath = (program_cpath or package.cpath) .. ";" .. cpath end
end

--- The `arg` table a program started as `luajit script args...` has.
-- @tparam string script `arg[0]`
-- @tparam table args `arg[1]`, `arg[2]`, ...
-- @treturn table
function M.arg(script, args)
  local t = { [0] = script }
  for k, v in pairs(interpreter) do t[k] = v end
  for k = 1, #args do t[k] = args[k] end
  return t
end

-- Whether `name` is one of this package's modules.
local function own(name)
  return name == "tecs.profile" or name:find("^tecs%.profile%.") ~= nil or name == "tecs.utils.profile"
end

-- The loader of module `name` on the paths the command line runs with, or nil.
local function find(name, own_path, own_cpath)
  local file = package.searchpath(name, own_path)
  if file then return assert(loadfile(file)) end
  file = package.searchpath(name, own_cpath)
  if file then
    local symbol = "luaopen_" .. name:gsub("%.", "_")
    return assert(package.loadlib(file, symbol))
  end
  return nil
end

-- The `__index` of `package.preload` while the program runs: this
-- package's modules from the command line's paths, before the program's
-- (the profiler must load its own); LuaJIT's `jit.*` from them only when
-- the program's paths do not have the module (as a searcher after the
-- program's would).
local function own_modules(own_path, own_cpath)
  return function(_, name)
    if type(name) ~= "string" then return nil end
    if own(name) then return find(name, own_path, own_cpath) end
    if name:find("^jit%.") and not package.searchpath(name, package.path)
        and not package.searchpath(name, package.cpath) then
      return find(name, own_path, own_cpath)
    end
    return nil
  end
end

--- Sets `_G.arg` and gives the program its search paths back; the command
-- line's own modules stay reachable.
-- @tparam table arg the program's `arg` (from `M.arg`)
function M.enter(arg)
  if from_wrapper then
    undo_wrapper_loader()
    from_wrapper = false
  end
  local own_path, own_cpath = package.path, package.cpath
  if program_path and program_path ~= own_path or program_cpath and program_cpath ~= own_cpath then
    if getmetatable(package.preload) == nil then
      setmetatable(package.preload, { __index = own_modules(own_path, own_cpath) })
    end
    package.path, package.cpath = program_path or own_path, program_cpath or own_cpath
  end
  _G.arg = arg
end

-- A runner that parses `arg` itself (busted's) needs arguments the
-- program must not see: the table it parses, and what it must hold after.
local pending

--- Gives `arg` to a runner that parses it (`parsed`), to hold `plain` once
-- `settle` runs (from the helper the runner loads after parsing).
-- @tparam table parsed the runner's arguments
-- @tparam table plain the arguments the program sees
function M.enter_runner(parsed, plain)
  pending = { target = parsed, plain = plain }
  M.enter(parsed)
end

--- Rewrites the table the runner parsed to the program's own arguments, in
-- place (the runner keeps that table as `arg`); nothing when the runner was
-- not started through `enter_runner`.
function M.settle()
  if not pending then return end
  local target, plain = pending.target, pending.plain
  pending = nil
  for k in pairs(target) do target[k] = nil end
  for k, v in pairs(plain) do target[k] = v end
end

return M
