--- What live objects that a program does not use cost a program that
-- collects all the time: the program runs with N extra live strings (or
-- tables, or one large string), made before it starts, in alternating
-- fresh processes; prints the median CPU time of each against none. This
-- is why a running session keeps so little loaded (docs/api.md, "What
-- loading it costs a program").
--
--   luajit bench/heap_cost.lua PROGRAM [KIND=N ...]
--   e.g. luajit bench/heap_cost.lua .../life.lua strings=100 strings=200 strings=300 tables=2000 blob=100000
--
-- Environment: BENCH_REPS (default 9), LUAJIT.
--   luajit bench/heap_cost.lua run KIND N PROGRAM   one run (internal)
local REPS = tonumber(os.getenv("BENCH_REPS") or "9")
local LUAJIT = os.getenv("LUAJIT") or "luajit"

if arg[1] == "run" then
  local kind, n, program = arg[2], tonumber(arg[3]), arg[4]
  local keep = {}
  if kind == "strings" then
    for i = 1, n do keep[i] = "extra string " .. i end
  elseif kind == "tables" then
    for i = 1, n do keep[i] = {} end
  elseif kind == "blob" then
    keep[1] = string.rep("x", n)
  end
  collectgarbage()
  local chunk = assert(loadfile(program))
  arg = { [0] = program }
  io.output("/dev/null")
  local t0 = os.clock()
  chunk()
  io.stderr:write(string.format("cpu=%.6f\n", os.clock() - t0))
  return
end

local program = assert(arg[1], "usage: luajit bench/heap_cost.lua PROGRAM [KIND=N ...]")
local cases = { { "none", 0 } }
for i = 2, #arg do
  local kind, n = arg[i]:match("^(%a+)=(%d+)$")
  assert(kind, "not KIND=N: " .. arg[i])
  cases[#cases + 1] = { kind, tonumber(n) }
end
local function sh(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local times = {}
for _ = 1, REPS do
  for _, c in ipairs(cases) do
    local p = assert(io.popen(string.format("%s bench/heap_cost.lua run %s %d %s 2>&1 >/dev/null", LUAJIT, c[1], c[2],
      sh(program))))
    local t = tonumber(p:read("*a"):match("cpu=([%d.]+)"))
    p:close()
    assert(t, "a run failed")
    local key = c[1] .. "=" .. c[2]
    times[key] = times[key] or {}
    table.insert(times[key], t)
  end
end
local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) / 2] or (t[n / 2] + t[n / 2 + 1]) / 2
end
local base = median(times["none=0"])
print(string.format("| extra live objects | CPU s (median of %d) | against none |", REPS))
print("|---|---:|---:|")
for _, c in ipairs(cases) do
  local m = median(times[c[1] .. "=" .. c[2]])
  print(string.format("| %s | %.3f | %+.1f%% |", c[1] == "none" and "none" or (c[2] .. " " .. c[1]), m,
    100 * (m / base - 1)))
end
