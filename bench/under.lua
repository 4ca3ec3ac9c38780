--- Runs a Lua program under one profiler configuration and prints how long
-- the program took (wall and CPU seconds of this thread):
--
--   luajit bench/under.lua CONFIG program.lua [args...]
--
-- CONFIG: none | loaded | tecs | tecs-function | tecs-line | tecs-wall |
-- jitp-f | jitp-l | floor-f | floor-signal | floor-trap
-- (loaded: require("tecs.profile") and no session, what loading the
-- module costs a program by itself; tecs: profile.sample() at its
-- defaults, 1 ms; tecs-function, tecs-line:
-- precision "function" or "line"; jitp-f / jitp-l: LuaJIT's jit.p in
-- function / line mode at 1 ms;
-- floor-signal: a signal to an empty handler at 1 ms of CPU time, what any
-- sampler pays for the signal alone;
-- floor-trap: the task-clock perf event a default session ticks with, to a
-- SIGTRAP handler that only counts: what that source costs by itself;
-- floor-f: LuaJIT's profiler in function mode with a callback that only
-- counts, driven at 1 ms of CPU time by bench/floor's timer thread, since
-- LuaJIT's own timer only fires on kernel ticks: what any profiler built on
-- LuaJIT's profiler pays at 1 kHz before it records anything).
--
-- Environment: BENCH_INTERVAL_MS (below); BENCH_STATS=1 also prints how
-- many of a tecs session's samples the tick handler read, and its misses.
local bench_dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = bench_dir .. "/?.lua;" .. package.path
local clock = require("clock")

local config, program = arg[1], arg[2]
-- BENCH_INTERVAL_MS: the sampling interval of every configuration (default
-- 1 ms); a short one magnifies the per-sample cost for measuring it.
local interval_ms = tonumber(os.getenv("BENCH_INTERVAL_MS") or "1")
local args = {}
for i = 3, #arg do args[#args + 1] = arg[i] end

local stop
if config == "loaded" then
  require("tecs.profile")
elseif config == "tecs" or config == "tecs-function" or config == "tecs-line" or config == "tecs-wall" then
  local opts = { intervalMs = interval_ms }
  if config == "tecs-line" then opts.precision = "line" end
  if config == "tecs-function" then opts.precision = "function" end
  if config == "tecs-wall" then opts.clock = "wall" end
  local s = require("tecs.profile").sample(opts)
  stop = function()
    s:stop()
    local st = s:stats()
    if os.getenv("BENCH_STATS") then
      io.stderr:write(string.format("\ncompiled=%d misses=%s precision=%s", st.compiledSamples or 0,
        st.compiledMisses and string.format("t%d a%d fr%d fn%d full%d", st.compiledMisses.trace or 0,
          st.compiledMisses.address or 0, st.compiledMisses.frame or 0, st.compiledMisses["function"] or 0,
          st.compiledMisses.full or 0) or "-", tostring(st.precision)))
    end
    return st.samples
  end
elseif config == "jitp-f" or config == "jitp-l" then
  local jp = require("jit.p")
  jp.start((config == "jitp-f" and "f" or "l") .. "i1", "/dev/null")
  stop = function() jp.stop() return 0 end
elseif config == "floor-f" then
  local ffi = require("ffi")
  ffi.cdef[[
    int bench_timer_start(uint64_t interval_ns);
    uint64_t bench_timer_stop(void);
  ]]
  local timer = ffi.load(bench_dir .. "/floor/target/release/libbenchtimer.so")
  local jprofile = require("jit.profile")
  local n = 0
  -- LuaJIT's own interval is set long: the ticks come from the timer thread.
  jprofile.start("fi1000", function(_, samples) n = n + samples end)
  assert(timer.bench_timer_start(interval_ms * 1e6) == 0, "bench timer already running")
  stop = function()
    timer.bench_timer_stop()
    jprofile.stop()
    return n
  end
elseif config == "floor-signal" then
  local ffi = require("ffi")
  ffi.cdef[[
    int bench_timer_start(uint64_t interval_ns);
    uint64_t bench_timer_stop(void);
    int bench_empty_handler_install(void);
    uint64_t bench_empty_delivered(void);
  ]]
  local timer = ffi.load(bench_dir .. "/floor/target/release/libbenchtimer.so")
  assert(timer.bench_empty_handler_install() == 0, "could not install the empty handler")
  assert(timer.bench_timer_start(interval_ms * 1e6) == 0, "bench timer already running")
  stop = function()
    timer.bench_timer_stop()
    return tonumber(timer.bench_empty_delivered())
  end
elseif config == "floor-trap" then
  -- Through package.loadlib, not the FFI, whose type names would stay in
  -- the program's string table (a session's probe leaves none there).
  local lib = bench_dir .. "/floor/target/release/libbenchtimer.so"
  local start = assert(package.loadlib(lib, "bench_trap_start_lua"))
  local trap_stop = assert(package.loadlib(lib, "bench_trap_stop_lua"))
  local err = start(interval_ms * 1e6)
  assert(err == 0, "could not open the task-clock event: errno " .. tostring(err))
  stop = function() return trap_stop() end
elseif config ~= "none" then
  error("bench/under.lua: unknown config " .. tostring(config))
end

local chunk = assert(loadfile(program))
_G.arg = { [0] = program, unpack(args) }
local w0, c0 = clock.wall(), clock.cpu()
chunk(unpack(args))
local wall, cpu = clock.wall() - w0, clock.cpu() - c0
local samples = stop and stop() or 0
io.stderr:write(string.format("\nwall=%.6f cpu=%.6f samples=%d\n", wall, cpu, samples))
