--- The benchmark driver: runs workloads under profiler configurations in
-- separate processes, alternating configurations run by run, and prints
-- medians and ratios. Also writes a Markdown fragment for BENCHMARKS.md.
--
--   luajit bench/bench.lua matrix   [workload ...]   overhead, rate, aborts
--   luajit bench/bench.lua persample                 per-sample cost by depth
--   luajit bench/bench.lua zones                     zone push+pop cost
--
-- Environment: BENCH_REPS (default 7), BENCH_SCALE (default 0.8),
-- BENCH_OUT (directory for the Markdown fragments, default build/bench),
-- BENCH_TIMING_CPATH (LUA_CPATH of the instrumented build, for persample).
local bench_dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = bench_dir .. "/?.lua;" .. package.path

local workloads = require("workloads")

local REPS = tonumber(os.getenv("BENCH_REPS") or "7")
local SCALE = tonumber(os.getenv("BENCH_SCALE") or "0.8")
local OUT = os.getenv("BENCH_OUT") or "build/bench"
local LUAJIT = os.getenv("LUAJIT") or "luajit"

local function median(t)
  local s = {}
  for i = 1, #t do s[i] = t[i] end
  table.sort(s)
  local n = #s
  if n == 0 then return 0 / 0 end
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

--- Runs one process; returns its figures as a table of numbers/strings.
local function run_one(workload, config, env)
  local cmd = (env or "") .. " " .. LUAJIT .. " " .. shell_quote(bench_dir .. "/run_one.lua") .. " "
    .. shell_quote(workload) .. " " .. shell_quote(config) .. " " .. SCALE .. " 2>&1"
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  local r = {}
  for k, v in out:gmatch("([%w_]+)=(%S+)") do r[k] = tonumber(v) or v end
  if not r.wall then error("run failed: " .. cmd .. "\n" .. out) end
  return r
end

