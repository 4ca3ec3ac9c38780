--- Where samples land against the truth, side by side: the workloads of
-- spec/fixtures/truth.lua, profiled by tecs-profile at its defaults and at
-- line precision, and by a jit.profile Lua callback at 1 ms (what jit.p
-- does) in function and in line mode. Each column's truth is timed
-- unprofiled in the same process between its stretches of profiled work
-- (six rounds), as spec/truth_spec.lua does: a share that drifts with the
-- machine's load drifts in both alike. Prints a Markdown table and writes
-- it to $BENCH_OUT/truth.md.
--
--   luajit bench/truth.lua [pattern]   (only workloads whose name has pattern)
local profile = require("tecs.profile")
local jprofile = require("jit.profile")
local truth = dofile("spec/fixtures/truth.lua")
local OUT = os.getenv("BENCH_OUT") or "build/bench"
local ROUNDS = 6
local TRUTH_SECONDS = 1.0

-- Runs `w` for `seconds` in ROUNDS stretches, timing the truth before each
-- one while `pause()` holds the profiler; returns the mean truth.
local function interleaved(w, seconds, pause, resume)
  local sum = {}
  for _ = 1, ROUNDS do
    pause()
    for k, v in pairs(truth.truth(w, TRUTH_SECONDS / ROUNDS)) do sum[k] = (sum[k] or 0) + v / ROUNDS end
    resume()
    truth.run(w, seconds / ROUNDS)
  end
  return sum
end

-- jit.profile with a Lua callback: collapsed text like ours, leaf lines.
local function with_jit_profile(w, seconds, mode)
  local counts = {}
  local function start()
    jprofile.start(mode .. "i1", function(thread, samples)
      local stack = jprofile.dumpstack(thread, "pl;", -100):gsub(";$", "")
      counts[stack] = (counts[stack] or 0) + samples
    end)
  end
  start()
  local want = interleaved(w, seconds, jprofile.stop, start)
  jprofile.stop()
  local lines = {}
  for stack, n in pairs(counts) do lines[#lines + 1] = stack .. " " .. n end
  return table.concat(lines, "\n"), want
end

local function ours(w, seconds, precision)
  local s = profile.sample({ precision = precision })
  local want = interleaved(w, seconds, function() s:pause() end, function() s:resume() end)
  local text = s:stop()
  return text, want, s:stats()
end

local only = arg and arg[1]
local rows = { "| workload | part | truth | tecs-profile | tecs-profile, line | jit.profile (f) | jit.profile (l) |",
  "|---|---|---:|---:|---:|---:|---:|" }
local worst = { 0, 0, 0, 0 }
for _, w in ipairs(truth.workloads) do if not only or w.name:find(only, 1, true) then
  local seconds = w.seconds or 1.5
  local a, ta, st = ours(w, seconds)
  local b, tb = ours(w, seconds, "line")
  local c, tc = with_jit_profile(w, seconds, "f")
  local d, td = with_jit_profile(w, seconds, "l")
  local sa, _, na = truth.shares(w, a)
  local sb, _, nb = truth.shares(w, b)
  local sc, _, nc = truth.shares(w, c)
  local sd, _, nd = truth.shares(w, d)
  for i, name in ipairs(w.parts) do
    -- Each cell's error is against its own column's truth; the truth
    -- column is their mean.
    local function cell(s, want, n, k)
      local err = math.abs(s[name] - want[name])
      if err > worst[k] then worst[k] = err end
      return string.format("%.1f%% (%+.1f)%s", 100 * s[name], 100 * (s[name] - want[name]),
        i == 1 and string.format(", n=%d", n) or "")
    end
    local t = (ta[name] + tb[name] + tc[name] + td[name]) / 4
    rows[#rows + 1] = string.format("| %s | %s | %.1f%% | %s | %s | %s | %s |", i == 1 and w.name or "", name, 100 * t,
      cell(sa, ta, na, 1), cell(sb, tb, nb, 2), cell(sc, tc, nc, 3), cell(sd, td, nd, 4))
  end
  io.stderr:write(w.name, " done (", st.clock, ")\n")
end end
rows[#rows + 1] = string.format("| **largest error** | | | %.1f points | %.1f points | %.1f points | %.1f points |",
  100 * worst[1], 100 * worst[2], 100 * worst[3], 100 * worst[4])
local text = table.concat(rows, "\n") .. "\n"
io.write(text)
if only then return end -- a partial table does not replace the full one
os.execute("mkdir -p '" .. OUT .. "'")
local f = io.open(OUT .. "/truth.md", "w")
if f then f:write(text) f:close() end
