-- The live page: the control channel's `snapshot` command, asked of a
-- listening program that marks frames (spec/fixtures/live_child.lua), and
-- `tecs-profile live`, its HTTP server on 127.0.0.1 behind a secret, asked
-- by a real client (curl). The page in a browser: platform_spec/live_page_spec.lua.
local native = require("tecs.profile.native")
local run = require("spec.support.run")

local FIXTURE = "spec/fixtures/live_child.lua"
local QUICK = "M.quick_work (spec/fixtures/frames_work.lua:15)"
local SLOW = "M.slow_work (spec/fixtures/frames_work.lua:6)"
-- A bound on waiting for the child, not a guess at its speed.
local PATIENCE_SECONDS = 120

local q = run.quote

describe("the live page", function()
  local dir, ctl, children, lives

  before_each(function()
    dir = run.tmpdir()
    ctl = dir .. "/ctl"
    children, lives = {}, {}
  end)

  local function spawn()
    local child = { stop = string.format("%s/stop-%d", dir, #children + 1) }
    child.p = assert(io.popen(string.format("TECS_PROFILE_DIR=%s timeout -k 10 %d %s %s %s 2>&1", q(ctl),
      run.TIMEOUT_SECONDS, run.luajit, q(FIXTURE), q(child.stop))))
    child.first = child.p:read("*l")
    child.socket = child.first and child.first:match("^listening (.*)$")
    child.pid = child.socket and tonumber(child.socket:match("/(%d+)%.sock$"))
    children[#children + 1] = child
    assert.is_number(child.pid, child.first)
    return child
  end

  -- `tecs-profile live ARGS` in the background: its pid, and its lines
  -- up to the page's address (`url`, `port`) or its end.
  local function live(args, env)
    local l = {}
    l.p = assert(io.popen(string.format("(%s TECS_PROFILE_DIR=%s %s live --timeout %d %s & echo \"pid=$!\"; " ..
      "wait $!; echo \"rc=$?\") 2>&1", env or "", q(ctl), run.cli, PATIENCE_SECONDS, args)))
    l.pid = tonumber(l.p:read("*l"):match("^pid=(%d+)$"))
    l.lines = {}
    while true do
      local line = l.p:read("*l")
      if not line then break end
      l.lines[#l.lines + 1] = line
      l.url = line:match("^live page: (http://%S+)$")
      if l.url then break end
      local rc = line:match("^rc=(%d+)$")
      if rc then
        l.rc, l.done = tonumber(rc), true
        break
      end
    end
    l.port = l.url and tonumber(l.url:match("^http://127%.0%.0%.1:(%d+)/"))
    lives[#lives + 1] = l
    return l
  end

  -- Ends `l` with `signal` (when running); returns its exit code and what
  -- it wrote after the address.
  local function stop_live(l, signal)
    if l.done then return l.rc, table.concat(l.lines, "\n") end
    if signal then os.execute("kill -" .. signal .. " " .. l.pid) end
    local rest = l.p:read("*a")
    l.p:close()
    l.done = true
    l.rc = tonumber(rest:match("rc=(%d+)%s*$"))
    return l.rc, rest
  end

  after_each(function()
    for _, l in ipairs(lives) do
      if not l.done then stop_live(l, "KILL") end
    end
    for _, c in ipairs(children) do
      run.write(c.stop, "")
      c.p:read("*a")
      c.p:close()
    end
    os.execute("rm -rf " .. q(dir))
  end)

  local function request(child, req)
    local ok, answer = native.call(native.raw.controlRequest, child.socket, req, PATIENCE_SECONDS)
    assert.is_true(ok, answer)
    return answer
  end

  -- The first answer of `ask()` for which `done(answer)` holds, within
  -- the bound.
  local function until_answer(ask, done)
    local deadline = os.time() + PATIENCE_SECONDS
    while true do
      local a = ask()
      if done(a) then return a end
      assert.is_true(os.time() < deadline, "still not there: " .. native.json(a))
      os.execute("sleep 0.1")
    end
  end

  local function enough(a) return a.ok ~= false and a.samples >= 100 and a.framesKept >= 30 end

  -- GET `url` with curl: status, body (extra: more curl arguments).
  local function get(url, extra)
    local body = dir .. "/body"
    local rc, out, err = run.run3(string.format("curl -s -o %s -w '%%{http_code}' %s %s", q(body), extra or "", q(url)))
    assert.equal(0, rc, err)
    return tonumber(out), run.read(body) or ""
  end

  local function sum_of_counts(text)
    local n = 0
    for line in text:gmatch("[^\n]+") do n = n + assert(tonumber(line:match(" (%d+)$")), line) end
    return n
  end

  it("snapshot: the running session's frames, slowest frames, stacks and functions, bounded", function()
    local child = spawn()
    local a = request(child, { cmd = "snapshot" })
    assert.is_false(a.ok)
    assert.matches("no session to look at: start one first", a.error, 1, true)
    assert.is_true(request(child, { cmd = "start" }).ok)
    a = until_answer(function() return request(child, { cmd = "snapshot" }) end, enough)
    assert.is_true(a.ok and a.running)
    assert.equal(child.pid, a.pid)
    -- The last frames, in order, each with its times and counts.
    assert.is_true(#a.frames >= 30 and #a.frames <= 600 and #a.frames <= a.framesKept)
    for i, f in ipairs(a.frames) do
      assert.equal(a.framesKept - #a.frames + i, f.index)
      for _, k in ipairs({ "startMs", "ms", "samples", "gcSamples" }) do assert.is_number(f[k], k) end
    end
    -- The slowest frames, slowest first, with what ran in them.
    assert.equal(math.min(20, a.framesKept), #a.hitches)
    for i, h in ipairs(a.hitches) do
      if i > 1 then assert.is_true(h.ms <= a.hitches[i - 1].ms) end
      for _, t in ipairs(h.top) do
        assert.is_string(t.name)
        assert.is_true(t.share > 0 and t.share <= 1)
      end
    end
    -- Stacks named by function, every sample in one of them.
    assert.equal(a.samples, sum_of_counts(a.stacks))
    assert.equal(0, a.stacksLeftOut)
    assert.truthy(a.stacks:find(QUICK, 1, true), a.stacks)
    local named = {}
    for _, f in ipairs(a.top) do named[f.name] = true end
    assert.is_true(named[QUICK] or false, native.json(a.top))
    assert.same({}, a.events)

    -- Bounds: three frames, one hitch, one stack and the others summed.
    local b = request(child, { cmd = "snapshot", frames = 3, hitches = 1, stacks = 1 })
    assert.equal(3, #b.frames)
    assert.equal(b.framesKept, b.frames[3].index)
    assert.equal(1, #b.hitches)
    local lines = {}
    for line in b.stacks:gmatch("[^\n]+") do lines[#lines + 1] = line end
    if b.stacksLeftOut > 0 then
      assert.equal(2, #lines)
      assert.matches("^%(other stacks%) %d+$", lines[2])
    else
      assert.equal(1, #lines)
    end
    assert.equal(b.samples, sum_of_counts(b.stacks))
    local bad = request(child, { cmd = "snapshot", frames = 0 })
    assert.is_false(bad.ok)
    assert.matches("bad field 'frames'", bad.error, 1, true)
    -- The session still runs.
    assert.is_true(request(child, { cmd = "status" }).running)
  end)

  it("live: a page and its data on 127.0.0.1 under a secret; ended by SIGTERM, it writes the session it started",
    function()
    local child = spawn()
    local l = live(tostring(child.pid))
    assert.is_string(l.url, table.concat(l.lines, "\n"))
    assert.matches("^pid " .. child.pid .. ": no session was running: started one", l.lines[1])
    assert.matches("^http://127%.0%.0%.1:%d+/%x+/$", l.url)
    -- Bound to 127.0.0.1 alone: its listening entry in the kernel's table.
    local tcp = assert(run.read("/proc/net/tcp"))
    assert.matches(string.format("%%d+: 0100007F:%04X 00000000:0000 0A ", l.port), tcp)
    assert.is_nil(tcp:match(string.format("%%d+: 00000000:%04X 00000000:0000 0A ", l.port)))

    -- Without the secret, with another secret or another host: refused.
    local root = l.url:match("^(http://[^/]+)/")
    local token = l.url:match("/(%x+)/$")
    local status, body = get(root .. "/")
    assert.equal(403, status)
    assert.matches("secret", body)
    assert.equal(403, (get(root .. "/data.json")))
    assert.equal(403, (get(root .. "/" .. token:sub(1, -2) .. (token:sub(-1) == "0" and "1" or "0") .. "/data.json")))
    assert.equal(403, (get(l.url .. "data.json", "-H 'Host: example.com'")))
    assert.equal(308, (get(root .. "/" .. token)))
    assert.equal(404, (get(l.url .. "other")))

    -- With it: the page, and its data once there is enough.
    status, body = get(l.url)
    assert.equal(200, status)
    assert.matches('<div id="frames-chart">', body, 1, true)
    assert.matches('fetch("data.json"', body, 1, true)
    local d = until_answer(function()
      local s, b = get(l.url .. "data.json")
      assert.equal(200, s, b)
      return native.jsonDecode(b)
    end, function(x) return x.samples >= 100 and x.framesKept >= 30 and x.flamegraph:find(QUICK, 1, true) end)
    assert.is_true(d.running)
    assert.is_true(#d.frames >= 30)
    assert.is_true(#d.hitches >= 1)
    assert.same({}, d.aborts)
    assert.matches("^%d+ samples in [%d.]+ s, every 1 ms %(sampling%); %d+ frames", d.summary)
    assert.matches("functions by self time", d.functions, 1, true)
    assert.truthy(d.functions:find(QUICK, 1, true), d.functions)
    assert.matches("<svg", d.flamegraph, 1, true)
    assert.is_true(d.flamegraphHeight > 0)

    -- A second client is told the channel is busy.
    local rc, out, err = run.run3(string.format("TECS_PROFILE_DIR=%s %s live %d", q(ctl), run.cli, child.pid))
    assert.equal(1, rc, out)
    assert.matches("busy: another client is attached to process " .. child.pid, err, 1, true)
    rc, _, err = run.run3(string.format("TECS_PROFILE_DIR=%s %s attach status", q(ctl), run.cli))
    assert.equal(1, rc)
    assert.matches("busy", err, 1, true)

    local code, rest = stop_live(l, "TERM")
    assert.equal(0, code, rest)
    assert.matches("SIGTERM: live ends", rest, 1, true)
    local path = rest:match("the session live started: %d+ samples in [%d.]+ s; written to (%S+)")
    assert.is_string(path, rest)
    assert.is_true(sum_of_counts(assert(run.read(path))) >= 100)
    -- The program goes on, its channel free again.
    local s = request(child, { cmd = "status" })
    assert.is_false(s.running)
    assert.equal(path, s.path)
  end)

  it("live follows a session that runs and leaves it running; a live killed leaves it retrievable", function()
    local child = spawn()
    assert.is_true(request(child, { cmd = "start" }).ok)
    local l = live("")
    assert.is_string(l.url, table.concat(l.lines, "\n"))
    assert.matches("following the session that runs", l.lines[1], 1, true)
    local code, rest = stop_live(l, "INT")
    assert.equal(0, code, rest)
    assert.matches("SIGINT: live ends", rest, 1, true)
    assert.is_nil(rest:find("written to", 1, true))
    assert.is_true(request(child, { cmd = "status" }).running)

    -- A live that dies: the program runs on, and its session is there.
    assert.is_true(request(child, { cmd = "stop" }).ok)
    l = live("")
    assert.matches("started one", l.lines[1], 1, true)
    until_answer(function() return native.jsonDecode(select(2, get(l.url .. "data.json"))) end,
      function(x) return x.samples and x.samples >= 50 end)
    stop_live(l, "KILL")
    local a = until_answer(function()
      local ok, answer = native.call(native.raw.controlRequest, child.socket, { cmd = "status" }, PATIENCE_SECONDS)
      return ok and answer or { ok = false }
    end, function(x) return x.ok end)
    assert.is_true(a.running)
    local stopped = request(child, { cmd = "stop" })
    assert.is_true(stopped.ok)
    assert.is_true(stopped.samples >= 50)
    assert.is_string(run.read(stopped.path))
  end)

  it("live -o a path the program may not write: refused at the end, the session left running, nothing written",
    function()
    local sentinel = require("spec.support.sentinel")
    local t = sentinel.make(dir)
    local before = sentinel.digest(t.outside) .. sentinel.digest(t.out)
    local child = spawn()
    for _, target in ipairs({ t.outside .. "/victim.svg", t.out .. "/link.svg", "../outside/new.svg" }) do
      local l = live("-o " .. q(target))
      assert.is_string(l.url, table.concat(l.lines, "\n"))
      until_answer(function() return native.jsonDecode(select(2, get(l.url .. "data.json"))) end,
        function(x) return x.samples and x.samples >= 1 end)
      local code, rest = stop_live(l, "TERM")
      assert.equal(1, code, rest)
      assert.matches("cannot stop the session live started: cannot write '", rest, 1, true)
      assert.matches("a client may write only in " .. ctl, rest, 1, true)
      -- The session runs on; attach stop writes it where it may.
      assert.is_true(request(child, { cmd = "status" }).running)
      assert.is_true(request(child, { cmd = "stop" }).ok)
    end
    assert.equal(before, sentinel.digest(t.outside) .. sentinel.digest(t.out))
  end)

  it("live --open gives the browser a file of this user's, never the secret on a command line", function()
    local child = spawn()
    -- The desktop's opener: it records its arguments, its parent's command
    -- line and the file it is given, as every local user could read them.
    local bin = dir .. "/bin"
    assert.equal(0, os.execute("mkdir -p " .. q(bin)))
    run.write(bin .. "/xdg-open", table.concat({
      "#!/bin/sh",
      "out=" .. q(dir .. "/opened"),
      "{ tr '\\0' ' ' < /proc/$$/cmdline; echo; tr '\\0' ' ' < /proc/$PPID/cmdline; echo; } > \"$out.cmdlines\"",
      "stat -c %a \"$1\" > \"$out.mode\"; cat \"$1\" > \"$out.page\"; echo \"$1\" > \"$out.path\"",
      "mv \"$out.path\" \"$out.done\"",
    }, "\n") .. "\n")
    assert.equal(0, os.execute("chmod +x " .. q(bin .. "/xdg-open")))
    local l = live(tostring(child.pid) .. " --open", "PATH=" .. q(bin) .. ":$PATH")
    assert.is_string(l.url, table.concat(l.lines, "\n"))
    local secret = assert(l.url:match("^http://127%.0%.0%.1:%d+/(%x+)/"), l.url)
    until_answer(function() return run.read(dir .. "/opened.done") end, function(a) return a ~= nil end)
    local cmdlines = run.read(dir .. "/opened.cmdlines")
    assert.is_nil(cmdlines:find(secret, 1, true), cmdlines)
    assert.matches("xdg-open", cmdlines, 1, true)
    local page = run.read(dir .. "/opened.page")
    assert.matches(l.url, page, 1, true)
    assert.matches("http-equiv=\"refresh\"", page, 1, true)
    assert.equal("600", run.read(dir .. "/opened.mode"):match("%d+"))
    local file = run.read(dir .. "/opened.done"):match("[^\n]+")
    assert.equal(ctl, file:match("^(.*)/[^/]+$"), "in the control directory, which only this user may enter")
    local code = stop_live(l, "TERM")
    assert.equal(0, code)
    assert.is_nil(run.read(file), "removed when live ends")
  end)

  it("live ends by itself when the program ends", function()
    local child = spawn()
    local l = live("")
    assert.is_string(l.url, table.concat(l.lines, "\n"))
    run.write(child.stop, "")
    child.p:read("*a")
    local code, rest = stop_live(l, nil)
    assert.equal(0, code, rest)
    assert.matches("pid " .. child.pid .. " has stopped listening: live ends", rest, 1, true)
  end)

  it("refuses bad options with a usage error naming them", function()
    local rc, _, err = run.run3(run.cli .. " live --port 70000")
    assert.equal(2, rc)
    assert.matches("option --port needs an integer from 0 to 65535, got 70000", err, 1, true)
    rc, _, err = run.run3(run.cli .. " live 1 2")
    assert.equal(2, rc)
    assert.matches('unexpected argument "2"', err, 1, true)
    rc, _, err = run.run3(string.format("TECS_PROFILE_DIR=%s %s live --timeout 0", q(ctl), run.cli))
    assert.equal(2, rc)
    assert.matches("option --timeout needs a positive number", err, 1, true)
  end)
end)
