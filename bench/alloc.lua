--- Allocation sessions: accuracy on workloads of known allocation shares,
-- and overhead on binary-trees: LuaJIT's program where its sources are
-- given (not part of this repository: its path in ALLOC_BENCH_PROGRAM, or
-- a checkout of LuaJIT's bench/ folder in LUAJIT_BENCH_DIR), else the
-- binary-trees-like bench/trees.lua. Every run loads the module first, so
-- the overheads are the session's, against the module loaded. Writes
-- alloc.md.
--
--   luajit bench/alloc.lua            accuracy, then overhead
--   luajit bench/alloc.lua run MODE BYTES PROGRAM ARG   one timed run (internal)
--
-- Environment: BENCH_REPS (default 7), BENCH_OUT, LUAJIT.
local clock = require("bench.clock")

local REPS = tonumber(os.getenv("BENCH_REPS") or "7")
local OUT = os.getenv("BENCH_OUT") or "build/bench"
local LUAJIT = os.getenv("LUAJIT") or "luajit"
local PROGRAM = os.getenv("ALLOC_BENCH_PROGRAM")
  or (os.getenv("LUAJIT_BENCH_DIR") and os.getenv("LUAJIT_BENCH_DIR") .. "/binary-trees.lua")
  or "bench/trees.lua"
local PROGRAM_ARG = os.getenv("ALLOC_BENCH_ARG") or "15"
local BYTES = tonumber(os.getenv("ALLOC_BENCH_BYTES")) or 524288 -- the default bytesPerSample

local function sh(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- One run: the program's CPU time under `mode` ("none", "profiler",
-- "wrapper" (a session that never samples), "alloc", "live" (tracking live
-- blocks), "stopped" (started and stopped before the program)). Prints
-- "seconds samples".
if arg[1] == "run" then
  local mode, bytes, program = arg[2], tonumber(arg[3]), arg[4]
  local profile = require("tecs.profile")
  local s
  if mode == "profiler" then
    -- LuaJIT's profiler alone, in the mode a session uses, never sampling.
    require("jit.profile").start("fi1000000", function() end)
  elseif mode ~= "none" then
    s = profile.allocations({ bytesPerSample = mode == "wrapper" and 1073741824 or bytes,
      maxLiveBlocks = mode == "live" and 16384 or nil })
    if mode == "stopped" then s:stop() s = nil end
  end
  arg = { arg[5] }
  io.output("/dev/null")
  local t0 = clock.cpu()
  dofile(program)
  local dt = clock.cpu() - t0
  local samples = 0
  if s then s:stop() samples = s:stats().samples end
  io.stderr:write(string.format("%.6f %d\n", dt, samples))
  return
end

local lines = {}
-- GC shares of a time-sampling session, one row per accuracy run.
local gc_lines = {}
local function out(s) print(s) lines[#lines + 1] = s end

-- Accuracy: shares of bytes by function against the exact byte counts of
-- each function run alone (a session's allocatedBytes counts every byte).
local function accuracy(jit_on)
  local w = dofile("spec/fixtures/alloc_workload.lua")
  local profile = require("tecs.profile")
  local names = { "strings", "tables", "closures" }
  local n = { strings = 150000, tables = 50000, closures = 40000 }
  if not jit_on then jit.off() jit.flush() end
  local keep, truth, total = {}, {}, 0
  for _, name in ipairs(names) do
    w[name](n[name], keep)
    local t = profile.allocations({ bytesPerSample = 1073741824 })
    w[name](n[name], keep)
    t:stop()
    truth[name] = t:stats().allocatedBytes
    total = total + truth[name]
  end
  local s = profile.allocations({ bytesPerSample = 4096 })
  for _, name in ipairs(names) do w[name](n[name], keep) end
  s:delta()
  for _, name in ipairs(names) do w[name](n[name], keep) end
  local text = s:delta("collapsed")
  s:stop()
  jit.on()
  -- Each stack's bytes go to the workload function of its innermost
  -- fixture frame (`file:line` or `file:first-last`).
  local file = debug.getinfo(w.strings, "S").short_src
  local got, sum = {}, 0
  for line in text:gmatch("[^\n]+") do
    local frames, bytes = line:match("^(.*) (%d+)$")
    local owner
    for f in frames:gmatch("[^;]+") do
      local at = f:sub(1, #file + 1) == file .. ":" and tonumber(f:sub(#file + 2):match("^(%d+)"))
      for _, name in ipairs(names) do
        local info = debug.getinfo(w[name], "S")
        if at and at >= info.linedefined and at <= info.lastlinedefined then owner = name end
      end
    end
    if owner then got[owner] = (got[owner] or 0) + tonumber(bytes) end
    sum = sum + tonumber(bytes)
  end
  -- What a time-sampling session sees on the same workload: the share of
  -- its samples in the garbage collector (VM state G), beside the bytes.
  if not jit_on then jit.off() end
  local ts = profile.sample({ intervalMs = 1 })
  for _ = 1, 5 do
    for _, name in ipairs(names) do w[name](n[name], keep) end
  end
  local ttext = ts:stop()
  jit.on()
  local gc, all = 0, 0
  for line in ttext:gmatch("[^\n]+") do
    local state, count = line:match("_%[(%u)%] (%d+)$")
    if count then
      all = all + tonumber(count)
      if state == "G" then gc = gc + tonumber(count) end
    end
  end
  for _, name in ipairs(names) do
    out(string.format("| %s | %s | %.1f%% | %.1f%% | %+.1f |", jit_on and "on" or "off", name,
      100 * truth[name] / total, 100 * (got[name] or 0) / sum, 100 * ((got[name] or 0) / sum - truth[name] / total)))
  end
  gc_lines[#gc_lines + 1] = string.format("| %s | %.1f%% | %d |", jit_on and "on" or "off",
    all > 0 and 100 * gc / all or 0, all)
end

out("Allocation sessions: byte shares by function (bytesPerSample 4096), against exact counts")
out("")
out("| JIT | function | true share | measured share | error (points) |")
out("|---|---|---:|---:|---:|")
accuracy(true)
accuracy(false)
out("")
out("The same workload (five rounds) under profile.sample (1 ms): CPU time in the GC")
out("")
out("| JIT | GC share of samples | samples |")
out("|---|---:|---:|")
for _, l in ipairs(gc_lines) do out(l) end
out("")

do
  local modes = { "none", "profiler", "wrapper", "alloc", "live", "stopped" }
  local times, samples = {}, {}
  for _, m in ipairs(modes) do times[m] = {} end
  for _ = 1, REPS do
    for _, m in ipairs(modes) do
      local cmd = string.format("%s bench/alloc.lua run %s %d %s %s 2>&1 >/dev/null", LUAJIT, m, BYTES, sh(PROGRAM),
        sh(PROGRAM_ARG))
      local p = assert(io.popen(cmd))
      local text = p:read("*a")
      p:close()
      local t, n = text:match("([%d.]+) (%d+)")
      assert(t, "run failed: " .. text)
      table.insert(times[m], tonumber(t))
      samples[m] = tonumber(n)
    end
  end
  local function median(list)
    local v = { unpack(list) }
    table.sort(v)
    return v[math.floor((#v + 1) / 2)]
  end
  -- Each configuration against the run without a session just before it:
  -- the median of these ratios cancels most of the drift of a busy machine.
  local ratio = {}
  for _, m in ipairs(modes) do
    ratio[m] = {}
    for i = 1, REPS do ratio[m][i] = times[m][i] / times.none[i] end
  end
  out(string.format("Overhead on %s %s (CPU time, %d rounds of alternating runs, the module loaded in every run; " ..
    "bytesPerSample %d)", PROGRAM:match("([^/]+)%.lua$") or PROGRAM, PROGRAM_ARG, REPS, BYTES))
  out("")
  out("| configuration | median s | overhead (median of paired ratios) | samples |")
  out("|---|---:|---:|---:|")
  local label = { none = "no session", profiler = "LuaJIT's profiler alone, function mode, no sample",
    wrapper = "session, no sample (profiler + allocator wrapper)", alloc = "allocation session",
    live = "allocation session tracking live blocks (maxLiveBlocks 16384)",
    stopped = "session stopped before the run" }
  for _, m in ipairs(modes) do
    local r = median(ratio[m])
    out(string.format("| %s | %.3f | %+.1f%% | %d |", label[m], median(times[m]), 100 * (r - 1), samples[m]))
  end
end

os.execute("mkdir -p " .. sh(OUT))
local f = assert(io.open(OUT .. "/alloc.md", "w"))
f:write(table.concat(lines, "\n"), "\n")
f:close()
