-- Interpreted code at the defaults: the tick handler reads the stack from
-- the interpreter's registers (crates/recorder/src/trace_decoder/interp.rs), so no
-- profiler hook is set for a tick in interpreted code. The samples it
-- reads must be charged as LuaJIT's hook charges them (line precision)
-- and as the truth, and name the same frames and lines.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local sampling = require("spec.support.sampling")
local collapsed = require("spec.support.collapsed")

local ROUNDS = 6
local FILE = "spec/interp_spec.lua"

-- Two interpreted functions (the JIT is off for them alone: the session's
-- probe still compiles its own loop), each a part of its own.
local function heavy(n)
  local s = 0
  for i = 1, n do s = (s + i * 7) % 1000003 end
  return s
end
local function light(n)
  local s = 0
  for i = 1, n do s = (s + i * 3) % 999983 end
  return s
end

-- A deterministic interpreted call chain: outer calls mid on one line,
-- mid calls inner on one line, and each has work of its own.
local function inner(n)
  local s = 0
  for i = 1, n do s = (s + i) % 65521 end
  return s
end
local function mid(n)
  local s = 0
  for i = 1, n do s = (s + i * 5) % 65519 end
  local r = inner(n * 2)
  return s + r
end
local function outer(n)
  local s = 0
  for i = 1, n do s = (s + i * 11) % 65497 end
  local r = mid(n)
  return s + r
end

for _, f in ipairs({ heavy, light, inner, mid, outer }) do jit.off(f, true) end

-- Whether the handler reads interpreted code in this build (x86-64 GC64
-- builds of LuaJIT 2.1, which all three LuaJITs of the suite are).
local function exact_expected()
  return jit.arch == "x64" and jit.os == "Linux"
end

local function lines_of(f)
  local info = debug.getinfo(f, "S")
  return info.linedefined, info.lastlinedefined
end


-- Samples by the first frame (from the leaf) in one of the parts' lines.
local function shares(text, parts)
  local counts, total = {}, 0
  for name in pairs(parts) do counts[name] = 0 end
  for _, r in ipairs(collapsed.parse(text)) do
    for k = #r.frames, 1, -1 do
      local line = tonumber((r.frames[k]:gsub("_%[%u%]$", "")):match("^" .. FILE:gsub("%p", "%%%0") .. ":(%d+)$"))
      local hit
      for name, f in pairs(parts) do
        local first, last = lines_of(f)
        if line and line >= first and line <= last then hit = name end
      end
      if hit then
        counts[hit] = counts[hit] + r.count
        total = total + r.count
        break
      end
    end
  end
  local got = {}
  for name in pairs(parts) do got[name] = total > 0 and counts[name] / total or 0 end
  return got, counts, total
end

-- Profiles heavy and light (about 70/30 of the time) at `precision` in
-- ROUNDS stretches, timing the truth in the pauses; checks each share and
-- returns the session's stats.
local function check_shares(precision, nh, nl)
  local parts = { heavy = heavy, light = light }
  local s = profile.sample({ precision = precision })
  local want, again = sampling.interleaved(s, ROUNDS, function()
    return sampling.time_parts({ heavy = function() heavy(nh) end, light = function() light(nl) end }, 0.2)
  end, function()
    sampling.for_cpu(2 / ROUNDS, function() heavy(sampling.jitter(nh)) light(sampling.jitter(nl)) end)
  end)
  local text = s:stop()
  local st = s:stats()
  local got, counts, n = shares(text, parts)
  local msg = string.format("heavy %.1f%% (truth %.1f%%, %d samples), light %.1f%% (truth %.1f%%) [%s, %s]",
    100 * got.heavy, 100 * (want.heavy + again.heavy) / 2, counts.heavy, 100 * got.light,
    100 * (want.light + again.light) / 2, st.clock, st.precision)
  print(msg)
  for name in pairs(parts) do
    sampling.check_share(name .. " (" .. msg .. ")", got[name], (want[name] + again[name]) / 2, n,
      math.abs(want[name] - again[name]))
  end
  return st, got, n
end

-- Whether `frames` (root first) ends in one of the chain's true stacks:
-- the frames in the chain's lines are outer's, then mid's from outer's
-- call line, then inner's from mid's call line.
local CALL_MID, CALL_INNER = lines_of(outer) + 3, lines_of(mid) + 3
local function true_chain_stack(frames)
  local at = {}
  for _, f in ipairs(frames) do
    local line = tonumber((f:gsub("_%[%u%]$", "")):match("^" .. FILE:gsub("%p", "%%%0") .. ":(%d+)$"))
    if line then at[#at + 1] = line end
  end
  local fns = { outer, mid, inner }
  -- The chain's frames are the last ones of this file (the spec's own
  -- frames lie below them).
  local start = #at
  while start > 1 do
    local first, last = lines_of(outer)
    if at[start] >= first and at[start] <= last then break end
    start = start - 1
  end
  local chain = {}
  for k = start, #at do chain[#chain + 1] = at[k] end
  if #chain == 0 or #chain > 3 then return false end
  for k, line in ipairs(chain) do
    local first, last = lines_of(fns[k])
    if line < first or line > last then return false end
    if k < #chain and line ~= (k == 1 and CALL_MID or CALL_INNER) then return false end
  end
  return true
