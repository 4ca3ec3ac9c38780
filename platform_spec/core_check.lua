--- The core of the API where the whole suite does not run: Windows x86-64
-- (the module cross-built for x86_64-pc-windows-gnu, loaded by a Windows
-- LuaJIT under Wine: scripts/windows.sh) and Linux arm64 (cross-built for
-- aarch64-unknown-linux-gnu, an arm64 LuaJIT under qemu-user:
-- scripts/arm64.sh). Prints TAP. Run from a tree laid out as the
-- repository (bin/, lua/, and the module in MODULE_DIR) as
-- `luajit platform_spec/core_check.lua MODULE_DIR`.
-- Work runs until the session holds enough samples, never a fixed count.
local module_dir = assert(arg[1], "usage: core_check.lua MODULE_DIR")
local windows = package.config:sub(1, 1) == "\\"
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = module_dir .. (windows and "/?.dll;" or "/?.so;") .. package.cpath

local checks, failed = {}, 0
local function check(name, fn) checks[#checks + 1] = { name = name, fn = fn } end

local profile = require("tecs.profile")

-- Until the session `s` holds `n` samples (the interval's worth of CPU at
-- least), calling `fn`.
local function until_samples(s, n, fn)
  repeat fn() until s:stats().samples >= n
end

local function burn(n)
  local t = 0
  for i = 1, n do t = t + math.sin(i) end -- the burning line
  return t
end
local BURN_LINE = debug.getinfo(burn, "S").linedefined + 2

-- Samples of collapsed text whose stack holds a frame matching `pat`, and all.
local function share(text, pat)
  local hit, all = 0, 0
  for stack, count in text:gmatch("([^\n]*) (%d+)\n") do
    all = all + count
    if stack:find(pat) then hit = hit + count end
  end
  return hit, all
end

check("the module loads and says it can sample", function()
  local native = require("tecs.profile.native")
  local ok, why = native.available()
  assert(ok, why)
  assert(require("tecs.utils.profile") == profile, "tecs.utils.profile is another module")
end)

check("profile.sample: a CPU-bound function takes the samples", function()
  local s = profile.sample()
  until_samples(s, 100, function() burn(1e6) end)
  local st = s:stats()
  local text = s:stop()
  local hit, all = share(text, "core_check%.lua:%d+")
  assert(all >= 100, "samples in the text: " .. all)
  assert(hit >= all * 0.9, ("the workload's frames in %d of %d samples:\n%s"):format(hit, all, text))
  assert(st.precision == "function", "precision " .. tostring(st.precision))
  assert(type(st.cpuSec) == "number" and st.cpuSec > 0, "cpuSec " .. tostring(st.cpuSec))
  assert(type(st.processCpuSec) == "number" and st.processCpuSec >= st.cpuSec * 0.5,
    "processCpuSec " .. tostring(st.processCpuSec))
  if windows then
    assert(st.signal == "none (LuaJIT's timer thread)", "signal " .. tostring(st.signal))
  else
    assert(st.signal == "SIGPROF" or st.signal == "SIGTRAP" or st.signal:find("^SIGRTMIN%+%d+$"),
      "signal " .. tostring(st.signal))
  end
end)

check("line precision names the line that runs", function()
  local s = profile.sample({ precision = "line" })
  until_samples(s, 100, function() burn(1e6) end)
  local text = s:stop()
  local hit, all = share(text, "core_check%.lua:" .. BURN_LINE .. "_")
  assert(hit >= all * 0.8, ("line %d in %d of %d samples:\n%s"):format(BURN_LINE, hit, all, text))
end)

check("jit.zone paths tag the stacks", function()
  local zone = require("jit.zone")
  local s = profile.sample()
  until_samples(s, 100, function()
    zone("update")
    zone("physics")
    burn(1e6)
    zone()
    zone()
  end)
  local text = s:stop()
  local hit, all = share(text, "^update;physics;")
  assert(hit >= all * 0.9, ("zoned samples %d of %d:\n%s"):format(hit, all, text))
end)

check("stop(file) writes the profile; an unwritable path errors and keeps it", function()
  local s = profile.sample()
  until_samples(s, 20, function() burn(1e6) end)
  local ok, err = pcall(s.stop, s, "Z:/no/such/dir/x.collapsed")
  assert(not ok and tostring(err):find("x.collapsed", 1, true), tostring(err))
  local text = s:collapsed()
  assert(#text > 0, "nothing kept after the failed write")
  local path = "build/core_check.collapsed"
  s:write(path)
  local f = assert(io.open(path, "rb"))
  local written = f:read("*a")
  f:close()
  os.remove(path)
  os.remove(path .. ".functions.json")
  assert(written == text, "the written file is not the collapsed text")
end)

check("views: profile.report of a session", function()
  local s = profile.sample()
  until_samples(s, 50, function() burn(1e6) end)
  s:stop()
  local r = profile.report(s)
  assert(r:find("^# %d+ samples"), r)
  assert(r:find("burn", 1, true), r)
end)

check("profile.trace: an abort is recorded, CSV written", function()
  local t = profile.trace()
  for _ = 1, 200 do
    local x = 0
    for i = 1, 100 do x = x + #tostring(i) end -- tostring: NYI in 2.1's recorder? then an abort
    for i = 1, 100 do local f = function() return i end; x = x + f() end -- FNEW: an abort
  end
  local report = t:stop()
  local csv = report:csv()
  assert(csv:find("^[^\n]*reason", 1) or csv:find("reason", 1, true), csv)
  assert(report.tracesAborted == nil or report.tracesAborted >= 0)
end)

check("newProfiler('time'): report names the hot function", function()
  local p = profile.newProfiler("time")
  p:start()
  local t0 = os.clock()
  while os.clock() - t0 < 0.3 do burn(1e6) end
  p:stop()
  local r = p:report()
  assert(r:find("burn", 1, true), r)
end)

check("coverage: the lines a function ran", function()
  local src = "build/covered_fixture.lua"
  local f = assert(io.open(src, "wb"))
  f:write("local M = {}\nfunction M.f(x)\n  if x then\n    return 1\n  end\n  return 2\nend\nreturn M\n")
  f:close()
  local cov = profile.coverage({ include = { "covered_fixture" } })
  local m = dofile(src)
  m.f(true)
  local out = "build/core_check.info"
  cov:stop(out)
  os.remove(src)
  local g = assert(io.open(out, "rb"))
  local lcov = g:read("*a")
  g:close()
  os.remove(out)
  assert(lcov:find("DA:4,1", 1, true) and lcov:find("DA:6,0", 1, true), lcov)
end)

check("the tecs-profile command: run a program, then report its profile", function()
  local prog, out = "build/core_check_prog.lua", "build/core_check_prog.collapsed"
  local f = assert(io.open(prog, "wb"))
  f:write("local function spin(n) local t = 0 for i = 1, n do t = t + math.sin(i) end return t end\n",
    "local st = require('tecs.profile.native')\n",
    "local t0 = os.clock() while os.clock() - t0 < 0.5 do spin(1e6) end\n")
  f:close()
  -- Under qemu-user the LuaJIT runs through the emulator: the runner says how.
  local luajit = os.getenv("TECS_CHECK_LUAJIT") or ('"' .. arg[-1] .. '"')
  local cmd = ('%s bin/tecs-profile run -o %s %s 2>&1'):format(luajit, out, prog)
  local p = assert(io.popen(cmd))
  local said = p:read("*a")
  p:close()
  os.remove(prog)
  local g = io.open(out, "rb")
  local text = g and g:read("*a") or ""
  if g then g:close() end
  os.remove(out)
  os.remove(out .. ".functions.json")
  local hit, all = share(text, "core_check_prog%.lua:1")
  assert(all > 0 and hit >= all * 0.9, ("spin in %d of %d samples:\n%s\n%s"):format(hit, all, text, said))
  assert(said:find("spin %(build/core_check_prog%.lua:1%)"), said)
end)

for i, c in ipairs(checks) do
  local ok, err = pcall(c.fn)
  if ok then
    print(("ok %d - %s"):format(i, c.name))
  else
    failed = failed + 1
    print(("not ok %d - %s"):format(i, c.name))
    for line in tostring(err):gmatch("[^\n]+") do print("# " .. line) end
  end
end
print("1.." .. #checks)
os.exit(failed == 0 and 0 or 1)
