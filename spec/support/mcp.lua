-- What the specs of `tecs-profile mcp` share: a listening child program, a
-- run of the server given messages, and today's MCP clients
-- (scripts/mcp-clients.sh, which pins them) driving it.
local assert = require("luassert")
local native = require("tecs.profile.native")
local run = require("spec.support.run")

local q = run.quote
local M = {}

M.FIXTURE = "spec/fixtures/listen_child.lua"
-- A bound on waiting for the child, not a guess at its speed.
M.PATIENCE_SECONDS = 120
-- The `_meta` of a stateless (2026-07-28) request.
M.STATELESS_META = { ["io.modelcontextprotocol/protocolVersion"] = "2026-07-28",
  ["io.modelcontextprotocol/clientCapabilities"] = setmetatable({}, { __jsontype = "object" }) }

--- A directory of its own for one test: `{ dir, ctl }` (the control
-- directory), and `close()` to end its child and remove it all.
function M.place()
  local p = { dir = run.tmpdir() }
  p.ctl = p.dir .. "/ctl"

  --- Starts the child (spec/fixtures/listen_child.lua) listening in `ctl`,
  -- in `mode` ("game", "deaf", ...), its `outputDir` `output` (default
  -- `dir`); sets `p.child` with its pid.
  function p.spawn(mode, output)
    local child = { stop = p.dir .. "/stop" }
    child.p = assert(io.popen(string.format("TECS_PROFILE_DIR=%s LISTEN_OUTPUT_DIR=%s timeout -k 10 %d %s %s %s %s 2>&1",
      q(p.ctl), q(output or p.dir), run.TIMEOUT_SECONDS, run.luajit, q(M.FIXTURE), q(child.stop), mode or "")))
    child.first = child.p:read("*l")
    child.pid = child.first and tonumber(child.first:match("/(%d+)%.sock$"))
    assert.is_number(child.pid, child.first)
    p.child = child
    return child
  end

  --- The answers of one run of the server given `messages` (tables),
  -- decoded, its stderr, and the lines it wrote and was sent as they were
  -- (decoding loses the difference between `{}` and `[]`).
  function p.exchange(messages)
    local lines = {}
    for i, m in ipairs(messages) do lines[i] = native.json(m) end
    run.write(p.dir .. "/in.jsonl", table.concat(lines, "\n") .. "\n")
    local rc, out, err = run.run3(string.format("TECS_PROFILE_DIR=%s %s mcp < %s", q(p.ctl), run.cli,
      q(p.dir .. "/in.jsonl")))
    assert.equal(0, rc, err)
    local answers, raw = {}, {}
    for line in out:gmatch("[^\n]+") do
      local v, why = native.jsonDecode(line)
      assert.is_nil(why, line)
      answers[#answers + 1] = v
      raw[#raw + 1] = line
    end
    return answers, err, { sent = lines, received = raw }
  end

  --- Waits until the running session holds `n` samples, however fast the
  -- child runs (bounded in real time).
  function p.samples_until(n)
    local deadline = os.time() + M.PATIENCE_SECONDS
    repeat
      local rc, out = run.run3(string.format("TECS_PROFILE_DIR=%s %s attach status", q(p.ctl), run.cli))
      assert.equal(0, rc, out)
      assert.is_true(os.time() < deadline, out)
      local got = tonumber(out:match("(%d+) samples")) or 0
      if got < n then os.execute("sleep 0.05") end
    until got >= n
  end

  function p.close()
    if p.child then
      run.write(p.child.stop, "")
      p.child.p:read("*a")
      p.child.p:close()
      p.child = nil
    end
    os.execute("rm -rf " .. q(p.dir))
  end
  return p
end

local clients
--- Today's MCP clients, installed by scripts/mcp-clients.sh (the newest
-- releases when MCP_CLIENTS=latest): `python` (PyPI's mcp 2.x), `python1`
-- (1.x), `node`, `node_modules` (the TypeScript SDK 1.x and its 2.x
-- client), `inspector`, and each one's `*_version`.
function M.clients()
  if clients then return clients end
  local rc, out, err = run.run3("bash scripts/mcp-clients.sh")
  assert.equal(0, rc, "cannot set up the MCP clients (scripts/mcp-clients.sh): " .. out .. err)
  clients = {}
  for k, v in out:gmatch("([%w_]+)=([^\n]*)") do clients[k] = v end
  return clients
end

--- A tool call's arguments for a driver: an object even when empty.
function M.args(t) return setmetatable(t or {}, { __jsontype = "object" }) end

--- What a client driver received when it ran `calls` (`{ {name, args},
-- ... }`) against `tecs-profile mcp` in the control directory `ctl`:
-- `kind` "python" (spec/support/mcp_client.py, with `client.python` or
-- `client.python1`) or "node" (spec/support/mcp_client.cjs, `package`
-- "sdk" or "client"), in `mode` ("legacy", "2026-07-28").
function M.drive(ctl, driver, calls)
  local c = M.clients()
  local cmd
  if driver.kind == "python" then
    cmd = string.format("%s spec/support/mcp_client.py", q(driver.python or c.python))
  else
    cmd = string.format("NODE_MODULES=%s %s spec/support/mcp_client.cjs %s", q(c.node_modules), q(c.node),
      driver.package)
  end
  local rc, out, err = run.run3(string.format("TECS_PROFILE_DIR=%s %s %s %s %s %s", q(ctl), cmd, q(driver.mode),
    q(run.luajit:match("^%S+")), q(run.root .. "/bin/tecs-profile"), q(native.json(calls))))
  assert.equal(0, rc, out .. err)
  return assert(native.jsonDecode(out:match("([^\n]+)%s*$") or ""), out .. err)
end

--- The inspector's CLI (`--cli`) run once in `era` ("legacy", "modern")
-- with `args`: its JSON answer (`{ result = ... }`, a tool's error result
-- included), or nil and everything it said.
function M.inspect(ctl, era, args)
  local c = M.clients()
  -- The inspector passes the server only the variables -e names.
  local env = {}
  for _, k in ipairs({ "LUA_PATH", "LUA_CPATH" }) do
    if os.getenv(k) then env[#env + 1] = "-e " .. q(k .. "=" .. os.getenv(k)) end
  end
  env[#env + 1] = "-e " .. q("TECS_PROFILE_DIR=" .. ctl)
  local rc, out, err = run.run3(string.format("MCP_CATALOG_PATH=%s MCP_CLIENT_CONFIG_PATH=%s PATH=%s:$PATH "
    .. "%s --cli --protocol-era %s --format json -q %s %s %s mcp %s", q(ctl .. "-catalog.json"),
    q(ctl .. "-client.json"), q(c.node:match("^(.*)/[^/]+$")), q(c.inspector), era, table.concat(env, " "),
    q(run.luajit:match("^%S+")), q(run.root .. "/bin/tecs-profile"), args))
  -- A tool's error result comes on stdout with a status of its own.
  local v = native.jsonDecode(out:match("^%s*{") and out or "")
  if not v or (rc ~= 0 and not (v.result and v.result.isError)) then return nil, out .. err end
  return v, out .. err
end

--- The revision each driver mode ends up in.
M.REVISION_OF_MODE = { legacy = "2025-11-25", ["2026-07-28"] = "2026-07-28" }

--- The clients an agent has today, as drivers: PyPI's 2.x in both eras
-- and 1.x, the TypeScript SDK 1.x and its 2.x client in the stateless era.
function M.drivers()
  local c = M.clients()
  return {
    { kind = "python", mode = "legacy" },
    { kind = "python", mode = "2026-07-28" },
    { kind = "python", mode = "legacy", python = c.python1 },
    { kind = "node", package = "sdk", mode = "legacy" },
    { kind = "node", package = "client", mode = "2026-07-28" },
  }
end

--- What an agent does with a program, pid `pid`: lists the targets,
-- profiles for `seconds` (with progress), stops again (nothing runs), asks
-- for a report, tracks trace aborts, and makes two mistakes (a bad
-- argument, a tool that does not exist). The calls, in order.
function M.agent_calls(pid, seconds)
  return {
    { "list_targets", M.args() },
    { "profiler_start", { target = pid, seconds = seconds } },
    { "profiler_stop", { target = pid } },
    { "report", { target = pid, by = "function", top = 5 } },
    { "trace_start", { target = pid } },
    { "trace_stop", { target = pid } },
    { "report", { target = pid, by = "colour" } },
    { "no_such_tool", M.args() },
  }
end

-- The read of `uri` among a driver's reads.
local function read_of(r, uri)
  for _, read in ipairs(r.reads) do
    if read.uri == uri then return read end
  end
end

--- Checks what a driver received for `agent_calls(pid, seconds)` in
-- `mode`; returns the profile's answer (`structured`, `text`, ...) for the
-- caller's checks of where samples went.
function M.assert_agent_session(r, pid, seconds, mode)
  local said = r.client .. ": "
  assert.equal("tecs-profile", r.server, said)
  assert.equal(M.REVISION_OF_MODE[mode], r.protocolVersion, said)
  assert.same({ "list_targets", "profiler_start", "profiler_stop", "report", "trace_start", "trace_stop" }, r.tools)
  local listed, profiled, again, report, traced, untraced, bad, unknown = unpack(r.calls)
  local pids = {}
  for _, t in ipairs(listed.structured.targets) do pids[#pids + 1] = t.pid end
  assert.is_true(#pids >= 1, said .. listed.text)
  local found = false
  for _, p in ipairs(pids) do found = found or p == pid end
  assert.is_true(found, said .. listed.text)

  -- The profile: its file, linked as a resource whose read is the file.
  assert.is_false(profiled.isError, said .. tostring(profiled.text))
  local sc = profiled.structured
  assert.is_number(sc.samples, said .. profiled.text)
  assert.is_number(sc.startedAt, said .. profiled.text)
  assert.is_true(sc.elapsedSec >= seconds, said .. profiled.text)
  local before, during = -math.huge, 0
  for _, p in ipairs(profiled.progress) do
    assert.is_true(p[1] > before and p[1] <= p[2], said .. native.json(profiled.progress))
    assert.equal(seconds, p[2], said)
    if p[1] < p[2] then during = during + 1 end
    before = p[1]
  end
  assert.is_true(during >= 1, said .. "no progress while the wait went on: " .. native.json(profiled.progress))
  assert.equal(1, #profiled.links, said .. native.json(profiled.links))
  local link = profiled.links[1]
  assert.equal("file://" .. sc.path, link.uri, said)
  local read = assert(read_of(r, link.uri), said .. "the profile's link was not read")
  assert.is_nil(read.error, said .. native.json(read.error))
  assert.equal(run.read(sc.path), read.contents[1].text, said .. "the resource is the file written")
  assert.equal(link.size, #read.contents[1].text, said)

  -- Nothing runs now: stopping again is an error that says so, and where
  -- the profile just taken is.
  assert.is_true(again.isError, said .. tostring(again.text))
  assert.matches("no profiling session is running", again.text)
  assert.matches(sc.path, again.text, 1, true)
  assert.matches("call report", again.text, 1, true)

  -- The report names the profile it is of.
  assert.is_false(report.isError, said .. tostring(report.text))
  assert.matches("the last profile, of the session started %d%d%d%d%-%d%d%-%d%d %d%d:%d%d:%d%d", report.text)
  assert.equal(sc.samples, report.structured.samples, said .. report.text)
  assert.equal(sc.startedAt, report.structured.startedAt, said)
  assert.equal(sc.path, report.structured.path, said)

  assert.is_false(traced.isError, said .. tostring(traced.text))
  assert.is_false(untraced.isError, said .. tostring(untraced.text))
  assert.equal(1, #untraced.links, said .. untraced.text)
  local csv = assert(read_of(r, untraced.links[1].uri), said)
  assert.matches("^severity,count,reason,location,zone\r\n", csv.contents[1].text)

  assert.is_true(bad.isError, said .. tostring(bad.text))
  assert.matches("argument 'by' must be one of", bad.text)
  assert.equal(-32602, unknown.error and unknown.error.code, said .. native.json(unknown))

  -- The resources: the last profile of each program listening.
  local listed_uris = {}
  for _, res in ipairs(r.resources) do listed_uris[res.uri] = res end
  assert.is_table(listed_uris[link.uri], said .. native.json(r.resources))
  return profiled
end

return M
