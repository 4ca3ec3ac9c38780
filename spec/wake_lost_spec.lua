-- A control-channel wake LuaJIT dropped is set again (sys/wake.rs). LuaJIT's
-- profiler writes back, after each callback, the hook mask it read before
-- it: a wake's SIGIO that lands in a callback leaves the wake's hook set
-- with no count bit, and the program is never woken again. The fixture
-- (spec/fixtures/wake_lost.lua) makes the SIGIO land there, checks that the
-- bit was lost, and never polls: its request must still be answered.
local run = require("spec.support.run")

local q = run.quote

describe("a control-channel wake whose count hook LuaJIT dropped", function()
  local dir
  before_each(function() dir = run.tmpdir() end)
  after_each(function() os.execute("rm -rf " .. q(dir)) end)

  local function measure(mode)
    local rc, out = run.run(string.format("%s spec/fixtures/wake_lost.lua %s %s", run.luajit, mode, q(dir .. "/ctl")))
    assert.equal(0, rc, out)
    local answered, lost, samples, wake = out:match("answered (%d+) lost (%a+) samples (%d+) wake (%-?%d+)")
    assert.is_not_nil(answered, out)
    -- The fixture reproduced the loss, or it shows nothing.
    assert.equal("true", lost, out)
    return tonumber(answered), tonumber(samples), tonumber(wake), out
  end

  it("is set again by a session's tick, which is left to LuaJIT's hook and counted", function()
    local answered, samples, wake, out = measure("session")
    assert.equal(1, answered, out)
    assert.is_true(wake >= 1 and wake <= samples, out)
  end)

  it("is set again by the next SIGIO, with no session running", function()
    local answered, _, _, out = measure("sigio")
    assert.equal(1, answered, out)
  end)
end)
