--- LÖVE's host code: how a game is recognized and named, and the one
-- wrapper of `love.timer.step`, which LÖVE's standard `love.run` calls once
-- per frame. What runs once per frame with no change to the game's code
-- registers with that wrapper (`on_step`): the control channel's poll
-- (`start`, below) and a sampling session's frame mark
-- (`tecs.profile.marks`). The wrapper goes when the last of them does.
--
-- A host module of `tecs.profile.listen` (see its `HOSTS` for the
-- interface): `kind`, `detect()`, `program()`, `start(channel)`, `stop()`.
-- Loaded only inside LÖVE, by the channel or a session that runs there.
-- @module tecs.profile.host.love

local M = {}

--- The kind the discovery entry names.
M.kind = "love"

--- Whether this Lua state runs inside LÖVE.
function M.detect()
  return type(love) == "table" and type(love.getVersion) == "function"
end

--- The name `tecs-profile targets` shows: the game's identity (its save
-- directory's name), or nil when it has none.
function M.program()
  local fs = type(love) == "table" and love.filesystem
  if type(fs) == "table" and type(fs.getIdentity) == "function" then
    local ok, id = pcall(fs.getIdentity)
    if ok and type(id) == "string" and id ~= "" then return id end
  end
  return nil
end

-- What runs before each step, in the order it was registered. Never
-- changed in place, replaced: what runs may register or unregister (a
-- poll that stops a session takes its frame mark off), and a step goes
-- on with the list it started with.
local on_step = {}

-- The wrapper of `love.timer.step` this module put in place, while it is
-- in that function's chain: { timer = love.timer, original = fn,
-- wrapper = fn }.
local hook

-- Puts a wrapper in front of `timer.step`.
local function wrap(timer)
  local original = timer.step
  local this
  local function step(...)
    -- A wrapper left in the chain of an older `love.timer` passes through.
    if hook == this then
      local fns = on_step
      for i = 1, #fns do fns[i]() end
    end
    return original(...)
  end
  this = { timer = timer, original = original, wrapper = step }
  timer.step = step
  hook = this
end

-- Takes the wrapper out of the chain, if nothing wrapped it since.
local function unwrap()
  if hook and hook.timer.step == hook.wrapper then
    hook.timer.step = hook.original
    hook = nil
  end
  -- Otherwise another library wrapped ours since: putting the original
  -- back would drop that library's wrapper too, so ours stays in the chain,
  -- passing calls through while nothing is registered, and the next
  -- registration uses it again rather than wrapping a second time.
end

--- Runs `fn` (no arguments, raising nothing) before each `love.timer.step`
-- from now on, after what registered before it; `love.timer.step` is
-- wrapped once, whoever registers. Registering `fn` again does nothing.
-- @tparam function fn
-- @treturn boolean whether there is a `love.timer.step` to run it (false:
--   the game turned the timer module off; `fn` runs if one appears later
--   and something registers then)
function M.on_step(fn)
  local fns, present = {}, false
  for i = 1, #on_step do
    fns[i] = on_step[i]
    present = present or on_step[i] == fn
  end
  if not present then
    fns[#fns + 1] = fn
    on_step = fns
  end
  local timer = type(love) == "table" and type(love.timer) == "table" and love.timer
  if not timer or type(timer.step) ~= "function" then return false end
  -- Ours is still in the chain unless the library that wrapped it put
  -- back the function it had found before ours.
  if not (hook and hook.timer == timer and timer.step ~= hook.original) then wrap(timer) end
  return true
end

--- Stops running `fn` at each step; `love.timer.step` gets its function
-- back when nothing is registered any more and nothing wrapped ours since.
-- @tparam function fn
function M.off_step(fn)
  local fns = {}
  for i = 1, #on_step do
    if on_step[i] ~= fn then fns[#fns + 1] = on_step[i] end
  end
  on_step = fns
  if #fns == 0 then unwrap() end
end

-- The poll of the channel this host polls, while it does.
local polling

--- Starts polling the control channel: `channel.poll()` runs before each
-- `love.timer.step`, so a game that called `profile.listen()` once is
-- driven once per frame. A game without the timer module, or whose own
-- `love.run` does not step it, calls `profile.poll()` itself.
-- @tparam table channel `{ poll = fn, finish = fn }`
-- @return nil (polling never fails to start)
function M.start(channel)
  if polling then M.off_step(polling) end
  polling = channel.poll
  M.on_step(polling)
  return nil
end

--- Stops polling.
function M.stop()
  if polling then
    M.off_step(polling)
    polling = nil
  end
end

return M
