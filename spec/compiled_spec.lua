-- Compiled code at the defaults: the tick handler reads the stack of the
-- trace it interrupts (crates/recorder/src/trace_decoder/), so a sample lands on the
-- line the trace runs, with the frames it inlined, where LuaJIT's own
-- safe-point sample lands where the trace next checks or exits. Truths
-- are timed in the session's pauses (spec/support/sampling.lua).
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local sampling = require("spec.support.sampling")
local collapsed = require("spec.support.collapsed")

local ROUNDS = 6
local FILE = "spec/compiled_spec.lua"

-- Two compiled loops in one function, on lines of their own.
local function two_loops(na, nb)
  local a, b = 0, 0
  for i = 1, na do a = a + (i % 13) * 0.25 end
  for i = 1, nb do b = b + (i % 11) * 0.75 end
  return a + b
end
local LOOP_A = debug.getinfo(two_loops, "S").linedefined + 2
local LOOP_B = LOOP_A + 1

-- A compiled loop whose function ends in table.concat, and other work.
-- Not a tail call: a C function reached by one runs in its caller's frame,
-- which is gone from the stack whenever the call is not compiled (BENCHMARKS.md,
-- "Compiled code read in the handler").
local function joined(n)
  local t = {}
  for i = 1, n do t[i] = i * 2 end
  local s = table.concat(t, ",")
  return s
end
local function other(n)
  local s = 0
  for i = 1, n do s = s + (i % 7) * 0.5 end
  return s
end

-- Whether the handler reads compiled code in this build (x86-64 GC64
-- builds of LuaJIT 2.1 with mcode offsets in their snapshots, which all
-- three LuaJITs of the suite are).
local function exact_expected()
  return jit.arch == "x64" and jit.os == "Linux"
end


-- Samples by the first frame (from the leaf) that `classify` names.
local function shares(text, names, classify)
  local counts, total = {}, 0
  for _, name in ipairs(names) do counts[name] = 0 end
  for _, r in ipairs(collapsed.parse(text)) do
    for k = #r.frames, 1, -1 do
      local hit = classify((r.frames[k]:gsub("_%[%u%]$", "")))
      if hit then
        counts[hit] = counts[hit] + r.count
        total = total + r.count
        break
      end
    end
  end
  local got = {}
  for _, name in ipairs(names) do got[name] = total > 0 and counts[name] / total or 0 end
  return got, counts, total
end

-- Profiles `work` at the defaults in ROUNDS stretches of `seconds` CPU
-- time, timing the truth with `measure` in the pauses; checks each share.
local function check(names, measure, work, classify, seconds)
  local s = profile.sample()
  local want, again = sampling.interleaved(s, ROUNDS, measure, function()
    sampling.for_cpu(seconds / ROUNDS, work)
  end)
  local text = s:stop()
  local st = s:stats()
  if exact_expected() then
    assert.equal("exact", st.precision, tostring(st.compiledNote))
    assert.is_true(st.compiledSamples > 0, "no sample read in the handler")
  end
  local got, counts, n = shares(text, names, classify)
  local report = {}
  for _, name in ipairs(names) do
    report[#report + 1] = string.format("%s %.1f%% (truth %.1f%% / %.1f%%, %d samples)", name, 100 * got[name],
      100 * want[name], 100 * again[name], counts[name])
  end
  local msg = string.format("%s [%s, %s]", table.concat(report, "; "), st.clock, st.precision)
  print(msg)
  for _, name in ipairs(names) do
    sampling.check_share(name .. " (" .. msg .. ")", got[name], (want[name] + again[name]) / 2, n,
      math.abs(want[name] - again[name]))
  end
end

