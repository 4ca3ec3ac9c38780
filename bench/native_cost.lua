-- What native frames cost a C-bound program: 12,000 calls of the entry of
-- spec/fixtures/native_split.c through the FFI (about 2.5 s of CPU), run
-- unprofiled (`none`), under a default session (`default`) or with
-- `nativeFrames` (`native`); time the whole process, alternating the
-- modes, e.g. with hyperfine or `perf stat -r`:
--   luajit bench/native_cost.lua native   against   luajit bench/native_cost.lua default
local mode, calls = arg[1] or "native", tonumber(arg[2]) or 12000
local so = os.getenv("TMPDIR") or "/tmp"
so = so .. "/tecs-native-split.so"
if not io.open(so) then
  assert(os.execute("cc -O2 -fomit-frame-pointer -fPIC -shared -I/usr/include/luajit-2.1 -o " .. so ..
    " spec/fixtures/native_split.c") == 0, "cc failed")
end
local ffi = require("ffi")
ffi.cdef([[double native_split_entry(long n);]])
local lib = ffi.load(so)
local s
if mode ~= "none" then s = require("tecs.profile").sample({ nativeFrames = mode == "native" }) end
local acc = 0
for _ = 1, calls do acc = acc + lib.native_split_entry(20000) end
if s then s:stop() end
