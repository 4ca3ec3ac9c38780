--- Collector steps that compiled code calls, read in the tick handler or
-- left to LuaJIT's hook (BENCHMARKS.md, "Collector steps from compiled
-- code").
--
--   luajit bench/gc_steps.lua stats   a compiled loop that keeps the tables it
--                                     makes, called in turn with a float loop,
--                                     2 s at 1 ms: where the collector's ticks
--                                     went, and the samples by VM state
--   luajit bench/gc_steps.lua cost    the same allocating loop paused and
--                                     running in turn, twelve rounds at
--                                     0.1 ms: what the session costs it
local profile = require("tecs.profile")

local work = dofile("spec/fixtures/gc_steps.lua")
local keep, spin = work.keep, work.spin

local mode = arg[1] or "stats"
if mode == "stats" then
  local s = profile.sample()
  local t0 = os.clock()
  while os.clock() - t0 < 2 do
    keep(20000)
    spin(100000)
  end
  s:stop()
  local st = s:stats()
  print(string.format("%d samples; collector ticks from traces left to the hook %d; read in the GC or the compiler %d;"
    .. " hook ticks in state GC %d", st.samples, st.stateMisses.trace, st.stateSamples, st.hookTicks.gc))
  print(profile.report(s, { by = "vmstate" }))
  print(profile.report(s, { by = "function" }))
elseif mode == "cost" then
  keep(2e6)
  local s = profile.sample({ intervalMs = 0.1 })
  local paused, running, n = 0, 0, 0
  for _ = 1, 12 do
    s:pause()
    local t = os.clock()
    keep(2e6)
    paused = paused + os.clock() - t
    local before = s:stats().samples
    s:resume()
    t = os.clock()
    keep(2e6)
    running = running + os.clock() - t
    n = n + s:stats().samples - before
  end
  s:stop()
  local st = s:stats()
  print(string.format("paused %.3f s, running %.3f s: %+.1f%%; %d samples; collector ticks from traces left to the hook %d",
    paused, running, 100 * (running / paused - 1), n, st.stateMisses.trace))
else
  error("bad argument #1 (\"stats\" or \"cost\" expected, got " .. tostring(mode) .. ")")
end
