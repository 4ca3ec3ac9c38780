-- What a session leaves of the program's compiled code. LuaJIT's profiler
-- stop flushes every trace; a session whose profiler ran in plain `i` mode
-- (the default, `exact` precision) compiled nothing into the traces, so its
-- stop holds that flush off and the program goes on with the code it
-- compiled. At function and line precision LuaJIT put profiler checks in
-- the traces, and the stop flushes them as LuaJIT does (docs/sampling.md,
-- Trace flushes at start and stop).
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local sampling = require("spec.support.sampling")
local util = require("jit.util")

-- Trace numbers that hold a trace now.
local function live_traces()
  local live = {}
  for n = 1, 4000 do
    if util.traceinfo(n) then live[#live + 1] = n end
  end
  return live
end

local function work()
  local s = 0
  for i = 1, 20000 do s = (s + i * 3) % 65521 end
  return s
end

-- Runs a session of `opts` over `work`; returns its stats, the traces
-- live before its stop, those of them live after it, and the flushes
-- LuaJIT reported during the stop.
local function stop_of(opts)
  local flushes = 0
  local function on_trace(what)
    if what == "flush" then flushes = flushes + 1 end
  end
  local s = profile.sample(opts)
  sampling.until_samples(s, 50, work)
  local st = s:stats()
  local before = live_traces()
  jit.attach(on_trace, "trace")
  s:stop()
  jit.attach(on_trace)
  local kept = {}
  for _, n in ipairs(before) do
    if util.traceinfo(n) then kept[#kept + 1] = n end
  end
  return st, before, kept, flushes
end

describe("a session's stop", function()
  after_each(function()
    sessions.stop_all()
  end)

  it("keeps the traces compiled under it at exact precision", function()
    local st, before, kept, flushes = stop_of({})
    if st.precision ~= "exact" then
      pending("exact precision is not available here: " .. tostring(st.compiledNote))
      return
    end
    if st.hooksRearmedNote then
      pending("LuaJIT's hook mask was not found: " .. st.hooksRearmedNote)
      return
    end
    assert.is_true(#before > 0, "no trace compiled under the session")
    assert.equal(0, flushes)
    assert.same(before, kept)
    -- The program runs on, on the code it compiled.
    assert.equal(work(), work())
  end)

  it("with flushTraces = false, the start keeps the traces compiled before it too", function()
    -- Compiled before the session.
    sampling.for_cpu(0.05, work)
    local before = live_traces()
    assert.is_true(#before > 0, "no trace compiled before the session")
    local flushes = 0
    local function on_trace(what)
      if what == "flush" then flushes = flushes + 1 end
    end
    jit.attach(on_trace, "trace")
    local s = profile.sample({ flushTraces = false })
    jit.attach(on_trace)
    local kept = {}
    for _, n in ipairs(before) do
      if util.traceinfo(n) then kept[#kept + 1] = n end
    end
    sampling.until_samples(s, 50, work)
    s:stop()
    local st = s:stats()
    if st.precision ~= "exact" then
      pending("exact precision is not available here: " .. tostring(st.compiledNote))
      return
    end
    assert.equal(0, flushes)
    assert.same(before, kept)
    -- Their ticks are read in the handler, at their snapshots: they have
    -- no map.
    assert.is_true(st.traceMap.noMap > 0, "ticks with no map: " .. st.traceMap.noMap)
    -- The option is refused where LuaJIT's own mode flushes anyway.
    assert.has_error(function() profile.sample({ flushTraces = false, precision = "line" }) end,
      'profile.sample: option \'flushTraces\' = false needs precision "auto" (got "line": LuaJIT\'s function '
        .. "and line modes flush every trace at the start)")
  end)

  it("flushes them at function precision, as LuaJIT does", function()
    local _, before, _, flushes = stop_of({ precision = "function" })
    assert.is_true(#before > 0, "no trace compiled under the session")
    assert.equal(1, flushes)
  end)
end)
