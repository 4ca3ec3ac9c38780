--- What a running sampling session puts on its time line: frame marks
-- (`profile.frame()`, and inside LÖVE a wrapper of `love.timer.step`, which
-- the standard `love.run` calls once per frame) and events (trace aborts).
-- Loaded with the session; reading the time line back is
-- `tecs.profile.timeline`, loaded when first asked.
-- @module tecs.profile.marks

local M = {}

-- The native handle of the running session, while one runs: the only
-- state `mark` reads, so that a mark without a session costs one test.
local marking
-- How the handle marks a frame (its `frame` method, looked up once).
local mark_frame

--- Mark the start of a frame (and the end of the previous one). Does
-- nothing when no sampling session runs.
function M.mark()
  if marking then mark_frame(marking) end
end

--- Whether a sampling session runs (and takes events).
-- @treturn boolean
function M.running()
  return marking ~= nil
end

--- Put an event on the time line of the running sampling session (a trace
-- abort): `details` is a table of strings. Does nothing without a session.
-- @tparam string name
-- @tparam[opt] table details
function M.event(name, details)
  if marking then marking:event(name, details) end
end

-- `love.timer.step` as found and as wrapped, while the wrapper is in its
-- chain: { timer = love.timer, original = fn, wrapper = fn }.
local love_hook

local function hook_love()
  local timer = type(love) == "table" and type(love.timer) == "table" and love.timer
  if not timer or type(timer.step) ~= "function" then return end
  -- A wrapper another library wrapped in turn is still in the chain of
  -- this `love.timer`, and marks again as soon as a session runs: a second
  -- one would mark twice.
  if love_hook and love_hook.timer == timer then return end
  local original = timer.step
  local function step(...)
    if marking then mark_frame(marking) end
    return original(...)
  end
  timer.step = step
  love_hook = { timer = timer, original = original, wrapper = step }
end

local function unhook_love()
  if love_hook and love_hook.timer.step == love_hook.wrapper then
    love_hook.timer.step = love_hook.original
    love_hook = nil
  end
  -- Otherwise something wrapped the wrapper since: putting the original
  -- back would drop that library's wrapper, so ours stays in the chain and
  -- passes calls through while no session runs.
end

--- Start marking frames for a session's native handle (at its start).
function M.attach(handle)
  marking, mark_frame = handle, handle.frame
  hook_love()
end

--- Stop marking frames (at the session's stop).
function M.detach(handle)
  if marking ~= handle then return end
  marking, mark_frame = nil, nil
  unhook_love()
end

return M
