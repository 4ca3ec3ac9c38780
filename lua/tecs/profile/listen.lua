--- The control channel: profile a running program from outside.
--
--    local profile = require("tecs.profile")
--    profile.listen()          -- once, at the start
--    ...
--    profile.poll()            -- where the program can spare a moment
--                              -- (a LÖVE game polls once per frame by itself,
--                              -- an nginx worker from a timer `listen` starts:
--                              -- see `HOSTS`)
--
-- `listen` opens a Unix socket in a directory only this user can enter and
-- puts a discovery entry beside it; `tecs-profile targets` lists the
-- programs listening, `tecs-profile attach` drives one. Commands run where
-- the program polls, on its own thread: a program that has not polled gets
-- its command late, not lost. The socket, the protocol and the discovery
-- entries are native (`tecs.profile.native`); what each command does is
-- here. See docs/control.md.
-- @module tecs.profile.listen

local clock = require("tecs.profile.clock")

local native_ok, native = pcall(require, "tecs.profile.native")

local M = {}

--- How many functions and zones `stop` returns.
M.TOP = 10
--- How many of the slowest frames `stop` returns, and how many functions
-- of each.
M.SLOWEST = 3
M.TOP_IN_FRAME = 3

--- Hosts whose code is a module of its own, asked in order whether the
-- program is theirs (`detect()`). Such a host names the program and its
-- kind, and polls by itself. A host module gives:
-- `kind` (the discovery entry's kind), `detect()` (whether this Lua state
-- is that host's), `program()` (the name `tecs-profile targets` shows, or
-- nil for the default), `start(channel)` (starts polling: `channel.poll()`
-- runs what waits, `channel.finish()` writes a session the channel started
-- and closes it, for a host that is about to exit; returns nil, or why
-- polling cannot start, which refuses `listen`), `stop()` (stops polling),
-- and optionally `say(message)` (where `finish` says what it wrote, when
-- not on stderr) and `plugins()` (the `plugins` option of the views: where
-- the host's plugins live).
M.HOSTS = { "tecs.profile.host.love", "tecs.profile.host.nginx", "tecs.profile.host.nvim" }

-- The open channel: { native = listener, dir, socket, pid, program, kind,
-- host (its module of `HOSTS`, if any) }, or nil.
local channel
-- The channel's sampling session, while one runs: { session, started (clock),
-- seconds (or nil) }.
local running
-- The last session the channel stopped: { session, answer, unwritten,
-- by_itself }: `unwritten` while its profile could not be written (the next
-- `stop` writes it), `by_itself` when its `seconds` ran out and no `stop`
-- has had its answer yet.
local last
local written = 0

-- The module of `HOSTS` whose host this program is, or nil (a plain
-- LuaJIT program: it calls `profile.poll()` itself).
local function host_module()
  for _, name in ipairs(M.HOSTS) do
    local ok, host = pcall(require, name)
    if ok and host.detect() then return host end
  end
  return nil
end

-- The name of a program no host module names.
local function program_name()
  return type(arg) == "table" and type(arg[0]) == "string" and arg[0] or "luajit"
end

-- Strips the "file:line: " prefix and the "profile.sample: " name of an
-- error raised by the library.
local function clean(err)
  return (tostring(err):gsub("^[^\n]-:%d+: ", ""))
end

local function failure(fmt, ...)
  return { ok = false, error = string.format(fmt, ...) }
end

-- The heaviest functions of `session`'s profile, by self samples.
local function top_functions(session, n)
  local funcmap = require("tecs.profile.funcmap")
  local prof = session._native:profile()
  local map = {}
  for _, file in ipairs(prof:files()) do map[file] = funcmap.for_file(file) or nil end
  local total = prof:samples()
  local top = {}
  if total == 0 then return top, 0 end
  for i, r in ipairs(prof:selfByFunction(map)) do
    if i > n then break end
    top[i] = { name = r.name, samples = r.samples, share = r.samples / total }
  end
  return top, total
end

-- The zone paths of `session`'s profile by samples (nil when no sample
-- was in a zone), at most `n`.
local function top_zones(session, n)
  local prof = session._native:profile()
  local total = prof:samples()
  local zones = prof:samplesByZone()
  if total == 0 or #zones == 0 or (#zones == 1 and zones[1].name == native.noZone) then return nil end
  local top = {}
  for i, z in ipairs(zones) do
    if i > n then break end
    top[i] = { name = z.name, samples = z.samples, share = z.samples / total }
  end
  return top
