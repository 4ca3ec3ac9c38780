-- `tecs-profile mcp` driven by the MCP clients agents use today, in both
-- eras, against a real listening program: PyPI's mcp 2.x (handshake and
-- 2026-07-28) and 1.x, the TypeScript SDK 1.x and its 2.x client, and the
-- inspector's CLI. scripts/mcp-clients.sh pins them; `make mcp-latest` runs
-- this file with the newest releases instead.
local native = require("tecs.profile.native")
local mcp = require("spec.support.mcp")
local run = require("spec.support.run")

-- Long enough that a progress notification comes while the wait goes on
-- (they come about once a second) unless a one-second sleep takes three.
local SECONDS = 3

describe("tecs-profile mcp with today's clients", function()
  local place
  before_each(function() place = mcp.place() end)
  after_each(function() place.close() end)

  for _, driver in ipairs(mcp.drivers()) do
    local name = driver.kind == "python" and (driver.python and "PyPI's mcp 1.x" or "PyPI's mcp 2.x")
      or (driver.package == "sdk" and "@modelcontextprotocol/sdk 1.x" or "@modelcontextprotocol/client 2.x")
    it(name .. " (" .. driver.mode .. "): list, profile with progress, stop, report, trace, resources, errors",
      function()
        local child = place.spawn()
        local r = mcp.drive(place.ctl, driver, mcp.agent_calls(child.pid, SECONDS))
        mcp.assert_agent_session(r, child.pid, SECONDS, driver.mode)
      end)
  end

  for _, era in ipairs({ "legacy", "modern" }) do
    it("the inspector's CLI (" .. era .. "): tools, profile, its resource, stop, report, trace, errors", function()
      local child = place.spawn()
      -- --strict: the tools' schemas have no portability problem.
      local listed, said = mcp.inspect(place.ctl, era, "--method tools/list --strict")
      assert(listed and listed.result, said)
      local schemas = {}
      for _, t in ipairs(listed.result.tools) do schemas[t.name] = t.inputSchema end
      assert.equal("number", schemas.profiler_start.properties.seconds.type)
      assert.equal("integer", schemas.profiler_start.properties.target.type)
      assert.same({ "function", "line", "module", "zone", "zonecomponent", "vmstate", "plugin" },
        schemas.report.properties.by.enum)

      local profiled
      profiled, said = mcp.inspect(place.ctl, era, string.format("--method tools/call --tool-name profiler_start "
        .. "--tool-arg target=%d --tool-arg seconds=1", child.pid))
      assert(profiled and profiled.result, said)
      local result = profiled.result
      assert.is_nil(result.isError, said)
      local sc = result.structuredContent
      local written = 0
      for count in assert(run.read(sc.path)):gmatch(" (%d+)\n") do written = written + tonumber(count) end
      assert.equal(written, sc.samples, "the samples the answer gives are the file's")
      local link
      for _, c in ipairs(result.content) do
        if c.type == "resource_link" then link = c end
      end
      assert.is_table(link, said)
      local read
      read, said = mcp.inspect(place.ctl, era, "--method resources/read --uri " .. run.quote(link.uri))
      assert(read and read.result, said)
      assert.equal(run.read(sc.path), read.result.contents[1].text)

      local again
      again, said = mcp.inspect(place.ctl, era, "--method tools/call --tool-name profiler_stop")
      assert(again and again.result, said)
      assert.is_true(again.result.isError, said)
      assert.matches("no profiling session is running", again.result.content[1].text)
      local report
      report, said = mcp.inspect(place.ctl, era, "--method tools/call --tool-name report --tool-arg by=line")
      assert(report and report.result, said)
      assert.matches("^pid " .. child.pid .. ": the last profile, of the session started ",
        report.result.content[1].text)
      assert.equal(sc.samples, report.result.structuredContent.samples, native.json(report.result))

      local traced
      traced, said = mcp.inspect(place.ctl, era, "--method tools/call --tool-name trace_start")
      assert(traced and traced.result and not traced.result.isError, said)
      traced, said = mcp.inspect(place.ctl, era, "--method tools/call --tool-name trace_stop")
      assert(traced and traced.result and not traced.result.isError, said)
      assert.matches("%.aborts%.csv$", traced.result.structuredContent.path)
      local unknown
      unknown, said = mcp.inspect(place.ctl, era, "--method tools/call --tool-name no_such_tool")
      -- The inspector knows the tools: it refuses the call itself.
      assert.is_nil(unknown, said)
      assert.matches("no_such_tool", said, 1, true)
      assert.matches("not found", said, 1, true)
    end)
  end
end)
