-- The control channel: a running luajit process that listens and polls,
-- driven from outside by `tecs-profile targets` and `attach`.
local collapsed = require("spec.support.collapsed")
local run = require("spec.support.run")

local FIXTURE = "spec/fixtures/listen_child.lua"
-- Lines of the fixture's `burn`, the work a profile must show.
local BURN_FIRST, BURN_LAST = 8, 12
-- Lines of the fixture's `make`, which allocates in the "alloc" mode.
local MAKE_FIRST, MAKE_LAST
do
  local n = 0
  for line in io.lines(FIXTURE) do
    n = n + 1
    if line:find("^local function make") then MAKE_FIRST = n end
    if MAKE_FIRST and not MAKE_LAST and line == "end" then MAKE_LAST = n end
  end
end
-- A bound on waiting for the child, not a guess at its speed.
local PATIENCE_SECONDS = 120

local q = run.quote

describe("the control channel", function()
  local dir, ctl, children
  before_each(function()
    dir = run.tmpdir()
    ctl = dir .. "/ctl"
    children = {}
  end)

  -- A child listening in `ctl`, its outputDir `dir`; returns once it has
  -- said so on stdout.
  local function spawn(mode, command)
    local child = { stop = string.format("%s/stop-%d", dir, #children + 1) }
    child.p = assert(io.popen(string.format(
      "TECS_PROFILE_DIR=%s LISTEN_OUTPUT_DIR=%s timeout -k 10 %d %s %s %s %s 2>&1",
      q(ctl), q(dir), run.TIMEOUT_SECONDS, command or run.luajit, q(FIXTURE), q(child.stop), mode or "")))
    child.first = child.p:read("*l")
    child.pid = child.first and tonumber(child.first:match("/(%d+)%.sock$"))
    children[#children + 1] = child
    return child
  end

  -- Ends a child; returns what it wrote after its first line.
  local function finish(child)
    if child.done then return child.rest end
    run.write(child.stop, "")
    child.rest = child.p:read("*a")
    child.p:close()
    child.done = true
    return child.rest
  end

  after_each(function()
    for _, c in ipairs(children) do finish(c) end
    os.execute("rm -rf " .. q(dir))
  end)

  local function cli(args)
    return run.run3(string.format("TECS_PROFILE_DIR=%s %s %s", q(ctl), run.cli, args))
  end

  -- `attach status` until `done(out)`, within the bound.
  local function status_until(target, done)
    local deadline = os.time() + PATIENCE_SECONDS
    while true do
      local rc, out, err = cli("attach " .. target .. " status --timeout " .. PATIENCE_SECONDS)
      assert.equal(0, rc, err)
      if done(out) then return out end
      assert.is_true(os.time() < deadline, "still not there: " .. out)
      os.execute("sleep 0.05")
    end
  end

  local function samples_of(out) return tonumber(out:match("(%d+) samples")) or 0 end

  local function burn_samples(text)
    return collapsed.sum(collapsed.parse(text), function(row)
      for _, f in ipairs(row.frames) do
        local line = tonumber(f:match("listen_child%.lua:(%d+)"))
        if line and line >= BURN_FIRST and line <= BURN_LAST then return true end
      end
      return false
    end)
  end

  it("makes no system call in a poll while nobody connects (a game's frame pays nothing for listening)", function()
    -- The system calls of two runs that differ only in how many polls
    -- they make, counted by strace (the channel's own thread included):
    -- a poll that looked at the socket would make 100,000 more.
    local traced = os.execute("strace -f -o /dev/null true >/dev/null 2>&1")
    if not (traced == 0 or traced == true) then
      pending("strace cannot trace a process here (not installed, or ptrace refused)")
      return
    end
    local script = dir .. "/polls.lua"
    run.write(script, [[
      local profile = require("tecs.profile")
      profile.listen()
      for _ = 1, tonumber(arg[1]) do profile.poll() end
      profile.close()
    ]])
    local function calls(polls)
      local out = dir .. "/strace-" .. polls
      local rc = os.execute(string.format("TECS_PROFILE_DIR=%s strace -f -c -o %s %s %s %d >/dev/null 2>&1",
        q(ctl), q(out), run.luajit, q(script), polls))
      assert.is_true(rc == 0 or rc == true, "strace " .. polls)
      local total = run.read(out):match("\n%s*[%d.]+%s+[%d.]+%s+%d+%s+(%d+)%s+%d*%s*total")
      return assert(tonumber(total), run.read(out))
    end
    local few, many = calls(1000), calls(101000)
    assert.is_true(few > 0)
    assert.is_true(many - few < 100, string.format("%d system calls, then %d with 100,000 more polls", few, many))
  end)

  it("closes in a child forked from a listening process, and the parent goes on listening", function()
    -- The channel's thread is the parent's: a child that closes its copy
    -- of the channel must not wait for it.
    local script = dir .. "/fork.lua"
    run.write(script, [[
      local ffi = require("ffi")
      ffi.cdef("int fork(void); int waitpid(int pid, int *status, int options); void _exit(int);")
      local profile = require("tecs.profile")
      profile.listen()
      local pid = ffi.C.fork()
      if pid == 0 then
        profile.close()
        ffi.C._exit(7)
      end
      local status = ffi.new("int[1]")
      assert(ffi.C.waitpid(pid, status, 0) == pid)
      assert(profile.poll() == 0)
      profile.close()
      io.write("child status ", math.floor(status[0] / 256) % 256, "\n")
    ]])
    local rc, out, err = run.run3(string.format("TECS_PROFILE_DIR=%s timeout -k 5 60 %s %s", q(ctl), run.luajit, q(script)))
    assert.equal(0, rc, err)
    assert.equal("child status 7\n", out)
  end)

  it("tracks trace aborts from outside: attach trace_start, trace_stop -o writes the CSV", function()
    local child = spawn()
    assert.is_number(child.pid, child.first)
    local rc, out, err = cli("attach trace_start")
    assert.equal(0, rc, err)
    assert.matches("tracking trace aborts", out)
    local csv = dir .. "/aborts.csv"
    rc, out, err = cli("attach trace_stop -o " .. q(csv))
    assert.equal(0, rc, err)
    assert.matches("%d+ trace aborts; written to " .. csv:gsub("%p", "%%%0"), out)
    assert.matches("^severity,count,reason,location,zone\r\n", assert(run.read(csv)))
    rc, _, err = cli("attach trace_stop")
    assert.equal(1, rc)
    assert.matches("trace_start first", err)
  end)

  it("lists the child, samples it between start and stop, and writes the profile", function()
    local child = spawn()
    assert.is_number(child.pid, child.first)
    local rc, out, err = cli("targets")
    assert.equal(0, rc, err)
    assert.matches("\n" .. child.pid .. " +luajit +[%d-]+ [%d:]+ +" .. FIXTURE:gsub("%p", "%%%0") .. "\n", out)

    rc, out, err = cli("attach start -i 1")
    assert.equal(0, rc, err)
    assert.matches("pid " .. child.pid .. ": sampling every 1 ms", out, 1, true)
    status_until("", function(o) return samples_of(o) >= 20 end)

    local file = dir .. "/p.collapsed"
    rc, out, err = cli("attach " .. child.pid .. " stop -o " .. q(file))
    assert.equal(0, rc, err)
    assert.matches("written to " .. file, out, 1, true)
    assert.matches("%d+%.%d%%  burn %(" .. FIXTURE:gsub("%p", "%%%0"), out)
    local text = assert(run.read(file))
    assert.is_true(collapsed.sum(collapsed.parse(text)) >= 20, text)
    assert.is_true(burn_samples(text) > 0, text)

    -- The last profile stays: report gives its text, status its file; a
    -- second stop is an error that says so, and writes nothing anywhere.
    rc, out, err = cli("attach report --top 3")
    assert.equal(0, rc, err)
    assert.matches("burn (" .. FIXTURE, out, 1, true)
    rc, out, err = cli("attach status")
    assert.equal(0, rc, err)
    assert.matches("last profile: " .. file, out, 1, true)
    rc, out, err = cli("attach stop -o " .. q(dir .. "/again.collapsed"))
    assert.equal(1, rc, out)
    assert.matches("no session to stop: none is running; the last one %(%d+ samples%) was written to "
      .. file:gsub("%p", "%%%0") .. ": report shows its views, status gives its path", err)
    assert.is_nil(run.read(dir .. "/again.collapsed"))
  end)

  it("attach start --allocations profiles the bytes the program allocates, by the stacks that allocate them", function()
    local child = spawn("alloc")
    assert.is_number(child.pid, child.first)
    local rc, out, err = cli("attach start --allocations --bytes-per-sample 1024")
    assert.equal(0, rc, err)
    assert.matches("pid " .. child.pid .. ": profiling allocations, a sample every 1024 bytes on average", out, 1, true)
    local function bytes_of(o) return tonumber(o:match("allocations: (%d+) bytes")) or 0 end
    status_until("", function(o) return bytes_of(o) >= 1024 * 50 end)
    local file = dir .. "/a.collapsed"
    rc, out, err = cli("attach stop -o " .. q(file))
    assert.equal(0, rc, err)
    assert.matches("%d+ bytes allocated %(sampled%) in [%d.]+ s; written to " .. file:gsub("%p", "%%%0"), out)
    local rows = collapsed.parse(assert(run.read(file)))
    -- Each sample charges its stack the mean bytes between two samples.
    for _, r in ipairs(rows) do assert.equal(0, r.count % 1024, r.stack) end
    local in_make = collapsed.sum(rows, function(r)
      for _, f in ipairs(r.frames) do
        local line = tonumber(f:match("listen_child%.lua:(%d+)"))
        if line and line >= MAKE_FIRST and line <= MAKE_LAST then return true end
      end
      return false
    end)
    assert.is_true(in_make >= 1024 * 25, ("bytes in make: %d of %d"):format(in_make, collapsed.sum(rows)))
    rc, out, err = cli("report " .. q(file))
    assert.equal(0, rc, err)
    assert.matches("^# %d+ bytes;", out)
    -- An option of the other kind of session is refused, naming it.
    rc, out, err = cli("attach start --bytes-per-sample 1024")
    assert.equal(2, rc, out .. err)
    assert.matches("option --bytes-per-sample needs --allocations", err, 1, true)
    rc, out, err = cli("attach start --allocations -i 2")
    assert.equal(2, rc, out .. err)
    assert.matches("option --interval is not one of attach start --allocations", err, 1, true)
  end)

  it("stop answers with the zones and the slowest frames; report gives callers and hitches", function()
    local child = spawn("game")
    assert.is_number(child.pid, child.first)
    local rc, out, err = cli("attach start -i 1")
    assert.equal(0, rc, err)
    status_until("", function(o) return samples_of(o) >= 40 end)
    rc, out, err = cli("attach stop")
    assert.equal(0, rc, err)
    -- Every sample of the loop is in the zone, so it ranks among the zones.
    assert.matches("\nzones:\n.-%d+%.%d%%  update\n", out)
    local frames = tonumber(out:match("\nslowest of (%d+) frames:\n"))
    assert.is_number(frames, out)
    assert.is_true(frames >= 1, out)
    assert.matches("\n  frame %d+: %d+%.%d ms", out)

    rc, out, err = cli("attach report --by function --then caller --top 5")
    assert.equal(0, rc, err)
    assert.matches("burn (" .. FIXTURE, out, 1, true)
    rc, out, err = cli("attach report --hitches 2")
    assert.equal(0, rc, err)
    assert.matches("^Slowest %d of " .. frames .. " frames:\n", out)
    rc, _, err = cli("attach report --hitches 0")
    assert.equal(2, rc)
    assert.matches("--hitches needs a positive integer", err, 1, true)
  end)

  it("hostile requests through every command: refused, naming the field; nothing written anywhere", function()
    local sentinel = require("spec.support.sentinel")
    local native = require("tecs.profile.native")
    local t = sentinel.make(dir)
    local child = { stop = dir .. "/stop-hostile" }
    child.p = assert(io.popen(string.format("TECS_PROFILE_DIR=%s LISTEN_OUTPUT_DIR=%s timeout -k 10 %d %s %s %s 2>&1",
      q(ctl), q(t.out), run.TIMEOUT_SECONDS, run.luajit, q(FIXTURE), q(child.stop))))
    child.first = child.p:read("*l")
    children[#children + 1] = child
    local socket = assert(child.first:match("^listening (.*)$"), child.first)
    local function request(req)
      local ok, answer = native.call(native.raw.controlRequest, socket, req, PATIENCE_SECONDS)
      assert.is_true(ok, answer)
      return answer
    end
    local function refused(req, want, what)
      local a = request(req)
      assert.is_false(a.ok, what .. ": " .. native.json(a))
      if want then assert.matches(want, a.error, 1, true) end
      return a
    end
    local before = sentinel.digest(dir)

    -- Numbers out of bounds, and not integers where one is expected.
    local bounded = {
      { "start", "seconds", { -1, 0, 3601, 1e300, -1e300 } },
      { "report", "top", { -1, 0, 1.5, 10001, 1e300 } },
      { "report", "hitches", { -1, 0, 0.5, 201, 2 ^ 53 } },
      { "snapshot", "frames", { -1, 0, 2.5, 20001, 1e300 } },
      { "snapshot", "hitches", { 0, 201 } },
      { "snapshot", "stacks", { 0, 1.5, 20001 } },
    }
    for _, b in ipairs(bounded) do
      for _, v in ipairs(b[3]) do
        refused({ cmd = b[1], [b[2]] = v }, "bad field '" .. b[2] .. "'", b[1] .. " " .. b[2] .. " = " .. v)
      end
    end
    for _, v in ipairs({ -1, 0, 0.05, 60001, 1e300 }) do
      refused({ cmd = "start", intervalMs = v }, "option 'intervalMs' must be", "intervalMs = " .. v)
    end
    -- Strings too long.
    refused({ cmd = "start", zone = string.rep("z", 60000) }, "bad field 'zone'", "a huge zone")
    refused({ cmd = "start", zone = "" }, "zone", "an empty zone")
    refused({ cmd = "report", by = string.rep("b", 100) }, "bad field 'by'", "a huge by")
    -- What the client's own encoder refuses to send: fields of the wrong
    -- kind, unknown fields and commands, NaN, infinities, numbers out of
    -- range; then a line of 5 MB, answered without being read, its
    -- connection closed.
    local lines = {
      { '{"cmd":"start","seconds":"5"}', "invalid type: string \"5\"" },
      { '{"cmd":"trace_start","includeBenign":"yes"}', "invalid type" },
      { '{"cmd":"status","path":"/x.svg"}', "unknown field `path`" },
      { '{"cmd":"stop","pth":"x.svg"}', "unknown field `pth`" },
      { '{"cmd":"stop","path":["/etc/passwd"]}', "invalid type" },
      { '{"cmd":"launch"}', "unknown variant `launch`" },
      { '{"cmd":"start","seconds":NaN}', "bad request" },
      { '{"cmd":"start","seconds":Infinity}', "bad request" },
      { '{"cmd":"start","seconds":1e999}', "number out of range" },
      { '{"cmd":"report","top":-1e999}', "number out of range" },
      { '{"cmd":"start","seconds":-0}', "bad field 'seconds'" },
      { '{"cmd":"stop","x":' .. string.rep("[", 60000), "recursion limit exceeded" },
    }
    local raw = {}
    for i, l in ipairs(lines) do raw[i] = l[1] end
    local rc, out = run.run(string.format("python3 -c %s %s %s", q([[
import json, socket, sys
for line in json.loads(sys.argv[2]) + [None]:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    try:
        s.sendall((line + "\n").encode() if line is not None else b"x" * (5 << 20))
    except OSError:
        pass
    # The answer's line; after a line too long, all until the program
    # closes the connection.
    answer = b""
    while line is None or not answer.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        answer += chunk
    print(json.dumps(answer.decode()))
    s.close()
]]), q(socket), q(native.json(raw))))
    assert.equal(0, rc, out)
    local n = 0
    for line in out:gmatch("[^\n]+") do
      n = n + 1
      local text = assert(native.jsonDecode(line))
      local a = assert(native.jsonDecode(text:match("^[^\n]+")), line)
      assert.is_false(a.ok, line)
      assert.equal(text:match("^[^\n]+\n"), text, "one answer line")
      assert.matches(n <= #lines and lines[n][2] or "request line longer than 65536 bytes: not read; the "
        .. "connection is closed", a.error, 1, true)
    end
    assert.equal(#lines + 1, n, out)

    -- Every hostile path: to stop while a session runs (which runs on),
    -- to trace_stop while tracking (which goes on), through the channel
    -- and through attach.
    local function refused_path(a, p)
      assert.is_false(a.ok, p[2] .. ": " .. native.json(a))
      local why = a.error:match("a client may write only in " .. t.out:gsub("%p", "%%%0") .. " %(outputDir, where a "
        .. "bare file name goes%) or " .. ctl:gsub("%p", "%%%0") .. " %(the control directory%)")
        or a.error:match("bad field 'path' %(the [%w ]*file to write: a string of at most 4096 bytes expected")
        or a.error:match("request line longer than 65536 bytes")
      assert.is_string(why, p[2] .. ": " .. a.error)
    end
    assert.is_true(request({ cmd = "start" }).ok)
    assert.is_true(request({ cmd = "trace_start" }).ok)
    for _, p in ipairs(sentinel.paths(t, ".svg")) do
      refused_path(request({ cmd = "stop", path = p[1] }), p)
      assert.is_true(request({ cmd = "status" }).running, p[2])
    end
    for _, p in ipairs(sentinel.paths(t, ".csv")) do
      refused_path(request({ cmd = "trace_stop", path = p[1] }), p)
    end
    for _, p in ipairs({ t.outside .. "/victim.svg", t.out .. "/theirs.svg", t.out .. "/link.svg" }) do
      local err
      rc, out, err = cli("attach stop -o " .. q(p))
      assert.equal(1, rc, out)
      assert.matches("a client may write only in", err, 1, true)
    end
    assert.equal(before, sentinel.digest(dir), "a refused request changed a file")
    assert.is_true(request({ cmd = "status" }).running)

    -- What a client may do: a new file in outputDir by its bare name or
    -- its path, again over it (the channel's own), one in the control
    -- directory with its functions file; a trace report.
    local a = request({ cmd = "stop", path = "mine.svg" })
    assert.is_true(a.ok, a.error)
    assert.equal(t.out .. "/mine.svg", a.path)
    assert.matches("^<%?xml", assert(run.read(a.path)))
    -- None runs now: stop writes nothing again, anywhere.
    a = refused({ cmd = "stop", path = "again.svg" }, "no session to stop: none is running; the last one", "again")
    assert.matches("was written to " .. t.out .. "/mine.svg", a.error, 1, true)
    assert.is_nil(run.read(t.out .. "/again.svg"))
    assert.is_true(request({ cmd = "start" }).ok)
    a = request({ cmd = "stop", path = t.out .. "/mine.svg" })
    assert.is_true(a.ok, a.error)
    assert.is_true(request({ cmd = "start" }).ok)
    local deadline = os.time() + PATIENCE_SECONDS
    while request({ cmd = "status" }).samples < 1 do
      assert.is_true(os.time() < deadline, "no sample")
      os.execute("sleep 0.05")
    end
    a = request({ cmd = "stop", path = ctl .. "/mine.collapsed" })
    assert.is_true(a.ok, a.error)
    assert.is_true(collapsed.sum(collapsed.parse(assert(run.read(ctl .. "/mine.collapsed")))) > 0)
    assert.is_string(run.read(ctl .. "/mine.collapsed.functions.json"))
    a = request({ cmd = "trace_stop", path = "aborts.csv" })
    assert.is_true(a.ok, a.error)
    assert.matches("^severity,count", assert(run.read(t.out .. "/aborts.csv")))
    -- Nothing else changed: what was there is as it was.
    local after = {}
    for line in sentinel.digest(dir):gmatch("[^\n]+") do
      if not (line:find("/mine%.") or line:find("/aborts%.csv")) then after[#after + 1] = line end
    end
    assert.equal(before, table.concat(after, "\n") .. "\n")
  end)

  it("a client that dies before its answer leaves the program running and the session retrievable", function()
    local child = spawn()
    assert.is_number(child.pid, child.first)
    -- A client that sends `start` and exits at once, before any answer.
    local socket = child.first:match("^listening (.*)$")
    local rc, out = run.run(string.format("python3 -c %s %s", q("import socket, sys, os\n" ..
      "s = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n" ..
      "s.sendall(b'{\"cmd\":\"start\",\"intervalMs\":1}\\n')\nos._exit(0)\n"), q(socket)))
    assert.equal(0, rc, out)
    -- The command ran all the same, and the answer to a closed connection
    -- did not end the program (no SIGPIPE).
    status_until(child.pid, function(o) return o:match(": sampling") and samples_of(o) >= 20 end)
    local file = dir .. "/after.collapsed"
    rc, out = cli("attach stop -o " .. q(file))
    assert.equal(0, rc, out)
    assert.is_true(burn_samples(assert(run.read(file))) > 0)
    assert.equal("", finish(child))
  end)

  it("keeps the directory 0700 and the discovery entry 0600, and removes the entry at the end", function()
    for _, mode in ipairs({ "", "exit" }) do
      local child = spawn(mode)
      local entry = ctl .. "/" .. child.pid .. ".json"
      local _, modes = run.run("stat -c %a " .. q(ctl) .. " " .. q(entry) .. " " .. q(ctl .. "/" .. child.pid .. ".sock"))
      assert.equal("700\n600\n600\n", modes)
      assert.matches('"pid":' .. child.pid, run.read(entry), 1, true)
      assert.matches('"kind":"luajit"', run.read(entry), 1, true)
      finish(child)
      assert.is_nil(run.read(entry), "entry left by a child that ended with mode " .. mode)
      local rc, out = cli("targets")
      assert.equal(0, rc)
      assert.equal("", out)
    end
  end)

  it("skips and removes the entry of a process that died", function()
    local child = spawn()
    run.run("kill -9 " .. child.pid)
    finish(child)
    assert.is_string(run.read(ctl .. "/" .. child.pid .. ".json"))
    local rc, out, err = cli("targets")
    assert.equal(0, rc, err)
    assert.equal("", out)
    assert.matches("no program is listening", err, 1, true)
    assert.is_nil(run.read(ctl .. "/" .. child.pid .. ".json"))
  end)

  it("answers busy to a second client while one is connected", function()
    local child = spawn()
    local native = require("tecs.profile.native")
    local held = native.raw.controlConnect(ctl .. "/" .. child.pid .. ".sock")
    local answer = held:request({ cmd = "status" }, PATIENCE_SECONDS)
    assert.is_true(answer.ok)
    assert.equal(child.pid, answer.pid)
    local rc, out, err = cli("attach status")
    assert.equal(1, rc, out)
    assert.matches("pid " .. child.pid .. ": busy", err, 1, true)
    held = nil
    collectgarbage()
    collectgarbage()
    status_until(child.pid, function(o) return o:find("not sampling", 1, true) ~= nil end)
  end)

  it("stops a session started with --seconds by itself", function()
    local child = spawn()
    local rc, _, err = cli("attach start --seconds 0.2")
    assert.equal(0, rc, err)
    status_until("", function(o) return o:find("not sampling", 1, true) ~= nil end)
    local out
    rc, out, err = cli("attach stop")
    assert.equal(0, rc, err)
    local path = out:match("written to (%S+)")
    assert.is_string(path, out)
    assert.equal(ctl .. "/", path:sub(1, #ctl + 1))
    assert.is_string(run.read(path))
    finish(child)
  end)

  it("run --listen runs the program with the channel open and writes a session left running", function()
    local child = spawn("polled", run.luajit .. " bin/tecs-profile run --listen")
    assert.equal("polling", child.first)
    local rc, out, err = cli("targets")
    assert.equal(0, rc, err)
    local pid = tonumber(out:match("\n(%d+) +luajit +[%d-]+ [%d:]+ +" .. FIXTURE:gsub("%p", "%%%0") .. "\n"))
    assert.is_number(pid, out)
    rc, out, err = cli("attach start")
    assert.equal(0, rc, err)
    status_until(pid, function(o) return samples_of(o) >= 20 end)
    local rest = finish(child)
    local path = rest:match("ran to the program's end: (%S+)")
    assert.is_string(path, rest)
    local text = assert(run.read(path))
    assert.is_true(burn_samples(text) > 0, text)
    -- The program's own frames only: its main chunk is the outermost.
    for _, row in ipairs(collapsed.parse(text)) do assert.matches("^" .. FIXTURE:gsub("%p", "%%%0"), row.frames[1]) end
    assert.is_nil(run.read(ctl .. "/" .. pid .. ".json"))
  end)

  it("run --listen answers a program that never polls, at its next entry into the interpreter", function()
    local child = { stop = dir .. "/stop-busy" }
    child.p = assert(io.popen(string.format("TECS_PROFILE_DIR=%s timeout -k 10 %d %s run --listen %s %s 2>&1", q(ctl),
      run.TIMEOUT_SECONDS, run.cli, q("spec/fixtures/listen_busy.lua"), q(child.stop))))
    child.first = child.p:read("*l")
    children[#children + 1] = child
    assert.equal("working", child.first)
    local rc, out, err = cli("attach start --timeout " .. PATIENCE_SECONDS)
    assert.equal(0, rc, err)
    local pid = tonumber(out:match("^pid (%d+): sampling"))
    assert.is_number(pid, out)
    status_until(pid, function(o) return samples_of(o) >= 20 end)
    -- No outputDir: the control directory.
    local file = ctl .. "/busy.collapsed"
    rc, out, err = cli("attach stop --timeout " .. PATIENCE_SECONDS .. " -o " .. q(file))
    assert.equal(0, rc, err)
    local text = assert(run.read(file))
    local in_burn = collapsed.sum(collapsed.parse(text), function(row)
      return collapsed.has_frame(row, "listen_busy%.lua:7%-11$") or collapsed.has_frame(row, "listen_busy%.lua:9$")
    end)
    assert.is_true(in_burn > 0, text)
    local rest = finish(child)
    assert.not_matches("profile.poll", rest, 1, true)
  end)

  it("names the argument in errors", function()
    local usage = {
      { "attach", "attach needs a COMMAND" },
      { "attach frob", 'unknown COMMAND "frob"' },
      { "attach status --seconds 3", "option --seconds is not one of attach status" },
      { "attach start --interval -1", "option --interval needs a positive number, got -1" },
      { "attach report --top 1.5", "option --top needs a positive integer, got 1.5" },
      { "attach status --timeout 0", "option --timeout needs a positive number" },
      { "attach status extra", 'unexpected argument "extra"' },
      { "targets x", "targets takes no argument" },
      { "run --listen -o x " .. FIXTURE, "--output cannot be given with --listen" },
    }
    for _, c in ipairs(usage) do
      local rc, out, err = cli(c[1])
      assert.equal(2, rc, c[1] .. ": " .. out .. err)
      assert.matches(c[2], err, 1, true)
      assert.equal("", out)
    end
    local rc, _, err = cli("attach status")
    assert.equal(1, rc)
    assert.matches("no program is listening", err, 1, true)

    local a, b = spawn(), spawn()
    rc, _, err = cli("attach status")
    assert.equal(1, rc)
    assert.matches("2 programs are listening (pids " .. math.min(a.pid, b.pid) .. ", " .. math.max(a.pid, b.pid),
      err, 1, true)
    rc, _, err = cli("attach 1 status")
    assert.equal(1, rc)
    assert.matches("no program with pid 1 is listening", err, 1, true)
    rc, _, err = cli("attach " .. a.pid .. " stop")
    assert.equal(1, rc)
    assert.matches("no session to stop", err, 1, true)
    rc, _, err = cli("attach " .. a.pid .. " start --zone ''")
    assert.equal(1, rc)
    assert.matches("zone", err, 1, true)

    local code = [[
      local profile = require("tecs.profile")
      local function try(opts) print(select(2, pcall(function() profile.listen(opts) end))) end
      try({ colour = "red" })
      try({ dir = 3 })
      try({ dir = arg[1] })
      profile.listen({ dir = arg[2] })
      try({ dir = arg[2] })
    ]]
    run.write(dir .. "/listen_errors.lua", code)
    os.execute("mkdir -m 755 " .. q(dir .. "/open"))
    local out
    rc, out = run.run(string.format("%s %s %s %s", run.luajit, q(dir .. "/listen_errors.lua"), q(dir .. "/open"),
      q(dir .. "/mine")))
    assert.equal(0, rc, out)
    assert.matches("listen_errors.lua:2: profile.listen: unknown option 'colour'", out, 1, true)
    assert.matches("profile.listen: option 'dir' must be a directory path string (got number 3)", out, 1, true)
    assert.matches("control directory " .. dir .. "/open has mode 755: others may enter it (0700 expected)", out, 1,
      true)
    assert.matches("profile.listen: already listening on " .. dir .. "/mine/", out, 1, true)
  end)

  it("a channel a launcher opened gives way to the program's own listen(), which is then the only one", function()
    local code = [[
      local listen = require("tecs.profile.listen")
      local launched = listen.listen_launched()
      local own = listen.listen({ program = "own" })
      print("same socket", own.socket == launched.socket, listen.listening())
      print(select(2, pcall(listen.listen)))
      listen.close()
    ]]
    run.write(dir .. "/launched.lua", code)
    local rc, out = run.run(string.format("TECS_PROFILE_DIR=%s %s %s", q(ctl), run.luajit, q(dir .. "/launched.lua")))
    assert.equal(0, rc, out)
    assert.matches("same socket\ttrue\ttrue\n", out, 1, true)
    assert.matches("profile.listen: already listening on " .. ctl .. "/", out, 1, true)
  end)
end)
