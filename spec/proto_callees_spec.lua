-- Methods made per object at the defaults: a trace that checks a callee by
-- its prototype only (several objects, each with closures over its own
-- state) holds no function for that callee's frame. The handler names the
-- frame from the prototype, a constant of the trace, where it used to
-- leave the tick at the snapshot before the call (the callee got 0.0% of
-- the samples against a truth of about half the loop's time). The loops of
-- spec/fixtures/proto_callees.lua have true shares known by marginal cost,
-- timed unprofiled in the session's pauses (spec/support/sampling.lua).
--
-- What is held here: a callee checked by its prototype gets samples of its
-- own (at least a quarter of its truth, less the sampling error) and
-- stats() counts the samples named by a prototype; no sample goes to a
-- function that did not run; the family's control (one shared method, a
-- constant of the trace) is within the product's bound of its truth. How
-- close the callees checked by prototype come to their truths depends on
-- where the fine map puts the boundaries between their code and their
-- caller's (BENCHMARKS.md, "Methods made per object", measures it).
local sessions = require("spec.support.sessions")
local sampling = require("spec.support.sampling")
local oracle = dofile("spec/fixtures/proto_callees.lua")

local ROUNDS = 6
local SECONDS = 2
local TRUTH_SECONDS = 0.6

-- The handler reads traces on x86-64 Linux (all three LuaJITs of the suite).
local exact_expected = jit.arch == "x64" and jit.os == "Linux"

-- Profiles `w` at the defaults, the truth timed in the pauses.
local function measure(w)
  return sampling.inside_trace(oracle, w, { rounds = ROUNDS, seconds = SECONDS, truth_seconds = TRUTH_SECONDS })
end

-- The lines of the fixture whose functions run in `w`'s profiled work.
local function running(w, line)
  for _, l in pairs(w.lines) do
    if line >= l[1] and line <= l[2] then return true end
  end
  return false
end

describe("methods made per object at the defaults", function()
  after_each(function()
    sessions.stop_all()
  end)

  for _, w in ipairs(oracle.workloads) do
    it("names the frames of " .. w.name .. " and gives each part its samples", function()
      local got, want, again, total, st, counts, rows = measure(w)
      local report = {}
      for _, name in ipairs(w.parts) do
        report[#report + 1] = string.format("%s %.1f%% (truth %.1f%% / %.1f%%, %d samples)", name, 100 * got[name],
          100 * want[name], 100 * again[name], counts[name])
      end
      local frames = st.compiledFrames or {}
      local msg = string.format("%s [%s, %s; by prototype %s, at a caller %s]", table.concat(report, "; "), st.clock,
        st.precision, tostring(frames.byPrototype), tostring(frames.atCaller))
      print(w.name .. ": " .. msg)
      -- No sample goes to a function of the fixture that did not run in the
      -- profiled work (the truth's variants run only while paused).
      local prefix = "^" .. oracle.file:gsub("%p", "%%%0") .. ":(%d+)"
      for _, r in ipairs(rows) do
        for _, frame in ipairs(r.frames) do
          local line = tonumber(frame:match(prefix))
          if line then
            assert.is_true(running(w, line), "a sample in a function that did not run: " .. frame .. " (" .. msg .. ")")
          end
        end
      end
      if not exact_expected then return end
      assert.equal("exact", st.precision, tostring(st.compiledNote))
      assert.is_table(st.compiledFrames)
      assert.is_number(frames.byPrototype)
      assert.is_number(frames.atCaller)
      for _, name in ipairs(w.parts) do
        local p, spread = (want[name] + again[name]) / 2, math.abs(want[name] - again[name])
        if w.shared then
          -- The control: the product's target, as in inside_trace_spec.lua,
          -- less the measured miss of the shared method's placement.
          sampling.check_share(name .. " (" .. msg .. ")", got[name], p, total, spread, "inside_trace",
            "shared_method_placement")
        elseif name ~= "loop" then
          -- Named by its prototype: samples of its own, where a tick left
          -- to the snapshot before the call gave it none.
          local least = p / 4 - sampling.tolerance(p / 4, total, spread)
          assert.is_true(got[name] >= least, string.format("%s got %.1f%%, less than %.1f%%: %s", name,
            100 * got[name], 100 * least, msg))
        end
      end
      if not w.shared then
        assert.is_true(frames.byPrototype > 0, "no sample was named by a prototype: " .. msg)
      end
    end)
  end
end)
