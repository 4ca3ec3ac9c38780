--- nginx's host code (lua-nginx-module, OpenResty): how a worker is
-- recognized and named, and the timer that polls its control channel.
--
-- A host module of `tecs.profile.listen` (see its `HOSTS` for the
-- interface): `kind`, `detect()`, `program()`, `start(channel)`, `stop()`.
--
-- In an nginx worker the program's thread is nginx's event loop, which
-- Lua never sees return: a recurring timer polls instead, in a light
-- thread of its own, between the worker's requests. Started once per Lua
-- VM (nginx has no way to cancel it), it polls whichever channel is open
-- (none after `close`: it then costs a function call). When the worker
-- exits (a reload, a stop), nginx runs it one last time as premature: a
-- session the channel started is written then (its path in the error
-- log) and the channel closes, before the worker is gone: its socket and
-- discovery entry go with it (closing the Lua state would remove them
-- too, but a worker that lingers on long requests keeps its state until
-- it ends).
-- @module tecs.profile.host.nginx

local M = {}

--- The kind the discovery entry names.
M.kind = "nginx"

--- Seconds between two polls: a command waits at most this long.
M.POLL_SECONDS = 0.1

--- Whether this Lua state is an nginx worker's (or master's).
function M.detect()
  return type(ngx) == "table" and type(ngx.timer) == "table"
end

--- The name `tecs-profile targets` shows: `nginx worker N`
-- (`ngx.worker.id()`), or `nginx`.
function M.program()
  if type(ngx.worker) == "table" and type(ngx.worker.id) == "function" then
    local ok, id = pcall(ngx.worker.id)
    if ok and id then return "nginx worker " .. id end
  end
  return "nginx"
end

--- Says `message` where this host's messages go: nginx's error log.
-- @tparam string message
function M.say(message)
  ngx.log(ngx.NOTICE, "tecs-profile: ", message)
end

-- The channel's functions the timer calls, `{ poll, finish }` (kept after
-- `stop`: polling a closed channel does nothing); and whether the timer
-- runs.
local channel
local timer_started = false

local function tick(premature)
  if premature then
    channel.finish()
    return
  end
  channel.poll()
end

--- Starts the poll timer (once per VM) for `channel`; refused in
-- `init_by_lua*`, which runs in the master before the workers fork (the
-- channel would name the master and be shared by every worker).
-- @tparam table channel `{ poll = fn, finish = fn }`
-- @return nil, or a string saying why polling cannot start
function M.start(channel_)
  if timer_started then
    channel = channel_
    return nil
  end
  local phase = type(ngx.get_phase) == "function" and ngx.get_phase()
  if phase == "init" then
    return "in nginx, call it in init_worker_by_lua* (init_by_lua* runs in the master process, not in the workers)"
  end
  if type(ngx.timer.every) ~= "function" then
    return "this lua-nginx-module has no ngx.timer.every (0.10.9 or later is needed): call profile.poll() from a timer"
  end
  channel = channel_
  -- A phase that may not make timers raises; a full timer table returns nil.
  local called, ok, err = pcall(ngx.timer.every, M.POLL_SECONDS, tick)
  if not (called and ok) then
    return "cannot start the poll timer in the " .. tostring(phase) .. " phase (ngx.timer.every: "
      .. tostring(called and err or ok) .. "): call it in init_worker_by_lua*"
  end
  timer_started = true
  return nil
end

--- Stops polling: the timer runs on (nginx cannot cancel it) and polls
-- nothing while no channel is open.
function M.stop() end

return M
