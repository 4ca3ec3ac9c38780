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
  -- in `mode` ("game", "deaf", ...); sets `p.child` with its pid.
  function p.spawn(mode)
    local child = { stop = p.dir .. "/stop" }
    child.p = assert(io.popen(string.format("TECS_PROFILE_DIR=%s timeout -k 10 %d %s %s %s %s 2>&1", q(p.ctl),
      run.TIMEOUT_SECONDS, run.luajit, q(M.FIXTURE), q(child.stop), mode or "")))
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
      local v, why = native.json_decode(line)
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
  return assert(native.json_decode(out:match("([^\n]+)%s*$") or ""), out .. err)
end

--- The inspector's CLI (`--cli`) run once in `era` ("legacy", "modern")
-- with `args`: its JSON result, or nil and everything it said.
function M.inspect(ctl, era, args)
  local c = M.clients()
  local rc, out, err = run.run3(string.format("TECS_PROFILE_DIR=%s MCP_CATALOG_PATH=%s MCP_CLIENT_CONFIG_PATH=%s "
    .. "PATH=%s:$PATH %s --cli --protocol-era %s --format json -q %s %s mcp %s", q(ctl), q(ctl .. "-catalog.json"),
    q(ctl .. "-client.json"), q(c.node:match("^(.*)/[^/]+$")), q(c.inspector), era, q(run.luajit:match("^%S+")),
    q(run.root .. "/bin/tecs-profile"), args))
  local v = rc == 0 and native.json_decode(out)
  if not v then return nil, out .. err end
  return v, out .. err
end

return M
