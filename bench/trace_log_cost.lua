--- What the fine map costs while traces are recorded: the CPU time to
-- compile many distinct traces unprofiled, and under a session at the
-- defaults (its `record` and `trace` event handlers log every recorded
-- bytecode and build each trace's map when it is committed). The session
-- ticks once a second, so that the difference is the logger's, not the
-- ticks'. Rounds alternate; prints the medians and writes
-- $BENCH_OUT/trace_log_cost.md.
--
--   luajit bench/trace_log_cost.lua [traces per round]
local profile = require("tecs.profile")
local OUT = os.getenv("BENCH_OUT") or "build/bench"
local N = tonumber(arg and arg[1]) or 400
local ROUNDS = 9

-- A chunk of `n` functions, each a loop with an inlined helper, distinct
-- in their constants so that each compiles to traces of its own.
local function chunk(n, salt)
  local src = {}
  for i = 1, n do
    src[#src + 1] = string.format([[
do
  local function h(x) return x * %d.5 + %d end
  F[%d] = function(t)
    local s = 0
    for j = 1, #t do s = s + h(t[j]) * 0.5 end
    return s
  end
end]], i + salt, i, i)
  end
  return table.concat(src, "\n")
end

local data = {}
for i = 1, 200 do data[i] = i end

-- Compiles `N` fresh functions' traces; returns CPU seconds and traces.
local function round(salt)
  local F = {}
  local fn = assert(loadstring(chunk(N, salt)))
  setfenv(fn, { F = F })
  fn()
  jit.flush()
  local traces = 0
  jit.attach(function(what) if what == "stop" then traces = traces + 1 end end, "trace")
  local t0 = os.clock()
  for i = 1, N do
    local f = F[i]
    for _ = 1, 4 do f(data) end
  end
  local dt = os.clock() - t0
  jit.attach(function() end)
  return dt, traces
end

local function median(t)
  table.sort(t)
  return t[math.floor(#t / 2) + 1]
end

round(0) -- warm the recorder and the allocator
local plain, logged, nplain, nlogged = {}, {}, {}, {}
for r = 1, ROUNDS do
  local dt, n = round(r * 1000)
  plain[#plain + 1], nplain[#nplain + 1] = dt / n, n
  local s = profile.sample({ intervalMs = 1000 })
  dt, n = round(r * 1000 + 500)
  s:stop()
  local m = s:stats().traceMap
  assert(m and m.tracesMapped > 0, "the session mapped no trace")
  logged[#logged + 1], nlogged[#nlogged + 1] = dt / n, n
end
local a, b = median(plain), median(logged)
local text = string.format(
  "| | traces a round | CPU per trace | traces/s |\n|---|---:|---:|---:|\n" ..
  "| unprofiled | %d | %.1f µs | %.0f |\n| session at the defaults (logger on) | %d | %.1f µs | %.0f |\n" ..
  "| **logger's cost** | | **%+.1f µs (%+.1f%%)** | |\n",
  median(nplain), 1e6 * a, 1 / a, median(nlogged), 1e6 * b, 1 / b, 1e6 * (b - a), 100 * (b - a) / a)
io.write(text)
os.execute("mkdir -p '" .. OUT .. "'")
local f = io.open(OUT .. "/trace_log_cost.md", "w")
if f then f:write(text) f:close() end
