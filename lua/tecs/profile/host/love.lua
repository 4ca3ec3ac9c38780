--- LÖVE's host code: how a game is recognized and named, the one
-- wrapper of `love.timer.step`, which LÖVE's standard `love.run` calls once
-- per frame, and the one wrapper of LÖVE's error handler, which runs when
-- the game fails. What runs once per frame with no change to the game's code
-- registers with that wrapper (`on_step`): the control channel's poll
-- (`start`, below) and a sampling session's frame mark
-- (`tecs.profile.sample`). The wrapper goes when the last of them does.
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

-- What runs when the game fails (LÖVE's error handler is called), in
-- the order it was registered, given the error; replaced, never changed in
-- place, as `on_step` is.
local on_error = {}

-- The wrapper of LÖVE's error handler this module put in place: { name =
-- "errorhandler" or "errhand", original = fn, wrapper = fn }, or nil.
local errwrap

-- Whether a line of a traceback is a frame of this package's Lua files.
local function own_line(line)
  return line:find("tecs/profile/[%w_/]+%.lua:%d") ~= nil or line:find("tecs/profile%.lua:%d") ~= nil
end

-- `traceback` without the frames of this package (a callback's zone
-- wrapper, the error handler's own): the traceback LÖVE prints is the one
-- it prints without the profiler. Levels count as the caller means them.
local function without_own_frames(traceback)
  return function(a, msg, level, ...)
    local text
    if type(a) == "thread" then
      text = traceback(a, msg, level, ...)
    elseif a == nil then
      -- `traceback()`: LuaJIT returns an explicit nil message as it is,
      -- so the text is asked with an empty one, whose line is cut.
      text = traceback("", (type(msg) == "number" and msg or 1) + 1)
      text = type(text) == "string" and text:gsub("^\n", "") or text
    else
      text = traceback(a, (type(msg) == "number" and msg or 1) + 1)
    end
    if type(text) ~= "string" then return text end
    local lines = {}
    for line in (text .. "\n"):gmatch("(.-)\n") do
      if not own_line(line) then lines[#lines + 1] = line end
    end
    return table.concat(lines, "\n")
  end
end

-- The handler LÖVE calls when the game fails (`love.errorhandler`, else
-- LÖVE 0.10's `love.errhand`): its field's name and function, or nil.
local function error_handler()
  if type(love) ~= "table" then return nil end
  local f = rawget(love, "errorhandler")
  if type(f) == "function" then return "errorhandler", f end
  f = rawget(love, "errhand")
  if type(f) == "function" then return "errhand", f end
  return nil
end

local function pack(...) return { n = select("#", ...), ... } end

-- Puts a wrapper in front of the game's error handler, unless ours is
-- already the one LÖVE would call.
local function wrap_error_handler()
  local name, original = error_handler()
  if not name or (errwrap and original == errwrap.wrapper) then return end
  local this
  local function handler(msg, ...)
    if errwrap == this then
      local fns = on_error
      for i = 1, #fns do pcall(fns[i], msg) end
    end
    local traceback = debug.traceback
    debug.traceback = without_own_frames(traceback)
    local results = pack(original(msg, ...))
    debug.traceback = traceback
    return unpack(results, 1, results.n)
  end
  this = { name = name, original = original, wrapper = handler }
  rawset(love, name, handler)
  errwrap = this
end

-- Puts a wrapper in front of `timer.step`.
local function wrap(timer)
  local original = timer.step
  local this
  local function step(...)
    -- A wrapper left in the chain of an older `love.timer` passes through.
    if hook == this then
      local fns = on_step
      for i = 1, #fns do fns[i]() end
      -- A game that set its own error handler since (in main.lua) gets
      -- it wrapped before its first frame.
      if #on_error > 0 then wrap_error_handler() end
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

--- Runs `fn(message)` (raising nothing) when the game fails, before
-- LÖVE's error handler shows the error; while anything is registered, the
-- traceback that handler prints leaves out the frames of this package, so
-- it reads as it does without the profiler. Registering `fn` again does
-- nothing.
-- @tparam function fn
function M.on_error(fn)
  local fns = {}
  for i = 1, #on_error do
    if on_error[i] == fn then return end
    fns[i] = on_error[i]
  end
  fns[#fns + 1] = fn
  on_error = fns
  wrap_error_handler()
end

--- Stops running `fn` when the game fails; the error handler gets its
-- function back when nothing is registered and nothing replaced ours.
-- @tparam function fn
function M.off_error(fn)
  local fns = {}
  for i = 1, #on_error do
    if on_error[i] ~= fn then fns[#fns + 1] = on_error[i] end
  end
  on_error = fns
  if #fns == 0 and errwrap then
    if rawget(love, errwrap.name) == errwrap.wrapper then rawset(love, errwrap.name, errwrap.original) end
    errwrap = nil
  end
end

-- The poll of the channel this host polls, while it does, and what it
-- does when the game fails.
local polling, failing

--- Starts polling the control channel: `channel.poll()` runs before each
-- `love.timer.step`, so a game that called `profile.listen()` once is
-- driven once per frame. A game without the timer module, or whose own
-- `love.run` does not step it, calls `profile.poll()` itself.
-- @tparam table channel `{ poll = fn, finish = fn }`
-- @return nil (polling never fails to start)
function M.start(channel)
  M.stop()
  -- LÖVE's functions by the paths they have now: a game that keeps one in
  -- a local and puts its own in its place still has it named.
  pcall(function() require("tecs.profile.cfuncs").remember() end)
  polling = channel.poll
  M.on_step(polling)
  -- A game that fails never polls again (LÖVE's error screen runs a loop
  -- of its own): a session the channel started is written now.
  failing = function(msg)
    io.stderr:write("tecs-profile: the game failed: ", (tostring(msg):match("^[^\n]*")), "\n")
    channel.finish()
  end
  M.on_error(failing)
  return nil
end

--- Stops polling.
function M.stop()
  if polling then
    M.off_step(polling)
    polling = nil
  end
  if failing then
    M.off_error(failing)
    failing = nil
  end
end

return M
