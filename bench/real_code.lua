--- Real libraries nobody here wrote, with hot compiled code, profiled three
-- ways: tecs-profile at its defaults, at line precision, and LuaJIT's own
-- sampler in function mode with a Lua callback at 1 ms (what `jit.p` does).
-- Prints each function's self share (the samples whose innermost Lua frame
-- lies in it; a C function's time stays with its caller, as in `jit.p`)
-- and marks the functions whose shares differ by more than 5 points
-- between two of the three. Writes the table to $BENCH_OUT/real_code.md.
--
--   luajit bench/real_code.lua [workload ...]
--
-- Workloads: `binaryheap`, `binaryheap-reused` and `basexx` (Debian's
-- lua-binaryheap and lua-basexx), `jumper` (the pathfinding library Jumper, from a checkout
-- JUMPER_DIR names; not part of this repository). REAL_SECONDS: CPU
-- seconds per profile (default 4).
local profile = require("tecs.profile")
local jprofile = require("jit.profile")
local funcmap = require("tecs.profile.funcmap")
local collapsed = dofile("spec/support/collapsed.lua")
local sampling = dofile("spec/support/sampling.lua")
local OUT = os.getenv("BENCH_OUT") or "build/bench"
local SECONDS = tonumber(os.getenv("REAL_SECONDS") or "") or 4

local workloads = {}

-- A min-heap of 2,000 keys filled and emptied, and a unique heap whose
-- entries are updated as a shortest-path search updates its frontier.
local function heap_round(h, u, rand)
  for _ = 1, 2000 do h:insert(rand() % 100000) end
  local s = 0
  while h:peek() do s = s + h:pop() end
  for i = 1, 1000 do u:insert(rand() % 100000, i) end
  for _ = 1, 1000 do
    local p = rand() % 1000 + 1
    if u:valueByPayload(p) then u:update(p, rand() % 100000) end
  end
  while u:peek() do s = s + select(2, u:pop()) end
  return s
end

local function heap_workload(reused)
  return function()
    local binaryheap = require("binaryheap")
    math.randomseed(1)
    local function rand() return math.random(0, 2147483647) end
    local h, u = binaryheap.minHeap(), binaryheap.minUnique()
    return function()
      if not reused then h, u = binaryheap.minHeap(), binaryheap.minUnique() end
      return heap_round(h, u, rand)
    end
  end
end

-- New heaps each round; and the heaps made once and emptied each round:
-- their methods (closures made per heap) are then the same functions
-- every time, which the traces hold as constants.
workloads.binaryheap = heap_workload(false)
workloads["binaryheap-reused"] = heap_workload(true)

-- base64, base32 and hex of an 8 KB string, both ways.
workloads.basexx = function()
  local basexx = require("basexx")
  local bytes = {}
  for i = 1, 8192 do bytes[i] = string.char((i * 7919) % 256) end
  local data = table.concat(bytes)
  return function()
    local a = basexx.from_base64(basexx.to_base64(data))
    local b = basexx.from_base32(basexx.to_base32(data))
    local c = basexx.from_hex(basexx.to_hex(data))
    return #a + #b + #c
  end
end

