-- `tecs-profile mcp`: the MCP server an agent drives over stdio, against a
-- real listening child process. The server is stateless, so each request
-- is a run of its own; the session is read through the same tools an agent
-- calls.
local native = require("tecs.profile.native")
local run = require("spec.support.run")

local FIXTURE = "spec/fixtures/listen_child.lua"
-- A bound on waiting for the child, not a guess at its speed.
local PATIENCE_SECONDS = 120

local q = run.quote

describe("tecs-profile mcp", function()
  local dir, ctl, child
  before_each(function()
    dir = run.tmpdir()
    ctl = dir .. "/ctl"
  end)
  after_each(function()
    if child then
      run.write(child.stop, "")
      child.p:read("*a")
      child.p:close()
      child = nil
    end
    os.execute("rm -rf " .. q(dir))
  end)

  -- A child listening in `ctl`, its outputDir `output` (default `dir`).
  local function spawn(mode, output)
    child = { stop = dir .. "/stop" }
    child.p = assert(io.popen(string.format(
      "TECS_PROFILE_DIR=%s LISTEN_OUTPUT_DIR=%s timeout -k 10 %d %s %s %s %s 2>&1",
      q(ctl), q(output or dir), run.TIMEOUT_SECONDS, run.luajit, q(FIXTURE), q(child.stop), mode or "")))
    child.first = child.p:read("*l")
    child.pid = child.first and tonumber(child.first:match("/(%d+)%.sock$"))
    assert.is_number(child.pid, child.first)
  end

  -- The answers of a run of the server given `messages` (tables), decoded.
  local function exchange(messages)
    local lines = {}
    for i, m in ipairs(messages) do lines[i] = native.json(m) end
    run.write(dir .. "/in.jsonl", table.concat(lines, "\n") .. "\n")
    local rc, out, err = run.run3(string.format("TECS_PROFILE_DIR=%s %s mcp < %s", q(ctl), run.cli,
      q(dir .. "/in.jsonl")))
    assert.equal(0, rc, err)
    local answers = {}
    for line in out:gmatch("[^\n]+") do
      local v, why = native.json_decode(line)
      assert.is_nil(why, line)
      answers[#answers + 1] = v
    end
    return answers, err
  end

  -- Until the running session holds `n` samples, however fast the child
  -- runs (bounded in real time).
  local function samples_until(n)
    local deadline = os.time() + PATIENCE_SECONDS
    repeat
      local rc, out = run.run3(string.format("TECS_PROFILE_DIR=%s %s attach status", q(ctl), run.cli))
      assert.equal(0, rc, out)
      assert.is_true(os.time() < deadline, out)
      local got = tonumber(out:match("(%d+) samples")) or 0
      if got < n then os.execute("sleep 0.05") end
    until got >= n
  end

  local function call(name, arguments, meta)
    local params = { name = name, arguments = arguments or setmetatable({}, { __jsontype = "object" }), _meta = meta }
    local a = exchange({ { jsonrpc = "2.0", id = 1, method = "tools/call", params = params } })
    assert.equal(1, #a)
    assert.is_nil(a[1].error)
    return a[1].result
  end

  it("answers the 2025-11-25 handshake and lists its tools, writing only protocol on stdout", function()
    local a, err = exchange({
      { jsonrpc = "2.0", id = 1, method = "initialize",
        params = { protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "spec", version = "1" } } },
      { jsonrpc = "2.0", method = "notifications/initialized" },
      { jsonrpc = "2.0", id = 2, method = "tools/list" },
      { jsonrpc = "2.0", id = 3, method = "no/such" },
    })
    assert.equal(3, #a, "a notification gets no answer")
    assert.equal("2025-11-25", a[1].result.protocolVersion)
    assert.is_table(a[1].result.capabilities.tools)
    assert.equal("tecs-profile", a[1].result.serverInfo.name)
    local names = {}
    for _, t in ipairs(a[2].result.tools) do
      names[#names + 1] = t.name
      assert.equal("object", t.inputSchema.type, t.name)
      assert.is_string(t.description)
    end
    assert.same({ "list_targets", "profiler_start", "profiler_stop", "report", "trace_start", "trace_stop" }, names)
    assert.equal(-32601, a[3].error.code)
    assert.matches("serving MCP", err)
  end)

  it("answers the stateless 2026-07-28 requests: server/discover, and resultType on results", function()
    local meta = { ["io.modelcontextprotocol/protocolVersion"] = "2026-07-28",
      ["io.modelcontextprotocol/clientCapabilities"] = setmetatable({}, { __jsontype = "object" }) }
    local a = exchange({
      { jsonrpc = "2.0", id = "d", method = "server/discover", params = { _meta = meta } },
      { jsonrpc = "2.0", id = "l", method = "tools/list", params = { _meta = meta } },
    })
    assert.equal("d", a[1].id)
    assert.equal("2026-07-28", a[1].result.supportedVersions[1])
    assert.equal("complete", a[1].result.resultType)
    assert.equal("complete", a[2].result.resultType)
    assert.equal("tecs-profile", a[1].result._meta["io.modelcontextprotocol/serverInfo"].name)
  end)

  it("profiles a running program: list_targets, profiler_start, profiler_stop, report", function()
    local none = call("list_targets")
    assert.same({}, none.structuredContent.targets)
    assert.matches("No program is listening", none.content[1].text)
    local missing = call("profiler_stop")
    assert.is_true(missing.isError)
    assert.matches("list_targets", missing.content[1].text)
    spawn()
    local listed = call("list_targets")
    assert.equal(child.pid, listed.structuredContent.targets[1].pid)
    local started = call("profiler_start", { intervalMs = 1 })
    assert.is_nil(started.isError, started.content[1].text)
    assert.matches("profiler_stop", started.content[1].text)
    samples_until(200)
    local path = dir .. "/agent.collapsed"
    local stopped = call("profiler_stop", { target = child.pid, path = path })
    assert.is_nil(stopped.isError, stopped.content[1].text)
    local sc = stopped.structuredContent
    assert.is_true(sc.samples >= 200, stopped.content[1].text)
    assert.equal(path, sc.path)
    assert.is_string(assert(run.read(path)))
    assert.matches("burn", sc.top[1].name)
    assert.is_true(sc.top[1].share > 0 and sc.top[1].share <= 1)
    assert.matches("±", stopped.content[1].text)
    local report = call("report", { by = "function", top = 5 })
    assert.matches("burn", report.content[1].text)
    local bad = call("report", { by = "colour" })
    assert.is_true(bad.isError)
    assert.matches("argument 'by' must be one of", bad.content[1].text)
  end)

  it("works with the reference client (PyPI's mcp): handshake, tools, a profile of a running program", function()
    local rc, python = run.run3("bash scripts/mcp-client.sh")
    assert.equal(0, rc, "cannot set up PyPI's mcp: " .. tostring(python))
    python = python:match("[^\n]+")
    spawn()
    local started = call("profiler_start", {})
    assert.is_nil(started.isError, started.content[1].text)
    samples_until(200)
    local calls = native.json({ { "list_targets", setmetatable({}, { __jsontype = "object" }) },
      { "profiler_stop", { path = dir .. "/client.collapsed" } }, { "report", { by = "line", top = 3 } } })
    local out, err
    rc, out, err = run.run3(string.format("TECS_PROFILE_DIR=%s %s spec/support/mcp_client.py %s %s %s", q(ctl),
      q(python), q(run.luajit:match("^%S+")), q(run.root .. "/bin/tecs-profile"), q(calls)))
    assert.equal(0, rc, err)
    local r = assert(native.json_decode(out:match("[^\n]+")), out)
    assert.equal("tecs-profile", r.server)
    assert.same({ "list_targets", "profiler_start", "profiler_stop", "report", "trace_start", "trace_stop" }, r.tools)
    assert.equal(child.pid, r.calls[1].structured.targets[1].pid)
    local stopped = r.calls[2]
    assert.is_false(stopped.isError, stopped.text)
    assert.is_true(stopped.structured.samples >= 200, stopped.text)
    assert.matches("burn", stopped.structured.top[1].name)
    assert.is_false(r.calls[3].isError, r.calls[3].text)
    assert.matches("listen_child%.lua:%d+", r.calls[3].text)
  end)

  -- PyPI's mcp client (scripts/mcp-client.sh): its python path.
  local function mcp_python()
    local rc, python = run.run3("bash scripts/mcp-client.sh")
    assert.equal(0, rc, "cannot set up PyPI's mcp: " .. tostring(python))
    return python:match("[^\n]+")
  end

  -- The calls (`{ { name, arguments }, ... }`) made by PyPI's client, and
  -- what it received (spec/support/mcp_client.py).
  local function python_calls(python, calls)
    local rc, out, err = run.run3(string.format("TECS_PROFILE_DIR=%s %s spec/support/mcp_client.py %s %s %s", q(ctl),
      q(python), q(run.luajit:match("^%S+")), q(run.root .. "/bin/tecs-profile"), q(native.json(calls))))
    assert.equal(0, rc, err)
    return assert(native.json_decode(out:match("[^\n]+")), out)
  end

  it("reports progress while profiler_start with seconds waits (PyPI's client's progress callback)", function()
    local python = mcp_python()
    spawn()
    -- Three seconds: notifications come about once a second, so one
    -- comes while the wait goes on unless a one-second sleep takes three.
    local r = python_calls(python, { { "profiler_start", { seconds = 3 } } })
    local call1 = r.calls[1]
    assert.is_false(call1.isError, call1.text)
    assert.is_number(call1.structured.samples, call1.text)
    local progress = call1.progress
    assert.is_true(#progress >= 1, "no notifications/progress arrived")
    local before, during = -math.huge, 0
    for i, p in ipairs(progress) do
      local done, total, message = p[1], p[2], p[3]
      assert.is_true(done > before, "progress " .. i .. " does not increase: " .. native.json(progress))
      assert.equal(3, total)
      if done < total then during = during + 1 end
      assert.is_true(done <= total, native.json(p))
      assert.matches("pid " .. child.pid, message)
      before = done
    end
    assert.is_true(during >= 1, "no notification while the wait went on: " .. native.json(progress))
    assert.equal(3, progress[#progress][1], "the last notification says the wait is over")
  end)

  it("sends no progress without a progress token, and none for a call that does not wait", function()
    spawn()
    local a = exchange({ { jsonrpc = "2.0", id = 1, method = "tools/call",
      params = { name = "profiler_start", arguments = { seconds = 0.2 } } },
      { jsonrpc = "2.0", id = 2, method = "tools/call",
        params = { name = "list_targets", arguments = setmetatable({}, { __jsontype = "object" }),
          _meta = { progressToken = "t" } } } })
    assert.equal(2, #a)
    assert.equal(1, a[1].id)
    assert.is_nil(a[1].result.isError, a[1].result.content[1].text)
    assert.equal(2, a[2].id)
  end)

  -- The MCP inspector's CLI mode (npm @modelcontextprotocol/inspector,
  -- installed by scripts/consumers.sh): one method per run, its result as
  -- JSON on stdout.
  local INSPECTOR = "build/consumers/node_modules/.bin/mcp-inspector"

  local function inspector(args)
    assert(run.read(INSPECTOR), "the MCP inspector is not installed (" .. INSPECTOR .. "): run make consumers, "
      .. "which installs npm's @modelcontextprotocol/inspector into build/consumers")
    local rc, out, err = run.run3(string.format("TECS_PROFILE_DIR=%s %s --cli %s %s mcp %s", q(ctl), INSPECTOR,
      q(run.luajit:match("^%S+")), q(run.root .. "/bin/tecs-profile"), args))
    assert.equal(0, rc, out .. err)
    local v, why = native.json_decode(out)
    assert.is_nil(why, out)
    return v
  end

  it("works with the MCP inspector's CLI mode: tools/list, list_targets, profiler_start with seconds", function()
    local listed = inspector("--method tools/list")
    local schemas = {}
    for _, t in ipairs(listed.tools) do schemas[t.name] = t.inputSchema end
    assert.equal("object", schemas.list_targets.type)
    assert.equal("number", schemas.profiler_start.properties.seconds.type)
    assert.equal("integer", schemas.profiler_start.properties.target.type)
    assert.equal("string", schemas.profiler_stop.properties.path.type)
    assert.same({ "function", "line", "module", "zone", "zonecomponent", "vmstate", "plugin" },
      schemas.report.properties.by.enum)
    assert.is_table(schemas.trace_start.properties.includeBenign)
    spawn()
    local targets = inspector("--method tools/call --tool-name list_targets")
    assert.is_nil(targets.isError)
    assert.equal(1, #targets.structuredContent.targets)
    assert.equal(child.pid, targets.structuredContent.targets[1].pid)
    assert.equal("luajit", targets.structuredContent.targets[1].kind)
    local profiled = inspector(string.format("--method tools/call --tool-name profiler_start --tool-arg target=%d "
      .. "--tool-arg seconds=1", child.pid))
    assert.is_nil(profiled.isError, profiled.content[1].text)
    local sc = profiled.structuredContent
    assert.matches("^/.*%.collapsed$", sc.path)
    local written = 0
    for count in assert(run.read(sc.path)):gmatch(" (%d+)\n") do written = written + tonumber(count) end
    assert.equal(written, sc.samples, "the samples the answer gives are the file's")
    assert.equal(sc.samples > 0, #sc.top > 0, profiled.content[1].text)
    local shares = 0
    for _, f in ipairs(sc.top) do
      assert.is_string(f.name)
      shares = shares + f.share
    end
    assert.is_true(shares <= 1 + 1e-9, profiled.content[1].text)
  end)

  it("says how to go on when the target does not poll", function()
    spawn("deaf")
    local r = call("profiler_start", {})
    assert.is_true(r.isError)
    assert.matches("pid " .. child.pid .. " did not answer", r.content[1].text)
    assert.matches("not be polling", r.content[1].text)
    assert.matches("Try again", r.content[1].text)
  end)

  it("tracks trace aborts: trace_start, trace_stop with the CSV written", function()
    spawn()
    local started = call("trace_start", { includeBenign = true })
    assert.is_nil(started.isError, started.content[1].text)
    local again = call("trace_start", {})
    assert.is_true(again.isError)
    assert.matches("already tracked", again.content[1].text)
    local path = dir .. "/aborts.csv"
    local stopped = call("trace_stop", { path = path })
    assert.is_nil(stopped.isError, stopped.content[1].text)
    assert.is_number(stopped.structuredContent.aborts)
    assert.equal(path, stopped.structuredContent.path)
    assert.matches("^severity,count,reason,location,zone\r\n", assert(run.read(path)))
    assert.is_true(call("trace_stop", {}).isError)
  end)

  it("profiler_stop gives the zones and the slowest frames; report gives callers and hitches", function()
    spawn("game")
    local r = call("profiler_start", {})
    assert.is_nil(r.isError, r.content[1].text)
    samples_until(40)
    r = call("profiler_stop", {})
    assert.is_nil(r.isError, r.content[1].text)
    local got = r.structuredContent
    -- Every sample of the loop is in the zone "update".
    local zones = {}
    for _, z in ipairs(got.zones) do zones[z.name] = z.share end
    assert.is_number(zones.update, r.content[1].text)
    assert.matches("\nZones by samples:\n", r.content[1].text)
    assert.is_true(#got.slowest >= 1, r.content[1].text)
    for _, f in ipairs(got.slowest) do
      assert.is_number(f.index)
      assert.is_true(f.ms >= 0)
      for _, t in ipairs(f.top) do assert.is_true(t.share > 0 and t.share <= 1) end
    end
    assert.matches("\nSlowest of %d+ frames:\n  frame %d+: ", r.content[1].text)

    r = call("report", { by = "function", ["then"] = "caller", top = 5 })
    assert.is_nil(r.isError, r.content[1].text)
    assert.matches("burn (" .. FIXTURE, r.content[1].text, 1, true)
    r = call("report", { hitches = 2 })
    assert.is_nil(r.isError, r.content[1].text)
    assert.matches("^Slowest %d of %d+ frames:\n", r.content[1].text)
  end)

  it("declares the bounds of every argument in the tools' input schemas", function()
    local a = exchange({ { jsonrpc = "2.0", id = 1, method = "tools/list" } })
    local seen = 0
    for _, tool in ipairs(a[1].result.tools) do
      for name, p in pairs(tool.inputSchema.properties) do
        if p.type == "number" or p.type == "integer" then
          assert.is_number(p.minimum, tool.name .. "." .. name)
          assert.is_number(p.maximum, tool.name .. "." .. name)
          assert.is_true(p.minimum <= p.maximum and p.maximum < 2 ^ 53, tool.name .. "." .. name)
          seen = seen + 1
        elseif p.type == "string" and not p.enum then
          assert.is_number(p.maxLength, tool.name .. "." .. name)
          seen = seen + 1
        end
      end
    end
    -- target (5 tools), intervalMs, seconds, zone, top, hitches, 2 paths.
    assert.equal(12, seen)
    local start = a[1].result.tools[2].inputSchema.properties
    assert.same({ 0.001, 3600 }, { start.seconds.minimum, start.seconds.maximum })
    assert.same({ 0.1, 60000 }, { start.intervalMs.minimum, start.intervalMs.maximum })
  end)

  it("hostile arguments to every tool: refused, saying why; nothing written anywhere", function()
    local sentinel = require("spec.support.sentinel")
    local t = sentinel.make(dir)
    spawn(nil, t.out)
    -- The spec's own files aside (the server's input).
    local function digest() return sentinel.digest(t.out) .. sentinel.digest(t.outside) .. sentinel.digest(ctl) end
    local before = digest()
    local object = setmetatable({}, { __jsontype = "object" })
    local calls = {
      { "profiler_start", { seconds = -1 }, "argument 'seconds' must be a number from 0.001 to 3600 (got -1)" },
      { "profiler_start", { seconds = 0 }, "argument 'seconds' must be a number from 0.001 to 3600 (got 0)" },
      { "profiler_start", { seconds = 3601 }, "argument 'seconds' must be" },
      { "profiler_start", { seconds = 1e300 }, "(got 1e+300)" },
      { "profiler_start", { seconds = "5" }, "argument 'seconds' must be a number" },
      { "profiler_start", { intervalMs = 0 }, "argument 'intervalMs' must be a number from 0.1 to 60000" },
      { "profiler_start", { intervalMs = -1e300 }, "argument 'intervalMs' must be" },
      { "profiler_start", { target = -1 }, "argument 'target' must be an integer from 1 to 4194304 (got -1)" },
      { "profiler_start", { target = 2 ^ 53 }, "argument 'target' must be an integer from 1 to 4194304" },
      { "profiler_start", { target = 1.5 }, "argument 'target' must be an integer (got 1.5)" },
      { "profiler_start", { zone = string.rep("z", 5000) }, "argument 'zone' must be at most 1024 bytes long" },
      { "report", { top = 0 }, "argument 'top' must be an integer from 1 to 10000 (got 0)" },
      { "report", { top = 2.5 }, "argument 'top' must be an integer (got 2.5)" },
      { "report", { top = 1e9 }, "argument 'top' must be an integer from 1 to 10000" },
      { "report", { hitches = -3 }, "argument 'hitches' must be an integer from 1 to 200 (got -3)" },
      { "report", { by = string.rep("b", 100000) }, "argument 'by' must be one of" },
      { "trace_start", { includeBenign = "yes" }, "argument 'includeBenign' must be a boolean" },
      { "list_targets", { x = 1 }, "unknown argument 'x'" },
      { "profiler_stop", { path = 5 }, "argument 'path' must be a string" },
      { "profiler_stop", { path = string.rep("/", 200000) .. "x.svg" }, "argument 'path' must be at most 4096 bytes" },
      { "trace_stop", { path = string.rep("p", 5000) .. ".csv" }, "argument 'path' must be at most 4096 bytes" },
    }
    -- Started, then every hostile path to profiler_stop and trace_stop.
    calls[#calls + 1] = { "profiler_start", object }
    calls[#calls + 1] = { "trace_start", object }
    local first_path = #calls + 1
    for _, p in ipairs(sentinel.paths(t, ".svg")) do calls[#calls + 1] = { "profiler_stop", { path = p[1] }, p[2] } end
    for _, p in ipairs(sentinel.paths(t, ".csv")) do calls[#calls + 1] = { "trace_stop", { path = p[1] }, p[2] } end
    local messages = {}
    for i, c in ipairs(calls) do
      messages[i] = { jsonrpc = "2.0", id = i, method = "tools/call", params = { name = c[1], arguments = c[2] } }
    end
    local answers = exchange(messages)
    assert.equal(#calls, #answers)
    for i, c in ipairs(calls) do
      local r = answers[i].result
      local text = r.content[1].text
      if c[2] == object then
        assert.is_nil(r.isError, text)
      elseif i < first_path then
        assert.is_true(r.isError, c[1] .. ": " .. text)
        assert.matches(c[3], text, 1, true)
      else
        assert.is_true(r.isError, c[3] .. ": " .. text)
        local why = text:find("a client may write only in " .. t.out .. " (outputDir, where a bare file name goes) or "
          .. ctl .. " (the control directory)", 1, true) or text:find("must be at most 4096 bytes long", 1, true)
        assert.is_number(why, c[3] .. ": " .. text)
      end
    end
    assert.equal(before, digest(), "a refused call changed a file")
    -- The session ran on: stopped now, it is written where it may be.
    local r = call("profiler_stop", { path = "agent.svg" })
    assert.is_nil(r.isError, r.content[1].text)
    assert.equal(t.out .. "/agent.svg", r.structuredContent.path)
    r = call("profiler_stop", { path = "again.svg" })
    assert.is_true(r.isError)
    assert.matches("no session to stop: none is running; the last one", r.content[1].text, 1, true)
    assert.is_nil(run.read(t.out .. "/again.svg"))
  end)

  it("through PyPI's client: a path outside is refused, a bare name is written in outputDir", function()
    local sentinel = require("spec.support.sentinel")
    local python = mcp_python()
    local t = sentinel.make(dir)
    spawn(nil, t.out)
    local before = sentinel.digest(t.outside)
    assert.is_nil(call("profiler_start", {}).isError)
    samples_until(50)
    local r = python_calls(python, { { "profiler_stop", { path = t.outside .. "/victim.svg" } },
      { "profiler_stop", { path = t.out .. "/theirs.svg" } }, { "profiler_stop", { path = "client.svg" } },
      { "profiler_stop", { path = "again.svg" } } })
    local outside, theirs, written, again = r.calls[1], r.calls[2], r.calls[3], r.calls[4]
    assert.is_true(outside.isError, outside.text)
    assert.matches("not in a directory a client may write in", outside.text, 1, true)
    assert.is_true(theirs.isError, theirs.text)
    assert.matches("exists and is not a file this channel wrote", theirs.text, 1, true)
    assert.is_false(written.isError, written.text)
    assert.equal(t.out .. "/client.svg", written.structured.path)
    assert.matches("^<%?xml", assert(run.read(t.out .. "/client.svg")))
    assert.is_true(again.isError, again.text)
    assert.matches("no session to stop", again.text, 1, true)
    assert.equal(before, sentinel.digest(t.outside))
    assert.equal("the user s own\n", run.read(t.out .. "/theirs.svg"))
  end)

  it("with seconds, profiles for that long and returns the profile", function()
    spawn()
    local r = call("profiler_start", { seconds = 0.5 })
    assert.is_nil(r.isError, r.content[1].text)
    assert.is_number(r.structuredContent.samples)
    assert.is_string(r.structuredContent.path)
  end)
end)
