--- Inside a trace, against the truth: the loops of
-- spec/fixtures/inside_trace.lua (inlined callees with no snapshot of their
-- own, one with guards, work the loop optimizer hoists), profiled by
-- tecs-profile at its defaults and at line precision, and by a jit.profile
-- Lua callback at 1 ms in function mode (what `jit.p` does). Each column's
-- truth (marginal costs) is timed unprofiled in the same process between
-- its stretches of profiled work, as spec/inside_trace_spec.lua does.
-- Prints a Markdown table and writes it to $BENCH_OUT/inside_trace.md.
-- `ORACLE=spec/fixtures/proto_callees.lua` measures that fixture's family
-- instead (methods made per object), written to $BENCH_OUT/proto_callees.md.
--
--   luajit bench/inside_trace.lua [pattern]   (only workloads whose name has pattern)
local profile = require("tecs.profile")
local jprofile = require("jit.profile")
local ORACLE = os.getenv("ORACLE") or "spec/fixtures/inside_trace.lua"
local oracle = dofile(ORACLE)
local collapsed = dofile("spec/support/collapsed.lua")
local sampling = dofile("spec/support/sampling.lua")
local OUT = os.getenv("BENCH_OUT") or "build/bench"
local ROUNDS = 6
local SECONDS = tonumber(os.getenv("INSIDE_SECONDS") or "") or 3
local TRUTH_SECONDS = 0.3

local function jitter(n) return math.max(1, math.floor(n * (0.5 + math.random()) + 0.5)) end

-- ROUNDS stretches of `w` under a sampler, the truth timed in its pauses.
local function interleaved(w, n, pause, resume)
  local sum = {}
  for _ = 1, ROUNDS do
    pause()
    for k, v in pairs(oracle.truth(w, n, TRUTH_SECONDS / ROUNDS, sampling.cpu)) do
      sum[k] = (sum[k] or 0) + v / ROUNDS
    end
    resume()
    sampling.for_cpu(SECONDS / ROUNDS, function() w.run(jitter(n)) end)
  end
  return sum
end

local function ours(w, n, precision)
  local s = profile.sample({ precision = precision })
  local want = interleaved(w, n, function() s:pause() end, function() s:resume() end)
  local text = s:stop()
  return text, want, s:stats()
end

local function with_jit_profile(w, n)
  local counts = {}
  local function start()
    jprofile.start("fi1", function(thread, samples)
      local stack = jprofile.dumpstack(thread, "pl;", -100):gsub(";$", "")
      counts[stack] = (counts[stack] or 0) + samples
    end)
  end
  start()
  local want = interleaved(w, n, jprofile.stop, start)
  jprofile.stop()
  local lines = {}
  for stack, c in pairs(counts) do lines[#lines + 1] = stack .. "_[N] " .. c .. "\n" end
  return table.concat(lines), want
end

local only = arg and arg[1]
local rows = { "| workload | part | truth | tecs-profile | tecs-profile, line | jit.p (f) |", "|---|---|---:|---:|---:|---:|" }
local worst = { 0, 0, 0 }
for _, w in ipairs(oracle.workloads) do if not only or w.name:find(only, 1, true) then
  local n = sampling.calibrate(w.run, 0.002)
  local a, ta, st = ours(w, n)
  local b, tb = ours(w, n, "line")
  local c, tc = with_jit_profile(w, n)
  local sa, _, na = oracle.shares(w, collapsed.parse(a))
  local sb, _, nb = oracle.shares(w, collapsed.parse(b))
  local sc, _, nc = oracle.shares(w, collapsed.parse(c))
  for i, name in ipairs(w.parts) do
    local function cell(s, want, cnt, k)
      local err = math.abs(s[name] - want[name])
      if err > worst[k] then worst[k] = err end
      return string.format("%.1f%% (%+.1f)%s", 100 * s[name], 100 * (s[name] - want[name]),
        i == 1 and string.format(", n=%d", cnt) or "")
    end
    -- A pause at line precision leaves the traces' line checks in place,
    -- so that column's own truth is not the unprofiled code's: line is
    -- held to the mean of the other two columns' truths.
    local t = (ta[name] + tc[name]) / 2
    local tl = { [name] = t }
    rows[#rows + 1] = string.format("| %s | %s | %.1f%% | %s | %s | %s |", i == 1 and w.name or "", name, 100 * t,
      cell(sa, ta, na, 1), cell(sb, tl, nb, 2), cell(sc, tc, nc, 3))
  end
  local m = st.traceMap or {}
  io.stderr:write(string.format("%s done (%s, %s; placed %s, at a snapshot %s, no map %s)\n", w.name, st.clock,
    st.precision, tostring(m.placed), tostring(m.atSnapshot), tostring(m.noMap)))
end end
rows[#rows + 1] = string.format("| **largest error** | | | %.1f points | %.1f points | %.1f points |",
  100 * worst[1], 100 * worst[2], 100 * worst[3])
local text = table.concat(rows, "\n") .. "\n"
io.write(text)
if only then return end
os.execute("mkdir -p '" .. OUT .. "'")
local f = io.open(OUT .. "/" .. ORACLE:match("([^/]+)%.lua$") .. ".md", "w")
if f then f:write(text) f:close() end
