--- Runs one workload once under one profiler configuration and prints one
-- line of `key=value` figures for bench/bench.lua to collect.
--
--   luajit bench/run_one.lua WORKLOAD CONFIG [SCALE]
--
-- CONFIG: none | tecs<ms> (tecs1, tecs10, tecs0.1) | jpf | jpG | lua |
-- empty (SIGPROF to a handler that only counts: the floor), and
-- for jit.profile-based configs an optional `@<ms>` suffix (`lua@0.1`) that
-- adds SIGPROF from bench/floor's timer (the same tgkill method tecs-profile
-- uses) so they sample at that rate instead of the kernel tick.
-- Trace aborts are counted with jit.attach in every configuration, so the
-- difference to `none` is what the profiler caused.
local bench_dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = bench_dir .. "/?.lua;" .. package.path

local clock = require("clock")
local workloads = require("workloads")

local name, config, scale = arg[1], arg[2] or "none", tonumber(arg[3] or "1")
local boost_ms
config, boost_ms = config:match("^([^@]*)@?(.*)$")
boost_ms = tonumber(boost_ms)
local work = workloads[name]
if type(work) ~= "function" then
  io.stderr:write("run_one: unknown workload ", tostring(name), "\n")
  os.exit(2)
end

-- Aborts because the machine-code area is full ("failed to allocate mcode
-- memory") are counted apart: they come from the amount of code compiled
-- (traces made in profiling mode carry extra checks and fill the area a
-- little sooner), not from a sample landing in a recording.
local traceerr = (select(2, pcall(require, "jit.vmdef")) or {}).traceerr or {}
local aborts, mcode_full, traces = 0, 0, 0
jit.attach(function(what, _, _, _, err)
  if what == "abort" then
    local msg = type(err) == "number" and traceerr[err] or tostring(err)
    if type(msg) == "string" and msg:find("mcode", 1, true) then
      mcode_full = mcode_full + 1
    else
      aborts = aborts + 1
    end
  elseif what == "stop" then traces = traces + 1 end
end, "trace")

-- Samples seen by jit.p: count the callbacks' `samples` argument by wrapping
-- jit.profile.start before jit.p is loaded (one addition per sample).
local jp_samples = 0
local function wrap_jit_profile()
  local jprofile = require("jit.profile")
  local real_start = jprofile.start
  jprofile.start = function(mode, cb)
    return real_start(mode, function(th, samples, vmstate)
      jp_samples = jp_samples + samples
      return cb(th, samples, vmstate)
    end)
  end
end

local start_profiler, stop_profiler
local stats = {}
if config == "none" then
  start_profiler = function() end
  stop_profiler = function() return 0 end
elseif config:match("^tecs") then
  local profile = require("tecs.profile")
  local interval = tonumber(config:sub(5))
  local session
  start_profiler = function() session = profile.sample({ intervalMs = interval }) end
  stop_profiler = function()
    local text = session:stop()
    stats = session:stats()
    stats.textBytes = #text
    return stats.samples
  end
elseif config == "jpf" or config == "jpG" then
  wrap_jit_profile()
  local jp = require("jit.p")
  local mode = config == "jpf" and "fi1" or "Gfi1"
  start_profiler = function() jp.start(mode, "/dev/null") end
  stop_profiler = function() jp.stop(); return jp_samples end
elseif config == "lua" then
  local sampler = require("lua_sampler")
  start_profiler = function() sampler.start(1) end
  stop_profiler = function()
    local text, n = sampler.stop()
    stats.textBytes = #text
    return n
  end
elseif config ~= "empty" then
  io.stderr:write("run_one: unknown config ", config, "\n")
  os.exit(2)
end

local benchlib
local function load_benchlib()
  if not benchlib then
    local ffi = require("ffi")
    ffi.cdef[[
      int bench_timer_start(uint64_t interval_ns);
      uint64_t bench_timer_stop(void);
      int bench_empty_handler_install(void);
      uint64_t bench_empty_delivered(void);
    ]]
    benchlib = ffi.load(bench_dir .. "/floor/target/release/libbenchtimer.so")
  end
  return benchlib
end

if config == "empty" then
  local lib = load_benchlib()
  start_profiler = function() assert(lib.bench_empty_handler_install() == 0) end
  stop_profiler = function() return tonumber(lib.bench_empty_delivered()) end
end

if boost_ms then
  local lib = load_benchlib()
  local start0, stop0 = start_profiler, stop_profiler
  start_profiler = function()
    start0()
    assert(lib.bench_timer_start(boost_ms * 1e6) == 0, "bench timer already running")
  end
  stop_profiler = function()
    lib.bench_timer_stop()
    return stop0()
  end
end

collectgarbage("collect")
start_profiler()
local w0, c0 = clock.wall(), clock.cpu()
local result = work(scale)
local w1, c1 = clock.wall(), clock.cpu()
local samples = stop_profiler()
local w2 = clock.wall()

local fields = {
  string.format("wall=%.6f", w1 - w0),
  string.format("cpu=%.6f", c1 - c0),
  string.format("samples=%d", samples or 0),
  string.format("aborts=%d", aborts),
  string.format("mcode_full=%d", mcode_full),
  string.format("traces=%d", traces),
  string.format("stop_ms=%.3f", (w2 - w1) * 1e3),
  string.format("result=%s", tostring(result)),
}
for _, k in ipairs({ "stacks", "textBytes", "memoryBytes", "callbackNs", "dumpNs" }) do
  if stats[k] then fields[#fields + 1] = string.format("%s=%s", k, tostring(stats[k])) end
end
if stats.clock then fields[#fields + 1] = "clock=" .. stats.clock end
print(table.concat(fields, " "))
