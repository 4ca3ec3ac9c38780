local profile = require("tecs.profile")
local new_profiler = require("tecs.profile.new_profiler")
local run = require("spec.support.run")
local sampling = require("spec.support.sampling")

local FIXTURE = "spec/fixtures/new_profiler_work.lua"
local work = dofile(FIXTURE)

-- The name the reports give `fn` of the fixture (`M.fib (spec/...:5)`).
local function name_of(fn)
  local info = debug.getinfo(fn, "S")
  local line = io.lines(info.short_src)
  local n = 0
  for text in line do
    n = n + 1
    if n == info.linedefined then
      local name = text:match("function%s+([%w_%.:]+)%s*%(")
      return string.format("%s (%s:%d)", name, info.short_src, info.linedefined)
    end
  end
end

local function run_call(body, prevent)
  local p = assert(profile.newProfiler("call"))
  for fn, level in pairs(prevent or {}) do p:prevent(fn, level) end
  assert.is_true(p:start())
  body()
  p:stop()
  return p
end

-- The functions of a profiler's lua_report, by name.
local function data_of(p)
  local data = assert(loadstring(p:lua_report()))()
  local by = {}
  for _, f in ipairs(data.functions) do by[f.name] = f end
  return by, data
end

local function near(a, b)
  return math.abs(a - b) <= 1e-9 + 1e-9 * math.abs(b)
end

