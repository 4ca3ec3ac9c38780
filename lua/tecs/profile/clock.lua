--- Wall-clock time for session durations.
-- The native module's monotonic clock where it loads; else
-- `clock_gettime(CLOCK_MONOTONIC)` through the FFI where that is available
-- (both: nanosecond resolution, unaffected by clock changes); else
-- `os.time()` (whole seconds). The native clock comes first because the FFI
-- is about 10 KB of live heap a program that does not use it would keep.
-- Resolved on first use, so loading this module has no side effects.
-- @module tecs.profile.clock

local M = {}

local now

local function resolve()
  local native_ok, native = pcall(require, "tecs.profile.native")
  if native_ok then return native.monotonic end
  local ok, ffi = pcall(require, "ffi")
  if ok and ffi.os ~= "Windows" then
    -- Private names (the symbol bound with __asm__), so that user code
    -- declaring clock_gettime or struct timespec itself is not disturbed.
    local declared = pcall(ffi.cdef, [[
      typedef struct { long tv_sec; long tv_nsec; } tecs_profile_timespec;
      int tecs_profile_clock_gettime(int clk_id, tecs_profile_timespec *tp) __asm__("clock_gettime");
    ]])
    if declared then
      local ts = ffi.new("tecs_profile_timespec")
      local MONOTONIC = ffi.os == "OSX" and 6 or 1
      local C = ffi.C
      local works = pcall(function() return C.tecs_profile_clock_gettime(MONOTONIC, ts) end)
      if works then
        return function()
          C.tecs_profile_clock_gettime(MONOTONIC, ts)
          return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
        end
      end
    end
  end
  return os.time
end

--- Seconds on a monotonic clock (arbitrary origin).
-- @treturn number
function M.now()
  if not now then now = resolve() end
  return now()
end

return M
