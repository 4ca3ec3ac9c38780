-- Inside a trace at the defaults: between two snapshots, a tick goes to the
-- bytecode (and inlined frames) whose machine code it interrupted, as the
-- trace's fine map places them (crates/recorder/src/trace_decoder/fine_map.rs), not to the
-- bytecode of the snapshot before it. The loops of
-- spec/fixtures/inside_trace.lua have true shares known by marginal cost,
-- timed unprofiled in the session's pauses (spec/support/sampling.lua).
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local sampling = require("spec.support.sampling")
local oracle = dofile("spec/fixtures/inside_trace.lua")

local ROUNDS = 6
local SECONDS = 2
local TRUTH_SECONDS = 0.6

-- The handler reads traces on x86-64 Linux (all three LuaJITs of the suite).
local exact_expected = jit.arch == "x64" and jit.os == "Linux"

-- Profiles `w` at the defaults, the truth timed in the pauses.
local function measure(w)
  return sampling.inside_trace(oracle, w, { rounds = ROUNDS, seconds = SECONDS, truth_seconds = TRUTH_SECONDS })
end

describe("inside a trace at the defaults", function()
  after_each(function()
    sessions.stop_all()
  end)

  for _, w in ipairs(oracle.workloads) do
    it("gives each part of " .. w.name .. " its marginal cost", function()
      local got, want, again, total, st, counts = measure(w)
      local report = {}
      for _, name in ipairs(w.parts) do
        report[#report + 1] = string.format("%s %.1f%% (truth %.1f%% / %.1f%%, %d samples)", name, 100 * got[name],
          100 * want[name], 100 * again[name], counts[name])
      end
      local map = st.traceMap or {}
      local msg = string.format("%s [%s, %s; placed %s, at a snapshot %s, no map %s]", table.concat(report, "; "),
        st.clock, st.precision, tostring(map.placed), tostring(map.atSnapshot), tostring(map.noMap))
      print(w.name .. ": " .. msg)
      if not exact_expected then return end
      assert.equal("exact", st.precision, tostring(st.compiledNote))
      assert.is_table(st.traceMap, tostring(st.traceMapNote))
      -- The loop's traces were recorded with the logger on (a start
      -- flushes the traces recorded before it): they have maps.
      assert.is_true(map.placed > map.noMap, msg)
      for _, name in ipairs(w.parts) do
        local p, spread = (want[name] + again[name]) / 2, math.abs(want[name] - again[name])
        -- The product's target is within 5 points or a quarter of the
        -- truth (BENCHMARKS.md, "Inside a trace", measures it); a single
        -- run is held to the sampling error and the map's own granularity.
        sampling.check_share(name .. " (" .. msg .. ")", got[name], p, total, spread, "inside_trace", w.allowance)
      end
    end)
  end

  it("says in stats() where ticks in traces were placed", function()
    local s = profile.sample()
    sampling.until_samples(s, 100, function() oracle.workloads[1].run(2000) end)
    s:stop()
    local st = s:stats()
    if st.precision ~= "exact" then
      assert.is_nil(st.traceMap)
      assert.is_string(st.traceMapNote)
      return
    end
    assert.is_nil(st.traceMapNote)
    for _, k in ipairs({ "tracesMapped", "tracesUnmapped", "placed", "atSnapshot", "noMap" }) do
      assert.is_number(st.traceMap[k], k)
    end
    assert.is_true(st.traceMap.tracesMapped > 0)
    -- Each tick read in a trace is counted once by the map's lookup.
    assert.is_true(st.traceMap.placed + st.traceMap.atSnapshot + st.traceMap.noMap >= 1)
    local f = profile.sample({ precision = "function" })
    f:stop()
    assert.is_nil(f:stats().traceMap)
    assert.is_string(f:stats().traceMapNote)
  end)
end)