describe("newProfiler", function()
  after_each(function()
    rawset(_G, "newProfiler", nil)
  end)

  describe('"call"', function()
    it("counts fib(20) as 21891 calls of fib", function()
      local p = run_call(function() work.fib(20) end)
      local by = data_of(p)
      local fib = by[name_of(work.fib)]
      assert.is_table(fib, p:report())
      assert.equal(21891, fib.calls)
      assert.equal(21890, fib.callers[name_of(work.fib)].calls)
      assert.is_true(fib.timed)
      assert.is_true(fib.total >= fib.self and fib.self > 0)
    end)

    it("counts every call of code the JIT compiled before it started", function()
      -- in a fresh Lua state: here, hooks ran before and fib may never compile
      local rc, out = run.run(run.luajit .. " spec/fixtures/new_profiler_compiled.lua")
      assert.equal(0, rc, out)
      assert.matches("compiled=true", out, 1, true)
      assert.matches("calls=21891", out, 1, true)
    end)

    it("leaves no loop blacklisted, and the JIT as it was", function()
      local rc, out = run.run(run.luajit .. " spec/fixtures/new_profiler_after.lua")
      assert.equal(0, rc, out)
      assert.matches("loop=.* FORL ", out)
      assert.is_nil(out:find("IFORL", 1, true), out)
      assert.matches("jit=true", out, 1, true)
      -- a JIT that was off stays off
      jit.off()
      local ok, err = pcall(run_call, function() work.thousand() end)
      local status = jit.status()
      jit.on()
      assert(ok, err)
      assert.is_false(status)
    end)

    it("counts a function called exactly 1000 times, with its caller", function()
      local p = run_call(function() work.thousand() end)
      local by = data_of(p)
      local leaf, thousand = by[name_of(work.leaf)], by[name_of(work.thousand)]
      assert.equal(1000, leaf.calls)
      assert.equal(1, thousand.calls)
      assert.equal(1000, leaf.callers[name_of(work.thousand)].calls)
      assert.equal(1000, thousand.callees[name_of(work.leaf)].calls)
    end)

    it("keeps total >= self, and total = self + the callees' times", function()
      local p = run_call(function() work.top(200) end)
      local by = data_of(p)
      for name, f in pairs(by) do
        if f.timed then assert.is_true(f.total >= f.self, name) end
      end
      local top, mid = by[name_of(work.top)], by[name_of(work.mid)]
      assert.equal(200, mid.calls)
      assert.equal(1000, by[name_of(work.leaf)].calls)
      for _, f in ipairs({ top, mid }) do
        local sum = f.self
        for _, e in pairs(f.callees) do sum = sum + (e.time or 0) end
        assert.is_true(near(f.total, sum), string.format("%.17g vs %.17g", f.total, sum))
      end
      -- top's total holds mid's and side's
      assert.is_true(top.total >= mid.total + by[name_of(work.side)].total)
    end)

    it("prevent level 1 drops the function and keeps what it calls, under its caller", function()
      local p = run_call(function() work.top(50) end, { [work.mid] = 1 })
      local by = data_of(p)
      assert.is_nil(by[name_of(work.mid)])
      local leaf = by[name_of(work.leaf)]
      assert.equal(250, leaf.calls)
      assert.equal(250, leaf.callers[name_of(work.top)].calls)
      assert.equal(50, by[name_of(work.side)].calls)
    end)

    it("prevent level 2 drops the function and everything it calls", function()
      local p = run_call(function() work.top(50) end, { [work.mid] = 2 })
      local by = data_of(p)
      assert.is_nil(by[name_of(work.mid)])
      assert.is_nil(by[name_of(work.leaf)])
      assert.equal(50, by[name_of(work.side)].calls)
      assert.equal(1, by[name_of(work.top)].calls)
    end)

    it("counts tail calls, and the stack stays right after them", function()
      local p = run_call(function() work.tails(300); work.thousand() end)
      local by = data_of(p)
      assert.equal(300, by[name_of(work.tail)].calls)
      assert.equal(1300, by[name_of(work.leaf)].calls)
      -- after 300 replaced frames, thousand's calls are still its own
      assert.equal(1000, by[name_of(work.leaf)].callers[name_of(work.thousand)].calls)
      assert.equal(300, by[name_of(work.tail)].callers[name_of(work.tails)].calls)
    end)

    it("prevent(f, 2) leaves out a child f reaches by a tail call, and nothing after it", function()
      local p = run_call(function() work.tails(300); work.thousand() end, { [work.tail] = 2 })
      local by = data_of(p)
      assert.is_nil(by[name_of(work.tail)])
      -- leaf's 300 calls through tail are left out; thousand's are its own
      assert.equal(1000, by[name_of(work.leaf)].calls)
      assert.same({ [name_of(work.thousand)] = { calls = 1000 } }, (function()
        local callers = {}
        for name, e in pairs(by[name_of(work.leaf)].callers) do callers[name] = { calls = e.calls } end
        return callers
      end)())
      assert.equal(1, by[name_of(work.tails)].calls)
    end)

    it("prevent(c_function, 2) leaves out the C function alone, not the calls after it", function()
      local clock = os.clock
      local p = run_call(function()
        for i = 1, 100 do
          clock()
          work.leaf(i)
        end
      end, { [clock] = 2 })
      local by = data_of(p)
      assert.is_nil(by["os.clock"])
      assert.equal(100, by[name_of(work.leaf)].calls)
    end)

    it("keeps the stack right when errors unwind through frames", function()
      local p = run_call(function() work.catcher(100); work.thousand() end)
      local by = data_of(p)
      for _, fn in ipairs({ work.deep1, work.deep2, work.raise }) do
        assert.equal(100, by[name_of(fn)].calls)
      end
      -- side is called by catcher, not by a frame the errors left
      local side = by[name_of(work.side)]
      assert.equal(100, side.calls)
      assert.same({ [name_of(work.catcher)] = { calls = 100 } }, side.callers)
      assert.equal(1000, by[name_of(work.leaf)].callers[name_of(work.thousand)].calls)
      local catcher = by[name_of(work.catcher)]
      assert.equal(100, catcher.callees.pcall.calls)
      local sum = catcher.self
      for _, e in pairs(catcher.callees) do sum = sum + (e.time or 0) end
      -- pcall is a C function: its callee's time reaches catcher through it
      assert.is_true(catcher.total >= sum)
      for name, f in pairs(by) do
        if f.timed then assert.is_true(f.total >= f.self, name) end
      end
    end)

    it("follows coroutines", function()
      local p = run_call(function()
        local gen = work.generator(40)
        for _ = 1, 40 do gen() end
      end)
      local by = data_of(p)
      local leaf = by[name_of(work.leaf)]
      assert.equal(40, leaf.calls)
      assert.equal(1, by[name_of(work.generator)].calls)
      -- leaf's caller is the coroutine's function, in the coroutine's stack
      local callers = {}
      for name, e in pairs(leaf.callers) do callers[#callers + 1] = name .. "=" .. e.calls end
      local line = 0
      for text in io.lines(FIXTURE) do
        line = line + 1
        if text:find("coroutine.wrap(function()", 1, true) then break end
      end
      assert.same({ "function (" .. FIXTURE .. ":" .. line .. ")=40" }, callers)
    end)

    it("report is sorted by self time, or total time when asked, and lua_report matches it", function()
      local p = run_call(function() work.top(100); work.fib(12) end)
      local by, data = data_of(p)
      for _, sort_total in ipairs({ false, true }) do
        local text = p:report(sort_total)
        local key = sort_total and "total" or "self"
        local rows = {}
        for line in text:gmatch("[^\n]+") do
          if not line:find("^#") and not line:find("^function%s+calls") then rows[#rows + 1] = line end
        end
        assert.equal(#data.functions, #rows)
        local prev
        for _, line in ipairs(rows) do
          local name, calls, total, self = line:match("^(.-)%s+(%d+)%s+(%S+)%s+(%S+)%s+%S+$")
          local f = by[name]
          assert.is_table(f, line)
          assert.equal(f.calls, tonumber(calls))
          if f.timed then
            assert.equal(string.format("%.6f", f.total), total)
            assert.equal(string.format("%.6f", f.self), self)
            if prev then assert.is_true(prev >= f[key], line) end
            prev = f[key]
          else
            assert.equal("-", total)
          end
        end
      end
    end)

    it("refuses to start while another debug hook is set", function()
      local p = assert(profile.newProfiler("call"))
      local function other() end
      debug.sethook(other, "c")
      local ok, err = p:start()
      debug.sethook()
      assert.is_nil(ok)
      assert.matches("another debug hook", err)
    end)
  end)

  describe('"time"', function()
    it("maps sampledelay to an interval: 100000 opcodes to 1 ms", function()
      assert.equal(1, assert(profile.newProfiler("time")).intervalMs)
      assert.equal(5, assert(profile.newProfiler("time", 500000)).intervalMs)
      assert.equal(0.1, assert(profile.newProfiler("time", 10)).intervalMs)
      assert.equal("time", assert(profile.newProfiler()).variant)
    end)

    it("says why a run shorter than one interval has no samples, and what to do", function()
      -- One sample a minute of CPU time: no run of this test reaches one.
      local p = assert(profile.newProfiler("time", 6e9))
      assert.is_true(p:start())
      work.wrapper(10)
      p:stop()
      local text = p:report()
      assert.matches('^# newProfiler "time": 0 samples', text)
      assert.matches("\n# no samples: the run took [%d.]+ ms of CPU time, less than one interval %(60000 ms%): " ..
        "profile a longer run, or sample more often with a smaller sampledelay", text)
      local data = assert(loadstring(p:lua_report()))()
      assert.equal(0, data.samples)
      assert.equal(text:match("\n# (no samples[^\n]*)"), data.note)
    end)

    it("says a handful of samples are too few to rank, as the views do", function()
      local p = assert(profile.newProfiler("time"))
      assert.is_true(p:start())
      -- Until the session has a few samples; stopped then, it has far fewer
      -- than the views' threshold.
      sampling.until_samples(p._session, 3, function() work.wrapper(100) end)
      p:stop()
      local text = p:report()
      local n = tonumber(text:match('^# newProfiler "time": (%d+) samples'))
      assert.is_true(n >= 3 and n < require("tecs.profile.native").fewSamples, text)
      assert.matches("\n# only " .. n .. " samples: too few to rank reliably %(shares are ±[%d.]+ points or less, " ..
        "95%%%); the run took [%d.]+ ms of CPU time: profile a longer run", text)
    end)

    it("gives shares in the known 3:1 proportion, and prevent works on samples", function()
      work.wrapper(2000) -- warm up: let the JIT compile the loops first
      local p = assert(profile.newProfiler("time"))
      p:prevent(work.wrapper, 1)
      assert.is_true(p:start())
      -- The truth: each callee timed alone in the profiler's pauses.
      local want, again = sampling.interleaved(p._session, 4, function()
        return sampling.time_parts({
          three = function() work.three(20000) end,
          one = function() work.one(20000) end,
        }, 0.05)
      end, function() sampling.until_samples(p._session, 300, function() work.wrapper(20000) end) end)
      p:stop()
      local by, data = data_of(p)
      local three, one = by[name_of(work.three)], by[name_of(work.one)]
      assert.is_table(three, p:report())
      assert.is_table(one, p:report())
      local n = three.selfSamples + one.selfSamples
      -- The two callees are nearly all of the work.
      assert.is_true(n >= 0.8 * p._session:stats().recordedSamples, "samples in the workload: " .. n)
      local truth = (want.three + again.three) / 2
      sampling.check_share("three", three.selfSamples / n, truth, n, math.abs(want.three - again.three))
      -- wrapper is prevented (level 1): absent, and its callees hang under its caller
      assert.is_nil(by[name_of(work.wrapper)])
      assert.is_nil(three.callers[name_of(work.wrapper)])
      assert.is_nil(three.calls)
      -- the report's counts are the data's
      local self_sum = 0
      for _, f in ipairs(data.functions) do
        self_sum = self_sum + f.selfSamples
        assert.is_true(f.totalSamples >= f.selfSamples)
        assert.is_true(near(f.selfSamples * data.intervalMs / 1000, f.self))
      end
      assert.equal(data.samples, self_sum)
      assert.matches("calls are not known", p:report())
      -- level 2 on one: its samples leave, three's stay
      p:prevent(work.one, 2)
      local by2, data2 = data_of(p)
      assert.is_nil(by2[name_of(work.one)])
      assert.equal(three.selfSamples, by2[name_of(work.three)].selfSamples)
      assert.equal(data.samples - one.totalSamples, data2.samples)
      assert.equal(data.droppedSamples + one.totalSamples, data2.droppedSamples)
    end)
  end)

  describe("prevent(f, 2) and a child f reaches by a tail call", function()
    it('"call" leaves the child out, and what runs after f', function()
      local p = run_call(function() for _ = 1, 10 do work.tail_driver(10) end end, { [work.tail_entry] = 2 })
      local by = data_of(p)
      assert.is_nil(by[name_of(work.tail_entry)])
      assert.is_nil(by[name_of(work.tail_child)])
      assert.equal(10, by[name_of(work.one)].calls)
      assert.equal(10, by[name_of(work.tail_driver)].calls)
    end)

    it('"time" leaves the child out, though no sample shows f', function()
      work.tail_driver(2000) -- warm up: let the JIT compile the loops first
      local p = assert(profile.newProfiler("time"))
      assert.is_true(p:start())
      sampling.until_samples(p._session, 200, function() work.tail_driver(20000) end)
      p:stop()
      local by, data = data_of(p)
      local child, one = by[name_of(work.tail_child)], by[name_of(work.one)]
      assert.is_table(child, p:report())
      assert.is_table(one, p:report())
      -- The tail call replaced f's frame: the child's samples are under f's caller.
      assert.is_table(child.callers[name_of(work.tail_driver)], p:report())
      assert.is_true(child.callers[name_of(work.tail_driver)].samples > 0, p:report())
      assert.is_nil(child.callers[name_of(work.tail_entry)])
      p:prevent(work.tail_entry, 2)
      local by2, data2 = data_of(p)
      assert.is_nil(by2[name_of(work.tail_child)])
      assert.is_nil(by2[name_of(work.tail_entry)])
      assert.equal(one.selfSamples, by2[name_of(work.one)].selfSamples)
      assert.equal(data.samples - child.totalSamples - (by[name_of(work.tail_entry)] or { totalSamples = 0 }).totalSamples,
        data2.samples)
    end)

    it("finds the children a function tail-calls through an upvalue, a global or a field", function()
      local samples = require("tecs.profile.new_profiler.samples")
      local function helper() return 1 end
      local function by_upvalue() return helper() end
      local found = samples.tail_callees(by_upvalue)
      assert.is_true(found[helper])
      assert.is_true(samples.tail_callees(work.tail_entry)[work.tail_child])
      -- A call that is not a tail call is not followed.
      assert.is_nil(samples.tail_callees(work.tail_driver)[work.tail_child])
      assert.is_nil(samples.tail_callees(work.tail_driver)[work.tail_entry])
      assert.is_nil(next(samples.tail_callees(function() local x = helper() return x end)))
    end)
  end)

  describe("API", function()
    it("returns nil for an invalid variant", function()
      assert.is_nil(profile.newProfiler("bogus"))
      assert.is_nil(profile.newProfiler(42))
      local p, err = profile.newProfiler("CALL")
      assert.is_nil(p)
      assert.matches('"time" or "call"', err)
    end)

    it("runs one profiler at a time", function()
      local q = assert(profile.newProfiler("call"))
      local p = assert(profile.newProfiler("call"))
      assert.is_true(p:start())
      local none, err = profile.newProfiler("time")
      assert.is_nil(none)
      assert.matches("already running", err)
      local ok, err2 = q:start()
      assert.is_nil(ok)
      assert.matches("already running", err2)
      q:stop() -- not the running one: does nothing
      assert.is_nil(p:start())
      p:stop()
      assert.is_true(q:start())
      q:stop()
    end)

    it("checks its arguments at the caller's level", function()
      local p = assert(profile.newProfiler("call"))
      local line = debug.getinfo(1, "l").currentline
      local ok, err = pcall(function() p:prevent("f") end)
      assert.is_false(ok)
      assert.matches("new_profiler_spec.lua:" .. (line + 1) .. ": Profiler:prevent: bad argument #1 'func'", err, 1, true)
      assert.has_error(function() p:prevent(print, 3) end,
        "Profiler:prevent: bad argument #2 'level' (1 or 2 expected, got number 3)")
      assert.error_matches(function() profile.newProfiler("time", -1) end, "bad argument #2 'sampledelay'")
      assert.error_matches(function() p.start() end, "use a colon")
    end)

    it("sets no global on require; install() sets newProfiler for code written against the original", function()
      assert.is_nil(rawget(_G, "newProfiler"))
      assert.equal(new_profiler.newProfiler, new_profiler.install())
      assert.equal(new_profiler.newProfiler, rawget(_G, "newProfiler"))
      assert.equal(new_profiler.Profiler, getmetatable(profile.newProfiler("call")))
      local text, lua, fn = dofile("spec/fixtures/new_profiler_seed_usage.lua")
      local by = {}
      for _, f in ipairs(assert(loadstring(lua))().functions) do by[f.name] = f end
      local info = debug.getinfo(fn, "S")
      local name = string.format("work (%s:%d)", info.short_src, info.linedefined)
      assert.equal(2, by[name].calls)
      assert.equal(500, by["math.floor"].calls)
      assert.matches(name, text, 1, true)
    end)
  end)
end)
