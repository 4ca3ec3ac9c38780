-- Inside a trace at the defaults, by family of code: loops whose inlined
-- callee is integer and bit work, number conversions, FFI or table loads
-- and stores, inlined builtins or a sunk allocation
-- (spec/fixtures/families.lua), each part held to its marginal cost timed
-- unprofiled in the session's pauses, as spec/inside_trace_spec.lua does.
-- The fine map places the code of each IR instruction by fitted sizes, or,
-- with TECS_PROFILE_PLACEMENT=decoded, where the trace's decoded machine
-- code puts it (crates/recorder/src/trace_decoder/code_anchors.rs); the fitted sizes miss several of
-- these by 7 to 13 points
-- (BENCHMARKS.md, "Inside a trace", by family). Each family is held here
-- under the placements it met the rule with (`meets` in the fixture): the
-- default (fitted sizes) and, with TECS_PROFILE_PLACEMENT=decoded, the
-- decoded code.
local sessions = require("spec.support.sessions")
local sampling = require("spec.support.sampling")
local oracle = dofile("spec/fixtures/families.lua")

local ROUNDS = 6
local SECONDS = 2
local TRUTH_SECONDS = 0.6

-- The handler reads traces on x86-64 Linux (all three LuaJITs of the suite).
local exact_expected = jit.arch == "x64" and jit.os == "Linux"

-- Profiles `w` at the defaults, the truth timed in the pauses.
local function measure(w)
  return sampling.inside_trace(oracle, w, { rounds = ROUNDS, seconds = SECONDS, truth_seconds = TRUTH_SECONDS })
end

-- Sets or clears TECS_PROFILE_PLACEMENT, which a session reads when it
-- starts (crates/recorder/src/trace_decoder/vm_events.rs).
local ffi = require("ffi")
pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite); int unsetenv(const char *name);")
local function placement(how)
  if how == "decoded" then
    ffi.C.setenv("TECS_PROFILE_PLACEMENT", "decoded", 1)
  else
    ffi.C.unsetenv("TECS_PROFILE_PLACEMENT")
  end
  assert(os.getenv("TECS_PROFILE_PLACEMENT") == (how == "decoded" and "decoded" or nil))
end

for _, how in ipairs({ "fitted", "decoded" }) do
  describe("inside a trace, by family, placed by " .. how .. (how == "fitted" and " sizes (the default)" or " code"),
    function()
      before_each(function() placement(how) end)
      after_each(function()
        placement("fitted")
        sessions.stop_all()
      end)

      for _, w in ipairs(oracle.workloads) do
        if w.meets[how] then
          it("gives each part of " .. w.name .. " its marginal cost", function()
            local got, want, again, total, st, counts = measure(w)
            local report = {}
            for _, name in ipairs(w.parts) do
              report[#report + 1] = string.format("%s %.1f%% (truth %.1f%% / %.1f%%, %d samples)", name,
                100 * got[name], 100 * want[name], 100 * again[name], counts[name])
            end
            local map = st.traceMap or {}
            local msg = string.format("%s [%s, %s, %s; placed %s, at a snapshot %s, no map %s]",
              table.concat(report, "; "), how, st.clock, st.precision, tostring(map.placed),
              tostring(map.atSnapshot), tostring(map.noMap))
            print(w.name .. ": " .. msg)
            if not exact_expected then return end
            assert.equal("exact", st.precision, tostring(st.compiledNote))
            assert.is_table(st.traceMap, tostring(st.traceMapNote))
            assert.is_true(map.placed > map.noMap, msg)
            for _, name in ipairs(w.parts) do
              local p, spread = (want[name] + again[name]) / 2, math.abs(want[name] - again[name])
              sampling.check_share(name .. " (" .. msg .. ")", got[name], p, total, spread, "inside_trace")
            end
          end)
        end
      end
    end)
end
