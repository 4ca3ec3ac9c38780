-- Collector steps that compiled code calls: a trace that allocates calls
-- the collector itself (`lj_gc_step_jit`), and a tick there finds the VM
-- in state GC with the trace's frames still in its registers. The tick
-- handler proves which trace called (a return address into its code on
-- the C stack, its base frame's prototype the one in the thread's stack)
-- and reads the trace's frames at that call
-- (crates/recorder/src/trace_decoder/walk.rs, `read_trace_gc_step`), so
-- LuaJIT's hook is not set for these ticks: it would make the trace exit
-- and charge the sample wherever the interpreter resumed. Where the time
-- goes is held to the truth by spec/families_spec.lua ("a collected
-- allocation").
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local collapsed = require("spec.support.collapsed")

local work = dofile("spec/fixtures/gc_steps.lua")
local keep, spin, FILE = work.keep, work.spin, work.file

-- Whether the handler reads traces in this build (x86-64 GC64 builds of
-- LuaJIT 2.1, which all three LuaJITs of the suite are).
local exact_expected = jit and jit.arch == "x64" and jit.os == "Linux"

-- Runs both loops until the session holds `want` samples in state GC (or
-- ten seconds of CPU time pass: a build where nothing allocates as
-- expected fails below, not here).
local function run(s, want)
  local t0 = os.clock()
  repeat
    keep(20000)
    spin(20000)
    local st = s:stats()
  until st.stateSamples + st.stateMisses.trace >= want or os.clock() - t0 > 10
end

describe("collector steps from compiled code", function()
  after_each(function()
    sessions.stop_all()
  end)

  it("are read in the tick handler, charged to the trace that allocated, with no hook", function()
    if not exact_expected then
      pending("compiled code is read in the handler on x86-64 Linux only")
      return
    end
    local s = profile.sample()
    run(s, 300)
    local text = s:stop()
    local st = s:stats()
    local gc, in_keep, in_spin = 0, 0, 0
    local elsewhere = {}
    local function within(frame, f)
      local line = tonumber(frame:match("^" .. FILE:gsub("%p", "%%%0") .. ":(%d+)"))
      local i = debug.getinfo(f, "S")
      return line ~= nil and line >= i.linedefined and line <= i.lastlinedefined
    end
    for _, r in ipairs(collapsed.parse(text)) do
      if r.state == "G" then
        gc = gc + r.count
        local k, sp = false, false
        for _, f in ipairs(r.frames) do
          k = k or within(f, keep)
          sp = sp or within(f, spin)
        end
        if k then in_keep = in_keep + r.count end
        if sp then in_spin = in_spin + r.count end
        if not k then elsewhere[#elsewhere + 1] = r.line end
      end
    end
    local why = string.format("%d samples in state GC, %d in keep, %d in spin; %d GC ticks from traces left to the "
      .. "hook, %d in all, %d read; traces: %d mapped, %d placed, %d at a snapshot\n%s", gc, in_keep, in_spin,
      st.stateMisses.trace, st.hookTicks.gc, st.stateSamples, st.traceMap.tracesMapped, st.traceMap.placed,
      st.traceMap.atSnapshot, table.concat(elsewhere, "\n"))
    assert.is_true(gc >= 250, why)
    -- Each GC tick from a trace went to the hook before (all of them); a
    -- few may still, where no tick in the trace was read yet. (Other GC
    -- ticks may go to the hook: the driving loop's, in the statistics' C
    -- function, `stateMisses.cFunction`.)
    assert.is_true(st.stateMisses.trace <= 10 + gc / 50, why)
    -- The allocating loop's: `spin` allocates nothing, and the rest is the
    -- loop that drives both and reads the session's statistics (a table
    -- each time), interpreted.
    assert.equal(0, in_spin, why)
    assert.is_true(in_keep >= 0.75 * gc, why)
  end)
end)
