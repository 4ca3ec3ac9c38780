-- `tecs-profile mcp`: the MCP server an agent drives over stdio, against a
-- real listening child process. The server is stateless, so each request
-- is a run of its own; the session is read through the same tools an agent
-- calls.
local native = require("tecs.profile.native")
local mcp = require("spec.support.mcp")
local run = require("spec.support.run")

local FIXTURE = mcp.FIXTURE
local PATIENCE_SECONDS = mcp.PATIENCE_SECONDS
local q = run.quote

describe("tecs-profile mcp", function()
  local place, dir, ctl, child
  before_each(function()
    place = mcp.place()
    dir = place.dir
    ctl = place.ctl
  end)
  after_each(function()
    place.close()
    child = nil
  end)

  local function spawn(mode, output) child = place.spawn(mode, output) end
  local function exchange(messages) return place.exchange(messages) end
  local function samples_until(n) place.samples_until(n) end

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
    -- Cacheable in this revision: the tools and the capabilities change
    -- only with tecs-profile itself.
    for _, answer in ipairs(a) do
      assert.equal(3600000, answer.result.ttlMs)
      assert.equal("public", answer.result.cacheScope)
    end
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
    local never = call("profiler_stop")
    assert.is_true(never.isError, never.content[1].text)
    assert.matches("no profiling session is running, and none has run", never.content[1].text)
    local started = call("profiler_start", { intervalMs = 1 })
    assert.is_nil(started.isError, started.content[1].text)
    assert.matches("profiler_stop", started.content[1].text)
    samples_until(200)
    local running = call("report", { top = 3 })
    assert.matches("^pid " .. child.pid .. ": the running session so far: the session started ",
      running.content[1].text)
    assert.is_true(running.structuredContent.running)
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
    -- Nothing runs now: a second stop is an error that says so, names the
    -- profile just taken and says that report gives its views.
    local again = call("profiler_stop", { target = child.pid })
    assert.is_true(again.isError, again.content[1].text)
    assert.matches("^pid " .. child.pid .. ": no profiling session is running, so nothing was stopped%. The last "
      .. "profile, of the session started %d+%-%d+%-%d+ [%d:]+, [%d.]+ s, " .. sc.samples .. " samples, was written to "
      .. path:gsub("%p", "%%%0") .. ": call report", again.content[1].text)
    local report = call("report", { by = "function", top = 5 })
    assert.matches("burn", report.content[1].text)
    assert.matches("^pid " .. child.pid .. ": the last profile, of the session started [^\n]*, " .. sc.samples
      .. " samples %(stopped; written to " .. path:gsub("%p", "%%%0") .. "%)%.\n", report.content[1].text)
    assert.same({ sc.samples, sc.startedAt, path, false }, { report.structuredContent.samples,
      report.structuredContent.startedAt, report.structuredContent.path, report.structuredContent.running })
    local bad = call("report", { by = "colour" })
    assert.is_true(bad.isError)
    assert.matches("argument 'by' must be one of", bad.content[1].text)
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

  it("with a progress token, ends the notifications with one that says the wait is over, before the result", function()
    spawn()
    local a = exchange({ { jsonrpc = "2.0", id = 1, method = "tools/call",
      params = { name = "profiler_start", arguments = { seconds = 1.2 }, _meta = { progressToken = 7 } } } })
    local result = a[#a]
    assert.equal(1, result.id)
    assert.is_nil(result.result.isError, result.result.content[1].text)
    assert.is_true(#a >= 2, "no notification")
    local last = a[#a - 1]
    assert.equal("notifications/progress", last.method)
    assert.same({ 7, 1.2, 1.2 }, { last.params.progressToken, last.params.progress, last.params.total })
    assert.matches("pid " .. child.pid .. ": 1.2 s done, stopping", last.params.message)
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
    assert.matches("\nSlowest %d of %d+ frames:\n", r.content[1].text)
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
    -- target (5 tools), intervalMs, seconds, zone, bytesPerSample, top, hitches, 2 paths.
    assert.equal(13, seen)
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
      -- Long, within the server's 64 KiB request line (mcp_reads_spec: past it).
      { "report", { by = string.rep("b", 60000) }, "argument 'by' must be one of" },
      { "trace_start", { includeBenign = "yes" }, "argument 'includeBenign' must be a boolean" },
      { "list_targets", { x = 1 }, "unknown argument 'x'" },
      { "profiler_stop", { path = 5 }, "argument 'path' must be a string" },
      { "profiler_stop", { path = string.rep("/", 60000) .. "x.svg" }, "argument 'path' must be at most 4096 bytes" },
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
      local text = r and r.content[1].text
      if not r then
        -- Past the server's request line: refused before it is decoded.
        assert.equal("a request line of 200 kB", c[3], native.json(answers[i]))
        assert.matches("request line longer than 65536 bytes", answers[i].error.message, 1, true)
      elseif c[2] == object then
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
    assert.matches("no profiling session is running, so nothing was stopped", r.content[1].text, 1, true)
    assert.is_nil(run.read(t.out .. "/again.svg"))
  end)

  it("through PyPI's client: a path outside is refused, a bare name is written in outputDir", function()
    local sentinel = require("spec.support.sentinel")
    local t = sentinel.make(dir)
    spawn(nil, t.out)
    local before = sentinel.digest(t.outside)
    assert.is_nil(call("profiler_start", {}).isError)
    samples_until(50)
    local r = mcp.drive(ctl, { kind = "python", mode = "legacy" }, { { "profiler_stop", { path = t.outside .. "/victim.svg" } },
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
    assert.matches("no profiling session is running, so nothing was stopped", again.text, 1, true)
    assert.equal(before, sentinel.digest(t.outside))
    assert.equal("the user s own\n", run.read(t.out .. "/theirs.svg"))
  end)

  it("with seconds, profiles for that long and returns the profile", function()
    spawn()
    local r = call("profiler_start", { seconds = 0.5 })
    assert.is_nil(r.isError, r.content[1].text)
    assert.is_number(r.structuredContent.samples)
    assert.is_string(r.structuredContent.path)
    -- The file written is in the control directory: a resource, linked.
    local link = r.content[2]
    assert.same({ "resource_link", "file://" .. r.structuredContent.path, "text/plain" },
      { link.type, link.uri, link.mimeType })
    assert.equal(#assert(run.read(r.structuredContent.path)), link.size)
  end)

  it("reads the profiles written as resources, and nothing else", function()
    spawn()
    local r = call("profiler_start", { seconds = 0.3 })
    assert.is_nil(r.isError, r.content[1].text)
    local path = r.structuredContent.path
    local meta = mcp.STATELESS_META
    -- Neither in the control directory nor in the program's outputDir
    -- (`dir`): a directory below it.
    assert.equal(0, os.execute("mkdir " .. q(dir .. "/below")))
    local outside = dir .. "/below/outside.collapsed"
    run.write(outside, "main.lua:1 1\n")
    local a = exchange({
      { jsonrpc = "2.0", id = 1, method = "resources/list", params = { _meta = meta } },
      { jsonrpc = "2.0", id = 2, method = "resources/read", params = { _meta = meta, uri = r.content[2].uri } },
      { jsonrpc = "2.0", id = 3, method = "resources/read", params = { _meta = meta, uri = "file://" .. outside } },
      { jsonrpc = "2.0", id = 4, method = "resources/read",
        params = { _meta = meta, uri = "file://" .. place.ctl .. "/" .. child.pid .. ".json" } },
      { jsonrpc = "2.0", id = 5, method = "resources/read", params = { _meta = meta, uri = "http://example.org/x" } },
    })
    assert.equal(1, #a[1].result.resources, native.json(a[1]))
    local listed = a[1].result.resources[1]
    assert.equal(r.content[2].uri, listed.uri)
    assert.matches("^pid " .. child.pid .. " %(", listed.title)
    assert.equal(0, a[1].result.ttlMs, "the profiles change at any time")
    assert.equal(run.read(path), a[2].result.contents[1].text)
    assert.equal("text/plain", a[2].result.contents[1].mimeType)
    assert.matches("only the profiles in the control directory", a[3].error.message)
    assert.matches("and in the outputDir of a program listening are resources", a[3].error.message, 1, true)
    assert.matches("is not a profile", a[4].error.message, 1, true)
    assert.matches("its resources are file:// URIs", a[5].error.message, 1, true)

    -- A profile a client had written in the program's outputDir (a bare
    -- name goes there) is a resource too, linked and read.
    assert.is_nil(call("profiler_start", {}).isError)
    samples_until(20)
    r = call("profiler_stop", { path = "in-output.collapsed" })
    assert.is_nil(r.isError, r.content[1].text)
    assert.equal(dir .. "/in-output.collapsed", r.structuredContent.path)
    assert.same({ "resource_link", "file://" .. dir .. "/in-output.collapsed" }, { r.content[2].type, r.content[2].uri })
    a = exchange({
      { jsonrpc = "2.0", id = 1, method = "resources/read", params = { _meta = meta, uri = r.content[2].uri } },
    })
    assert.equal(run.read(dir .. "/in-output.collapsed"), a[1].result.contents[1].text)

    -- Past the bound a read is refused, saying how large the file is; a
    -- binary profile comes as base64.
    local limit = require("tecs.profile.mcp.resources").MAX_BYTES
    local big, binary = place.ctl .. "/big.collapsed", place.ctl .. "/bytes.pb.gz"
    run.write(big, string.rep("x", limit + 1))
    local bytes = {}
    for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
    run.write(binary, table.concat(bytes) .. "\0\1")
    a = exchange({
      { jsonrpc = "2.0", id = 1, method = "resources/read", params = { _meta = meta, uri = "file://" .. big } },
      { jsonrpc = "2.0", id = 2, method = "resources/read", params = { _meta = meta, uri = "file://" .. binary } },
    })
    assert.matches(string.format("is %d bytes, more than the %d a read returns", limit + 1, limit), a[1].error.message)
    local got = a[2].result.contents[1]
    assert.equal("application/gzip", got.mimeType)
    local rc, decoded = run.run3("printf %s " .. run.quote(got.blob) .. " | base64 -d | od -An -v -tu1")
    assert.equal(0, rc)
    local values = {}
    for v in decoded:gmatch("%d+") do values[#values + 1] = tonumber(v) end
    assert.equal(258, #values)
    for i = 0, 255 do assert.equal(i, values[i + 1]) end
    assert.same({ 0, 1 }, { values[257], values[258] })
  end)
end)
