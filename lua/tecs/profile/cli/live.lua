--- `tecs-profile live [PID]`: a page on 127.0.0.1 that follows a running
-- program. The command holds one connection to the program's control
-- channel (another client is told the channel is busy) and serves, under
-- a secret made for the run, the live page (`tecs.profile.page`) and its
-- data, `data.json`, from the channel's `snapshot` command, asked each
-- time the page asks. The HTTP server is native (`native.raw.httpServe`:
-- blocking, 127.0.0.1 only, requests without the secret refused there).
-- @module tecs.profile.cli.live

local attach = require("tecs.profile.cli.attach")
local options = require("tecs.profile.cli.options")
local page = require("tecs.profile.page")

local M = {}

--- Seconds the loop waits for a request before it looks at the signals
-- and at the program again.
M.WAIT = 0.5

local function say_error(msg)
  io.stderr:write("tecs-profile: ", msg, "\n")
  return 1
end

local function say(fmt, ...)
  io.stdout:write(string.format(fmt, ...), "\n")
  io.stdout:flush()
end

-- Whether a request failed because the program had closed the connection
-- before reading it (it closes one idle too long): it did not run, and may
-- be sent again on a new connection.
local function closed_before(err)
  return err:find("closed the connection without answering", 1, true) ~= nil
    or err:find("cannot send the request", 1, true) ~= nil
end

-- The connection to `target`'s channel: `request(req)` answers the
-- program's answer, or nil and why there is none; `idle()`, the seconds
-- since the last answer. A request that got no answer in time leaves the
-- connection out of step (its answer comes later): the connection is
-- closed and the next request opens another.
local function channel(native, target, timeout)
  local clock = require("tecs.profile.clock")
  local conn
  local answered = clock.now()
  local self = {}
  function self.request(req)
    for _ = 1, 2 do
      local fresh = conn == nil
      if fresh then
        local ok, c = native.call(native.raw.controlConnect, target.socket)
        if not ok then return nil, c end
        conn = c
      end
      local ok, answer = native.call(conn.request, conn, req, timeout)
      if ok then
        answered = clock.now()
        return answer
      end
      conn:close()
      conn = nil
      if fresh or not closed_before(answer) then return nil, answer end
    end
  end
  function self.idle()
    return clock.now() - answered
  end
  function self.close()
    if conn then conn:close() end
    conn = nil
  end
  return self
end

-- Whether the program `pid` still listens.
local function listening(pid)
  local targets = attach.targets_list()
  for _, t in ipairs(targets or {}) do
    if t.pid == pid then return true end
  end
  return targets == nil -- the list could not be read: assume it does
end

