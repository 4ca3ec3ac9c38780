--- LÖVE's callbacks as zones. While a sampling session runs in a LÖVE
-- game (option `loveZones`, on by default), each callback of the `love`
-- table (`love.update`, `love.draw`, `love.load`, the input and window
-- handlers) runs inside a zone named after it, so that a profile of a game
-- nobody edited splits by the phases its developer thinks in; the game's
-- own `jit.zone` zones nest inside. A callback the game defines after the
-- session started is wrapped when it is defined. At the stop every
-- callback still ours gets its function back. The wrapper's own frame is
-- the profiler's, which no profile shows.
-- @module tecs.profile.host.love_zones

local M = {}

--- The callbacks LÖVE 11's `love.run` and event handlers call by name.
M.CALLBACKS = {
  "load", "update", "draw", "quit", "focus", "mousefocus", "visible", "resize", "lowmemory",
  "keypressed", "keyreleased", "textinput", "textedited",
  "mousemoved", "mousepressed", "mousereleased", "wheelmoved",
  "touchpressed", "touchreleased", "touchmoved",
  "joystickpressed", "joystickreleased", "joystickaxis", "joystickhat", "joystickadded", "joystickremoved",
  "gamepadpressed", "gamepadreleased", "gamepadaxis",
  "filedropped", "directorydropped", "displayrotated", "threaderror",
}

local is_callback = {}
for _, name in ipairs(M.CALLBACKS) do is_callback[name] = true end

-- The installation in place: { love = table, zones = table, wrapped =
-- { name = { original = fn, wrapper = fn } }, meta = the metatable set on
-- `love`, or nil }.
local installed

-- Pops what the callback left above `depth` (its own unbalanced zones
-- included) and returns the callback's results.
local function leave(zones, depth, ...)
  for i = #zones, depth + 1, -1 do zones[i] = nil end
  return ...
end

-- The wrapper of a callback is made from this text, the callback called
-- as a field of its own name: a traceback names the game's function as
-- LÖVE's call `love.update(dt)` does ("in function 'update'"), where a
-- call through a local would name it after the local. The chunk is named
-- as this file, so that its frames are the profiler's own.
local WRAPPER = [[
local leave, zones, label, callee = ...
return function(...)
  local depth = #zones
  zones[depth + 1] = label
  return leave(zones, depth, callee.%s(...))
end]]
local SOURCE = debug.getinfo(1, "S").source

local function wrap(zones, name, f)
  local make = assert(loadstring(WRAPPER:format(name), SOURCE))
  return make(leave, zones, "love." .. name, { [name] = f })
end

-- Registered with the host while installed: a game that fails while a
-- session runs prints its traceback without the wrappers' frames.
local function on_error() end

local function wrap_field(state, name, f)
  local wrapper = wrap(state.zones, name, f)
  state.wrapped[name] = { original = f, wrapper = wrapper }
  return wrapper
end

--- Wraps the game's callbacks so that each runs in its zone; `zones` is
-- the zone stack the session reads. Does nothing outside LÖVE or when
-- already installed.
-- @tparam table zones
function M.install(zones)
  if installed or not require("tecs.profile.host.love").detect() or type(zones) ~= "table" then return end
  local l = love
  local state = { love = l, zones = zones, wrapped = {} }
  for _, name in ipairs(M.CALLBACKS) do
    local f = rawget(l, name)
    if type(f) == "function" then rawset(l, name, wrap_field(state, name, f)) end
  end
  -- Callbacks defined later (a session started at the top of main.lua)
  -- pass through __newindex, which only a table without a metatable of
  -- its own can be given.
  if getmetatable(l) == nil then
    state.meta = {
      __newindex = function(t, k, v)
        if is_callback[k] and type(v) == "function" then v = wrap_field(state, k, v) end
        rawset(t, k, v)
      end,
    }
    setmetatable(l, state.meta)
  end
  installed = state
  require("tecs.profile.host.love").on_error(on_error)
end

--- Gives every callback still wrapped its own function back.
function M.uninstall()
  local state = installed
  if not state then return end
  installed = nil
  require("tecs.profile.host.love").off_error(on_error)
  local l = state.love
  if state.meta and getmetatable(l) == state.meta then setmetatable(l, nil) end
  for name, w in pairs(state.wrapped) do
    -- A callback the game replaced since is the game's.
    if rawget(l, name) == w.wrapper then rawset(l, name, w.original) end
  end
end

return M
