-- Faults in the profiled program must never crash the profiler or spoil its
-- output: errors, coroutines, zone misuse, deep recursion, JIT on/off/flush,
-- constant full GCs, and the Lua state closing with a session running.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local collapsed = require("spec.support.collapsed")
local zone = require("jit.zone")

local LUAJIT = require("spec.support.run").luajit

local cpu = require("spec.support.cpu")
local sampling = require("spec.support.sampling")

-- Stops `s`, checks the output parses strictly and the samples add up.
local function finish(s)
  local text = s:stop()
  local rows = collapsed.parse(text)
  local st = s:stats()
  assert.is_true(st.samples > 0, "no samples")
  assert.equal(st.recordedSamples, collapsed.sum(rows), "every recorded sample is in the output")
  return rows, text, st
end

describe("faults in the profiled program", function()
  after_each(function()
    sessions.stop_all()
    zone:flush()
  end)

  it("errors thrown and caught through profiled code", function()
    local function thrower(depth, n)
      if depth == 0 then cpu.busy(n); error({ code = n }) end
      local r = thrower(depth - 1, n)
      return r
    end
    local s = profile.sample({ intervalMs = 0.2 })
    local caught = 0
    sampling.for_cpu(0.5, function(i)
      local ok, e = pcall(thrower, i % 30, 500)
      if not ok and type(e) == "table" then caught = caught + 1 end
      ok = xpcall(function() cpu.busy(200); error("string error " .. i) end, debug.traceback)
      if not ok then caught = caught + 1 end
      ok = pcall(error) -- error(nil)
      if not ok then caught = caught + 1 end
    end)
    local rows = finish(s)
    assert.is_true(caught > 100)
    local in_thrower = collapsed.sum(rows, function(r) return collapsed.has_frame(r, "robust_faults_spec.lua:" .. debug.getinfo(thrower, "S").linedefined + 1) end)
    assert.is_true(in_thrower > 0, "samples inside the throwing function")
  end)

  it("coroutine.wrap and yields across zones", function()
    local gen = coroutine.wrap(function()
      while true do
        zone("coro") cpu.busy(2000)
        coroutine.yield(1)           -- yields with its zone still pushed
        cpu.busy(2000) zone()
        coroutine.yield(2)
      end
    end)
    local failing = coroutine.wrap(function() cpu.busy(1000); error("inside a coroutine") end)
    local s = profile.sample({ intervalMs = 0.2 })
    sampling.for_cpu(0.5, function()
      zone("main") gen() cpu.busy(1000) zone()
    end)
    assert.is_false(pcall(failing))
    local dead_ok, dead_err = pcall(failing)
    assert.is_false(dead_ok)
    assert.matches("dead coroutine", dead_err)
    local rows = finish(s)
    local coro = collapsed.sum(rows, function(r)
      for _, f in ipairs(r.frames) do if f == "coro" then return true end end
    end)
    assert.is_true(coro > 0, "samples under the coroutine's zone")
  end)

  it("zone pops on an empty stack, odd zone values, runaway pushes", function()
    local s = profile.sample({ intervalMs = 0.2 })
    local pops_failed = 0
    sampling.for_cpu(0.4, function(i)
      if not pcall(zone) then pops_failed = pops_failed + 1 end   -- empty stack
      zone(i) zone({}) cpu.busy(1000) zone() zone()                    -- non-string zones
      for _ = 1, 100 do zone("deep") end cpu.busy(1000) zone:flush()   -- 100 entries
    end)
    local rows = finish(s)
    assert.is_true(pops_failed > 0)
    local max_zones = 0
    for _, r in ipairs(rows) do
      local n = 0
      for _, f in ipairs(r.frames) do if f == "deep" then n = n + 1 end end
      if n > max_zones then max_zones = n end
    end
    assert.equal(64, max_zones, "zone paths are cut at 64 entries")
    assert.is_true(collapsed.sum(rows, function(r) return r.frames[1] == "?" end) > 0, "non-string zones show as ?")
  end)

  it("recursion 20,000 deep, at the largest stack depth", function()
    local function deep(n) if n == 0 then return cpu.busy(200000) end local r = deep(n - 1) return r + 1 end
    for _, depth in ipairs({ 16, 1000 }) do
      local s = profile.sample({ intervalMs = 0.5, stackDepth = depth })
      sampling.for_cpu(0.3, function() deep(20000) end)
      local rows = finish(s)
      local longest = 0
      for _, r in ipairs(rows) do if #r.frames > longest then longest = #r.frames end end
      assert.equal(depth + 1, longest, "the requested depth under a [truncated stack] root")
      for _, r in ipairs(rows) do
        if #r.frames == depth + 1 then assert.equal("[truncated stack]", r.frames[1], r.line) end
      end
    end
  end)

  it("jit.flush(), jit.off() and jit.on() mid-session", function()
    local s = profile.sample({ intervalMs = 0.2 })
    sampling.for_cpu(0.6, function(i)
      cpu.busy(3000)
      if i % 7 == 0 then jit.flush() end
      if i % 11 == 0 then jit.off() cpu.busy(3000) jit.on() end
      if i % 13 == 0 then jit.off(cpu.busy) cpu.busy(1000) jit.on(cpu.busy) end
    end)
    jit.on()
    local rows = finish(s)
    local states = {}
    for _, r in ipairs(rows) do states[r.state] = (states[r.state] or 0) + r.count end
    assert.is_true((states.I or 0) > 0, "interpreted samples while the JIT was off")
  end)

  it("a full collectgarbage() every frame", function()
    local s = profile.sample({ intervalMs = 0.2 })
    local junk = {}
    sampling.for_cpu(0.6, function(i)
      for k = 1, 200 do junk[k] = { i, tostring(k) } end
      collectgarbage()
      cpu.busy(500)
    end)
    local rows, _, st = finish(s)
    assert.is_true(#rows > 0)
    assert.is_true(st.recordedSamples > 0)
  end)

  describe("the Lua state closing with a session still running", function()
    -- Under a time limit: OpenResty's luajit2 has been seen to hang in
    -- lua_close once in about 900 exit-close runs (docs/robustness.md,
    -- "Known problem"); such a hang is reported and the run tried once more.
    local function run(how)
      local function once()
        local p = io.popen("timeout 60 " .. LUAJIT .. " spec/fixtures/exit_running.lua " .. how ..
          " 2>&1; echo \"exit=$?\"")
        local out = p:read("*a")
        p:close()
        return out
      end
      local out = once()
      if out:find("\nexit=124\n$") or out:find("^exit=124\n$") then
        io.stderr:write("exit_running.lua ", how, " hung (", LUAJIT, "); running it again\n")
        out = once()
      end
      return out
    end
    local function snapshot_ok(out)
      local snap = out:match("^(.-)%-%-%- snapshot\n")
      assert.is_truthy(snap, out)
      assert.is_true(#collapsed.parse(snap) > 0, "a valid snapshot before the exit")
    end
    for _, how in ipairs({ "end", "exit-close", "exit" }) do
      it(how, function()
        local out = run(how)
        snapshot_ok(out)
        assert.matches("\nexit=0\n$", "\n" .. out:match("[^\n]*\n$"))
      end)
    end
    it("an uncaught error", function()
      local out = run("error")
      snapshot_ok(out)
      assert.matches("uncaught error with a session running", out)
      assert.matches("exit=1\n$", out)
    end)
    it("sessions dropped without stop", function()
      local out = run("gc")
      snapshot_ok(out)
      local dropped = out:match("%-%-%- snapshot\n(.-)%-%-%- dropped\n")
      assert.is_truthy(dropped, out)
      assert.is_true(#collapsed.parse(dropped) > 0, "the dropped session kept its data")
      local second = out:match("%-%-%- dropped\n(.-)%-%-%- second\n")
      assert.is_truthy(second, out)
      assert.is_true(#collapsed.parse(second) > 0)
      -- 40 handles collected with a tick pending (valgrind runs this case too)
      assert.matches("%-%-%- second\n%-%-%- dropped in a loop\n", out)
      assert.matches("exit=0\n$", out)
    end)
  end)
end)
