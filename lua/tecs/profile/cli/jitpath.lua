--- Finds LuaJIT's own `jit/` modules (`jit.vmdef`, `jit.zone`) for the
-- command line when `package.path` does not reach them: a `LUA_PATH`
-- without `;;` drops the running LuaJIT's built-in path, and with it the
-- builtin names (`pcall` would show as `[builtin#20]`) and the trace-abort
-- wording. The directory searched is the one the running LuaJIT installs
-- its `jit/` modules to, `PREFIX/share/luajit-VERSION`, found from the path
-- of the running executable, so the modules match the VM.
-- @module tecs.profile.cli.jitpath

local M = {}

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

-- The path of the running executable (Linux's /proc/self/exe), or nil.
local function executable()
  local ok, ffi = pcall(require, "ffi")
  if not ok then return nil end
  local found, path = pcall(function()
    -- Already declared by the host or another module: that declaration serves.
    pcall(ffi.cdef, "long readlink(const char *path, char *buf, size_t size);")
    local size = 4096
    local buf = ffi.new("char[?]", size)
    local n = tonumber(ffi.C.readlink("/proc/self/exe", buf, size))
    if n and n > 0 and n < size then return ffi.string(buf, n) end
    return nil
  end)
  return found and path or nil
end

--- The directories that may hold the running LuaJIT's `jit/` modules,
-- most likely first.
-- @tparam[opt] string exe the executable's path (default: the running one)
-- @tparam[opt] string version `jit.version` (default: the running one's)
-- @treturn table directory paths
function M.candidates(exe, version)
  exe = exe or executable()
  version = version or (jit and jit.version) or ""
  local full = version:match("^LuaJIT (%S+)")
  local prefixes = {}
  local bindir = exe and exe:match("^(.*)/[^/]+$")
  local prefix = bindir and bindir:match("^(.*)/[^/]+$")
  if prefix then prefixes[#prefixes + 1] = prefix end
  prefixes[#prefixes + 1] = "/usr/local"
  prefixes[#prefixes + 1] = "/usr"
  local dirs = {}
  if not full then return dirs end
  local majmin = full:match("^(%d+%.%d+)")
  for _, p in ipairs(prefixes) do
    dirs[#dirs + 1] = p .. "/share/luajit-" .. full
    if majmin and majmin ~= full then dirs[#dirs + 1] = p .. "/share/luajit-" .. majmin end
  end
  return dirs
end

--- The running LuaJIT's built-in `package.path` and `package.cpath` (what
-- it searches with neither LUA_PATH nor LUA_CPATH set), asked of a fresh
-- process of the same executable; nil when that cannot be done.
-- @treturn string|nil path
-- @treturn string|nil cpath
function M.builtin_paths()
  local exe = executable()
  if not exe then return nil end
  local quoted = "'" .. exe:gsub("'", "'\\''") .. "'"
  local p = io.popen("env -u LUA_PATH -u LUA_CPATH -u LUA_INIT " .. quoted ..
    [[ -e "io.write(package.path, '\n', package.cpath, '\n')" 2>/dev/null]])
  if not p then return nil end
  local path, cpath = p:read("*l"), p:read("*l")
  p:close()
  if not path or not cpath then return nil end
  return path, cpath
end

--- Appends the running LuaJIT's module directory to `package.path` when
-- `jit.vmdef` cannot be found on it.
-- @treturn string|nil the directory added, if any
function M.complete()
  if package.searchpath("jit.vmdef", package.path) then return nil end
  for _, dir in ipairs(M.candidates()) do
    if exists(dir .. "/jit/vmdef.lua") then
      package.path = package.path .. ";" .. dir .. "/?.lua"
      return dir
    end
  end
  return nil
end

return M
