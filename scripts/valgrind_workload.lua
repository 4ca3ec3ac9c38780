-- A short mix of the faults from spec/robust_faults_spec.lua, run under
-- valgrind by scripts/valgrind.sh, with allocation sessions attached to the
-- sampling sessions. It ends with sessions still running, so that
-- lua_close's path (the session finalisers) is checked too.
local profile = require("tecs.profile")
local zone = require("jit.zone")

local function busy(n) local s = 0 for i = 1, n do s = (s + i * 3) % 65537 end return s end
local function run_for(sec, fn) local t0 = os.clock() local i = 0 while os.clock() - t0 < sec do i = i + 1 fn(i) end end
local function thrower(d) if d == 0 then busy(100) error("x") end local r = thrower(d - 1) return r end
local function deep(n) if n == 0 then return busy(1000) end local r = deep(n - 1) return r + 1 end
local coro = coroutine.wrap(function() while true do zone("coro") busy(200) coroutine.yield() pcall(zone) coroutine.yield() end end)
local odd = assert(loadstring("return 1", "@semi;colon new\nline \255.lua"))

-- An allocation session beside a sampling session, where it can attach
-- (the sampling session has its own tick handler).
local function attached_allocations(sampling)
  if sampling:stats().clock == "process-cpu-itimer" then return nil end
  local a = profile.allocations({ bytesPerSample = 4096 })
  assert(a._native:isAttached(), "the allocation session did not attach")
  return a
end

local s = profile.sample({ intervalMs = 1, maxStacks = 200 })
local a = attached_allocations(s)
run_for(1.0, function(i)
  pcall(thrower, i % 10)
  coro()
  pcall(zone)
  zone("odd;\nzone") odd() zone()
  if i % 50 == 0 then jit.flush() end
  if i % 70 == 0 then jit.off() busy(100) jit.on() end
  loadstring("return " .. i, "=gen" .. i)()
  collectgarbage()
end)
deep(20000)
local ok = pcall(s.stop, s, "/nonexistent-dir/x.collapsed")
assert(not ok)
assert(#s:collapsed() > 0)
if a then assert(not a:isRunning() and a:stats().samples > 0 and #a:collapsed() > 0) end
local path = os.tmpname()
s:write(path)
os.remove(path)
-- a second session, left running at exit
local s2 = profile.sample({ intervalMs = 1, clock = "wall" })
local a2 = attached_allocations(s2)
run_for(0.3, function() busy(1000) loadstring("return 1")() end)
print("valgrind workload done", s:stats().samples, s2:stats().samples,
  a and a:stats().samples or "no attached allocation session", a2 and a2:stats().samples or "")
