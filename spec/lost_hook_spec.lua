-- LuaJIT can lose its profiler hook: a tick that lands while the VM thread
-- rewrites its dispatch table leaves a sample pending that the table never
-- calls, and LuaJIT takes no sample again (sys/posix/lost_hook.rs). The
-- tick handler sets such a hook again. Each workload runs in a child
-- process (spec/fixtures/lost_hook.lua); the truth is its CPU time times the
-- least rate of the session's clock. A lost hook leaves a few percent of
-- that, or none.
local run = require("spec.support.run")

local function measure(mode)
  local rc, out = run.run(string.format("%s spec/fixtures/lost_hook.lua %s 0.3", run.luajit, mode))
  assert.equal(0, rc, out)
  local samples, expected, rearmed = out:match("samples (%d+) expected (%d+) rearmed (%d+)")
  assert.is_not_nil(samples, out)
  assert.is_nil(out:match("note (.*)"), out)
  return tonumber(samples), tonumber(expected), tonumber(rearmed), out
end

describe("a profiler hook LuaJIT lost", function()
  it("is set again while a debug hook is set and cleared in a loop", function()
    local samples, expected, _, out = measure("churn")
    assert.is_true(expected >= 30, out)
    assert.is_true(samples >= expected / 2, out)
  end)

  it("is set again after it was lost by hand, and the session says so", function()
    local samples, expected, rearmed, out = measure("inject")
    assert.is_true(expected >= 30, out)
    assert.is_true(rearmed >= 1, out)
    assert.is_true(samples >= expected / 2, out)
  end)
end)
