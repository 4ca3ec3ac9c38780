--- Real libraries nobody here wrote, with hot compiled code, profiled three
-- ways: tecs-profile at its defaults, at line precision, and LuaJIT's own
-- sampler in function mode with a Lua callback at 1 ms (what `jit.p` does).
-- Prints each function's self share (the samples whose innermost Lua frame
-- lies in it; a C function's time stays with its caller, as in `jit.p`)
-- and marks the functions whose shares differ by more than 5 points
-- between two of the three. Then holds the hot functions to a truth by
-- marginal cost, as spec/fixtures/families.lua does for its loops: each
-- workload's round is timed unprofiled, in the pauses between the
-- profiled stretches, against the same round with one function replaced by
-- a stand-in that gives the same results without its work (a lookup, or a
-- replay of the swaps the function made), in turn; the function's share
-- is the time the stand-in saves. Writes both tables to
-- $BENCH_OUT/real_code.md.
--
--   luajit bench/real_code.lua [workload ...]
--
-- Workloads: `binaryheap`, `binaryheap-reused` and `basexx` (Debian's
-- lua-binaryheap and lua-basexx), `jumper` (the pathfinding library Jumper, from a checkout
-- JUMPER_DIR names; not part of this repository). REAL_SECONDS: CPU
-- seconds per profile (default 4), a half of that again for each column's
-- truth.
local profile = require("tecs.profile")
local jprofile = require("jit.profile")
local funcmap = require("tecs.profile.funcmap")
local collapsed = dofile("spec/support/collapsed.lua")
local sampling = dofile("spec/support/sampling.lua")
local OUT = os.getenv("BENCH_OUT") or "build/bench"
local SECONDS = tonumber(os.getenv("REAL_SECONDS") or "") or 4
local ROUNDS = 6
local TRUTH_SECONDS = SECONDS / 2

local workloads = {}

--- A fresh copy of a library module loaded from its source, with text
-- inserted after each patch's target (`{ target, text }`); `__S` in that
-- text is `state`, and `...` is the module's name, as `require` gives.
-- The stand-ins of the truth are such copies.
local function library_copy(modname, state, patches)
  local path = assert(package.searchpath(modname, package.path))
  local f = assert(io.open(path))
  local src = f:read("*a")
  f:close()
  for _, p in ipairs(patches) do
    local _, b = src:find(p[1], 1, true)
    assert(b, "bench/real_code.lua: " .. modname .. " has changed: no " .. p[1])
    src = src:sub(1, b) .. p[2] .. src:sub(b + 1)
  end
  return assert(loadstring("local __S = select(2, ...) " .. src, "@" .. path .. " (copy)"))(modname, state)
end

-- A min-heap of 2,000 keys filled and emptied, and a unique heap whose
-- entries are updated as a shortest-path search updates its frontier.
-- Every round starts the random numbers again, so that the rounds timed
-- for the truth replay the same calls.
local function heap_round(h, u, rand)
  math.randomseed(1)
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

-- The same round without the library: the same random numbers drawn and
-- the same sums made from the values the heaps gave (`seq`, recorded).
local function harness_round(seq, rand)
  math.randomseed(1)
  for _ = 1, 2000 do seq.x = rand() % 100000 end
  local s, k = 0, 0
  for _ = 1, 2000 do k = k + 1 s = s + seq[k] end
  for _ = 1, 1000 do seq.x = rand() % 100000 end
  for _ = 1, 1000 do
    local p = rand() % 1000 + 1
    if p > 0 then seq.x = rand() % 100000 end
  end
  for _ = 1, 1000 do k = k + 1 s = s + seq[k] end
  return s
end

-- sinkDown's walk recorded (each step's child, 0 at its end), and two
-- stand-ins for it that make the same swaps from the record without
-- comparing anything; the second walks the record once more first, which
-- costs what the stand-in's own loop does (the truth adds it back).
local RECORD = { "      if min == pos then break end\n", "      __S.F[#__S.F + 1] = min\n" }
local RECORD_END = { "      if min == pos then", " __S.F[#__S.F + 1] = 0" }
local REPLAY = "    do local S = __S local F = S.F local i = S.i local c = F[i]"
  .. " while c ~= 0 do swap(self, pos, c) pos = c i = i + 1 c = F[i] end S.i = i + 1 return end\n"
