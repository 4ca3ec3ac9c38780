-- The time axis: timestamped samples, frames (profile.frame) and hitches.
-- Frame lengths are set by construction (CPU time burned in known
-- functions); assertions take their bounds from sample counts, never from
-- the machine's speed.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local sample = require("tecs.profile.sample")

local THIS = "^[^:]*timeline_spec%.lua:%d+: "
local work = dofile("spec/fixtures/frames_work.lua")
local sampling = require("spec.support.sampling")

-- Marks a frame with the session paused, and returns the samples recorded
-- so far: every sample recorded later is taken after the mark.
local function mark_between(s)
  s:pause()
  local recorded = s:stats().recordedSamples
  profile.frame()
  s:resume()
  return recorded
end

local function sum_samples(frames)
  local n = 0
  for _, f in ipairs(frames) do n = n + f.samples end
  return n
end

describe("the time axis", function()
  setup(function()
    -- Let the JIT compile both loops before any session measures them.
    work.quick_work(0.05)
    work.slow_work(0.05)
  end)

  after_each(function()
    sessions.stop_all()
    _G.love = nil
  end)

  it("ranks the slow frame first and names the function that burned its time", function()
    local s = profile.sample({ intervalMs = 1 })
    work.quick_work(0.02) -- before the first mark: in no frame
    local recorded_at_first = mark_between(s)
    for i = 1, 10 do
      if i == 6 then work.slow_work(0.3) else work.quick_work(0.005) end
      if i < 10 then profile.frame() end
    end
    s:stop()
    local st = s:stats()
    local frames = s:frames()
    assert.equal(10, #frames)
    for i, f in ipairs(frames) do
      assert.equal(i, f.index)
      assert.is_true(f.ms >= 0 and f.samples >= 0 and f.gcSamples <= f.samples)
      if i > 1 then
        local prev = frames[i - 1]
        assert.is_true(math.abs(prev.startMs + prev.ms - f.startMs) < 1e-3, "frames are contiguous")
      end
    end
    assert.is_true(frames[1].startMs > 0, "the first mark came after the session's start")
    assert.equal(st.recordedSamples - recorded_at_first, sum_samples(frames))
    assert.equal(0, st.timelineDroppedSamples)

    local hitch = s:hitches(1)
    assert.equal(1, #hitch)
    local h = hitch[1]
    assert.equal(6, h.index)
    assert.equal(frames[6].ms, h.ms)
    assert.equal(frames[6].samples, h.samples)
    -- 0.3 s of CPU time: about 300 samples at 1 ms on any machine.
    assert.is_true(h.samples >= sampling.least_samples(s, 0.3), "samples in the slow frame: " .. h.samples)
    assert.matches("^M%.slow_work %(spec/fixtures/frames_work%.lua:%d+%)$", h.top[1].name)
    assert.is_true(h.top[1].share >= 0.8, "share of slow_work: " .. h.top[1].share)
    local total = 0
    for i, t in ipairs(h.top) do
      total = total + t.share
      if i > 1 then assert.is_true(t.share <= h.top[i - 1].share) end
    end
    assert.is_true(math.abs(total - 1) < 1e-9, "the shares cover the frame")

    local all = s:hitches(100)
    assert.equal(10, #all, "no more hitches than frames")
    for i = 2, #all do assert.is_true(all[i].ms <= all[i - 1].ms) end
  end)

  it("makes one frame per mark, the last one running to the end", function()
    local s = profile.sample({ intervalMs = 1 })
    -- Paused while marking: a tick among the marks would land in an early
    -- frame.
    s:pause()
    for _ = 1, 37 do profile.frame() end
    s:resume()
    work.quick_work(0.02)
    assert.equal(37, #s:frames(), "frames of a running session")
    s:stop()
    local frames = s:frames()
    assert.equal(37, #frames)
    assert.equal(37, s:stats().frames)
    assert.equal(0, s:stats().droppedFrames)
    assert.equal(sum_samples(frames), frames[37].samples, "the work ran in the last frame")
    profile.frame()
    assert.equal(37, #s:frames(), "a mark after the stop changes nothing")
  end)

  it("keeps at most timelineSamples samples, dropping the oldest", function()
    -- Line precision: compiled code takes a sample at a line change, not
    -- only at a function's entry or exit, so the loop fills the ring.
    local s = profile.sample({ intervalMs = 1, timelineSamples = 50, precision = "line" })
    local r0 = mark_between(s)
    -- Twice the ring's samples in the first frame, whatever the clock's rate.
    sampling.until_samples(s, 100, function() work.quick_work(0.005) end)
    local r1 = mark_between(s)
    work.quick_work(0.01)
    s:stop()
    local st = s:stats()
    local frames = s:frames()
    assert.equal(2, #frames)
    assert.equal(50 * 16, st.timelineBytes)
    assert.is_true(st.timelineDroppedSamples > 0)
    assert.equal(st.recordedSamples, st.timelineSamples + st.timelineDroppedSamples)
    -- The newest samples are kept: all of the last frame's, part of the first's.
    assert.equal(st.recordedSamples - r1, frames[2].samples)
    assert.is_true(frames[1].samples < r1 - r0)
    assert.equal(st.timelineSamples, frames[1].samples + frames[2].samples)
  end)

  it("slowFrameMs: fast frames keep their counts, their samples leave the timeline", function()
    -- Every frame is fast at 60 s: the timeline keeps only the samples
    -- taken outside any frame; the frames still count theirs.
    local s = profile.sample({ intervalMs = 1, slowFrameMs = 60000 })
    assert.equal(60000, s.slowFrameMs)
    work.quick_work(0.02)
    local before = mark_between(s)
    for _ = 1, 3 do
      work.quick_work(0.02)
      profile.frame()
    end
    work.quick_work(0.02)
    s:stop()
    local st = s:stats()
    local frames = s:frames()
    assert.equal(4, #frames)
    assert.equal(st.recordedSamples - before, sum_samples(frames))
    -- 80 ms of CPU time: tens of ticks at 1 ms.
    assert.is_true(sum_samples(frames) >= sampling.least_samples(s, 0.08), "samples in frames: " .. sum_samples(frames))
    assert.equal(sum_samples(frames), st.timelineFastFrameSamples)
    assert.equal(before, st.timelineSamples)
    assert.equal(st.recordedSamples, st.timelineSamples + st.timelineFastFrameSamples)
    for _, f in ipairs(frames) do
      assert.equal(0, s._native:frameProfile(f.index):samples())
    end
    -- Nothing of the aggregate is lost.
    assert.equal(st.recordedSamples, s._native:profile():samples())
  end)

  it("slowFrameMs: a frame at least that long keeps its samples", function()
    -- A frame of 0.2 s of CPU time lasts at least 50 ms on any machine;
    -- the short ones are fast or slow depending on the machine, and each
    -- is consistent with its duration.
    local s = profile.sample({ intervalMs = 1, slowFrameMs = 50 })
    profile.frame()
    for i = 1, 6 do
      if i == 4 then work.slow_work(0.2) else work.quick_work(0.005) end
      profile.frame()
    end
    s:stop()
    local st = s:stats()
    local frames = s:frames()
    assert.equal(7, #frames)
    assert.is_true(frames[4].ms >= 50)
    assert.is_true(frames[4].samples >= sampling.least_samples(s, 0.2), "samples in the slow frame: " .. frames[4].samples)
    local fast = 0
    for _, f in ipairs(frames) do
      local held = s._native:frameProfile(f.index):samples()
      if f.ms < 50 then
        assert.equal(0, held)
        fast = fast + f.samples
      else
        assert.equal(f.samples, held)
      end
    end
    assert.equal(fast, st.timelineFastFrameSamples)
    -- The slowest frame (frame 4, unless the machine stalled a short one
    -- for longer) has its samples, and what ran in it.
    local h = s:hitches(1)[1]
    for _, f in ipairs(frames) do assert.is_true(f.ms <= h.ms) end
    assert.equal(frames[h.index].samples, h.samples)
    if h.samples > 0 then assert.is_true(#h.top > 0) end
    assert.equal(st.recordedSamples, st.timelineSamples + st.timelineFastFrameSamples)
  end)

  it("gives each finished frame the CPU time its thread used, and the rest as waiting", function()
    local s = profile.sample({ intervalMs = 1 })
    profile.frame()
    -- A frame of 40 ms of this process's CPU time.
    local began = os.clock()
    local x = 0
    while os.clock() - began < 0.04 do x = (x + 1) % 7 end
    profile.frame()
    -- A frame that waits 150 ms for another process: off this CPU.
    os.execute("sleep 0.15")
    profile.frame()
    local running = s:frames()
    s:stop()
    local frames = s:frames()
    assert.equal(3, #frames)
    -- The running session's last frame has no end yet, so no CPU time.
    assert.is_nil(running[3].cpuMs)
    for _, f in ipairs(frames) do
      assert.is_number(f.cpuMs, "frame " .. f.index)
      assert.is_true(f.cpuMs >= 0 and f.cpuMs <= f.ms + 1, string.format("%g ms on CPU of %g", f.cpuMs, f.ms))
    end
    -- The busy frame's CPU time is the time the loop counted (the process
    -- has no other thread that runs here), the waiting frame's at least
    -- 150 ms short of its length.
    assert.is_true(frames[1].cpuMs >= 35, string.format("%g ms on CPU", frames[1].cpuMs))
    assert.is_true(frames[2].ms - frames[2].cpuMs >= 140, string.format("%g of %g ms", frames[2].cpuMs, frames[2].ms))
    -- The slowest frames say it as a table.
    local text = require("tecs.profile.timeline").hitches_text(s:hitches(2), #frames)
    assert.matches("on CPU   waiting", text, 1, true)
    local waited = text:match("\n%s+2%s+[%d.]+%s+[%d.]+%s+([%d.]+)")
    assert.is_true(tonumber(waited) >= 140, text)
  end)

  it("on the wall clock, says where a frame waited: another process, I/O, the collector", function()
    local s = profile.sample({ clock = "wall", intervalMs = 1 })
    profile.frame()
    os.execute("sleep 0.1") -- frame 1: waits for a child process
    profile.frame()
    local pipe = assert(io.popen("sleep 0.1; echo done")) -- frame 2: waits reading its pipe
    assert.equal("done\n", pipe:read("*a"))
    pipe:close()
    profile.frame()
    local began = os.clock() -- frame 3: CPU only
    local x = 0
    while os.clock() - began < 0.05 do x = (x + 1) % 7 end
    profile.frame()
    s:stop()
    local by_index = {}
    for _, h in ipairs(s:hitches(4)) do by_index[h.index] = h end
    local function first_wait(h)
      local w = h.waits[1] or {}
      return w.kind, w.share or 0, string.format("%s %.2f of %d samples", tostring(w.kind), w.share or 0, h.samples)
    end
    -- About 100 samples each (25 on a clock of the kernel's tick): nearly
    -- all in the function the frame waited in.
    local kind, share, said = first_wait(by_index[1])
    assert.is_true(kind == "process" and share >= 0.5, said)
    kind, share, said = first_wait(by_index[2])
    assert.is_true(kind == "I/O" and share >= 0.5, said)
    for _, w in ipairs(by_index[3].waits) do
      assert.is_true(w.kind == "collector" or w.share < 0.2, select(3, first_wait(by_index[3])))
    end
    local text = require("tecs.profile.timeline").hitches_text(s:hitches(4), #s:frames())
    assert.matches("; waits: process %d+%%", text)
    assert.matches("; waits: I/O %d+%%", text)
  end)

  it("keeps frames but no samples with timelineSamples = 0", function()
    local s = profile.sample({ intervalMs = 1, timelineSamples = 0 })
    profile.frame()
    work.quick_work(0.02)
    profile.frame()
    s:stop()
    local st = s:stats()
    assert.equal(0, st.timelineSamples)
    assert.equal(0, st.timelineBytes)
    assert.is_true(st.recordedSamples > 0)
    local hitches = s:hitches(2)
    assert.equal(2, #hitches)
    for _, h in ipairs(hitches) do
      assert.equal(0, h.samples)
      assert.same({}, h.top)
    end
  end)

  it("counts samples taken in the garbage collector", function()
    local s = profile.sample({ intervalMs = 1 })
    local heap = {}
    for i = 1, 200000 do heap[i] = { i } end
    mark_between(s)
    sampling.for_cpu(0.2, function() collectgarbage("collect") end)
    s:stop()
    heap = nil
    local f = s:frames()[1]
    assert.is_true(f.samples >= sampling.least_samples(s, 0.2), "samples: " .. f.samples)
    assert.is_true(f.gcSamples > f.samples / 2, ("%d of %d samples in the GC"):format(f.gcSamples, f.samples))
    -- On the Chrome trace, runs of GC samples are instant events that
    -- together hold every GC sample of the timeline.
    local in_runs = 0
    for args in s:timeline("chrome-trace"):gmatch('"name":"GC","cat":"gc","ph":"i"[^{}]*"args":(%b{})') do
      in_runs = in_runs + tonumber(args:match('"samples":(%d+)'))
    end
    local gc_total = 0
    for _, fr in ipairs(s:frames()) do gc_total = gc_total + fr.gcSamples end
    assert.is_true(in_runs >= gc_total and in_runs > 0, in_runs .. " GC samples in runs, " .. gc_total .. " in frames")
  end)

  it("profile.frame() without a session does nothing", function()
    assert.is_nil(sample.active())
    for _ = 1, 3 do assert.equal(0, select("#", profile.frame())) end
    local s = profile.sample()
    s:stop()
    assert.same({}, s:frames(), "marks before the start are not the session's")
    assert.same({}, s:hitches(3))
  end)

  it("rejects a bad n and a bad timelineSamples with clear errors", function()
    local s = profile.sample()
    for _, case in ipairs({ { 0, "number 0" }, { -2, "number %-2" }, { 1.5, "number 1.5" }, { "3", 'string "3"' },
      { nil, "nil" }, { math.huge, "number inf" }, { 0 / 0, "number [-]?nan" } }) do
      local ok, err = pcall(function() local r = s:hitches(case[1]); return r end)
      assert.is_false(ok)
      assert.matches(THIS .. "SampleSession:hitches: bad argument #1 'n' %(positive integer expected, got "
        .. case[2] .. "%)$", err)
    end
    local ok, err = pcall(function() local r = s.hitches(3); return r end)
    assert.is_false(ok)
    assert.matches(THIS .. "SampleSession:hitches: called on number 3; use a colon", err)
    s:stop()
    for _, bad in ipairs({ -1, 2.5, 16777217, "many" }) do
      ok, err = pcall(function() local r = profile.sample({ timelineSamples = bad }); return r end)
      assert.is_false(ok)
      assert.matches(THIS .. "profile%.sample: option 'timelineSamples' must be an integer from 0 %(no timeline%) "
        .. "to 16777216 %(got ", err)
      assert.is_nil(sample.active())
    end
    for _, bad in ipairs({ -1, 60001, "20", 0 / 0 }) do
      ok, err = pcall(function() local r = profile.sample({ slowFrameMs = bad }); return r end)
      assert.is_false(ok)
      assert.matches(THIS .. "profile%.sample: option 'slowFrameMs' must be a number of milliseconds from 0 to 60000 "
        .. "%(got ", err)
      assert.is_nil(sample.active())
    end
  end)

  describe("inside LÖVE (love.timer.step)", function()
    local function fake_love()
      local calls = 0
      local function step() calls = calls + 1; return 0.016 end
      _G.love = { timer = { step = step } }
      return step, function() return calls end
    end

    it("marks a frame at each step and puts the original back at the stop", function()
      local original, calls = fake_love()
      local s = profile.sample()
      assert.are_not.equal(original, love.timer.step)
      for _ = 1, 3 do assert.equal(0.016, love.timer.step()) end
      assert.equal(3, calls())
      assert.equal(3, #s:frames())
      s:stop()
      assert.equal(original, love.timer.step)
    end)

    it("leaves a later wrapper in place, and never marks twice", function()
      local original = fake_love()
      local s = profile.sample()
      local ours = love.timer.step
      local function theirs(...) return ours(...) end
      love.timer.step = theirs
      s:stop()
      assert.equal(theirs, love.timer.step, "another library's wrapper is not clobbered")
      assert.equal(0.016, love.timer.step())
      assert.equal(0, #s:frames(), "no marks once stopped")
      local s2 = profile.sample()
      assert.equal(theirs, love.timer.step, "not wrapped a second time")
      love.timer.step()
      love.timer.step()
      s2:stop()
      assert.equal(2, #s2:frames())
      assert.are_not.equal(original, love.timer.step)
    end)
  end)
end)