end

-- The `n` slowest frames `session` marked, each with the functions that
-- ran most in it (nil when no frame was marked), and the frames marked.
local function slowest_frames(session, n)
  local frames = session:frames()
  if #frames == 0 then return nil end
  local slow = {}
  for i, h in ipairs(session:hitches(n)) do
    local top = {}
    for j, f in ipairs(h.top) do
      if j > M.TOP_IN_FRAME then break end
      top[j] = { name = f.name, share = f.share }
    end
    slow[i] = { index = h.index, startMs = h.startMs, ms = h.ms, samples = h.samples, gcSamples = h.gcSamples,
      cpuMs = h.cpuMs, top = top, waits = #h.waits > 0 and h.waits or nil }
  end
  return slow, #frames
end

-- A new name in the control directory (absolute: a relative
-- $TECS_PROFILE_DIR is made absolute when the channel opens).
local function default_path()
  written = written + 1
  return string.format("%s/%d-%s-%d.collapsed", channel.native:controlDir(), channel.pid,
    os.date("!%Y%m%dT%H%M%S"), written)
end

-- Where a file of `kind` ("profile", "trace") a client named `path` goes
-- (default: a new file in the control directory): its absolute path, or
-- nil and why a client may not have it written there, which says where
-- it may (the rules are native: `control::files`).
local function place(path, kind)
  if path == nil then
    path = default_path()
    if kind == "trace" then path = path:gsub("%.collapsed$", ".aborts.csv") end
  end
  local ok, where = native.call(channel.native.place, channel.native, path, kind)
  if not ok then return nil, where end
  -- Collapsed text has its functions file beside it: both may be written,
  -- or neither is.
  if kind == "profile" and native.formatFor(where) == "collapsed" then
    local side_ok, side = native.call(channel.native.place, channel.native, where .. native.functionsFileEnding,
      "functions")
    if not side_ok then return nil, side end
  end
  return where
end

-- Writes `text` to `target` (from `place`) as the channel writes a
-- client's files, the functions file beside a profile too; true, or nil
-- and the message, as `fs.write_atomic` answers.
local function confined_writer(target, kind)
  return function(path, text)
    local ok, err = native.call(channel.native.write, channel.native, path, path == target and kind or "functions",
      text)
    if not ok then return nil, err end
    return true
  end
end

-- Writes the last session's profile to `target` (from `place`); the
-- answer, or a failure that keeps the profile for the next `stop`.
local function write_last(target)
  local ok, wok, werr = pcall(last.session._write_file, last.session, target, nil, confined_writer(target, "profile"))
  if not (ok and wok) then
    return failure("%s (the session is stopped and its profile kept: stop again writes it, to another path if "
      .. "need be)", clean(ok and werr or wok))
  end
  last.unwritten = nil
  last.answer.path = target
  return last.answer
end

-- Stops the channel's session: nil, its profile then `last`'s, not yet
-- written; or a failure.
local function stop_running()
  local r = running
  running = nil
  local elapsed = clock.now() - r.started
  local ok, err = pcall(r.session.stop, r.session)
  if not ok then return failure("%s", clean(err)) end
  local answer = { ok = true, running = false, intervalMs = r.session.intervalMs, elapsedSec = elapsed,
    startedAt = r.session._started_at }
  answer.top, answer.samples = top_functions(r.session, M.TOP)
  answer.zones = top_zones(r.session, M.TOP)
  if r.allocations then
    -- Its samples are bytes: no frames, no time.
    answer.allocations, answer.bytesPerSample, answer.intervalMs = true, r.session.bytesPerSample, nil
  else
    answer.hitches, answer.framesMarked = slowest_frames(r.session, M.SLOWEST)
  end
  last = { session = r.session, answer = answer, unwritten = true }
  return nil
end

-- Stops the channel's session and writes its profile to a new file in the
-- control directory; the answer, or a failure (the profile kept).
local function finish_by_default()
  local failed = stop_running()
  if failed then return failed end
  local target, err = place(nil, "profile")
  if not target then return failure("%s (the profile is kept: stop writes it)", err) end
  return write_last(target)
end

local commands = {}

function commands.status()
  local answer = { ok = true, running = running ~= nil, pid = channel.pid, program = channel.program,
    kind = channel.kind, path = last and last.answer.path }
  local s = running and running.session or last and last.session
  if s then
    -- The samples its profile holds: a running session's recorded so far
    -- (not those taken while the channel's own work paused it), a stopped
    -- one's as its stop answered.
    answer.samples = running and s:stats().recordedSamples or last.answer.samples
    answer.intervalMs = s.intervalMs
    if s.bytesPerSample then
      -- An allocation session's samples are counted as bytes, as its profile counts them.
      answer.allocations, answer.bytesPerSample, answer.intervalMs = true, s.bytesPerSample, nil
      if running then answer.samples = s:stats().recordedSamples * s.bytesPerSample end
    end
    answer.startedAt = s._started_at
  end
  if running then
    answer.elapsedSec = clock.now() - running.started
    if running.seconds then answer.secondsLeft = math.max(0, running.seconds - answer.elapsedSec) end
  elseif last then
    answer.elapsedSec = last.answer.elapsedSec
  end
  return answer
end

-- `start` begins a sampling session, or with `allocations` an allocation
-- session (bytes charged to the stacks that allocated them).
function commands.start(req)
  if running then return failure("a session is already running (started by this channel): stop it first") end
  if req.bytesPerSample ~= nil and not req.allocations then
    return failure("bytesPerSample is an option of allocation sessions: start with allocations")
  end
  local ok, session
  if req.allocations then
    ok, session = pcall(require("tecs.profile.allocations").start,
      { bytesPerSample = req.bytesPerSample, zone = req.zone })
  else
    ok, session = pcall(require("tecs.profile.sample").start,
      { intervalMs = req.intervalMs, zone = req.zone, skipThread = channel.skipThread })
  end
  if not ok then return failure("%s", clean(session)) end
  running = { session = session, started = clock.now(), seconds = req.seconds, allocations = req.allocations }
  return { ok = true, running = true, intervalMs = session.intervalMs, bytesPerSample = session.bytesPerSample,
    allocations = req.allocations or nil, pid = channel.pid }
end

-- Stops the session and writes its profile where the client may have it
-- written (refused first, the session running on, where it may not). With
-- no session running: the profile a failed write kept, written now; the
-- answer of a session whose `seconds` ran out, once; else an error saying
-- where the last profile is (it is never written again elsewhere).
function commands.stop(req)
  if running or (last and last.unwritten) then
    local target, err = place(req.path, "profile")
    if not target then return failure("%s%s", err, running and " (the session runs on)" or "") end
    if running then
      local failed = stop_running()
      if failed then return failed end
    end
    return write_last(target)
  end
  if last and last.by_itself and req.path == nil then
    last.by_itself = nil
    return last.answer
  end
  if last then
    return failure("no session to stop: none is running; the last one (%d samples) was written to %s: report "
      .. "shows its views, status gives its path, start begins another", last.answer.samples or 0,
      tostring(last.answer.path))
  end
  return failure("no session to stop: start one first")
end

-- A report's answer: its text, and which profile it describes (when its
-- session started, how long it ran, the file written once stopped).
local function report_answer(s, text)
  return { ok = true, running = running ~= nil, samples = running and s:stats().recordedSamples or last.answer.samples,
    text = text, startedAt = s._started_at,
    elapsedSec = running and clock.now() - running.started or last.answer.elapsedSec,
    path = not running and last.answer.path or nil }
end

function commands.report(req)
  local s = running and running.session or last and last.session
  if not s then return failure("no profile yet: start a session first") end
  if req.hitches then
    local ok, text = pcall(function()
      local frames = s:frames()
      return require("tecs.profile.timeline").hitches_text(s:hitches(req.hitches), #frames)
    end)
    if not ok then return failure("%s", clean(text)) end
    return report_answer(s, text)
  end
  local plugins = channel.host and channel.host.plugins and channel.host.plugins()
  local ok, text = pcall(require("tecs.profile.report").report, s, { by = req.by, ["then"] = req["then"],
    limit = req.top, plugins = plugins })
  if not ok then return failure("%s", clean(text)) end
  return report_answer(s, text)
end

-- What the running session (else the last one) has recorded so far,
-- bounded (see `tecs.profile.listen.snapshot`); the session keeps running.
function commands.snapshot(req)
  local s = running and running.session or last and last.session
  if not s then return failure("no session to look at: start one first") end
  local snapshot = require("tecs.profile.listen.snapshot")
  local counts, err = snapshot.counts(req)
  if not counts then return failure("%s", err) end
  local answer = snapshot.take(s, counts)
  answer.ok, answer.running, answer.intervalMs, answer.pid = true, running ~= nil, s.intervalMs, channel.pid
  answer.program, answer.kind = channel.program, channel.kind
  answer.elapsedSec = running and clock.now() - running.started or last.answer.elapsedSec
  return answer
end

-- The channel's trace-abort tracker, while one runs; and the report of
-- one stopped whose CSV could not be written (the next trace_stop writes it).
local tracing, unwritten_report

function commands.trace_start(req)
  if tracing then return failure("trace aborts are already tracked (trace_stop first)") end
  local ok, session = pcall(require("tecs.profile.trace").start, { includeBenign = req.includeBenign })
  if not ok then return failure("%s", clean(session)) end
  tracing = session
  return { ok = true, running = running ~= nil, pid = channel.pid }
end

function commands.trace_stop(req)
  if not tracing and not unwritten_report then
    return failure("no trace-abort tracking to stop: trace_start first")
  end
  local target, err = place(req.path, "trace")
  if not target then return failure("%s%s", err, tracing and " (trace aborts are still tracked)" or "") end
  if tracing then
    local session = tracing
    tracing = nil
    local ok, report = pcall(session.stop, session)
    if not ok then return failure("%s", clean(report)) end
    unwritten_report = report
  end
  local report = unwritten_report
  local ok, werr = native.call(channel.native.write, channel.native, target, "trace", report:csv())
  if not ok then return failure("%s (the report is kept: trace_stop again writes it)", werr) end
  unwritten_report = nil
  local sites = {}
  for i, site in ipairs(report.sites) do
    if i > M.TOP then break end
    sites[i] = { severity = site.severity, count = site.count, reason = site.reason, location = site.location,
      zone = site.zone ~= "" and site.zone or nil }
  end
  return { ok = true, running = running ~= nil, aborts = report.totalAborts, sites = sites, path = target }
end

local function run(request)
  if request.invalid then return { ok = false, error = request.invalid } end
  local ok, answer = pcall(commands[request.cmd], request)
  if not ok then return failure("%s failed: %s", request.cmd, clean(answer)) end
  return answer
end

-- Runs one command as the profiler's own work, not the program's: a
-- sampling session that runs is paused meanwhile (its samples would go to
-- the line that polls) and the command's time is left out of the frame it
-- runs in (a live page's snapshot would make the game's hitches).
local function own_work(request)
  local sample = package.loaded["tecs.profile.sample"]
  local s = sample and sample.active()
  local pause = s and not s._paused and not s._stopped
  if pause then s:pause() end
  local began = clock.now()
  local answer = run(request)
  if pause and sample.active() == s and not s._stopped then
    s._native:ownWork(clock.now() - began)
    s:resume()
  end
  return answer
end

-- Runs what waits; see `M.poll`.
local function poll_now()
  if running and running.seconds and clock.now() - running.started >= running.seconds then
    -- Its answer is the next `stop`'s (`tecs-profile mcp` waits, then stops).
    local before = last
    finish_by_default()
    if last ~= before then last.by_itself = true end
  end
  local n = 0
  -- Every command waiting runs now, but a bound keeps a flooding client
  -- from holding the program's thread.
  while n < 64 do
    local request = channel.native:next()
    if request == nil then break end
    channel.native:reply(own_work(request))
    n = n + 1
  end
  return n
end

-- Whether a poll runs: one the wake-up started inside another (see the
-- `wake` option) has nothing to do.
local polling = false

--- Run the commands that wait, on the calling (the VM's) thread; a
-- session started with `seconds` stops here once its time has passed.
-- Does nothing when not listening.
-- @treturn integer how many commands ran
function M.poll()
  if not channel or polling then return 0 end
  polling = true
  -- Each command runs under pcall (`run`): nothing raises through here.
  local n = poll_now()
  polling = false
  return n
end

-- What a host module calls when its program is about to exit: a session
-- the channel started is written (its path, or why not, said where the
-- host says things) and the channel closes.
local function finish_for_host()
  local host = host_module()
  local path, err = M.finish_session()
  if path or err then
    local message = path and ("the running session was written to " .. path)
      or ("the running session could not be written: " .. tostring(err))
    if host and host.say then host.say(message) else io.stderr:write("tecs-profile: ", message, "\n") end
  end
  M.close()
end

--- Open the control channel of this process. A host of `HOSTS` polls by
-- itself: in LÖVE once per frame, in Neovim from a libuv timer; in an
-- nginx worker a timer polls every
-- `POLL_SECONDS` of `tecs.profile.host.nginx` (so one call in
-- `init_worker_by_lua*` is all a worker needs; refused in `init_by_lua*`,
-- which runs in the master).
-- @tparam[opt] table opts `dir` (the control directory; default
--   `$TECS_PROFILE_DIR`, else `$XDG_RUNTIME_DIR/tecs-profile`, else
--   `/tmp/tecs-profile-UID`; created 0700, and refused unless it is this
--   user's alone), `program` (the name `targets` shows; default `arg[0]`,
--   a LÖVE game's identity, "nginx worker N", or a host module's name
--   such as "nvim DIR"), `wake` (Linux: a
--   command that arrives runs at the program's next interpreted
--   instruction even if it never polls: SIGIO sets a one-shot count hook,
--   taken off as it runs; refused where the host handles SIGIO itself or
--   has a debug hook set; default false), `outputDir` (a directory where
--   clients may have the program write profiles besides the control
--   directory; a file name a client gives alone goes there), `skipThread`
--   (a Lua thread whose samples the sessions clients start do not record)
-- @treturn table `{ socket = path, entry = path, dir = path, pid = number }`,
--   with `wake`: `woken` (true, or false and `whyNotWoken`)
function M.listen(opts)
  if not native_ok then
    error("profile.listen: cannot load the native module tecs.profile.native: " .. tostring(native), 2)
  end
  -- The options are declared (names, what each takes) in the native module.
  local ok_opts, err = native.call(native.raw.checkOptions, "listen", opts)
  if not ok_opts then error("profile.listen: " .. err, 2) end
  opts = opts or {}
  -- A channel `tecs-profile love` opened gives way to the program's own.
  if channel and channel.launched then M.close() end
  if channel then
    error("profile.listen: already listening on " .. channel.socket .. " (profile.close() first)", 2)
  end
  if not native.raw.listen then error("profile.listen: this system has no Unix sockets", 2) end
  local host = host_module()
  local kind = host and host.kind or "luajit"
  if host then
    -- Before the channel opens, so that a refusal leaves nothing behind.
    local why = host.start({ poll = M.poll, finish = finish_for_host })
    if why then error("profile.listen: " .. why, 2) end
  end
  local program = opts.program or (host and host.program()) or program_name()
  local ok, listener = native.call(native.raw.listen, opts.dir, { program = program, kind = kind, started = os.time(),
    outputDir = opts.outputDir })
  if not ok then
    if host then host.stop() end
    error("profile.listen: " .. listener, 2)
  end
  local socket = listener:socket()
  channel = { native = listener, socket = socket, dir = socket:match("^(.*)/[^/]*$"), pid = listener:pid(),
    program = program, kind = kind, skipThread = opts.skipThread, host = host }
  local info = { socket = socket, entry = listener:entry(), dir = channel.dir, pid = channel.pid }
  if opts.wake then info.woken, info.whyNotWoken = listener:wake(M.poll) end
  return info
end

--- Open the channel for a launcher (`tecs-profile love`), as `listen()`
-- with no options does; a later `listen` by the program itself closes it
-- and opens the program's own, instead of failing.
-- @treturn table as `listen`'s
function M.listen_launched()
  local info = M.listen()
  channel.launched = true
  return info
end

--- Close the channel: its socket and discovery entry go. A session it
-- started keeps running until `finish_session` or the program's end.
function M.close()
  if not channel then return end
  if channel.host then channel.host.stop() end
  channel.native:close()
  channel = nil
end

--- Whether the channel is open.
function M.listening()
  return channel ~= nil
end

--- Stops a session the channel started and writes its profile to the
-- control directory (for the end of a program run with `--listen`).
-- @return the path written, or nil (no session, or it could not be written)
-- and the error
function M.finish_session()
  if not running then return nil end
  if not channel then return nil, "the channel is closed: its directories are no longer open" end
  local answer = finish_by_default()
  if not answer.ok then return nil, answer.error end
  return answer.path
end

return M