local WALK = "    do local S = __S local F = S.F local j = S.i while F[j] ~= 0 do j = j + 1 end S.w = j end\n"
local SINK = "function heap:sinkDown(pos)\n"

local function heap_workload(reused)
  return function()
    local binaryheap = require("binaryheap")
    local function rand() return math.random(0, 2147483647) end
    local function stepper(lib)
      local h, u = lib.minHeap(), lib.minUnique()
      return function()
        if not reused then h, u = lib.minHeap(), lib.minUnique() end
        return heap_round(h, u, rand)
      end
    end
    local step = stepper(binaryheap)
    -- The record: one round through a copy that notes sinkDown's steps,
    -- and the values the harness summed.
    local rec = { F = {}, i = 1 }
    local seq = {}
    local recorder = library_copy("binaryheap", rec, { RECORD, RECORD_END })
    local hr, ur = recorder.minHeap(), recorder.minUnique()
    math.randomseed(1)
    for _ = 1, 2000 do hr:insert(rand() % 100000) end
    while hr:peek() do seq[#seq + 1] = hr:pop() end
    for i = 1, 1000 do ur:insert(rand() % 100000, i) end
    for _ = 1, 1000 do
      local p = rand() % 1000 + 1
      if ur:valueByPayload(p) then ur:update(p, rand() % 100000) end
    end
    while ur:peek() do seq[#seq + 1] = select(2, ur:pop()) end
    assert(#seq == 3000)
    local function replaying(extra)
      local st = { F = rec.F, i = 1 }
      local s = stepper(library_copy("binaryheap", st, { { SINK, extra .. REPLAY } }))
      return function() st.i = 1 return s() end
    end
    local variants = {
      all = step,
      replay = replaying(""),
      walk = replaying(WALK),
      harness = function() return harness_round(seq, rand) end,
    }
    -- Each stand-in's round sums the values the library's round pops.
    local want = step()
    for k, v in pairs(variants) do assert(v() == want, k .. ": not the library's round") end
    return step, {
      variants = variants,
      parts = {
        {
          name = "sinkDown, with the lt calls it makes",
          match = function(f, caller)
            return f:find("sinkDown (", 1, true) ~= nil or (f:find("^lt ") ~= nil and caller ~= nil and caller:find("sinkDown (", 1, true) ~= nil)
          end,
          truth = function(per) return (per.all - per.replay + math.max(0, per.walk - per.replay)) / per.all end,
        },
        {
          name = "the harness's loop (with `math.random`)",
          match = function(f) return f == "(elsewhere)" end,
          truth = function(per) return per.harness / per.all end,
        },
      },
    }
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
  local function stepper(lib)
    return function()
      local a = lib.from_base64(lib.to_base64(data))
      local b = lib.from_base32(lib.to_base32(data))
      local c = lib.from_hex(lib.to_hex(data))
      return #a + #b + #c
    end
  end
  -- Stand-ins that look the result up: number_to_bit's for 5 and 6 bits,
  -- to_bit's closure's for each byte, pure_from_bit's for each 8 bits.
  local st = { NB = { [5] = {}, [6] = {} }, TB = {}, PF = {} }
  for _, len in ipairs({ 5, 6 }) do
    for num = 0, 2 ^ len - 1 do
      local t = {}
      for k = len - 1, 0, -1 do t[#t + 1] = math.floor(num / 2 ^ k) % 2 end
      st.NB[len][num] = table.concat(t)
    end
  end
  for b = 0, 255 do
    local t = {}
    for k = 7, 0, -1 do t[#t + 1] = math.floor(b / 2 ^ k) % 2 end
    st.TB[string.char(b)] = table.concat(t)
    st.PF[table.concat(t)] = string.char(b)
  end
  -- Each stand-in gives the library's results.
  local function without(target, text)
    local lib = library_copy("basexx", st, { { target, text } })
    for _, k in ipairs({ "64", "32", "_hex" }) do
      local enc = basexx["to_base" .. k] and "to_base" .. k or "to" .. k
      local dec = enc:gsub("^to", "from")
      assert(lib[enc](data) == basexx[enc](data) and lib[dec](basexx[enc](data)) == data, target)
    end
    return stepper(lib)
  end
  local function own(name) return function(f) return f:find(name, 1, true) ~= nil end end
  local step = stepper(basexx)
  local variants = {
    all = step,
    nb = without("local function number_to_bit( num, length )\n", "   do return __S.NB[length][num] end\n"),
    tb = without("str:gsub( '.', function ( c )\n", "               do return __S.TB[c] end\n"),
    pf = without("str:gsub( '........', function ( cc )\n", "               do return __S.PF[cc] end\n"),
  }
  local function marginal(k) return function(per) return math.max(0, per.all - per[k]) / per.all end end
  return step, {
    variants = variants,
    parts = {
      { name = "number_to_bit", match = own("number_to_bit ("), truth = marginal("nb") },
      { name = "to_bit's closure", match = own("basexx.lua:72)"), truth = marginal("tb") },
      { name = "pure_from_bit's closure", match = own("basexx.lua:46)"), truth = marginal("pf") },
    },
  }
end

-- A* on a 120x120 grid with one cell in eight a wall (a fixed pseudo-random map), between far-apart cells
-- it connects. (One finder: Jumper's four finders in turn, recompiled
-- after any flush, a profiler's start's too, outgrow the trace cache and
-- flush it again and again, unprofiled too; see BENCHMARKS.md, "Real code,
-- inside traces", and bench/jit_decisions.lua.)
workloads.jumper = function()
  local jumper = dofile("bench/jumper.lua")
  local step, why = jumper.rounds({ "ASTAR" })
  if not step then return nil, why end
  -- isWalkableAt's stand-in looks the answer up (A* asks with walkable 0
  -- and no clearance); both variants of the truth find the method on the
  -- grid itself, the library's or the stand-in. A round of the truth is
  -- the four searches.
  local W = {}
  for y, row in ipairs(jumper.map()) do
    W[y] = {}
    for x, v in ipairs(row) do W[y][x] = v == 0 end
  end
  local function four(f) return function() local n = 0 for _ = 1, 4 do n = n + f() end return n end end
  local all = four(jumper.rounds({ "ASTAR" }, function(g) g.isWalkableAt = g.isWalkableAt end))
  local without = four(jumper.rounds({ "ASTAR" }, function(g) g.isWalkableAt = function(_, x, y) return W[y][x] end end))
  assert(all() == without(), "isWalkableAt's stand-in changed the paths")
  return step, {
    variants = { all = all, walkable = without },
    parts = {
      {
        name = "Grid:isWalkableAt",
        match = function(f) return f:find("isWalkableAt (", 1, true) ~= nil end,
        truth = function(per) return math.max(0, per.all - per.walkable) / per.all end,
      },
    },
  }
end

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

-- Samples by part of a workload's truth: each part's `match(f, caller)`
-- sees the innermost Lua frame's function and its caller's (as
-- self_shares names them). Returns counts by part name and the total.
local function part_counts(text, only_file, parts)
  local counts, total = {}, 0
  for _, p in ipairs(parts) do counts[p.name] = 0 end
  local function fn(frame)
    local file, line = frame:gsub("_%[%u%]$", ""):match("^(.+):(%d+)$")
    if not file then
      file, line = frame:match("^(.+):(%d+)%-%d+$")
    end
    if not file then return nil end
    return only_file(file) and function_of(file, tonumber(line)) or "(elsewhere)"
  end
  for _, row in ipairs(collapsed.parse(text)) do
    local f, caller
    for i = #row.frames, 1, -1 do
      local g = fn(row.frames[i])
      if g then
        if f then caller = g break end
        f = g
      end
    end
    if f then
      total = total + row.count
      for _, p in ipairs(parts) do
        if p.match(f, caller) then counts[p.name] = counts[p.name] + row.count break end
      end
    end
  end
  return counts, total
end

-- ROUNDS stretches of `step` under a sampler, the workload's variants timed
-- on the CPU clock in its pauses, in turn, a round each, so that a drift
-- in the machine's speed touches all alike. Returns each variant's
-- seconds per round.
local function interleaved(step, truth, pause, resume)
  local names = {}
  for k in pairs(truth and truth.variants or {}) do names[#names + 1] = k end
  table.sort(names)
  local time, calls = {}, {}
  for _, k in ipairs(names) do time[k], calls[k] = 0, 0 end
  for _ = 1, ROUNDS do
    if #names > 0 then
      pause()
      local t_end = sampling.cpu() + TRUTH_SECONDS / ROUNDS
      repeat
        for _, k in ipairs(names) do
          local t0 = sampling.cpu()
          truth.variants[k]()
          time[k] = time[k] + sampling.cpu() - t0
          calls[k] = calls[k] + 1
        end
      until sampling.cpu() >= t_end
      resume()
    end
    sampling.for_cpu(SECONDS / ROUNDS, step)
  end
  local per = {}
  for _, k in ipairs(names) do per[k] = time[k] / calls[k] end
  return per
end

local function ours(step, truth, precision)
  local s = profile.sample({ precision = precision })
  local per = interleaved(step, truth, function() s:pause() end, function() s:resume() end)
  local text = s:stop()
  return text, s:stats(), per
end

local function jit_p_f(step, truth)
  local counts = {}
  local function start()
    jprofile.start("fi1", function(thread, samples)
      local stack = jprofile.dumpstack(thread, "pl;", -100):gsub(";$", "")
      counts[stack] = (counts[stack] or 0) + samples
    end)
  end
  start()
  local per = interleaved(step, truth, jprofile.stop, start)
  jprofile.stop()
  local lines = {}
  for stack, c in pairs(counts) do lines[#lines + 1] = stack .. "_[N] " .. c .. "\n" end
  return table.concat(lines), per
end

local names = {}
for i = 1, #(arg or {}) do names[#names + 1] = arg[i] end
if #names == 0 then names = { "binaryheap", "binaryheap-reused", "basexx", "jumper" } end
local truth_rows = {
  "| library | part | truth (in the pauses of defaults, jit.p) | defaults | line | jit.p f |",
  "|---|---|---:|---:|---:|---:|",
}
local rows = { "| library | function | defaults | line | jit.p f | largest difference |", "|---|---|---:|---:|---:|---:|" }
for _, name in ipairs(names) do
  local step, truth = workloads[name]()
  local why = truth
  if not step then
    io.stderr:write(name, ": skipped (", why, ")\n")
  else
    local here = debug.getinfo(1, "S").short_src
    local function library(file) return file ~= here and not file:find("sampling.lua", 1, true) end
    sampling.for_cpu(0.5, step) -- warm: the traces exist before any profile
    local columns, stats = {}, nil
    local a, st, ta = ours(step, truth)
    stats = st
    local b, _, tb = ours(step, truth, "line")
    local c, tc = jit_p_f(step, truth)
    columns[1] = { self_shares(a, library) }
    columns[2] = { self_shares(b, library) }
    columns[3] = { self_shares(c, library) }
    if type(truth) == "table" then
      -- A pause at line precision leaves the traces' line checks in
      -- place, so that column is held to the mean of the other two
      -- columns' truths (as bench/inside_trace.lua does).
      local parts = truth.parts
      local counted = { { part_counts(a, library, parts) }, { part_counts(b, library, parts) }, { part_counts(c, library, parts) } }
      for i, p in ipairs(parts) do
        local t1, t3 = p.truth(ta), p.truth(tc)
        local t = (t1 + t3) / 2
        local function cell(k, want)
          local got = counted[k][1][p.name] / math.max(counted[k][2], 1)
          return string.format("%.1f%% (%+.1f)", 100 * got, 100 * (got - want))
        end
        truth_rows[#truth_rows + 1] = string.format("| %s | %s | %.1f%% (%.1f, %.1f) | %s | %s | %s |", i == 1 and name or "",
          p.name, 100 * t, 100 * t1, 100 * t3, cell(1, t1), cell(2, t), cell(3, t3))
      end
    end
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
local text = table.concat(rows, "\n") .. "\n\n" .. table.concat(truth_rows, "\n") .. "\n"
io.write(text)
os.execute("mkdir -p '" .. OUT .. "'")
local f = io.open(OUT .. "/real_code.md", "w")
if f then f:write(text) f:close() end
