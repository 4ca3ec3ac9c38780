-- Soak test: SOAK_SECONDS (default 600) of sampling at the highest rate
-- (intervalMs = 0.1) on a workload that mixes every fault the robustness
-- specs try one by one: errors caught through profiled code, coroutines
-- yielding across zones, pops on an empty zone stack, 20,000-deep recursion,
-- jit.flush/off/on, a full GC every frame, odd names, new code every frame
-- (stack table overflow), jit.profile taking the profiler over, failed and
-- successful writes, child processes exiting with a session running, and
-- an allocation session attached to every other sampling session.
--
-- Prints one line per session and a summary with the samples, the resident
-- memory at start and end, and every error; exits 1 on any error.
--
--   SOAK_SECONDS=30 luajit scripts/soak.lua     (LUA_PATH/LUA_CPATH as in make)

local profile = require("tecs.profile")
local native = require("tecs.profile.native")
local zone = require("jit.zone")
local jprofile = require("jit.profile")

local TOTAL = tonumber(os.getenv("SOAK_SECONDS")) or 600
local SESSION = math.max(3, math.min(60, TOTAL / 4))
local LUAJIT = os.getenv("LUAJIT_BIN") or "luajit"
local RSS_GROWTH_LIMIT_KB = 128 * 1024

local errors = {}
local function fail(fmt, ...)
  local msg = string.format(fmt, ...)
  errors[#errors + 1] = msg
  io.stderr:write("soak: ERROR ", msg, "\n")
end

local function rss_kb()
  local f = io.open("/proc/self/statm")
  if not f then return 0 end
  local _ = f:read("*n")
  local pages = f:read("*n")
  f:close()
  return pages * 4
end

local function wall() return os.time() end

-- ---------------------------------------------------------------- workload
local function busy(n) local s = 0 for i = 1, n do s = (s + i * 3) % 65537 end return s end

local function thrower(depth)
  if depth == 0 then busy(300); error({ "table error" }) end
  local r = thrower(depth - 1)
  return r
end

local function deep(n) if n == 0 then return busy(2000) end local r = deep(n - 1) return r + 1 end

local coro = coroutine.wrap(function()
  while true do
    zone("coro") busy(500)
    coroutine.yield()
    busy(500) zone()
    coroutine.yield()
  end
end)

local ODD = { "semi;colon", "new\nline", "quo\"te", "com,ma", "ünï©ødé", "bad\255utf8", "sp ace" }
local odd_fns = {}
for i, n in ipairs(ODD) do
  odd_fns[i] = assert(loadstring("local s = 0 for i = 1, 400 do s = (s + i) % 7 end return s", "@" .. n .. ".lua"))
end

local generated = 0
local function frame(i)
  zone("frame")
  -- errors caught through profiled code
  pcall(thrower, i % 20)
  pcall(error, "plain " .. i)
  -- coroutines yielding across zones
  coro()
  -- pops on an empty zone stack (the frame zone is flushed first)
  if i % 50 == 0 then
    zone:flush()
    pcall(zone)
    zone("frame")
  end
  -- deep recursion
  if i % 200 == 0 then deep(20000) end
  -- JIT state changes
  if i % 97 == 0 then jit.flush() end
  if i % 131 == 0 then jit.off() busy(1000) jit.on() end
  -- odd names, in zones and chunk names
  local k = i % #ODD + 1
  zone(ODD[k]) odd_fns[k]() zone()
  -- new code every frame
  generated = generated + 1
  local f = loadstring("local s = 0 for i = 1, 200 do s = (s + i) % 7 end return s", "=gen/" .. generated .. ".lua")
  f()
  busy(2000)
  zone:flush()
  -- a full GC every frame
  collectgarbage()
end

-- ---------------------------------------------------------------- checks
local function check_text(label, text, expect_total)
  local ok, parsed = pcall(native.parseCollapsed, text)
  if not ok then return fail("%s: output does not parse: %s", label, parsed) end
  if expect_total and parsed.samples ~= expect_total then
    fail("%s: output has %d samples, stats say %d recorded", label, parsed.samples, expect_total)
  end
  return parsed
end

local tmpdir = os.tmpname()
os.remove(tmpdir)
os.execute("mkdir -p '" .. tmpdir .. "'")

local function child_exits_running(how)
  local p = io.popen(LUAJIT .. " spec/fixtures/exit_running.lua " .. how .. " >/dev/null 2>&1; echo $?")
  local rc = p:read("*a")
  p:close()
  if tonumber(rc) ~= 0 then fail("child exiting with a running session (%s) returned %s", how, rc) end
end

-- ---------------------------------------------------------------- main loop
local rss_start = rss_kb()
local rss_after_first
local t_start = wall()
local sessions, total_samples, total_overflow, frames = 0, 0, 0, 0
local max_table_bytes = 0

while wall() - t_start < TOTAL do
  sessions = sessions + 1
  local takeover = sessions % 3 == 0
  local max_stacks = sessions % 2 == 0 and 5000 or nil
  local ok_start, s = pcall(profile.sample, { intervalMs = 0.1, maxStacks = max_stacks })
  if not ok_start then
    fail("session %d did not start: %s", sessions, s)
    break
  end
  -- every other session, an allocation session attached to it
  local a
  if sessions % 2 == 1 then
    local ok_a, alloc = pcall(profile.allocations, { bytesPerSample = 4096 })
    if not ok_a then
      fail("session %d: the allocation session did not start: %s", sessions, alloc)
    elseif s:stats().clock ~= "process-cpu-itimer" and not alloc._native:isAttached() then
      fail("session %d: the allocation session did not attach", sessions)
    else
      a = alloc
    end
  end
  local t0 = wall()
  local i = 0
  local took_over = false
  while wall() - t0 < SESSION and wall() - t_start < TOTAL do
    i = i + 1
    frame(i)
    if takeover and not took_over and wall() - t0 >= SESSION / 2 then
      took_over = true
      jprofile.start("li1", function() end)
      for _ = 1, 50 do frame(i) end
      jprofile.stop()
    end
    if i % 500 == 0 then check_text("snapshot", s:collapsed()) end
  end
  frames = frames + i
  -- a failing write, then a good one: nothing may be lost
  local bad = tmpdir .. "/missing/dir/out.collapsed"
  local ok_w, err = pcall(s.stop, s, bad)
  if ok_w then fail("a write to a missing directory succeeded") end
  if not tostring(err):find(bad, 1, true) then fail("write error does not name the path: %s", tostring(err)) end
  if a then
    -- stopped with the sampling session, its data kept
    if a:isRunning() then fail("session %d: the attached allocation session still runs", sessions) end
    local ast = a:stats()
    check_text("allocations " .. sessions, a:collapsed(), ast.recordedSamples * 4096)
    if ast.allocatedBytes <= 0 or ast.samples <= 0 then
      fail("session %d: the allocation session counted %d bytes, %d samples", sessions, ast.allocatedBytes, ast.samples)
    end
  end
  local st = s:stats()
  local text = s:collapsed()
  check_text("session " .. sessions, text, st.recordedSamples)
  local good = tmpdir .. "/out " .. sessions .. ".collapsed"
  if s:write(good) ~= text then fail("write returned other text") end
  local f = io.open(good, "rb")
  if not f or f:read("*a") ~= text then fail("the written file differs from the profile") end
  if f then f:close() end
  os.remove(good)
  if took_over and not (st.warning or ""):find("found LuaJIT's profiler no longer ours", 1, true) then
    fail("session %d: the jit.profile takeover was not reported (warning: %s)", sessions, tostring(st.warning))
  end
  if not took_over and st.warning then fail("session %d: unexpected warning: %s", sessions, st.warning) end
  if st.samples <= 0 then fail("session %d recorded no samples", sessions) end
  total_samples = total_samples + st.samples
  total_overflow = total_overflow + st.overflowSamples
  if st.memoryBytes > max_table_bytes then max_table_bytes = st.memoryBytes end
  local cap = max_stacks or native.defaultMaxStacks
  if st.stacks > cap then fail("session %d: %d stacks past the cap %d", sessions, st.stacks, cap) end
  -- a child process that exits with a session running
  child_exits_running(({ "end", "exit-close", "exit" })[sessions % 3 + 1])
  collectgarbage()
  if sessions == 1 then rss_after_first = rss_kb() end
  print(string.format("soak: session %d: %d frames, %d samples (%.0f/s), %d stacks, %d overflow, table %d KiB, RSS %d KiB%s%s",
    sessions, i, st.samples, st.rate, st.stacks, st.overflowSamples, math.floor(st.memoryBytes / 1024), rss_kb(),
    a and string.format(", %d allocation samples", a:stats().samples) or "",
    took_over and ", jit.profile takeover reported" or ""))
  io.stdout:flush()
end

os.execute("rm -rf '" .. tmpdir .. "'")
collectgarbage()
local rss_end = rss_kb()
if rss_after_first and rss_end - rss_after_first > RSS_GROWTH_LIMIT_KB then
  fail("resident memory grew %d KiB after the first session", rss_end - rss_after_first)
end
print(string.format("soak: %d s, %d sessions, %d frames, %d samples, %d overflow samples, largest table %d KiB",
  wall() - t_start, sessions, frames, total_samples, total_overflow, math.floor(max_table_bytes / 1024)))
print(string.format("soak: resident memory start %d KiB, after first session %d KiB, end %d KiB",
  rss_start, rss_after_first or -1, rss_end))
print(string.format("soak: errors=%d", #errors))
for _, e in ipairs(errors) do print("soak: error: " .. e) end
os.exit(#errors == 0 and 0 or 1)
