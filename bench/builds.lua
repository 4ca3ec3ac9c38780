--- Two builds of the module side by side on whole programs: each run is a
-- fresh process, its CPU time taken whole (perf's task-clock, else
-- /usr/bin/time) with its wall time, under one configuration of bench/under.lua,
-- with `LUA_CPATH` naming one build's module; configurations and builds
-- alternate run by run. Prints the medians and each one's overhead over
-- the unprofiled run.
--
--   luajit bench/builds.lua NAME=CPATH... -- program.lua [args...]
--
-- NAME=CPATH: a build (`CPATH` the folder holding `tecs/profile/native.so`).
-- Environment: BENCH_REPS (default 9), BENCH_CONFIGS (default
-- `none,floor-trap,tecs`; `none` and `floor-trap` run once, not per build,
-- the module not being loaded there), LUAJIT.
local REPS = tonumber(os.getenv("BENCH_REPS") or "9")
local LUAJIT = os.getenv("LUAJIT") or "luajit"
local here = os.getenv("PWD")
-- The whole process's CPU time from perf's task-clock (microseconds) where
-- perf runs, else user + system from /usr/bin/time (10 ms steps).
local perf_runs = os.execute("perf stat -x, -e task-clock true >/dev/null 2>&1")
local PERF = (perf_runs == 0 or perf_runs == true) and "perf stat -x, -e task-clock " or ""

local builds, program = {}, {}
local seen_sep = false
for i = 1, #arg do
  if seen_sep then
    program[#program + 1] = arg[i]
  elseif arg[i] == "--" then
    seen_sep = true
  else
    local name, cpath = arg[i]:match("^([^=]+)=(.+)$")
    assert(name, "usage: luajit bench/builds.lua NAME=CPATH... -- program.lua [args...]")
    builds[#builds + 1] = { name = name, cpath = cpath }
  end
end
assert(#builds > 0 and #program > 0, "usage: luajit bench/builds.lua NAME=CPATH... -- program.lua [args...]")

local function sh(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- The runs: a configuration without the module once, with it per build.
local runs = {}
for name in (os.getenv("BENCH_CONFIGS") or "none,floor-trap,tecs"):gmatch("[^,]+") do
  if name == "none" or name:find("^floor") then
    runs[#runs + 1] = { label = name, config = name, cpath = builds[1].cpath }
  else
    for _, b in ipairs(builds) do
      runs[#runs + 1] = { label = name .. "@" .. b.name, config = name, cpath = b.cpath }
    end
  end
end

local dir = program[1]:match("^(.*)/[^/]*$") or "."
local function run_one(r)
  local cmd = string.format("cd %s && LUA_PATH=%s LUA_CPATH=%s /usr/bin/time -f 'time %%U %%S %%e' %s%s %s %s %s",
    sh(dir), sh(here .. "/lua/?.lua;" .. here .. "/lua/?/init.lua;;"), sh(r.cpath .. "/?.so;;"), PERF, LUAJIT,
    sh(here .. "/bench/under.lua"), r.config, sh(program[1]))
  for i = 2, #program do cmd = cmd .. " " .. sh(program[i]) end
  local h = assert(io.popen(cmd .. " 2>&1 >/dev/null"))
  local out = h:read("*a")
  h:close()
  local user, sys, wall = out:match("time ([%d.]+) ([%d.]+) ([%d.]+)")
  local thread = tonumber(out:match("cpu=([%d.]+)"))
  assert(user and thread, "run failed: " .. cmd .. "\n" .. out)
  local task_ms = tonumber(out:match("([%d.]+),msec,task%-clock"))
  return task_ms and task_ms / 1000 or tonumber(user) + tonumber(sys), tonumber(wall), thread
end

local function median(t)
  local s = {}
  for i = 1, #t do s[i] = t[i] end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
end

local cpu, wall, thread = {}, {}, {}
for _, r in ipairs(runs) do cpu[r.label], wall[r.label], thread[r.label] = {}, {}, {} end
for rep = 1, REPS do
  for i = 0, #runs - 1 do
    local r = runs[(i + rep - 1) % #runs + 1]
    local c, w, t = run_one(r)
    table.insert(cpu[r.label], c)
    table.insert(wall[r.label], w)
    table.insert(thread[r.label], t)
  end
end

local base = runs[1].label
local function cell(t, i, unit)
  local m, b = median(t[i]), median(t[base])
  return string.format("%.3f %s (%+.1f%%)", m, unit, 100 * (m / b - 1))
end
print(string.format("%s, %d runs each, medians: the whole process's CPU time (%s) and wall time, " ..
  "the program thread's CPU time while the program ran (bench/under.lua)", table.concat(program, " "), REPS,
  PERF ~= "" and "perf stat task-clock" or "/usr/bin/time user+system"))
for _, r in ipairs(runs) do
  print(string.format("%-22s cpu %s  wall %s  thread %s", r.label, cell(cpu, r.label, "s"), cell(wall, r.label, "s"),
    cell(thread, r.label, "s")))
end
-- Each run's CPU time, sorted: a program whose compiled code differs run
-- to run shows it here (a bimodal spread).
for _, r in ipairs(runs) do
  local s = {}
  for i, x in ipairs(cpu[r.label]) do s[i] = x end
  table.sort(s)
  for i, x in ipairs(s) do s[i] = string.format("%.3f", x) end
  print(string.format("  %-20s %s", r.label, table.concat(s, " ")))
end
