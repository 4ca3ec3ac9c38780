-- Trace sessions: the module, the lifecycle (pause, resume, stop, write,
-- snapshots), chaining to other trace handlers, errors, and running beside
-- the native sampler. These tests run in-process: see spec/support/trace.lua
-- on the test runner's own traces.
local profile = require("tecs.profile")
local trace = require("tecs.profile.trace")
local t = require("spec.support.trace")
local sampling = require("spec.support.sampling")

local read, find_site, fresh_nyi_loop = t.read, t.find_site, t.fresh_nyi_loop

describe("profile.trace", function()
  after_each(t.stop_active)

  it("starts the tracker, reachable under both module names", function()
    assert.equal(profile.trace, require("tecs.utils.profile").trace)
    local s = profile.trace()
    assert.equal(trace.TraceSession, getmetatable(s))
    assert.equal(s, trace.active())
    s:stop()
  end)

  it("loading the package attaches nothing", function()
    local script = [[
      local reg = debug.getregistry()
      local function snapshot()
        local t, n = reg._VMEVENTS, 0
        if t then for _ in pairs(t) do n = n + 1 end end
        return n
      end
      local function mine() end
      jit.attach(mine, "trace")
      local before = snapshot()
      require("tecs.profile"); require("tecs.utils.profile")
      local n = 0
      for _, v in pairs(reg._VMEVENTS) do if v == mine then n = n + 1 end end
      io.write(before == snapshot() and n == 1 and "clean" or "attached")
    ]]
    assert.equal("clean", t.run_script(script))
  end)

  it("leaves the FFI names clock_gettime and struct timespec to user code", function()
    local script = [[
      require("tecs.profile").trace():stop()
      local ffi = require("ffi")
      ffi.cdef("struct timespec { long s, ns; }; int clock_gettime(int, struct timespec *);")
      io.write(ffi.C.clock_gettime(1, ffi.new("struct timespec")) == 0 and "ok" or "failed")
    ]]
    assert.equal("ok", t.run_script(script, true))
  end)

  describe("session", function()
    it("does not count while paused; pause and resume are idempotent", function()
      local s = profile.trace()
      s:pause(); s:pause()
      assert.is_true(s:isPaused())
      fresh_nyi_loop("=paused")()
      s:resume(); s:resume()
      assert.is_false(s:isPaused())
      fresh_nyi_loop("=resumed")()
      local r = s:stop()
      assert.is_nil(find_site(r.sites, function(x) return x.location == "paused:1" end))
      assert.is_true(find_site(r.sites, function(x) return x.location == "resumed:1" end).count >= 1)
    end)

    it("writes the report to the file given to stop", function()
      local path = os.tmpname()
      local s = profile.trace()
      fresh_nyi_loop("=written")()
      local r = s:stop(path)
      assert.equal(tostring(r), read(path))
      os.remove(path)
    end)

    it("keeps the report when the file cannot be written", function()
      local s = profile.trace()
      fresh_nyi_loop("=kept")()
      local bad = "/nonexistent-dir/aborts.csv"
      local ok, err = pcall(s.stop, s, bad)
      assert.is_false(ok)
      assert.matches("TraceSession:stop: cannot write '/nonexistent-dir/aborts.csv': No such file", err, 1, true)
      assert.is_false(s:isRunning())
      assert.is_nil(trace.active())
      local r = s:report()
      assert.is_true(r.totalAborts >= 1)
      assert.is_true(find_site(r.sites, function(x) return x.location == "kept:1" end).count >= 1)
      local path = os.tmpname()
      assert.equal(tostring(r), r:write(path))
      assert.equal(tostring(r), read(path))
      os.remove(path)
      local wok, werr = pcall(r.write, r, bad)
      assert.is_false(wok)
      assert.matches("TraceReport:write: cannot write '/nonexistent-dir/aborts.csv'", werr, 1, true)
    end)

    it("gives a snapshot report while running", function()
      local s = profile.trace()
      fresh_nyi_loop("=snap1")()
      local mid = s:report()
      fresh_nyi_loop("=snap2")()
      local r = s:stop()
      local function snap1(x) return x.location == "snap1:1" end
      assert.is_true(mid.totalAborts >= 1)
      assert.is_true(r.totalAborts > mid.totalAborts)
      -- snap1 stopped running before the snapshot: its count is final there.
      -- (Other sites may abort meanwhile: the runner's own code is traced too.)
      assert.is_table(find_site(mid.sites, snap1))
      assert.equal(t.total(t.own_sites(mid.sites, "snap1")), t.total(t.own_sites(r.sites, "snap1")))
      assert.is_nil(find_site(mid.sites, function(x) return x.location == "snap2:1" end))
    end)

    it("chains to a trace handler attached before and restores it at stop", function()
      local seen = {}
      local function mine(what) seen[#seen + 1] = what end
      jit.attach(mine, "trace")
      local s = profile.trace()
      fresh_nyi_loop("=chained1")()
      local during = #seen
      local r = s:stop()
      fresh_nyi_loop("=chained2")()
      jit.attach(mine)
      assert.is_true(r.totalAborts >= 1)
      assert.is_true(during >= 2 * r.totalAborts, "events seen by the earlier handler during the session: " .. during)
      assert.is_true(#seen >= during + 2, "the earlier handler was not restored")
    end)

    it("keeps -jv printing during and after the session", function()
      local out = os.tmpname()
      local v = require("jit.v")
      v.on(out)
      local s = profile.trace()
      -- Three fresh loops each: whether one loop gets hot enough to be
      -- recorded depends on hot counters it shares with earlier code.
      for _ = 1, 3 do fresh_nyi_loop("=withjv1", 3000)() end
      local r = s:stop()
      for _ = 1, 3 do fresh_nyi_loop("=withjv2", 3000)() end
      v.off()
      local text = read(out)
      os.remove(out)
      local during = select(2, text:gsub("withjv1:1 %-%- NYI: bytecode", ""))
      local after = select(2, text:gsub("withjv2:1 %-%- NYI: bytecode", ""))
      -- Compared by location and reason: the runner's own code may abort
      -- meanwhile, the loop may abort for another reason now and then
      -- ("error thrown or hook called during recording"), and its NYI aborts
      -- may fall on two sites (warn, and blacklist once LuaJIT blacklists it).
      local nyi = {}
      for _, x in ipairs(t.own_sites(r.sites, "withjv1")) do
        if x.reason == "NYI: bytecode FNEW" then nyi[#nyi + 1] = x end
      end
      assert.is_true(#nyi >= 1, tostring(r))
      assert.equal(t.total(nyi), during, tostring(r))
      assert.is_true(after >= 1)
    end)

    it("leaves a handler attached during the session in place at stop", function()
      local s = profile.trace()
      local seen = 0
      local function later() seen = seen + 1 end
      jit.attach(later, "trace")
      s:stop()
      -- Long enough to get hot whatever an earlier abort left in the hot
      -- counter it shares (a penalty of up to 60000, two per iteration).
      fresh_nyi_loop("=later", 40000)()
      jit.attach(later)
      assert.is_true(seen >= 2)
    end)
  end)

  describe("errors", function()
    it("starting while a session is active", function()
      local s = profile.trace()
      local ok, err = pcall(profile.trace)
      assert.is_false(ok)
      assert.matches("profile.trace: a trace session is already active", err, 1, true)
      s:stop()
      profile.trace():stop() -- and another can start after stop
    end)

    it("stop twice, pause/resume after stop", function()
      local s = profile.trace()
      s:stop()
      for _, m in ipairs({ "stop", "pause", "resume" }) do
        local ok, err = pcall(s[m], s)
        assert.is_false(ok)
        assert.matches("TraceSession:" .. m .. ": session already stopped", err, 1, true)
      end
    end)

    local bad = {
      { { includeBenign = 1 }, "option 'includeBenign' must be a boolean (got number 1)" },
      { { includeBenign = "yes" }, "option 'includeBenign' must be a boolean" },
      { { includebenign = true }, "unknown option 'includebenign' (known options: includeBenign)" },
      { { true }, "unknown option" },
      { "benign", "bad argument #1 'opts' (table or nil expected, got string \"benign\")" },
    }
    for _, case in ipairs(bad) do
      it("rejects " .. (type(case[1]) == "table" and tostring(next(case[1])) or tostring(case[1])), function()
        local line = debug.getinfo(1, "l").currentline + 1
        local ok, err = pcall(function() local s = profile.trace(case[1]); return s end)
        assert.is_false(ok)
        assert.matches("trace_session_spec.lua:" .. line .. ": profile.trace: ", err, 1, true)
        assert.matches(case[2], err, 1, true)
        assert.is_nil(trace.active(), "no half-started session")
      end)
    end

    it("starts without options where the native module cannot load, and says why options cannot be checked", function()
      local run = require("spec.support.run")
      local script = [[
        package.cpath = ""
        local profile = require("tecs.profile")
        local r = profile.trace():stop()
        print("plain", r.totalAborts)
        print("empty", pcall(function() return profile.trace({}):stop() ~= nil end))
        print("opts", pcall(profile.trace, { includeBenign = true }))
      ]]
      local rc, out = run.run(run.quote(run.luajit) .. " -e " .. run.quote(script))
      assert.equal(0, rc, out)
      assert.matches("plain\t%d+", out)
      assert.matches("empty\ttrue\ttrue", out)
      assert.matches("opts\tfalse\t[^\n]*profile.trace: options need the native module tecs.profile.native", out)
    end)

    it("method called with a dot", function()
      local s = profile.trace()
      for _, m in ipairs({ "stop", "pause", "resume", "report" }) do
        local ok, err = pcall(s[m])
        assert.is_false(ok)
        assert.matches("TraceSession:" .. m .. ": called on nil; use a colon", err, 1, true)
      end
      local r = s:stop()
      local ok, err = pcall(r.write, "x.csv")
      assert.is_false(ok)
      assert.matches('TraceReport:write: called on string "x.csv"; use a colon, e.g. report:write()', err, 1, true)
    end)

    it("bad filename leaves the session running", function()
      local s = profile.trace()
      local ok, err = pcall(s.stop, s, 42)
      assert.is_false(ok)
      assert.matches("TraceSession:stop: bad argument #1 'filename'", err, 1, true)
      assert.is_true(s:isRunning())
      s:stop()
    end)
  end)

  describe("with the native sampler", function()
    local RECERR = t.RECERR
    local native_ok = pcall(require, "tecs.profile.native")

    -- Thousands of distinct hot loops: the JIT spends most of the time
    -- recording and compiling.
    local function recording_heavy(first, count)
      local sum = 0
      for k = first, first + count - 1 do
        local src = string.format([[
          local t, s = {}, %d
          for i = 1, 300 do
            local a = i * %d + s
            local b = (a %% 7) + (i %% 3) * 2
            t[(i %% 16) + 1] = a - b
            s = s + t[(i %% 16) + 1] * 0.5 + b - (a / 3)
            if s > 1e9 then s = s - 1e9 end
          end
          return s]], k, k % 13 + 1)
        sum = sum + assert(loadstring(src, "=hot" .. k))()
      end
      return sum
    end

    local function recerr_count(report)
      local n = 0
      for _, s in ipairs(report.sites) do if s.reason == RECERR then n = n + s.count end end
      return n
    end

    it("causes no aborts, while a Lua-callback sampler does", function()
      assert.is_true(native_ok, "native module not built")
      -- Native sampler: samples land while the JIT records and compiles
      -- (VM state J), yet no trace is aborted by them.
      local function in_jit_of(text)
        local n = 0
        for line in text:gmatch("[^\n]+") do
          if line:find("_%[J%] %d+$") then n = n + tonumber(line:match("(%d+)$")) end
        end
        return n
      end
      local t = profile.trace()
      local s = profile.sample({ intervalMs = 0.1 })
      recording_heavy(1, 4000)
      -- Then more fresh loops until 100 samples are taken in the compiler,
      -- however fast it compiles here.
      sampling.until_samples(s, 100, function(k) recording_heavy(4000 + 50 * k, 50) end, {
        count = function() return in_jit_of(s:collapsed()) end, minSeconds = 10,
      })
      local text = s:stop()
      local r = t:stop()
      local in_jit = in_jit_of(text)
      assert.is_true(r.tracesStarted >= 4000, "traces started: " .. r.tracesStarted)
      assert.is_true(in_jit >= 100, "samples taken inside the JIT compiler: " .. in_jit)
      assert.equal(0, recerr_count(r))

      -- Contrast: jit.profile with a Lua callback aborts traces being
      -- recorded whenever a sample lands during recording.
      local jprofile = require("jit.profile")
      local lua_samples, hook_aborts, rounds = 0, 0, 0
      local t0 = os.clock()
      repeat
        rounds = rounds + 1
        local t2 = profile.trace()
        jprofile.start("li1", function(_, n) lua_samples = lua_samples + n end)
        recording_heavy(rounds * 10000, 2000)
        jprofile.stop()
        hook_aborts = hook_aborts + recerr_count(t2:stop())
      until hook_aborts >= 3 or os.clock() - t0 > 10
      assert.is_true(lua_samples > 0)
      assert.is_true(hook_aborts > 0, string.format(
        "no '%s' aborts from the Lua callback in %d samples", RECERR, lua_samples))
    end)
  end)
end)
