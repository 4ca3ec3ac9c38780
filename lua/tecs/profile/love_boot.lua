--- The boot chunk of `tecs-profile love`: run in an unmodified LÖVE game's
-- Lua state by the LD_PRELOAD library (`inject/`), right after LÖVE opened
-- the standard libraries and before it loads `love`, with the package's
-- Lua directory and library directory as arguments.
--
-- It changes one thing the game can see: `package.preload` gets a
-- metatable whose `__index` finds this package's modules (names under
-- `tecs.profile`) in those directories, as `run` does, so that
-- `package.path`, `package.cpath`, `package.loaders` and the keys of
-- `package.preload` stay as under plain `love`. The same `__index` opens
-- the control channel (`profile.listen()`) when LÖVE requires the game's
-- `main`: `love.timer` is loaded and the game's identity set by then, and
-- the channel polls once per frame from `love.timer.step`; a game that
-- calls `profile.listen()` itself takes the channel over. Anything that
-- fails is said on stderr; nothing is raised into the game.
-- See docs/control.md.
-- @script tecs.profile.love_boot

local luadir, libdir = ...

local own_path = luadir .. "/?.lua;" .. luadir .. "/?/init.lua"
local own_cpath = libdir .. "/?.so"

-- Whether `name` is one of this package's modules.
local function own(name)
  return name == "tecs.profile" or name:find("^tecs%.profile%.") ~= nil or name == "tecs.utils.profile"
end

-- The loader of the package's module `name`, or nil.
local function find(name)
  local file = package.searchpath(name, own_path)
  if file then return assert(loadfile(file)) end
  file = package.searchpath(name, own_cpath)
  if file then return assert(package.loadlib(file, "luaopen_" .. name:gsub("%.", "_"))) end
  return nil
end

local opened = false

local function open()
  local ok, info = pcall(function()
    return require("tecs.profile.listen").listen_launched()
  end)
  if ok then
    io.stderr:write("tecs-profile: listening on ", info.socket, " (tecs-profile targets, attach, mcp)\n")
  else
    io.stderr:write("tecs-profile: the control channel did not open: ", tostring(info), "\n")
  end
end

setmetatable(package.preload, {
  __index = function(_, name)
    if type(name) ~= "string" then return nil end
    if own(name) then return find(name) end
    if name == "main" and not opened then
      opened = true
      open()
    end
    return nil
  end,
})
