--- Wall-clock time for session durations.
-- Uses `clock_gettime(CLOCK_MONOTONIC)` through the FFI where it is
-- available (nanosecond resolution, unaffected by clock changes); falls back
-- to `os.time()` (whole seconds) elsewhere. Resolved on first use, so loading
-- this module has no side effects.
-- @module tecs.profile.clock

local M = {}

local now

local function resolve()
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
