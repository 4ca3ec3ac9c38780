--- Per-worker profiling for OpenResty / lua-nginx-module.
--
-- LuaJIT has one profiler per process, and every nginx worker is a process
-- with its own Lua VM, so each worker runs its own session. A flag in a
-- shared dict says whether profiling is wanted; a timer in every worker
-- starts or stops that worker's session to match and writes its profile to
-- <nginx prefix>/tecs-worker-<id>.collapsed. The session lives in this
-- module's upvalue, which persists across requests in the worker.
--
--   lua_shared_dict tecs_profile 64k;
--   init_worker_by_lua_block { ngx.timer.every(1, require("worker_profile").poll) }
--   location = /profile/start { content_by_lua_block { require("worker_profile").want(true) } }
--   location = /profile/stop  { content_by_lua_block { require("worker_profile").want(false) } }
--
-- To profile one worker at a time from outside instead (tecs-profile
-- attach, or an agent through tecs-profile mcp), one line is enough:
--
--   init_worker_by_lua_block { require("tecs.profile").listen() }
--
-- Both can be configured; a worker runs one session at a time, whichever
-- asked first (the other is refused, and logged here once).

local profile = require("tecs.profile")

local M = {}

local session -- this worker's running session, if any
local refused = false -- whether starting one failed since the flag went on

--- Where this worker writes its profile.
function M.path()
  return string.format("%stecs-worker-%d.collapsed", ngx.config.prefix(), ngx.worker.id())
end

--- Ask every worker to start (true) or stop (false) profiling.
function M.want(on)
  ngx.shared.tecs_profile:set("on", on)
  ngx.say(on and "profiling on" or "profiling off")
end

--- Timer callback: make this worker's session match the flag.
function M.poll(premature)
  local on = not premature and ngx.shared.tecs_profile:get("on")
  if on and not session then
    local ok, started = pcall(profile.sample, { intervalMs = 1 })
    if ok then
      session = started
    elseif not refused then
      refused = true
      ngx.log(ngx.WARN, started)
    end
  elseif not on then
    refused = false
  end
  if not on and session then
    local s = session
    session = nil
    local ok, err = pcall(s.stop, s, M.path())
    if not ok then ngx.log(ngx.ERR, err) end
  end
end

return M
