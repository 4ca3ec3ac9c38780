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
-- `main` and it compiles (else it says the game failed and opens
-- nothing): `love.timer` is loaded and the game's identity set by then, and
-- the channel polls once per frame from `love.timer.step`; a game that
-- calls `profile.listen()` itself takes the channel over. Anything that
-- fails is said on stderr; nothing is raised into the game.
--
-- Before `main`, LÖVE 11 requires the game's `conf` and calls its
-- `love.conf(t)`; when `t.version` names a LÖVE it does not run as it is,
-- it shows a compatibility dialog and waits for a click, so the channel
-- would not open until someone closes it (and under `xvfb-run` nobody
-- can). The same `__index` sees `conf` required: it watches that one call
-- of `love.conf` and says on stderr what happens and how to go on; with
-- the option `skip-version-check` it sets `t.version` to the running LÖVE.
-- See docs/control.md.
-- @script tecs.profile.host.love_boot

local luadir, libdir, options = ...
local skip_version_check = (("," .. (options or "") .. ","):find(",skip-version-check,", 1, true)) ~= nil

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

-- Whether LÖVE 11 shows its compatibility dialog for the configuration
-- `t` (as its boot.lua decides: a version it does not list as compatible,
-- unless the version's major and minor both equal its own, compared as
-- LÖVE 11.4 compares them; and a window module to show it in).
local function version_dialog(love, t)
  if type(t) ~= "table" or type(love.isVersionCompatible) ~= "function" then return false end
  local version = tostring(t.version)
  if love.isVersionCompatible(version) then return false end
  local major, minor, revision = version:match("^(%d+)%.(%d+)%.(%d+)$")
  if major and minor and revision and not (major ~= love._version_major and minor ~= love._version_minor) then
    return false
  end
  return not (type(t.modules) == "table" and t.modules.window == false)
end

-- After the game's `love.conf(t)`: what LÖVE does next about `t.version`.
local function check_version(love, t)
  if not version_dialog(love, t) then return end
  local declared, running = tostring(t.version), tostring(love._version)
  if skip_version_check then
    t.version = running
    io.stderr:write("tecs-profile: this game declares LÖVE ", declared, " (t.version in conf.lua); ",
      "--skip-version-check: LÖVE ", running, " runs it without its compatibility dialog\n")
    return
  end
  io.stderr:write("tecs-profile: this game declares LÖVE ", declared, " (t.version in conf.lua): LÖVE ", running,
    " now shows a compatibility dialog and waits until it is closed, before it loads main.lua; the control ",
    "channel opens only then (under xvfb-run nobody can close it). To go on: close the dialog, set t.version = \"",
    running, "\" in conf.lua, or run tecs-profile love --skip-version-check\n")
end

-- The loader of the game's `conf` that LÖVE's own searchers find,
-- wrapped so that its `love.conf`, once defined, is watched for its one
-- call (then put back as it was); nil where none finds it (`require`
-- then goes on as without this).
local function watched_conf(name)
  for i = 2, #package.loaders do
    local ok, loader = pcall(package.loaders[i], name)
    if ok and type(loader) == "function" then
      return function(...)
        -- require keeps the first value a loader returns.
        local result = loader(...)
        local love = rawget(_G, "love")
        local conf = type(love) == "table" and rawget(love, "conf")
        if type(conf) == "function" then
          love.conf = function(t, ...)
            love.conf = conf
            conf(t, ...)
            local checked, err = pcall(check_version, love, t)
            if not checked then io.stderr:write("tecs-profile: cannot check t.version: ", tostring(err), "\n") end
          end
        end
        return result
      end
    end
  end
  return nil
end

-- The loader of the game's `main` that LÖVE's own searchers find, or nil
-- and why not: a `main.lua` that does not compile fails here, before the
-- channel would open.
local function main_loader(name)
  for i = 2, #package.loaders do
    local ok, loader = pcall(package.loaders[i], name)
    if not ok then return nil, loader end
    if type(loader) == "function" then return loader end
  end
  return nil
end

local conf_watched = false

setmetatable(package.preload, {
  __index = function(_, name)
    if type(name) ~= "string" then return nil end
    if own(name) then return find(name) end
    if name == "conf" and not conf_watched then
      conf_watched = true
      return watched_conf(name)
    end
    if name == "main" and not opened then
      opened = true
      local loader, err = main_loader(name)
      if not loader then
        -- `require` goes on as without this, and LÖVE shows the error.
        io.stderr:write("tecs-profile: the game failed: main.lua did not load",
          err and (": " .. tostring(err):match("^[^\n]*")) or "", "; the control channel did not open\n")
        return nil
      end
      open()
      return loader
    end
    return nil
  end,
})
