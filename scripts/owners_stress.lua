-- Others starting and stopping LuaJIT's profiler under a running session,
-- and processes ending with a session running: nothing may crash and the
-- session keeps what it collected.
--
--   luajit scripts/owners_stress.lua cycles N   N starts and stops of
--       jit.profile (every tenth one jit.p) while a session runs at 0.1 ms
--   luajit scripts/owners_stress.lua exits N    N child processes that end
--       with a session running (half by returning, half by os.exit(0, true))
--
-- Prints "ok ..." and exits 0, or prints what went wrong and exits 1.
-- LUA_PATH/LUA_CPATH as in make; LUAJIT_BIN names the LuaJIT for children.
local what, n = arg[1], tonumber(arg[2]) or 100

local function busy(k) local s = 0 for i = 1, k do s = (s + i * 3) % 65537 end return s end

if what == "child" then
  local profile = require("tecs.profile")
  S = profile.sample({ intervalMs = 0.1 }) -- a global: lua_close finds it running
  busy(200000 + (tonumber(arg[3]) or 0) % 7 * 10000)
  if arg[4] == "exit" then os.exit(0, true) end
  return
end

if what == "cycles" then
  local profile = require("tecs.profile")
  local jprofile = require("jit.profile")
  local jp = require("jit.p")
  local out = os.tmpname()
  local s = profile.sample({ intervalMs = 0.1 })
  -- Until the session has 100 samples, however fast this machine runs the
  -- loop (a CPU second at the least kernel tick rate is enough).
  local t0 = os.clock()
  repeat busy(100000) until s:stats().samples >= 100 or os.clock() - t0 > 2
  local before = s:stats().samples
  local theirs = 0
  for i = 1, n do
    if i % 10 == 0 then
      jp.start("f", out)
      busy(3000)
      jp.stop()
    else
      jprofile.start(i % 2 == 0 and "fi1" or "li1", function(_, k) theirs = theirs + k end)
      busy(3000)
      jprofile.stop()
    end
    busy(1000)
  end
  os.remove(out)
  local text = s:stop()
  local st = s:stats()
  if before < 100 or st.samples < before or #text == 0 then
    print(string.format("lost data: %d samples before, %d at stop, %d bytes of text", before, st.samples, #text))
    os.exit(1)
  end
  print(string.format("ok %d cycles, session kept %d samples (%s), jit.profile got %d", n, st.samples, st.clock,
    theirs))
  return
end

if what == "exits" then
  local luajit = os.getenv("LUAJIT_BIN") or "luajit"
  local bad, hangs = {}, 0
  for i = 1, n do
    local how = i % 2 == 0 and "exit" or "end"
    -- Under a time limit, tried once more after a hang (OpenResty's luajit2
    -- was seen to hang in lua_close, rarely); hangs are counted and printed.
    local function child()
      local p = io.popen(string.format("timeout 60 %s scripts/owners_stress.lua child 0 %d %s 2>&1; echo \"rc=$?\"",
        luajit, i, how))
      local outp = p:read("*a")
      p:close()
      return outp, tonumber(outp:match("rc=(%d+)%s*$"))
    end
    local outp, rc = child()
    if rc == 124 then
      hangs = hangs + 1
      outp, rc = child()
    end
    if rc ~= 0 then bad[#bad + 1] = string.format("child %d (%s): rc %s: %s", i, how, tostring(rc), outp) end
  end
  if #bad > 0 then
    print(#bad .. " of " .. n .. " children failed")
    for _, b in ipairs(bad) do print(b) end
    os.exit(1)
  end
  print(string.format("ok %d exits with a session running (%d hung and ran again)", n, hangs))
  return
end

io.stderr:write("usage: luajit scripts/owners_stress.lua cycles|exits N\n")
os.exit(2)
