--- `tecs-profile love GAME [args...]`: an unmodified LÖVE game run with
-- the control channel open.
--
-- The command replaces itself with `love GAME args...` (execvp: the same
-- process id, the game's exit status and signals), with the package's
-- LD_PRELOAD library (`tecs/profile/love_preload.so`, built from `inject/`)
-- added to `LD_PRELOAD`. In the game's Lua state the library runs the boot
-- chunk `tecs.profile.host.love_boot`, which opens the channel; it gives
-- `LD_PRELOAD` back as the user had it and removes the variables below
-- before the game's Lua code runs. See docs/control.md.
-- @module tecs.profile.cli.love

local M = {}

--- The variables the LD_PRELOAD library reads (and removes): the boot
-- chunk, the package's directories, the user's own `LD_PRELOAD`, and the
-- options the boot chunk is given (words joined by commas).
M.ENV = {
  boot = "TECS_PROFILE_LOVE_BOOT",
  luadir = "TECS_PROFILE_LOVE_LUADIR",
  libdir = "TECS_PROFILE_LOVE_LIBDIR",
  user_preload = "TECS_PROFILE_LOVE_PRELOAD",
  options = "TECS_PROFILE_LOVE_OPTIONS",
}

local ffi = require("ffi")
pcall(ffi.cdef, [[
int execvp(const char *file, char *const argv[]);
int setenv(const char *name, const char *value, int overwrite);
char *strerror(int errnum);
]])

-- The current directory (for paths made absolute: the game may change it).
local function cwd()
  local p = io.popen("pwd")
  local dir = p and p:read("*l")
  if p then p:close() end
  return dir or "."
end

local function absolute(path)
  if path:sub(1, 1) == "/" then return path end
  return cwd() .. "/" .. path:gsub("^%./", "")
end

--- Where the package's files are, as this process finds its own modules:
-- the boot chunk on `package.path`, the library on `package.cpath`.
-- @treturn table `{ boot, luadir, preload, libdir }`, or nil and why not
function M.files()
  local boot = package.searchpath("tecs.profile.host.love_boot", package.path)
  if not boot then return nil, "cannot find the boot chunk tecs/profile/host/love_boot.lua on package.path" end
  local preload = package.searchpath("tecs.profile.love_preload", package.cpath)
  if not preload then
    return nil, "cannot find the LD_PRELOAD library tecs/profile/love_preload.so on package.cpath " ..
      "(make build, or make install, builds it beside native.so)"
  end
  boot, preload = absolute(boot), absolute(preload)
  local luadir = boot:match("^(.*)/tecs/profile/host/love_boot%.lua$")
  local libdir = preload:match("^(.*)/tecs/profile/love_preload%.so$")
  -- The boot chunk finds the package's modules as DIR/?.lua and DIR/?.so.
  if not luadir then return nil, "the boot chunk " .. boot .. " is not found as DIR/tecs/profile/host/love_boot.lua" end
  if not libdir then return nil, "the library " .. preload .. " is not found as DIR/tecs/profile/love_preload.so" end
  return { boot = boot, luadir = luadir, preload = preload, libdir = libdir }
end

--- Replaces this process with `love` running `game`; returns only when
-- that fails.
-- @tparam table opts `love` (the command; default "love", found on PATH)
-- @tparam table pos the game (a folder or a .love file) and its arguments
-- @tparam function usage_error raises a usage error
-- @treturn number exit code (1: love could not be started)
function M.run(opts, pos, usage_error)
  local game = pos[1]
  if not game then usage_error("love needs a game: a folder with main.lua, or a .love file") end
  local probe = io.open(game, "r")
  if not probe then
    usage_error("no game at %q (a folder with main.lua, or a .love file, expected)", game)
  end
  probe:close()
  if jit.os ~= "Linux" then
    io.stderr:write("tecs-profile love: runs on Linux only (the game's process is entered through LD_PRELOAD); ",
      "elsewhere call profile.listen() in the game\n")
    return 1
  end
  local files, err = M.files()
  if not files then
    io.stderr:write("tecs-profile love: ", err, "\n")
    return 1
  end
  if files.preload:find("[%s:]") then
    -- LD_PRELOAD splits its list at spaces and colons.
    io.stderr:write("tecs-profile love: the LD_PRELOAD library's path has a space or a colon, which LD_PRELOAD ",
      "cannot hold: ", files.preload, "\n")
    return 1
  end
  local command = opts.love or "love"
  local user_preload = os.getenv("LD_PRELOAD")
  local function set(name, value) ffi.C.setenv(name, value, 1) end
  set(M.ENV.boot, files.boot)
  set(M.ENV.luadir, files.luadir)
  set(M.ENV.libdir, files.libdir)
  set(M.ENV.options, opts.skipVersionCheck and "skip-version-check" or "")
  if user_preload then set(M.ENV.user_preload, user_preload) end
  set("LD_PRELOAD", files.preload .. (user_preload and user_preload ~= "" and (":" .. user_preload) or ""))
  local argv = ffi.new("const char *[?]", #pos + 2)
  argv[0] = command
  for i = 1, #pos do argv[i] = pos[i] end
  io.stdout:flush()
  io.stderr:flush()
  ffi.C.execvp(command, ffi.cast("char *const *", argv))
  local why = ffi.string(ffi.C.strerror(ffi.errno()))
  io.stderr:write("tecs-profile love: cannot run ", command, ": ", why,
    opts.love and "\n" or " (install LÖVE 11, or give its path with --love PATH)\n")
  return 1
end

return M