--- Runs `live`; returns the exit code.
function M.live(opts, pos, usage_error)
  local pid
  if pos[1] and pos[1]:match("^%d+$") then pid = tonumber(table.remove(pos, 1)) end
  if #pos > 0 then usage_error("live: unexpected argument %q (PID expected)", pos[1]) end
  local port = opts.port or options.option("live", "port").default
  if port < 0 or port > 65535 or port ~= math.floor(port) then
    usage_error("option --port needs an integer from 0 to 65535, got %s", tostring(port))
  end
  for key, spelling in pairs({ intervalMs = "--interval", timeout = "--timeout" }) do
    local v = opts[key]
    if v ~= nil and not (v > 0 and v < math.huge) then
      usage_error("option %s needs a positive number, got %s", spelling, tostring(v))
    end
  end
  local timeout = opts.timeout or options.option("live", "timeout").default
  local target, err = attach.choose(pid)
  if not target then return say_error(err) end
  local native = require("tecs.profile.native")
  -- Caught from here on: a signal at any later point ends live through
  -- its one way out, which stops a session it started.
  native.raw.stopSignals("catch")
  local program = channel(native, target, timeout)
  local function give_up(msg)
    native.raw.stopSignals("release")
    program.close()
    return say_error(msg)
  end
  local status, why = program.request({ cmd = "status" })
  if not status then return give_up(string.format("live: pid %d: %s", target.pid, why)) end
  if not status.ok then return give_up(string.format("pid %d: %s", target.pid, status.error)) end
  local sok, server = native.call(native.raw.httpServe, port)
  if not sok then return give_up("live: " .. server) end
  local started = false
  if not status.running then
    local a, serr = program.request({ cmd = "start", intervalMs = opts.intervalMs })
    if not a or not a.ok then
      return give_up(string.format("pid %d: cannot start a session: %s", target.pid, a and a.error or serr))
    end
    started = true
    say("pid %d: no session was running: started one, sampling every %g ms (stopped and written when live ends)",
      target.pid, a.intervalMs)
  else
    say("pid %d: following the session that runs (live leaves it running)", target.pid)
  end
  local title = string.format("pid %d: %s", target.pid, target.program)
  say("live page: %s", server:url())
  -- The browser is given a file of this user's that sends it on to the
  -- address: the address, with its secret, never on a command line.
  local redirect
  if opts.open then
    local found = os.execute("command -v xdg-open >/dev/null 2>&1")
    if found == 0 or found == true then -- Lua 5.1's status, or 5.2's
      local rok, file = native.call(native.raw.liveRedirect, server:url())
      if rok then
        redirect = file
        os.execute("xdg-open '" .. file:gsub("'", "'\\''") .. "' >/dev/null 2>&1 &")
      else
        say("--open: %s: open the address in a browser", file)
      end
    else
      say("--open: no xdg-open here: open the address in a browser")
    end
  end

  -- The page's data, or nil and why there is none.
  local function data()
    local a, derr = program.request({ cmd = "snapshot" })
    if not a then return nil, derr end
    if not a.ok then return nil, a.error end
    local ok, d = pcall(page.live_data, a, { title = title })
    if not ok then return nil, "cannot draw the snapshot: " .. tostring(d) end
    return d
  end

  -- The program closes a connection that sends nothing for its idle
  -- limit; live asks for the status well before, to keep the channel.
  local keep_alive = (native.raw.controlLimits or { idleSeconds = 60 }).idleSeconds / 3
  local ended, signal
  local ok, loop_err = pcall(function()
    local quiet = 0
    while true do
      signal = native.raw.stopSignals("caught")
      if signal then return end
      local path = server:next(M.WAIT)
      if path == "/" or path == "/data.json" then
        quiet = 0
        local d, derr = data()
        if not d and path == "/" then
          server:reply(503, "text/plain; charset=utf-8", "no answer from pid " .. target.pid .. ": " .. derr .. "\n")
          if not listening(target.pid) then ended = true return end
        elseif not d then
          server:reply(503, "application/json", native.json({ error = derr }))
          if not listening(target.pid) then ended = true return end
        elseif path == "/" then
          server:reply(200, "text/html; charset=utf-8", page.live(d, { title = "tecs-profile live: " .. title }))
        else
          server:reply(200, "application/json", native.json(d))
        end
      elseif path then
        server:reply(404, "text/plain", "not found\n")
      else
        -- No page asks: look now and then whether the program still runs.
        quiet = quiet + 1
        if quiet % 4 == 0 and not listening(target.pid) then ended = true return end
        if program.idle() >= keep_alive then program.request({ cmd = "status" }) end
      end
    end
  end)
  if not ok then
    io.stderr:write("tecs-profile: live: ", tostring(loop_err), "\n")
  end
  -- The browser has long read it.
  if redirect then os.remove(redirect) end
  if ended then
    native.raw.stopSignals("release")
    program.close()
    say("pid %d has stopped listening: live ends", target.pid)
    return ok and 0 or 1
  end
  local code = ok and 0 or 1
  -- The session is stopped before anything is printed: a terminal that
  -- went away (SIGHUP) may take the output with it.
  local a, serr
  if started then
    a, serr = program.request({ cmd = "stop", path = opts.output and attach.output_path(opts.output) })
  end
  -- Caught until now: a second Ctrl-C does not cut the stop short.
  native.raw.stopSignals("release")
  if signal then say("%s: live ends", signal) end
  if started then
    if a and a.ok then
      say("pid %d: the session live started: %d samples in %.2f s; written to %s", target.pid, a.samples,
        a.elapsedSec or 0, a.path)
    else
      code = say_error(string.format("pid %d: cannot stop the session live started: %s (attach stop retries)",
        target.pid, a and a.error or serr))
    end
  end
  program.close()
  return code
end

return M