--- Runs every config REPS times, alternating (the starting config rotates
-- each round so no config always follows the same one).
local function run_alternating(workload, configs)
  local runs = {}
  for _, c in ipairs(configs) do runs[c.name] = {} end
  for rep = 1, REPS do
    for i = 0, #configs - 1 do
      local c = configs[(i + rep - 1) % #configs + 1]
      local r = run_one(workload, c.config, c.env)
      table.insert(runs[c.name], r)
    end
  end
  return runs
end

local function field(runs, k)
  local t = {}
  for i, r in ipairs(runs) do t[i] = tonumber(r[k]) or 0 end
  return t
end

--- Summary of one config against the `none` runs.
local function summarise(runs, base)
  local wall, cpu = median(field(runs, "wall")), median(field(runs, "cpu"))
  local bwall, bcpu = median(field(base, "wall")), median(field(base, "cpu"))
  local samples = median(field(runs, "samples"))
  local rates = {}
  for i, r in ipairs(runs) do rates[i] = (r.samples or 0) / r.cpu end
  local s = {
    wall = wall, cpu = cpu,
    wall_over = (wall / bwall - 1) * 100,
    cpu_over = (cpu / bcpu - 1) * 100,
    samples = samples,
    rate = median(rates),
    aborts = median(field(runs, "aborts")) - median(field(base, "aborts")),
    mcode_full = median(field(runs, "mcode_full")) - median(field(base, "mcode_full")),
    stop_ms = median(field(runs, "stop_ms")),
    callback_ns = median(field(runs, "callbackNs")),
    -- Spread of this config's CPU times: (max - min) / median.
    spread = (function()
      local t = field(runs, "cpu")
      table.sort(t)
      return (t[#t] - t[1]) / median(t) * 100
    end)(),
    dump_ns = median(field(runs, "dumpNs")),
  }
  -- Per-sample cost from the CPU time of the profiled thread: it includes
  -- signal delivery, LuaJIT's hook and the callback, and it is what the
  -- workload loses. The timer thread's own CPU is not in it.
  s.per_sample_us = samples > 0 and (cpu - bcpu) / samples * 1e6 or 0 / 0
  return s
end

local function fmt(x, spec)
  if x ~= x then return "-" end
  return string.format(spec, x)
end

local function write_fragment(name, lines)
  os.execute("mkdir -p " .. shell_quote(OUT))
  local f = assert(io.open(OUT .. "/" .. name .. ".md", "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
end

local matrix_configs = {
  { name = "none", config = "none", label = "no profiler" },
  { name = "tecs1", config = "tecs1", label = "tecs-profile 1 ms", requested = 1000 },
  { name = "tecs10", config = "tecs10", label = "tecs-profile 10 ms", requested = 100 },
  { name = "jpf", config = "jpf", label = "jit.p f, 1 ms", requested = 1000 },
  { name = "jpG", config = "jpG", label = "jit.p Gf, 1 ms", requested = 1000 },
  { name = "lua", config = "lua", label = "pure-Lua sampler 1 ms", requested = 1000 },
}

local header = "| workload | profiler | wall s | wall over | CPU s | CPU over | CPU spread | samples/s (req.) | µs/sample | aborts Δ | mcode-full Δ | stop ms |"
local rule = "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"

local function row_cells(workload, c, s)
  return string.format("| %s | %s | %s | %s | %s | %s | %s | %s%s | %s | %s | %s | %s |",
    workload, c.label, fmt(s.wall, "%.3f"), c.name == "none" and "" or fmt(s.wall_over, "%+.1f%%"),
    fmt(s.cpu, "%.3f"), c.name == "none" and "" or fmt(s.cpu_over, "%+.1f%%"), fmt(s.spread, "%.0f%%"),
    c.name == "none" and "" or fmt(s.rate, "%.0f"), c.requested and (" (" .. c.requested .. ")") or "",
    c.name == "none" and "" or fmt(s.per_sample_us, "%.1f"),
    c.name == "none" and "" or fmt(s.aborts, "%+d"), c.name == "none" and "" or fmt(s.mcode_full, "%+d"),
    c.name == "none" and "" or fmt(s.stop_ms, "%.1f"))
end

local function matrix(names)
  if #names == 0 then names = workloads.order end
  local md = { header, rule }
  print(header) print(rule)
  for _, w in ipairs(names) do
    local runs = run_alternating(w, matrix_configs)
    for _, c in ipairs(matrix_configs) do
      local s = summarise(runs[c.name], runs.none)
      local line = row_cells(w, c, s)
      print(line) io.stdout:flush()
      md[#md + 1] = line
    end
  end
  write_fragment("matrix", md)
end

local function persample()
  local timing = os.getenv("BENCH_TIMING_CPATH")
  local configs = {
    { name = "none", config = "none", label = "no profiler" },
    { name = "tecs", config = "tecs0.1", label = "tecs-profile 0.1 ms" },
    { name = "lua", config = "lua@0.1", label = "pure-Lua sampler, 0.1 ms timer" },
    { name = "jpG", config = "jpG@0.1", label = "jit.p Gf, 0.1 ms timer" },
    { name = "empty", config = "empty@0.1", label = "empty SIGPROF handler (the floor), 0.1 ms timer" },
  }
  if timing then
    configs[#configs + 1] = { name = "split", config = "tecs0.1", label = "tecs-profile 0.1 ms, timed build",
      env = "LUA_CPATH=" .. shell_quote(timing) }
  end
  local h = "| depth | profiler | samples/s | µs/sample | ratio to tecs-profile |"
  local md = { h, "|---:|---|---:|---:|---:|" }
  local h2 = "| depth | total µs/sample | signal delivery (floor) | rest of LuaJIT's path: hook, trace exit, re-entry | LuaJIT dumpstack | our bookkeeping | bookkeeping share |"
  local md2 = { h2, "|---:|---:|---:|---:|---:|---:|---:|" }
  print(h) print(md[2])
  for _, w in ipairs({ "deep16", "deep64", "deep200" }) do
    local runs = run_alternating(w, configs)
    local sums = {}
    for _, c in ipairs(configs) do sums[c.name] = summarise(runs[c.name], runs.none) end
    local tecs = sums.tecs.per_sample_us
    local depth = w:match("%d+")
    for _, c in ipairs(configs) do
      if c.name ~= "none" and c.name ~= "split" then
        local s = sums[c.name]
        local line = string.format("| %s | %s | %.0f | %s | %s |", depth, c.label, s.rate,
          fmt(s.per_sample_us, "%.1f"), fmt(s.per_sample_us / tecs, "%.2fx"))
        print(line) io.stdout:flush()
        md[#md + 1] = line
      end
    end
    local sp = sums.split
    local floor = sums.empty.per_sample_us
    if sp and sp.samples > 0 then
      local cbu, dumpu = sp.callback_ns / sp.samples / 1e3, sp.dump_ns / sp.samples / 1e3
      local own = cbu - dumpu
      md2[#md2 + 1] = string.format("| %s | %s | %s | %s | %s | %s | %s |", depth, fmt(tecs, "%.1f"), fmt(floor, "%.1f"),
        fmt(tecs - floor - cbu, "%.1f"), fmt(dumpu, "%.2f"), fmt(own, "%.2f"), fmt(own / tecs * 100, "%.1f%%"))
    end
  end
  print() print(h2) print(md2[2])
  for i = 3, #md2 do print(md2[i]) end
  md[#md + 1] = ""
  for _, l in ipairs(md2) do md[#md + 1] = l end
  write_fragment("persample", md)
end

local function zones()
  local p = assert(io.popen(LUAJIT .. " " .. shell_quote(bench_dir .. "/zones.lua") .. " 2>&1"))
  local out = p:read("*a")
  p:close()
  io.write(out)
  write_fragment("zones", { out })
end

local cmd = arg[1] or "matrix"
local rest = {}
for i = 2, #arg do rest[#rest + 1] = arg[i] end
if cmd == "matrix" then matrix(rest)
elseif cmd == "persample" then persample()
elseif cmd == "zones" then zones()
else
  io.stderr:write("bench.lua: unknown command ", cmd, " (matrix, persample, zones)\n")
  os.exit(2)
end
