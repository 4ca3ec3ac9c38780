--- Clocks for the benchmark harness: monotonic wall time and the calling
-- thread's CPU time, in seconds, read through the FFI (no allocation).
local ffi = require("ffi")

pcall(ffi.cdef, [[
typedef struct { long tv_sec; long tv_nsec; } tecs_bench_timespec;
int clock_gettime(int clk, tecs_bench_timespec *ts);
]])

local CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID = 1, 3
local ts = ffi.new("tecs_bench_timespec")

local M = {}

local function read(clk)
  ffi.C.clock_gettime(clk, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

--- Monotonic wall-clock seconds.
function M.wall() return read(CLOCK_MONOTONIC) end

--- CPU seconds used by the calling thread.
function M.cpu() return read(CLOCK_THREAD_CPUTIME_ID) end

return M