describe("compiled code at the defaults", function()
  after_each(function()
    sessions.stop_all()
  end)

  it("puts a sample on the line of the loop the trace runs", function()
    local na = sampling.calibrate(function(n) two_loops(n, 0) end, 0.0035)
    local nb = sampling.calibrate(function(n) two_loops(0, n) end, 0.0015)
    check({ "a", "b" }, function()
      return sampling.time_parts({ a = function() two_loops(na, 0) end, b = function() two_loops(0, nb) end }, 0.2)
    end, function() two_loops(sampling.jitter(na), sampling.jitter(nb)) end, function(f)
      if f == FILE .. ":" .. LOOP_A then return "a" end
      if f == FILE .. ":" .. LOOP_B then return "b" end
    end, 3)
  end)

  it("keeps the time of a function that ends in table.concat in that function", function()
    local nj = sampling.calibrate(joined, 0.0025)
    local no = sampling.calibrate(other, 0.0025)
    local jfirst, jlast = debug.getinfo(joined, "S").linedefined, debug.getinfo(joined, "S").lastlinedefined
    local ofirst, olast = debug.getinfo(other, "S").linedefined, debug.getinfo(other, "S").lastlinedefined
    local clock = sampling.cpu
    local function step(times)
      local c0 = clock()
      joined(sampling.jitter(nj))
      local c1 = clock()
      other(sampling.jitter(no))
      times.joined, times.other = times.joined + c1 - c0, times.other + clock() - c1
    end
    check({ "joined", "other" }, function()
      -- Timed in the loop the profile runs, each call between two clock
      -- reads: the same traces as under the profiler.
      local times = { joined = 0, other = 0 }
      sampling.for_cpu(0.3, function() step(times) end)
      local total = times.joined + times.other
      return { joined = times.joined / total, other = times.other / total }
    end, function() step({ joined = 0, other = 0 }) end, function(f)
      local line = tonumber(f:match("^" .. FILE:gsub("%p", "%%%0") .. ":(%d+)"))
      if not line then return nil end
      if line >= jfirst and line <= jlast then return "joined" end
      if line >= ofirst and line <= olast then return "other" end
    end, 3)
  end)

  it("reads a C function's callers at the tick, as LuaJIT's hook finds them", function()
    -- The same C-heavy loop under the hook (line precision) and read
    -- in the handler: the same stacks, whatever their counts.
    local t = {}
    for i = 1, 200 do t[i] = (i * 7919) % 1009 end
    local function sorted() local c = {} for i = 1, #t do c[i] = t[i] end table.sort(c) return c[1] end
    local function stacks(precision)
      local s = profile.sample({ precision = precision })
      sampling.until_samples(s, 400, sorted)
      local set = {}
      for _, r in ipairs(collapsed.parse(s:stop())) do
        if r.frames[#r.frames]:find("table.sort", 1, true) then set[table.concat(r.frames, ";")] = true end
      end
      return set, s:stats()
    end
    local runs = {}
    for _, precision in ipairs({ "line", "auto" }) do runs[precision] = { stacks(precision) } end
    local hooked, read, st = runs.line[1], runs.auto[1], runs.auto[2]
    if exact_expected() then assert.equal("exact", st.precision) end
    local shared = 0
    for k in pairs(read) do
      if hooked[k] then shared = shared + 1 end
    end
    assert.is_true(next(read) ~= nil and shared > 0, "no table.sort stack in common")
    for k in pairs(read) do
      assert.is_true(hooked[k] ~= nil or k:find("sampling.lua", 1, true) ~= nil, "read in the handler only: " .. k)
    end
  end)

  it("says in stats() how compiled code was read, and why not when it was not", function()
    local s = profile.sample({ precision = "function" })
    local st = s:stats()
    s:stop()
    assert.equal("function", st.precision)
    assert.is_string(st.compiledNote)
    assert.equal(0, st.compiledSamples)
    assert.equal(st.samples, st.hookSamples)
    s = profile.sample()
    sampling.until_samples(s, 100, function() two_loops(1000, 1000) end)
    st = s:stats()
    s:stop()
    assert.equal(st.samples, st.compiledSamples + st.hookSamples, "every sample is the handler's or the hook's")
    if exact_expected() then
      assert.equal("exact", st.precision)
      assert.is_nil(st.compiledNote)
      assert.is_table(st.compiledMisses)
      for _, k in ipairs({ "trace", "address", "frame", "function", "full" }) do
        assert.is_number(st.compiledMisses[k], k)
      end
    else
      assert.equal("function", st.precision)
      assert.is_string(st.compiledNote)
    end
  end)
end)
