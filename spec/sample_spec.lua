local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local collapsed = require("spec.support.collapsed")
local sampling = require("spec.support.sampling")
local zone = require("jit.zone")

-- Not cpu.busy: BUSY names this loop's frame, which must be in this file.
local function busy(n) local s = 0 for i = 1, n do s = (s + i * 3) % 65537 end return s end
local BUSY = "sample_spec.lua:" .. debug.getinfo(busy, "S").linedefined

describe("profile.sample", function()
  after_each(function()
    sessions.stop_all()
  end)

  it("is reachable under both module names", function()
    assert.equal(require("tecs.profile"), require("tecs.utils.profile"))
    assert.is_function(profile.sample)
    assert.is_function(profile.trace)
  end)

  -- Compiled leaves are functions (`file:3-3`) at the default precision and
  -- lines (`file:3`) at line precision; the six/three/one functions each sit
  -- on one line, so both name the same code.
  for _, case in ipairs({ { "function", "%d-%d" }, { "line", "%d" } }) do
    local precision, suffix = case[1], case[2]
    it("attributes time in known proportions (6:3:1) at " .. precision .. " precision", function()
      local work = dofile("spec/fixtures/proportions.lua")
      work.run(50, 2000) -- warm up: let the JIT compile the loops first
      local s = profile.sample({ intervalMs = 1, precision = precision })
      -- The truth: each function timed alone in the session's pauses (the
      -- same loop body, but each its own trace).
      local want, again = sampling.interleaved(s, 6, function()
        return sampling.time_parts({
          six = function() work.six(20000) end,
          three = function() work.three(20000) end,
          one = function() work.one(20000) end,
        }, 0.06)
      end, function() sampling.until_samples(s, 250, function() work.run(20, 20000) end) end)
      local rows = collapsed.parse(s:stop())
      assert.equal(precision, s:stats().precision)
      local function share(line)
        local frame = "spec/fixtures/proportions.lua:" .. suffix:format(line, line)
        return collapsed.sum(rows, function(r) return r.frames[#r.frames] == frame end)
      end
      local a, b, c = share(3), share(4), share(5)
      local total = a + b + c
      assert.is_true(total >= 0.9 * s:stats().recordedSamples, "samples in the workload: " .. total)
      local msg = string.format("shares %.1f / %.1f / %.1f (n=%d)", 100 * a / total, 100 * b / total, 100 * c / total,
        total)
      for _, part in ipairs({ { a, "six" }, { b, "three" }, { c, "one" } }) do
        local name = part[2]
        sampling.check_share(name .. ", " .. msg, part[1] / total, (want[name] + again[name]) / 2, total,
          math.abs(want[name] - again[name]))
      end
    end)
  end

  it("gives the whole process's CPU time beside the profiled thread's", function()
    -- Eight threads of libc's strlen over 64 MiB each: CPU time of the
    -- process that the profiled thread (waiting in pthread_join) never sees.
    local ffi = require("ffi")
    ffi.cdef [[
      typedef unsigned long tecs_spec_pthread_t;
      int pthread_create(tecs_spec_pthread_t *, const void *, void *(*)(void *), void *);
      int pthread_join(tecs_spec_pthread_t, void **);
    ]]
    pcall(ffi.cdef, "size_t strlen(const char *);")
    local n = 64 * 1024 * 1024
    local buf = ffi.new("char[?]", n + 1)
    ffi.fill(buf, n, 65)
    local s = profile.sample()
    local start = ffi.cast("void *(*)(void *)", ffi.C.strlen)
    for _ = 1, 8 do
      local t, ret = ffi.new("tecs_spec_pthread_t[1]"), ffi.new("void *[1]")
      assert.equal(0, ffi.C.pthread_create(t, nil, start, buf))
      assert.equal(0, ffi.C.pthread_join(t[0], ret))
      assert.equal(n, tonumber(ffi.cast("uintptr_t", ret[0])))
    end
    s:stop()
    local st = s:stats()
    assert.is_number(st.processCpuSec)
    assert.is_true(st.processCpuSec - st.cpuSec > 0.005,
      string.format("process %.4f s, thread %.4f s", st.processCpuSec, st.cpuSec))
  end)

  it("reaches the requested rate at intervalMs = 1", function()
    local s = profile.sample({ intervalMs = 1 })
    sampling.for_cpu(1.0, function() busy(10000) end)
    s:stop()
    local st = s:stats()
    local msg = string.format("rate %.0f/s of %.0f/s requested (%s clock, %s)", st.rate, st.requestedRate, st.clock,
      tostring(st.clockNote))
    if st.clock == "thread-cpu" then
      -- The task-clock source counts the thread's CPU time, whatever the load.
      assert.is_true(st.rate > 0.9 * st.requestedRate, msg)
      assert.equal("SIGTRAP", st.signal)
    else
      -- Without perf events the rate is the kernel tick's, and the session
      -- says why it could not do better.
      assert.is_true(st.rate > 50, msg)
      assert.is_string(st.clockNote, msg)
    end
  end)

  it("with clock = \"wall\", charges blocked time where the thread blocked, without cutting waits short", function()
    local ffi = require("ffi")
    pcall(ffi.cdef, "int usleep(unsigned int usec);")
    local function frame_sleep()
      local rc = ffi.C.usleep(3000) -- not a tail call: the frame must stay
      return rc
    end
    local s = profile.sample({ clock = "wall" })
    local early, frames = 0, 0
    local t0, call_line = os.time(), debug.getinfo(1, "l").currentline + 3
    repeat
      busy(20000)
      if frame_sleep() ~= 0 then early = early + 1 end
      frames = frames + 1
    until frames >= 300 or os.time() - t0 > 10
    local rows = collapsed.parse(s:stop())
    local st = s:stats()
    local msg = string.format("%s clock: %d of %d sleeps cut short, %s blocked samples", st.clock, early, frames,
      tostring(st.blockedSamples))
    if st.interruptsWaits then
      -- The timer fallback (no perf events) says that it interrupts waits.
      assert.equal("wall-timer", st.clock, msg)
      return
    end
    assert.equal("wall", st.clock, msg)
    assert.equal(0, early, msg)
    -- About 3 ms per frame blocked: at least half of it must show up.
    assert.is_true(st.blockedSamples >= frames * 3 * 0.5, msg)
    -- A frame in frame_sleep (its span, or a line inside it), or the line
    -- that calls it where the trace inlined it with no snapshot inside
    -- (docs/sampling.md, "Where a sample is charged").
    local info = debug.getinfo(frame_sleep, "S")
    local at_sleep = collapsed.sum(rows, function(r)
      for _, f in ipairs(r.frames) do
        local a = tonumber(f:match("sample_spec%.lua:(%d+)"))
        if a and (a >= info.linedefined and a <= info.lastlinedefined or a == call_line) then return true end
      end
      return false
    end)
    assert.is_true(at_sleep >= st.blockedSamples * 0.8, msg .. ", " .. at_sleep .. " of them in frame_sleep")
  end)

  it("puts zone paths first and marks compiled code N", function()
    local s = profile.sample()
    sampling.for_cpu(0.6, function()
      zone("update") zone("physics") busy(20000) zone() zone()
      zone("render") busy(10000) zone()
    end)
    local rows = collapsed.parse(s:stop())
    local phys = collapsed.sum(rows, function(r) return r.frames[1] == "update" and r.frames[2] == "physics" end)
    local render = collapsed.sum(rows, function(r) return r.frames[1] == "render" end)
    -- physics runs twice render's loop: about 2/3 and 1/3 of 0.6 s.
    assert.is_true(phys >= sampling.least_samples(s, 0.6 * 0.6), "update;physics samples: " .. phys)
    assert.is_true(render >= sampling.least_samples(s, 0.6 * 0.3), "render samples: " .. render)
    assert.is_true(phys > render)
    local busy_n = collapsed.sum(rows, function(r)
      return r.state == "N" and r.frames[#r.frames]:find(BUSY, 1, true) ~= nil
    end)
    assert.is_true(busy_n >= sampling.least_samples(s, 0.5), "compiled busy loop not marked N")
  end)

  it("marks interpreted code I", function()
    local function interp(n) local s = 0 for i = 1, n do s = (s + i * 3) % 65537 end return s end
    jit.off(interp, true)
    local s = profile.sample()
    sampling.for_cpu(0.5, function() interp(20000) end)
    local rows = collapsed.parse(s:stop())
    jit.on(interp, true)
    local i_count = collapsed.sum(rows, function(r) return r.state == "I" and collapsed.has_frame(r, "sample_spec.lua") end)
    local n_count = collapsed.sum(rows, function(r) return r.state == "N" and collapsed.has_frame(r, "sample_spec.lua:7[0-9]") end)
    assert.is_true(i_count >= sampling.least_samples(s, 0.45), "interpreted samples: " .. i_count)
    assert.is_true(n_count < i_count / 10)
  end)

  it("keeps exactly the matching zone subtree with the zone filter", function()
    local s = profile.sample({ zone = "a/Render" })
    sampling.for_cpu(0.6, function()
      zone("a") zone("Render") busy(5000) zone("post") busy(5000) zone() zone()
      zone("Renderer") busy(5000) zone() zone()
      zone("b") busy(5000) zone()
      busy(5000)
    end)
    local text = s:stop()
    local rows = collapsed.parse(text)
    assert.is_true(#rows > 0)
    local post = 0
    for _, r in ipairs(rows) do
      assert.equal("a", r.frames[1], r.line)
      assert.equal("Render", r.frames[2], r.line)
      assert.is_false(r.frames[3] == "Renderer", r.line)
      if r.frames[3] == "post" then post = post + r.count end
    end
    assert.is_true(post > 0, "the nested zone is kept")
    assert.is_true(s:stats().filteredSamples > 0)
  end)

  it("records nothing while paused", function()
    -- (not tail calls, so that these frames stay on the stack)
    local function in_pause(n) local r = busy(n) return r end
    local function in_run(n) local r = busy(n) return r end
    local s = profile.sample()
    s:pause(); s:pause()
    sampling.for_cpu(0.4, function() in_pause(10000) end)
    s:resume(); s:resume()
    sampling.for_cpu(0.4, function() in_run(10000) end)
    local rows = collapsed.parse(s:stop())
    local paused_line = debug.getinfo(in_pause, "S").linedefined
    local run_line = debug.getinfo(in_run, "S").linedefined
    assert.equal(0, collapsed.sum(rows, function(r) return collapsed.has_frame(r, "sample_spec.lua:" .. paused_line .. "$") end))
    assert.is_true(collapsed.sum(rows, function(r) return collapsed.has_frame(r, "sample_spec.lua:" .. run_line .. "$") end)
      >= sampling.least_samples(s, 0.35))
    assert.is_true(s:stats().pausedSamples >= sampling.least_samples(s, 0.35))
  end)

  it("sorts lines by count, descending", function()
    local s = profile.sample()
    sampling.for_cpu(0.4, function() zone("x") busy(8000) zone() busy(2000) end)
    local rows = collapsed.parse(s:stop())
    for i = 2, #rows do assert.is_true(rows[i - 1].count >= rows[i].count) end
  end)

  it("marks a stack cut at stackDepth with a [truncated stack] root frame", function()
    -- 40 nested calls under a depth of 8: every sample inside is cut and
    -- keeps the innermost 8 frames; a call 2 deep is never cut. Both run in
    -- a coroutine, whose stack starts empty (the runner's frames are not
    -- part of it).
    local function nest(n) if n == 0 then return busy(20000) end return nest(n - 1) + 1 end
    local function burn_in_coroutine(seconds, depth)
      coroutine.wrap(function() sampling.for_cpu(seconds, function() nest(depth) end) end)()
    end
    local s = profile.sample({ stackDepth = 8 })
    burn_in_coroutine(0.4, 40)
    local rows = collapsed.parse(s:stop())
    local cut, whole = 0, 0
    for _, r in ipairs(rows) do
      if r.frames[1] == "[truncated stack]" then
        -- The marker and the innermost 8 frames; fewer only where frames of
        -- the profiler's own were dropped after the cut (a tick in stop()).
        assert.is_true(#r.frames <= 9, r.line)
        if #r.frames == 9 then cut = cut + r.count end
        for i = 2, #r.frames do assert.is_nil(r.frames[i]:find("truncated", 1, true), r.line) end
      else
        whole = whole + r.count
        assert.is_true(#r.frames <= 8, r.line)
      end
    end
    assert.is_true(cut >= sampling.least_samples(s, 0.35), "cut samples: " .. cut .. ", whole: " .. whole)

    -- Only the coroutine's samples: one taken on the runner's own (deep)
    -- stack between the coroutine's end and the stop would be cut.
    s = profile.sample({ stackDepth = 8, skipStartingThread = true })
    burn_in_coroutine(0.2, 2)
    local text = s:stop()
    assert.is_nil(text:find("[truncated stack]", 1, true), text)
    assert.is_true(#collapsed.parse(text) > 0)
  end)

  it("names C functions of loaded modules by their Lua path", function()
    -- lpeg.match is a C function; a match-time capture calls back into Lua,
    -- so it is on the stack under the callback's samples.
    local lpeg = require("lpeg")
    local pattern = lpeg.Cmt(lpeg.P(1), function() busy(3000) return true end) ^ 0
    local s = profile.sample()
    sampling.for_cpu(0.4, function() lpeg.match(pattern, "xxxxxxxx") end)
    local rows = collapsed.parse(s:stop())
    local named, unnamed = 0, 0
    for _, r in ipairs(rows) do
      for _, f in ipairs(r.frames) do
        if f == "lpeg.match" then named = named + r.count end
        if f:find("^%[C:") then unnamed = unnamed + r.count end
      end
    end
    assert.is_true(named >= sampling.least_samples(s, 0.35), "samples under lpeg.match: " .. named)
    assert.equal(0, unnamed)
  end)

  it("names a C function by its Lua path in every view of a running session, as at stop", function()
    local lpeg = require("lpeg")
    local pattern = lpeg.Cmt(lpeg.P(1), function() busy(3000) return true end) ^ 0
    local s = profile.sample()
    sampling.until_samples(s, 50, function() lpeg.match(pattern, "xxxxxxxx") end)
    s:pause()
    local function named(what, text)
      local under = collapsed.sum(collapsed.parse(text), function(r) return collapsed.has_frame(r, "^lpeg%.match$") end)
      assert.is_true(under > 0, what .. ":\n" .. text)
      assert.is_nil(text:find("[C:", 1, true), what .. ":\n" .. text)
    end
    named("collapsed", s:collapsed())
    named("delta", s:delta("collapsed"))
    local svg = profile.flamegraph(s)
    assert.matches("lpeg%.match", svg)
    assert.is_nil(svg:find("[C:", 1, true), svg)
    s:resume()
    named("stop", s:stop())
  end)

  it("walks the modules for names only when the session has recorded a function no walk looked for", function()
    local cfuncs = require("tecs.profile.cfuncs")
    local native = require("tecs.profile.native")
    local lpeg = require("lpeg")
    local pattern = lpeg.Cmt(lpeg.P(1), function() busy(3000) return true end) ^ 0
    local s = profile.sample()
    local walks = 0
    native.raw.setFunctionPaths(function()
      walks = walks + 1
      return cfuncs.paths()
    end)
    sampling.until_samples(s, 50, function() lpeg.match(pattern, "xxxxxxxx") end)
    -- Paused, the session records nothing new: the first view walks, the
    -- others do not.
    s:pause()
    s:collapsed()
    local after_first = walks
    assert.is_true(after_first >= 1, "walks: " .. walks)
    s:collapsed()
    s:delta("collapsed")
    profile.report(s, { limit = 5 })
    s:hitches(3)
    assert.equal(after_first, walks)
    -- A function no walk has seen (a chunk of its own, which no path
    -- reaches) makes the next view walk once more.
    local fresh = assert(loadstring("local n = ... local s = 0 for i = 1, n do s = (s + i * 7) % 65521 end return s",
      "=fresh_chunk"))
    s:resume()
    sampling.until_samples(s, 50, function() fresh(5000) end)
    s:pause()
    assert.matches("fresh_chunk:", s:collapsed())
    assert.is_true(walks > after_first, "walks: " .. walks)
    local after_fresh = walks
    s:collapsed()
    assert.equal(after_fresh, walks)
    s:resume()
    s:stop()
  end)

  it("names builtins from jit.vmdef", function()
    -- A builtin shows on the stack while it calls back into Lua.
    local s = profile.sample({ stackDepth = 4 })
    sampling.for_cpu(0.5, function() pcall(busy, 10000) end)
    local rows = collapsed.parse(s:stop())
    local through_pcall = collapsed.sum(rows, function(r)
      return r.frames[#r.frames - 1] == "pcall" and r.frames[#r.frames]:find(BUSY, 1, true) ~= nil
    end)
    assert.is_true(through_pcall >= sampling.least_samples(s, 0.45), "samples under pcall: " .. through_pcall)
    for _, r in ipairs(rows) do assert.is_falsy(r.line:find("[builtin#", 1, true), r.line) end
  end)

  it("writes the file given to stop and returns the same text", function()
    local path = os.tmpname()
    local s = profile.sample()
    sampling.for_cpu(0.2, function() busy(5000) end)
    local text = s:stop(path)
    local f = assert(io.open(path, "rb"))
    local on_disk = f:read("*a")
    f:close()
    os.remove(path)
    assert.equal(text, on_disk)
    assert.is_true(#collapsed.parse(text) > 0)
  end)

  it("keeps the profile when the file cannot be written", function()
    local s = profile.sample()
    sampling.for_cpu(0.2, function() busy(5000) end)
    local ok, err = pcall(s.stop, s, "/nonexistent-dir/x/out.collapsed")
    assert.is_false(ok)
    assert.matches("/nonexistent%-dir/x/out.collapsed", err)
    assert.matches("No such file or directory", err)
    local text = s:collapsed()
    assert.is_true(#collapsed.parse(text) > 0)
    local path = os.tmpname()
    assert.equal(text, s:write(path))
    os.remove(path)
    assert.is_nil(require("tecs.profile.sample").active())
  end)

  describe("errors", function()
    it("starting while a session is active", function()
      local s = profile.sample()
      local ok, err = pcall(profile.sample)
      assert.is_false(ok)
      assert.matches("already active", err)
      s:stop()
    end)

    it("stop twice, pause/resume after stop", function()
      local s = profile.sample()
      s:stop()
      for _, m in ipairs({ "stop", "pause", "resume" }) do
        local ok, err = pcall(s[m], s)
        assert.is_false(ok)
        assert.matches("already stopped", err)
      end
    end)

    local bad = {
      { { intervalMs = 0 }, "intervalMs" },
      { { intervalMs = -5 }, "intervalMs" },
      { { intervalMs = "10" }, "intervalMs" },
      { { intervalMs = 0 / 0 }, "intervalMs" },
      { { zone = 5 }, "'zone'" },
      { { zone = "" }, "'zone'" },
      { { stackDepth = 0 }, "stackDepth" },
      { { stackDepth = 2.5 }, "stackDepth" },
      { { clock = "gpu" }, "clock" },
      { { interval = 5 }, "unknown option 'interval'" },
      { { [1] = true }, "unknown option" },
      { "fast", "table or nil expected" },
    }
    for _, case in ipairs(bad) do
      it("rejects " .. (type(case[1]) == "table" and next(case[1]) and tostring(next(case[1])) or tostring(case[1])), function()
        local ok, err = pcall(profile.sample, case[1])
        assert.is_false(ok)
        assert.matches(case[2], err, 1, true)
        assert.matches("^profile.sample: ", err:gsub("^[^:]+:%d+: ", ""))
        assert.is_nil(require("tecs.profile.sample").active(), "no half-started session")
        -- and a good session can still start afterwards
        profile.sample():stop()
      end)
    end

    it("reports errors at the caller's line", function()
      local ok, err = pcall(function() profile.sample({ intervalMs = 0 }) end)
      assert.is_false(ok)
      assert.matches("sample_spec.lua:%d+: profile.sample", err)
    end)

    it("method called with a dot", function()
      local s = profile.sample()
      local ok, err = pcall(s.stop)
      assert.is_false(ok)
      assert.matches("use a colon", err)
      s:stop()
    end)

    it("bad filename", function()
      local s = profile.sample()
      local ok, err = pcall(s.stop, s, 42)
      assert.is_false(ok)
      assert.matches("'filename'", err)
      assert.is_true(s:isRunning(), "a rejected argument does not stop the session")
      s:stop()
    end)
  end)
end)