end

describe("interpreted code at the defaults", function()
  after_each(function()
    sessions.stop_all()
  end)

  it("is read in the handler and charged as the truth, as at line precision", function()
    local nh = sampling.calibrate(heavy, 0.0035)
    local nl = sampling.calibrate(light, 0.0015)
    local st, exact, n = check_shares(nil, nh, nl)
    if exact_expected() then
      assert.equal("exact", st.precision, tostring(st.compiledNote))
      assert.is_nil(st.interpNote)
      -- Interpreted work: most ticks are read in the handler, not hooked.
      assert.is_true(st.interpSamples > st.recordedSamples / 2,
        string.format("%d of %d samples read in the handler", st.interpSamples, st.recordedSamples))
    end
    local st_line, line, m = check_shares("line", nh, nl)
    assert.equal("line", st_line.precision)
    assert.equal(0, st_line.interpSamples)
    -- The two precisions agree with each other within their sampling error.
    local p = (exact.heavy * n + line.heavy * m) / (n + m)
    local tol = sampling.tolerance_two(p, n, m)
    assert.is_true(math.abs(exact.heavy - line.heavy) <= tol, string.format(
      "heavy: %.1f%% read in the handler, %.1f%% at line precision (bound %.1f)", 100 * exact.heavy,
      100 * line.heavy, 100 * tol))
  end)

  it("names the frames and lines LuaJIT's hook names", function()
    local n = sampling.calibrate(outer, 0.002)
    local function run(precision)
      local s = profile.sample({ precision = precision })
      sampling.until_samples(s, 600, function() outer(n) end)
      local text = s:stop()
      return collapsed.parse(text), s:stats()
    end
    for _, precision in ipairs({ "line", "auto" }) do
      local records, st = run(precision)
      local chain, bad = 0, {}
      for _, r in ipairs(records) do
        local leaf = r.frames[#r.frames]
        local line = tonumber((leaf:gsub("_%[%u%]$", "")):match("^" .. FILE:gsub("%p", "%%%0") .. ":(%d+)$"))
        local first = lines_of(inner)
        local _, last = lines_of(outer)
        -- Samples whose leaf is a line of the chain (inner, mid, outer).
        if line and line >= first and line <= last then
          chain = chain + r.count
          if not true_chain_stack(r.frames) then bad[#bad + 1] = table.concat(r.frames, ";") end
        end
      end
      assert.is_true(chain >= 300, string.format("%s: %d samples in the chain", precision, chain))
      assert.same({}, bad, precision .. ": stacks that are not the chain's")
      if precision == "auto" and exact_expected() then
        assert.is_true(st.interpSamples >= chain / 2,
          string.format("%d of %d samples in the chain read in the handler", st.interpSamples, chain))
      end
    end
  end)

  it("says in stats() how interpreted code was read, and why not when it was not", function()
    local s = profile.sample({ precision = "line" })
    local st = s:stats()
    s:stop()
    assert.is_string(st.interpNote)
    assert.equal(0, st.interpSamples)
    s = profile.sample()
    sampling.until_samples(s, 100, function() heavy(1000) end)
    st = s:stats()
    s:stop()
    if exact_expected() then
      assert.is_nil(st.interpNote)
      for _, k in ipairs({ "helper", "registers", "builtin", "frame", "full" }) do
        assert.is_number(st.interpMisses[k], k)
      end
      for _, k in ipairs({ "trace", "exit", "cFunction", "frame", "full" }) do
        assert.is_number(st.stateMisses[k], k)
      end
      assert.is_true(st.stateSamples <= st.compiledSamples)
      local hooked = 0
      for _, k in ipairs({ "compiled", "interpreted", "c", "gc", "jit", "wake" }) do
        assert.is_number(st.hookTicks[k], k)
        hooked = hooked + st.hookTicks[k]
      end
      -- Every tick the handler gave to the hook is counted by its state.
      assert.is_true(st.hookSamples <= hooked, string.format("%d hook samples, %d ticks hooked", st.hookSamples,
        hooked))
      assert.is_true(st.interpSamples <= st.compiledSamples)
    else
      assert.is_string(st.interpNote)
    end
  end)
end)
