--- Benchmark workloads. Each entry is `function(scale) ... end` doing a fixed
-- amount of work (about 0.3 s of CPU time unprofiled at scale 1 on
-- a current x86-64 core)
-- and returning a value that depends on all of it, so nothing is optimised
-- away. Every workload is deterministic: the same work on every run.
local zone = require("jit.zone")

local W = {}

-- Known proportions under zones: 50% / 30% / 20% of the work in three
-- functions, each under its own zone.
local function spin(n)
  local x = 0
  for i = 1, n do x = (x + i * 7) % 1000003 end
  return x
end
local function part_a(n) return spin(n) end
local function part_b(n) return spin(n) end
local function part_c(n) return spin(n) end

function W.zones(scale)
  local acc = 0
  for _ = 1, math.floor(4500 * scale) do
    zone("frame")
    zone("A") acc = acc + part_a(5000) zone()
    zone("B") acc = acc + part_b(3000) zone()
    zone("C") acc = acc + part_c(2000) zone()
    zone()
  end
  return acc
end

-- Deep recursion: the work happens at the bottom of a stack `depth` frames
-- deep (plus the harness frames above it).
local function make_deep(depth)
  local function leaf(n)
    local x = 0
    for i = 1, n do x = (x + i * 3) % 999983 end
    return x
  end
  local rec
  rec = function(d, n)
    if d <= 1 then return leaf(n) end
    return rec(d - 1, n) + 1 -- not a tail call: the frame stays
  end
  return function(scale)
    local acc = 0
    for _ = 1, math.floor(4200 * scale) do acc = acc + rec(depth, 10000) end
    return acc
  end
end
W.deep16 = make_deep(16)
W.deep64 = make_deep(64)
W.deep200 = make_deep(200)

-- Strings, garbage and C functions: concatenation, string.format, gsub,
-- table.concat, table.sort with a Lua comparator, fresh tables per item.
function W.gc(scale)
  local acc = 0
  for round = 1, math.floor(840 * scale) do
    local parts = {}
    for i = 1, 400 do
      local s = string.format("%d:%s", i * round, ("x"):rep(i % 17))
      s = s:gsub("x", "y") .. tostring(i)
      parts[#parts + 1] = { name = s, len = #s }
    end
    table.sort(parts, function(a, b) return a.len < b.len or (a.len == b.len and a.name < b.name) end)
    local names = {}
    for i = 1, #parts do names[i] = parts[i].name end
    acc = acc + #table.concat(names, ",") + collectgarbage("count") % 7
  end
  return acc
end

-- Interpreter-bound: the JIT is off, and two coroutines hand values back
-- and forth.
function W.interp(scale)
  local was_on = jit.status()
  jit.off()
  local co = coroutine.wrap(function(x)
    while true do
      local s = 0
      for i = 1, 50 do s = s + (x * i) % 13 end
      x = coroutine.yield(s)
    end
  end)
  local acc = 0
  for i = 1, math.floor(770000 * scale) do acc = acc + co(i) end
  if was_on then jit.on() end
  return acc
end

-- Recording-heavy: thousands of distinct small hot loops made with
-- loadstring, each run just long enough to be recorded, so the JIT spends
-- most of its time recording and compiling new traces.
function W.record(scale)
  local acc = 0
  local n = math.floor(18000 * scale)
  for k = 1, n do
    local src = string.format([[
      local x, c = 0, %d
      for i = 1, 300 do x = (x + i * c) %% 65521 end
      return x]], k)
    local f = assert(loadstring(src, "=loop" .. k))
    acc = acc + f()
  end
  return acc
end

--- Names in the order the benchmark runs them.
W.order = { "zones", "deep16", "deep64", "deep200", "gc", "interp", "record" }

return W
