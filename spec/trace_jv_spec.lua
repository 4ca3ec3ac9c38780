-- The trace tracker against `luajit -jv`: on fixtures with known aborts, the
-- report gives the reasons and counts per site that -jv prints, with -jv
-- running in the same process (chained) and in a separate run.
local jv = require("spec.support.jv")
local t = require("spec.support.trace")

describe("profile.trace matches luajit -jv on programs with known aborts", function()
  local fixtures = { "nyi", "leave", "recursion", "blacklist", "cfunc" }

  -- -jv's aborts in the fixture. -jv prints every abort of the process, also
  -- those in code that runs before the session starts or after its handler
  -- is detached (the runner, the tracker building its report), which the
  -- session rightly does not see. -jv names a file by its base name; a
  -- builtin (not `file:line`) is kept.
  local function fixture_aborts(jv_text, name)
    local own = {}
    for _, a in ipairs(jv.aborts(jv_text)) do
      if a.location:find("^trace_" .. name .. "%.lua:%d+$") or not a.location:find(":%d+$") then
        own[#own + 1] = a
      end
    end
    return own
  end

  for _, name in ipairs(fixtures) do
    it("trace_" .. name .. ".lua: same reasons and counts per site, in one run with -jv", function()
      local records, summary, jv_text = t.run_fixture(name, { with_jv = true, benign = true })
      local aborts = fixture_aborts(jv_text, name)
      local jv_counts, in_builtin = t.count_jv(aborts)
      local sites = t.sites_of(records)
      assert.is_true(next(jv_counts) ~= nil, "-jv printed no aborts for " .. name)
      assert.same(jv_counts, t.count_like_jv(sites, in_builtin))
      -- Locations name the whole chunk, not just the base name.
      for _, s in ipairs(sites) do
        assert.matches("^spec/fixtures/trace_" .. name .. "%.lua:%d+$", s.location)
        assert.equal("", s.zone)
      end
      -- Extra fields agree with -jv's lines for the fixture's traces. The
      -- session also counts a trace that completes in the runner's own code
      -- while it runs (its stop, say: whether one gets hot depends on the
      -- hot counters it shares), which -jv names after the runner: so at
      -- least the fixture's, at most all that -jv printed.
      local jv_completed = select(2, jv_text:gsub("%[TRACE +%d+ [^%]]*trace_" .. name .. "%.lua", ""))
      local jv_all = select(2, jv_text:gsub("%[TRACE +%d+ ", ""))
      assert.is_true(summary.tracesCompleted >= jv_completed and summary.tracesCompleted <= jv_all,
        string.format("%d traces completed in the session; -jv printed %d in the fixture, %d in all\n%s",
          summary.tracesCompleted, jv_completed, jv_all, jv_text))
      assert.equal(#aborts, summary.tracesAborted)
      assert.equal(summary.tracesCompleted + summary.tracesAborted, summary.tracesStarted)
      assert.equal(summary.totalAborts, summary.tracesAborted) -- includeBenign
    end)
  end

  -- Without -jv attached, the tracker's own run gives what a separate
  -- `luajit -jv=<file> fixture.lua` prints. (The fixtures are built so that
  -- their aborts are the same in every run: LuaJIT randomises its retry
  -- penalties, and any Lua trace handler, -jv's too, moves the shared hot
  -- counters, so e.g. deep recursion like fib() differs from run to run.)
  for _, name in ipairs(fixtures) do
    it("trace_" .. name .. ".lua: same as a separate luajit -jv run", function()
      local jv_text = jv.run(t.LUAJIT, "spec/fixtures/trace_" .. name .. ".lua")
      local jv_counts, in_builtin = t.count_jv(jv.aborts(jv_text))
      assert.is_true(next(jv_counts) ~= nil, "-jv printed no aborts for " .. name)
      local records = t.run_fixture(name, { benign = true })
      assert.same(jv_counts, t.count_like_jv(t.sites_of(records), in_builtin))
    end)
  end
end)
