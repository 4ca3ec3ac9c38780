-- Others starting and stopping LuaJIT's profiler under a running session,
-- and processes ending with a session running (scripts/owners_stress.lua;
-- `make soak` runs the full counts: 10,000 cycles and 1,000 exits). Each
-- runs in a child process, so a crash fails the test instead of the suite.
local run = require("spec.support.run")

local function stress(what, n)
  local rc, out = run.run(string.format("LUAJIT_BIN=%s %s scripts/owners_stress.lua %s %d",
    run.quote(run.luajit), run.luajit, what, n))
  return rc, out
end

describe("under stress", function()
  it("a session survives 3,000 starts and stops of jit.profile and jit.p, and keeps its data", function()
    local rc, out = stress("cycles", 3000)
    assert.equal(0, rc, out)
    assert.matches("ok 3000 cycles, session kept %d+ samples", out)
  end)

  it("200 processes that end with a session running all exit cleanly", function()
    local rc, out = stress("exits", 200)
    assert.equal(0, rc, out)
    assert.matches("ok 200 exits", out)
  end)
end)
