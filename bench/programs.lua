--- Overhead on whole programs nobody here wrote: Debian-packaged Lua
-- libraries driven by realistic inputs (bench/programs/*.lua; four of them
-- collector-bound, with a small live set: a log stream through dkjson,
-- game-server messages through lua-cjson, a debug log through lua-inspect,
-- a page per order through Penlight), and LuaJIT's own benchmark programs
-- when LUAJIT_BENCH_DIR names a checkout of their bench/ folder (they are
-- not part of this repository). Each program runs under every
-- configuration of bench/under.lua, alternating run by run; prints median
-- times and overheads, and writes programs.md, with the default session's
-- overhead less that of the tick source alone (floor-trap) when both run.
--
--   luajit bench/programs.lua [program-name ...]
--
-- Environment: BENCH_REPS (default 7), BENCH_CONFIGS, BENCH_OUT, LUAJIT, LUAJIT_BENCH_DIR,
-- BENCH_INTERVAL_MS (every configuration's interval, default 1; see bench/under.lua),
-- BENCH_METRIC ("wall", the default, or "cpu": the program thread's CPU
-- time, which a machine busy with other work inflates less).
local REPS = tonumber(os.getenv("BENCH_REPS") or "7")
local OUT = os.getenv("BENCH_OUT") or "build/bench"
local LUAJIT = os.getenv("LUAJIT") or "luajit"
local LJ_DIR = os.getenv("LUAJIT_BENCH_DIR")
local METRIC = os.getenv("BENCH_METRIC") or "wall"
assert(METRIC == "wall" or METRIC == "cpu", "BENCH_METRIC: wall or cpu")

-- Each configuration of bench/under.lua, with its column heading.
local CONFIGS = {
  { "none", "unprofiled (s)" },
  { "loaded", "module loaded, no session" },
  { "tecs", "tecs-profile (defaults)" },
  { "tecs-function", "tecs-profile, function" },
  { "tecs-line", "tecs-profile, line" },
  { "jitp-f", "jit.p f" },
  { "floor-signal", "floor: a signal to an empty handler" },
  { "floor-trap", "floor: the task-clock trap to an empty handler" },
  { "floor-f", "floor: LuaJIT's profiler in f mode, empty callback" },
}

-- LuaJIT's programs with arguments that make each run about a second here.
local LUAJIT_PROGRAMS = {
  { "md5", "15000" }, { "scimark-lu", "2000" }, { "nbody", "3000000" }, { "k-nucleotide", "1000000", stdin = true },
  { "spectral-norm", "1500" }, { "fannkuch", "10" }, { "ray", "7" }, { "binary-trees", "15" },
  { "mandelbrot", "3000" }, { "life" }, { "fasta", "2000000" }, { "series", "3000" }, { "scimark-fft", "20000" },
}

-- BENCH_CONFIGS (names, comma-separated) keeps only those configurations
-- (the unprofiled run always stays).
if os.getenv("BENCH_CONFIGS") then
  local keep = { none = true }
  for name in os.getenv("BENCH_CONFIGS"):gmatch("[^,]+") do keep[name] = true end
  local kept = {}
  for _, c in ipairs(CONFIGS) do if keep[c[1]] then kept[#kept + 1] = c end end
  CONFIGS = kept
end

local function sh(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local programs = {
  { name = "dkjson encode/decode", path = "bench/programs/json_api.lua", args = {} },
  { name = "penlight text+tables", path = "bench/programs/penlight_text.lua", args = {} },
  { name = "dkjson log stream (GC)", path = "bench/programs/json_log.lua", args = {} },
  { name = "cjson messages (GC)", path = "bench/programs/cjson_events.lua", args = {} },
  { name = "inspect debug log (GC)", path = "bench/programs/inspect_log.lua", args = {} },
  { name = "penlight pages (GC)", path = "bench/programs/penlight_report.lua", args = {} },
}
if LJ_DIR then
  os.execute("mkdir -p " .. sh(OUT))
  for _, p in ipairs(LUAJIT_PROGRAMS) do
    local path = LJ_DIR .. "/" .. p[1] .. ".lua"
    local f = io.open(path)
    if f then
      f:close()
      local input
      if p.stdin then
        input = (OUT:sub(1, 1) == "/" and OUT or (os.getenv("PWD") .. "/" .. OUT)) .. "/fasta-" .. p[2] .. ".txt"
        local g = io.open(input)
        if g then g:close() else
          os.execute(string.format("%s %s %s > %s", LUAJIT, sh(LJ_DIR .. "/fasta.lua"), p[2], sh(input)))
        end
      end
      programs[#programs + 1] = { name = p[1], path = path, args = { p[2] }, stdin = input, dir = LJ_DIR }
    end
  end
end

os.execute("mkdir -p " .. sh(OUT))
local wanted = {}
for i = 1, #arg do wanted[arg[i]] = true end

local function median(t)
  local s = {}
  for i = 1, #t do s[i] = t[i] end
  table.sort(s)
  local n = #s
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end

local function run_one(p, config)
  local cmd = string.format("%s bench/under.lua %s %s", LUAJIT, config, sh(p.path))
  if p.dir then -- LuaJIT's programs read their data files from their folder
    cmd = string.format("cd %s && %s %s/bench/under.lua %s %s", sh(p.dir), LUAJIT, sh(os.getenv("PWD")), config,
      sh(p.path))
  end
  for _, a in ipairs(p.args) do cmd = cmd .. " " .. sh(a) end
  if p.stdin then cmd = cmd .. " < " .. sh(p.stdin) end
  local h = assert(io.popen(cmd .. " 2>&1 >/dev/null"))
  local out = h:read("*a")
  h:close()
  local t = tonumber(out:match(METRIC .. "=([%d.]+)"))
  if not t then error("run failed: " .. cmd .. "\n" .. out) end
  return t
end

-- The default session against the tick source alone, in points, when
-- both configurations run.
local function has(name)
  for _, c in ipairs(CONFIGS) do if c[1] == name then return true end end
  return false
end
local VS_FLOOR = has("tecs") and has("floor-trap")

local rows = {}
local heads = {}
for i, c in ipairs(CONFIGS) do heads[i] = string.format("%12s", c[1]) end
if VS_FLOOR then heads[#heads + 1] = string.format("%12s", "tecs-trap") end
print(string.format("%-24s %s", "program", table.concat(heads, " ")))
for _, p in ipairs(programs) do
  if next(wanted) == nil or wanted[p.name] then
    local walls = {}
    for _, c in ipairs(CONFIGS) do walls[c[1]] = {} end
    for rep = 1, REPS do
      for i = 0, #CONFIGS - 1 do
        local c = CONFIGS[(i + rep - 1) % #CONFIGS + 1][1]
        table.insert(walls[c], run_one(p, c))
      end
    end
    local base = median(walls.none)
    local r = { name = p.name, base = base }
    local cells = { string.format("%12.3f", base) }
    for i = 2, #CONFIGS do
      local c = CONFIGS[i][1]
      r[c] = 100 * (median(walls[c]) / base - 1)
      cells[i] = string.format("%+11.1f%%", r[c])
    end
    if VS_FLOOR then
      r.vs_floor = r.tecs - r["floor-trap"]
      cells[#cells + 1] = string.format("%+12.1f", r.vs_floor)
    end
    rows[#rows + 1] = r
    print(string.format("%-24s %s", p.name, table.concat(cells, " ")))
  end
end

local function median_of(key)
  local t = {}
  for _, r in ipairs(rows) do t[#t + 1] = r[key] end
  return #t > 0 and median(t) or 0 / 0
end

local f = assert(io.open(OUT .. "/programs.md", "w"))
f:write(string.format("Median %s of %d interleaved runs per configuration; overhead against the unprofiled run. ",
  METRIC == "cpu" and "CPU time of the program's thread" or "wall time", REPS),
  "All at 1 ms (configurations of bench/under.lua): tecs-profile loaded and no session, at its defaults (compiled ",
  "code and C functions read in the tick handler) or at the precision named, `jit.p` at the rate LuaJIT's own ",
  "timer reaches, and the floors, driven at 1 kHz of CPU time by bench/floor's timer thread: a signal to a ",
  "handler that only counts, the task-clock trap a default session ticks with to a handler that only counts, ",
  "and LuaJIT's profiler in `f` mode with a callback that only counts.",
  VS_FLOOR and " The last column is the default session's overhead less the trap's, in points (median row: " ..
    "the difference of the two medians)." or "", " (GC) marks the collector-bound programs, which keep a small ",
  "live set while they allocate.\n\n")
local head, rule = {}, {}
for i, c in ipairs(CONFIGS) do head[i], rule[i] = c[2], "---:" end
if VS_FLOOR then head[#head + 1], rule[#rule + 1] = "defaults − trap (points)", "---:" end
f:write("| program | " .. table.concat(head, " | ") .. " |\n", "|---|" .. table.concat(rule, "|") .. "|\n")
for _, r in ipairs(rows) do
  local cells = { string.format("%.3f", r.base) }
  for i = 2, #CONFIGS do cells[i] = string.format("%+.1f%%", r[CONFIGS[i][1]]) end
  if VS_FLOOR then cells[#cells + 1] = string.format("%+.1f", r.vs_floor) end
  f:write("| " .. r.name .. " | " .. table.concat(cells, " | ") .. " |\n")
end
local med = { "" }
for i = 2, #CONFIGS do
  med[i] = string.format(CONFIGS[i][1] == "tecs" and "**%+.1f%%**" or "%+.1f%%", median_of(CONFIGS[i][1]))
end
if VS_FLOOR then med[#med + 1] = string.format("**%+.1f**", median_of("tecs") - median_of("floor-trap")) end
f:write("| **median** | " .. table.concat(med, " | ") .. " |\n")
f:close()
