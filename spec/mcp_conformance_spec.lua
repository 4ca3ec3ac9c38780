-- `tecs-profile mcp` against the specification's schema of each revision it
-- answers: every request a client sends here and every result, error and
-- notification the server writes, in the handshake era (2025-11-25, and
-- 2024-11-05 for what an older revision leaves out) and the stateless one
-- (2026-07-28), checked by spec/support/mcp_conformance.py with the models
-- PyPI's mcp-types generates from each revision's schema.json: a missing
-- field, a wrong type or a field the revision does not have anywhere in a
-- message fails. The exchanges run against a real listening program.
local native = require("tecs.profile.native")
local protocol = require("tecs.profile.mcp.protocol")
local mcp = require("spec.support.mcp")
local run = require("spec.support.run")

local q = run.quote
local args = mcp.args

describe("tecs-profile mcp conforms to the specification's schema", function()
  local place
  before_each(function() place = mcp.place() end)
  after_each(function() place.close() end)

  -- Runs the checker on `exchanges`; its verdict. Each exchange's messages
  -- go to it as they were written (`raw`), else encoded here.
  local function conformance(exchanges)
    local path = place.dir .. "/transcript.json"
    local parts = {}
    for i, ex in ipairs(exchanges) do
      local sent, received = {}, {}
      for j, m in ipairs(ex.sent) do sent[j] = ex.raw and ex.raw.sent[j] or native.json(m) end
      for j, m in ipairs(ex.received) do received[j] = ex.raw and ex.raw.received[j] or native.json(m) end
      parts[i] = string.format('{"revision":%s,"refused":%s,"sent":[%s],"received":[%s]}', native.json(ex.revision),
        tostring(ex.refused == true), table.concat(sent, ","), table.concat(received, ","))
    end
    run.write(path, "[" .. table.concat(parts, ",") .. "]")
    local rc, out, err = run.run3(string.format("%s spec/support/mcp_conformance.py %s", q(mcp.clients().python),
      q(path)))
    assert.equal(0, rc, out .. err)
    return assert(native.jsonDecode(out), out)
  end

  -- One run of the server in `revision`: the messages sent and received.
  local function exchange(revision, sent)
    local received, _, raw = place.exchange(sent)
    return { revision = revision, sent = sent, received = received, raw = raw }
  end

  -- Builders of requests in each era: `id`, method, params.
  local function stateless(id, method, params)
    params = params or {}
    params._meta = params._meta or {}
    for k, v in pairs(mcp.STATELESS_META) do params._meta[k] = v end
    return { jsonrpc = "2.0", id = id, method = method, params = params }
  end
  local function handshake(id, method, params)
    return { jsonrpc = "2.0", id = id, method = method, params = params }
  end
  local function initialize(version)
    return { handshake(0, "initialize", { protocolVersion = version, capabilities = args(),
      clientInfo = { name = "spec", version = "1" } }), { jsonrpc = "2.0", method = "notifications/initialized" } }
  end
  local function call(request, id, name, arguments, meta)
    return request(id, "tools/call", { name = name, arguments = args(arguments), _meta = meta })
  end

  -- The links to resources in the results of `ex`.
  local function links_of(ex)
    local uris = {}
    for _, m in ipairs(ex.received) do
      for _, c in ipairs(m.result and m.result.content or {}) do
        if c.type == "resource_link" then uris[#uris + 1] = c.uri end
      end
    end
    return uris
  end

  -- Every message of one era: the session's lifecycle through the tools,
  -- the resources, and the errors. `request` builds a request of the era,
  -- `opening` is what a client sends first.
  local function era(revision, request, opening)
    local function open(list)
      local all = {}
      for _, m in ipairs(opening) do all[#all + 1] = m end
      for _, m in ipairs(list) do all[#all + 1] = m end
      return all
    end
    local exchanges = {}
    exchanges[1] = exchange(revision, open({
      request(1, "tools/list"),
      request(2, "resources/templates/list"),
      call(request, 3, "list_targets"),
      call(request, 4, "profiler_start", { intervalMs = 1 }),
      call(request, 5, "report", { top = 3 }),
    }))
    place.samples_until(20)
    exchanges[2] = exchange(revision, open({
      call(request, 1, "profiler_stop"),
      call(request, 2, "profiler_stop"),
      call(request, 3, "report", { by = "line", top = 3 }),
      call(request, 4, "profiler_start", { seconds = 1.2 }, { progressToken = "p" }),
      call(request, 5, "trace_start", { includeBenign = true }),
      call(request, 6, "trace_stop"),
      request(7, "resources/list"),
      call(request, 8, "no_such_tool"),
      request(9, "no/such/method"),
      request(10, "resources/read", { uri = "file:///etc/passwd" }),
      call(request, 11, "report", { by = "colour" }),
    }))
    local uris = links_of(exchanges[2])
    assert.is_true(#uris >= 2, "no resource links: " .. native.json(exchanges[2].received))
    local reads = {}
    for i, uri in ipairs(uris) do reads[i] = request(i, "resources/read", { uri = uri }) end
    exchanges[3] = exchange(revision, open(reads))
    return exchanges
  end

  -- The kinds of message checked for `revision`, as "kind method" keys.
  local function checked_in(verdict, revision)
    local seen = {}
    for _, c in ipairs(verdict.checked) do
      if c[3] == revision then seen[c[1] .. " " .. tostring(c[2])] = true end
    end
    return seen
  end

  -- What must have been checked in a revision: a result of every method
  -- the server answers there (as its table declares them), progress, and
  -- the errors.
  local function assert_covered(seen, r)
    for method in pairs(protocol.METHODS) do
      if protocol.has(method, r) then assert.is_true(seen["result " .. method], r.version .. ": " .. method) end
    end
    assert.is_true(seen["notification notifications/progress"], r.version .. ": progress")
    assert.is_true(seen["error tools/call"], r.version .. ": an unknown tool's error")
    assert.is_true(seen["error resources/read"], r.version .. ": a refused read's error")
  end

  local function revision_row(version)
    for _, r in ipairs(protocol.REVISIONS) do
      if r.version == version then return r end
    end
  end

  it("in the handshake era (2025-11-25): lifecycle, tools, progress, resources, errors", function()
    place.spawn()
    local opening = initialize("2025-11-25")
    opening[#opening + 1] = handshake(99, "ping")
    local exchanges = era("2025-11-25", handshake, opening)
    local verdict = conformance(exchanges)
    assert.same({}, verdict.problems)
    local seen = checked_in(verdict, "2025-11-25")
    assert_covered(seen, revision_row("2025-11-25"))
    assert.is_true(seen["request initialize"] and seen["client notification notifications/initialized"])
  end)

  it("in the stateless era (2026-07-28): discover, tools, progress, resources, errors", function()
    place.spawn()
    local exchanges = era("2026-07-28", stateless, { stateless(0, "server/discover") })
    -- The errors of this era: a revision not answered, and a request
    -- without the capabilities the revision requires in _meta.
    exchanges[#exchanges + 1] = exchange("2026-07-28", {
      { jsonrpc = "2.0", id = 1, method = "tools/list", params = { _meta = {
        ["io.modelcontextprotocol/protocolVersion"] = "1900-01-01",
        ["io.modelcontextprotocol/clientCapabilities"] = args() } } },
      { jsonrpc = "2.0", id = 2, method = "tools/list", params = { _meta = {
        ["io.modelcontextprotocol/protocolVersion"] = "2026-07-28" } } },
      stateless(3, "ping"),
    })
    exchanges[#exchanges].refused = true
    local verdict = conformance(exchanges)
    assert.same({}, verdict.problems)
    assert_covered(checked_in(verdict, "2026-07-28"), revision_row("2026-07-28"))
    local errors = exchanges[#exchanges].received
    assert.equal(-32022, errors[1].error.code)
    assert.same({ "1900-01-01", protocol.VERSIONS }, { errors[1].error.data.requested, errors[1].error.data.supported })
    assert.equal(-32602, errors[2].error.code)
    assert.matches("clientCapabilities", errors[2].error.message)
    assert.equal(-32601, errors[3].error.code, "ping is not in 2026-07-28")
  end)

  it("in an older handshake revision (2024-11-05): nothing that revision lacks", function()
    place.spawn()
    local exchanges = { exchange("2024-11-05", {
      initialize("2024-11-05")[1],
      handshake(1, "tools/list"),
      call(handshake, 2, "profiler_start", { seconds = 0.3 }),
    }) }
    local verdict = conformance(exchanges)
    assert.same({}, verdict.problems)
    local a = exchanges[1].received
    assert.equal("2024-11-05", a[1].result.protocolVersion)
    for _, t in ipairs(a[2].result.tools) do assert.is_nil(t.outputSchema, t.name) end
    assert.is_nil(a[3].result.isError, a[3].result.content[1].text)
    assert.is_nil(a[3].result.structuredContent)
    for _, c in ipairs(a[3].result.content) do assert.equal("text", c.type) end
  end)

  it("the check itself fails a missing field, a field the revision lacks, and a wrong type", function()
    local verdict = conformance({ {
      revision = "2026-07-28",
      sent = { stateless(1, "tools/list"), stateless(2, "tools/call", { name = "x", arguments = args() }) },
      received = {
        { jsonrpc = "2.0", id = 1, result = { resultType = "complete", tools = {}, cacheScope = "public" } },
        { jsonrpc = "2.0", id = 2, result = { resultType = "complete", content = {}, isError = "no", bogus = 1 } },
      },
    } })
    local problems = table.concat(verdict.problems, "\n")
    assert.matches("ttlMs", problems)
    assert.matches("bogus: a field this revision does not have", problems)
    assert.matches("isError", problems)
  end)
end)