-- A* on a 120x120 grid with one cell in eight a wall (a fixed pseudo-random map), between far-apart cells
-- it connects. (One finder: Jumper's four finders in turn, recompiled
-- after any flush, a profiler's start's too, outgrow the trace cache and
-- flush it again and again, unprofiled too; see BENCHMARKS.md, "Real code,
-- inside traces", and bench/jit_decisions.lua.)
workloads.jumper = function() return dofile("bench/jumper.lua").rounds({ "ASTAR" }) end

-- Function ranges of each file met, innermost first.
local ranges = {}
local function function_of(file, line)
  local r = ranges[file]
  if r == nil then
    local entry = funcmap.for_file(file)
    r = {}
    if entry then
      for _, f in ipairs(entry) do r[#r + 1] = f end
      table.sort(r, function(a, b) return (a[2] - a[1]) < (b[2] - b[1]) end)
    end
    ranges[file] = r
  end
  for _, f in ipairs(r) do
    if line >= f[1] and line <= f[2] then return f[3] end
  end
  return "(main chunk) " .. file
end

-- Self shares by function: the innermost frame of the form `file:line`, or
-- a sample of compiled code LuaJIT's hook took and named by its function
-- only (`file:first-last`). Returns counts, total and those hook samples.
local function self_shares(text, only_file)
  local counts, total, hooked = {}, 0, 0
  for _, row in ipairs(collapsed.parse(text)) do
    local hooked_file, first = row.frames[#row.frames]:match("^(.+):(%d+)%-%d+$")
    if hooked_file then
      -- LuaJIT's hook named the function only: its self time, at no line.
      local f = only_file(hooked_file) and function_of(hooked_file, tonumber(first)) or "(elsewhere)"
      counts[f] = (counts[f] or 0) + row.count
      total = total + row.count
      hooked = hooked + row.count
    end
    for i = #row.frames, 1, -1 do
      if hooked_file then break end
      local file, line = row.frames[i]:gsub("_%[%u%]$", ""):match("^(.+):(%d+)$")
      if file then
        if only_file(file) then
          local f = function_of(file, tonumber(line))
          counts[f] = (counts[f] or 0) + row.count
        else
          counts["(elsewhere)"] = (counts["(elsewhere)"] or 0) + row.count
        end
        total = total + row.count
        break
      end
    end
  end
  return counts, total, hooked
end

local function ours(step, precision)
  local s = profile.sample({ precision = precision })
  sampling.for_cpu(SECONDS, step)
  local text = s:stop()
  return text, s:stats()
end

local function jit_p_f(step)
  local counts = {}
  jprofile.start("fi1", function(thread, samples)
    local stack = jprofile.dumpstack(thread, "pl;", -100):gsub(";$", "")
    counts[stack] = (counts[stack] or 0) + samples
  end)
  sampling.for_cpu(SECONDS, step)
  jprofile.stop()
  local lines = {}
  for stack, c in pairs(counts) do lines[#lines + 1] = stack .. "_[N] " .. c .. "\n" end
  return table.concat(lines)
end

local names = {}
for i = 1, #(arg or {}) do names[#names + 1] = arg[i] end
if #names == 0 then names = { "binaryheap", "binaryheap-reused", "basexx", "jumper" } end
local rows = { "| library | function | defaults | line | jit.p f | largest difference |", "|---|---|---:|---:|---:|---:|" }
for _, name in ipairs(names) do
  local step, why = workloads[name]()
  if not step then
    io.stderr:write(name, ": skipped (", why, ")\n")
  else
    local here = debug.getinfo(1, "S").short_src
    local function library(file) return file ~= here and not file:find("sampling.lua", 1, true) end
    sampling.for_cpu(0.5, step) -- warm: the traces exist before any profile
    local columns, stats = {}, nil
    local a, st = ours(step)
    stats = st
    columns[1] = { self_shares(a, library) }
    columns[2] = { self_shares((ours(step, "line")), library) }
    columns[3] = { self_shares(jit_p_f(step), library) }
    local fns = {}
    for _, c in ipairs(columns) do
      for f, n in pairs(c[1]) do
        if n / c[2] >= 0.02 then fns[f] = true end
      end
    end
    local list = {}
    for f in pairs(fns) do list[#list + 1] = f end
    local function share(k, f) return (columns[k][1][f] or 0) / math.max(columns[k][2], 1) end
    table.sort(list, function(x, y) return share(1, x) > share(1, y) end)
    for i, f in ipairs(list) do
      local s = { share(1, f), share(2, f), share(3, f) }
      local d = math.max(s[1], s[2], s[3]) - math.min(s[1], s[2], s[3])
      rows[#rows + 1] = string.format("| %s | %s | %.1f%% | %.1f%% | %.1f%% | %s%.1f |", i == 1 and name or "",
        f:gsub("|", "\\|"), 100 * s[1], 100 * s[2], 100 * s[3], d > 0.05 and "**" or "", 100 * d)
      if d > 0.05 then rows[#rows] = rows[#rows] .. "**" end
    end
    local m = stats.traceMap or {}
    io.stderr:write(string.format("%s: n = %d / %d / %d; at the defaults %d named by function only (placed %s, at a snapshot %s, no map %s)\n",
      name, columns[1][2], columns[2][2], columns[3][2], columns[1][3], tostring(m.placed), tostring(m.atSnapshot), tostring(m.noMap)))
  end
end
local text = table.concat(rows, "\n") .. "\n"
io.write(text)
os.execute("mkdir -p '" .. OUT .. "'")
local f = io.open(OUT .. "/real_code.md", "w")
if f then f:write(text) f:close() end
