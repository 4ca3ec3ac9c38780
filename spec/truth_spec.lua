-- Where samples land, against the truth: each workload's parts are timed
-- unprofiled (spec/fixtures/truth.lua) in the pauses of a session at
-- the defaults (at the workload's `precision` where it names one), within
-- the bounds of spec/support/sampling.lua, the spread being the
-- difference between the truths of odd and even rounds; a workload's known
-- miss (blocking calls, for one) widens its bound by the allowance it
-- names. `make bench` prints the same workloads beside LuaJIT's own
-- sampler (bench/truth.lua).
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local truth = dofile("spec/fixtures/truth.lua")
local sampling = require("spec.support.sampling")

local SECONDS = 1.5
local TRUTH_SECONDS = 1.5
local ROUNDS = 6

describe("samples land where the time goes", function()
  after_each(function()
    sessions.stop_all()
  end)

  for _, w in ipairs(truth.workloads) do
    it(w.name, function()
      -- The truth is timed in the session's pauses, six times between its
      -- six stretches of work: the same compiled code (a pause flushes no
      -- trace) at the same time, so a share that drifts with the machine's
      -- load (system calls get dearer) drifts in both alike. Odd and even
      -- rounds give two estimates, whose difference widens the bound.
      local early_before = truth.early
      local plain = truth.run(w, 0.5) -- unprofiled: how many waits end early anyway
      local early_plain = truth.early - early_before
      local iterations, early = 0, 0
      local s = profile.sample({ precision = w.precision })
      local want, again = sampling.interleaved(s, ROUNDS, function() return truth.truth(w, TRUTH_SECONDS / ROUNDS) end,
        function()
          local e0 = truth.early
          iterations = iterations + truth.run(w, (w.seconds or SECONDS) / ROUNDS)
          early = early + truth.early - e0
        end)
      local text = s:stop()
      local got, counts, n = truth.shares(w, text)
      local st = s:stats()
      local report = {}
      for _, name in ipairs(w.parts) do
        report[#report + 1] = string.format("%s %.1f%% (truth %.1f%% / %.1f%%, %d samples)", name, 100 * got[name],
          100 * want[name], 100 * again[name], counts[name])
      end
      local msg = string.format("%s [%s, %.0f samples/s%s]", table.concat(report, "; "), st.clock, st.rate,
        w.precision and ", precision " .. w.precision or "")
      print(w.name .. ": " .. msg)
      assert.is_true(n >= 100, "too few samples in the parts: " .. n .. " (" .. msg .. ")")
      for _, name in ipairs(w.parts) do
        sampling.check_share(name .. " (" .. msg .. ")", got[name], (want[name] + again[name]) / 2, n,
          math.abs(want[name] - again[name]), w.blocking and "blocking" or nil, w.allowance)
      end
      if w.waits then
        local waits = iterations * w.waits
        local allowed = math.max(early_plain * iterations / math.max(plain, 1), waits / 200)
        assert.is_true(early <= allowed, string.format("%d of %d waits ended early under the profiler (unprofiled: %d of %d)",
          early, waits, early_plain, plain * w.waits))
      end
    end)
  end
end)
