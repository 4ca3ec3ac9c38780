-- `tecs-profile report` on a timeline (Chrome trace events): the frames
-- and the slowest of them read back from the file must be those the
-- session had. The slow frame is set by construction (CPU time burned in
-- a known function); nothing depends on the machine's speed.
local profile = require("tecs.profile")
local sample = require("tecs.profile.sample")
local timeline = require("tecs.profile.timeline")
local options = require("tecs.profile.cli.options")
local run = require("spec.support.run")
local sampling = require("spec.support.sampling")

local work = dofile("spec/fixtures/frames_work.lua")

-- The rows of a hitches table: { index, ms, samples, gc, first = first
-- function named } (its columns of CPU time left out).
local function rows(text)
  local out, header = {}, text:match("^Slowest %d+ of (%d+) frames:\n")
  for line in text:gmatch("[^\n]+") do
    line = line:gsub("^(%s*%d+%s+[%d.]+)%s+[%d.?]+%s+[%d.?]+(%s+%d+%s+%d+  )", "%1%2")
    local index, ms, samples, gc, what = line:match("^%s*(%d+)%s+([%d.]+)%s+(%d+)%s+(%d+)  (.*)$")
    if index then
      out[#out + 1] = { index = tonumber(index), ms = ms, samples = tonumber(samples), gc = tonumber(gc),
        first = what:match("^%d+%% ([^,]*)") }
    end
  end
  return out, tonumber(header)
end

describe("tecs-profile report on a timeline", function()
  local dir, trace, collapsed, run_out

  setup(function()
    dir = run.tmpdir()
    trace, collapsed = dir .. "/game.trace.json", dir .. "/game.collapsed"
    -- run's hitches are on stderr (stdout is the program's).
    local rc, _, err = run.run3(run.cli .. " run -q --hitches 12 --timeline " .. run.quote(trace) .. " -o " ..
      run.quote(collapsed) .. " spec/fixtures/frames_game.lua")
    assert.equal(0, rc, err)
    run_out = err
  end)

  teardown(function()
    local active = sample.active()
    if active then active:stop() end
    os.execute("rm -rf " .. run.quote(dir))
  end)

  it("report --hitches N names the slow frame first, with the frames run --hitches found", function()
    local want, frames = rows(run_out)
    assert.equal(12, frames, run_out)
    local rc, out, err = run.run3(run.cli .. " report --hitches 2 " .. run.quote(trace))
    assert.equal(0, rc, err)
    local got, got_frames = rows(out)
    assert.equal(frames, got_frames, out)
    assert.equal(2, #got, out)
    -- frame, ms, on CPU, waiting (the file keeps them), samples, gc, what ran.
    assert.matches("^%s+8%s+[%d.]+%s+[%d.]+%s+[%d.]+%s+%d+%s+%d+  %d+%% M%.slow_work %(spec/fixtures/frames_work%.lua:6%)",
      out:match("\n[^\n]*\n([^\n]*)"))
    assert.equal(run_out:match("\n[^\n]*\n([^\n]*)"), out:match("\n[^\n]*\n([^\n]*)"))
    -- The same frames, times, counts and leading function as the session gave.
    for i = 1, 2 do assert.same(want[i], got[i]) end
    -- Every frame, as many as were marked.
    rc, out = run.run3(run.cli .. " report --hitches 50 " .. run.quote(trace))
    assert.equal(0, rc)
    got = rows(out)
    assert.equal(12, #got)
    for i = 1, 12 do
      assert.same({ want[i].index, want[i].ms, want[i].samples }, { got[i].index, got[i].ms, got[i].samples })
    end
  end)

  it("report FILE.trace.json prints the frames", function()
    local want = rows(run_out)
    local samples = 0
    for _, r in ipairs(want) do samples = samples + r.samples end
    local rc, out, err = run.run3(run.cli .. " report " .. run.quote(trace))
    assert.equal(0, rc, err)
    assert.matches("^12 frames %(1 to 12%), [%d.]+ ms in all, " .. samples .. " samples %(%d+ in GC%)\n", out)
    assert.matches("slowest " .. want[1].ms .. " ms (frame " .. want[1].index .. ")", out, 1, true)
    assert.matches("the other views need a collapsed-stack file", out, 1, true)
  end)

  it("the timeline read back holds the session's frames and what ran in them", function()
    work.quick_work(0.02)
    work.slow_work(0.02)
    -- A frame of a long C call and string building: the ticks in table.sort
    -- reach the callback late, several at once, so its samples come closer
    -- together than the interval (the timeline's ranges are then shorter
    -- than the samples they hold).
    local big = {}
    for i = 1, 200000 do big[i] = (i * 7919) % 100003 end
    local function c_and_strings()
      local t = {}
      for i = 1, #big do t[i] = big[i] end
      table.sort(t)
      local parts = {}
      for i = 1, 40000 do parts[#parts + 1] = string.format("%d:%s", i, tostring(i * 3.5)) end
      return #table.concat(parts, ",")
    end
    local s = profile.sample({ intervalMs = 1 })
    profile.frame()
    work.quick_work(0.03)
    profile.frame()
    work.slow_work(0.06)
    profile.frame()
    work.quick_work(0.03)
    profile.frame()
    sampling.for_cpu(0.05, c_and_strings)
    s:stop()
    local t = assert(timeline.read_trace(s:timeline("chrome-trace")))
    assert.equal(s.intervalMs, t.intervalMs)
    local frames = s:frames()
    assert.equal(4, #frames)
    assert.equal(#frames, #t.frames)
    for i, f in ipairs(frames) do
      local r = t.frames[i]
      assert.same({ f.index, f.ms, f.samples, f.gcSamples }, { r.index, r.ms, r.samples, r.gcSamples })
      -- Start times are whole microseconds in the file: half a microsecond
      -- apart at most (and a rounding error of the doubles).
      assert.is_true(math.abs(f.startMs - r.startMs) <= 0.0005 + 1e-9, f.startMs .. " vs " .. r.startMs)
    end
    local want, got = s:hitches(4), timeline.trace_hitches(t, 4)
    assert.equal(4, #got)
    for i = 1, 4 do
      assert.equal(want[i].index, got[i].index)
      local share = 0
      for _, e in ipairs(got[i].top) do share = share + e.share end
      assert.is_true(math.abs(share - 1) < 1e-9, "shares add up to " .. share)
      -- What ran in the frame, function for function, as the session had it:
      -- the file counts each frame's samples.
      assert.same(want[i].top, got[i].top)
    end
    -- The slow frame (the 2nd marked) is slow_work's, in the file as in the session.
    local slow
    for _, h in ipairs(got) do if h.index == frames[2].index then slow = h end end
    assert.matches("^M%.slow_work ", slow.top[1].name)
    assert.is_true(slow.top[1].share > 0.5, "share " .. slow.top[1].share)
  end)

  it("report --hitches N from the file gives the session's hitches, function for function, from any directory", function()
    -- A chunk whose source no directory holds: the session names its
    -- function from what it recorded while sampling, and so must the file.
    local chunk = assert(loadstring(table.concat({
      "local M = {}",
      "function M.spread_work(n)",
      "  local s = 0",
      "  for i = 1, n do",
      "    s = (s + i * 5) % 65519",
      "    s = (s * 3 + i) % 65497",
      "  end",
      "  return s",
      "end",
      "return M",
    }, "\n"), "=hitchgame.lua"))()
    local big = {}
    for i = 1, 20000 do big[i] = (i * 7919) % 100003 end
    local function c_work()
      local t = {}
      for i = 1, #big do t[i] = big[i] end
      table.sort(t)
      return #table.concat(t, ",", 1, 2000)
    end
    local s = profile.sample({ intervalMs = 1 })
    -- Each frame runs until it holds samples enough to rank several
    -- functions; the third is the longest by construction (three parts).
    local parts = { { work.quick_work }, { chunk.spread_work, c_work }, { work.slow_work, chunk.spread_work, c_work } }
    for _, frame in ipairs(parts) do
      profile.frame()
      for _, fn in ipairs(frame) do
        -- frames_work's functions take seconds of CPU time, the chunk's a count.
        local arg = (fn == work.quick_work or fn == work.slow_work) and 0.002 or 3000
        sampling.until_samples(s, 40, function() fn(arg) end)
      end
    end
    s:stop()
    local frames = s:frames()
    assert.equal(3, #frames)
    local path = dir .. "/named.trace.json"
    s:write(path)
    local want = s:hitches(3)
    -- Read back here: the same frames, functions and shares (start times
    -- are whole microseconds in the file).
    local got = timeline.trace_hitches(assert(timeline.read_trace(assert(run.read(path)))), 3)
    assert.equal(3, #got)
    for i, h in ipairs(want) do
      local r = got[i]
      assert.same({ h.index, h.ms, h.samples, h.gcSamples, h.top }, { r.index, r.ms, r.samples, r.gcSamples, r.top })
    end
    -- The chunk's function is named as a function, not line by line.
    local named = 0
    for _, h in ipairs(want) do
      if h.index > 1 then assert.is_true(#h.top >= 2, "frame " .. h.index .. " ranks " .. #h.top .. " functions") end
      for _, e in ipairs(h.top) do
        if e.name:match("^[%w_.:]+ %(hitchgame%.lua:2%)$") then named = named + 1 end
        assert.is_nil(e.name:match("^hitchgame%.lua:%d+$"), e.name)
      end
    end
    assert.equal(2, named, timeline.hitches_text(want, #frames))
    -- From another directory, where neither source is readable: the same text.
    local cli = run.luajit .. " " .. run.quote(run.root .. "/bin/tecs-profile")
    local rc, out, err = run.run3("cd / && " .. cli .. " report --hitches 3 " .. run.quote(path))
    assert.equal(0, rc, err)
    assert.equal(timeline.hitches_text(want, #frames), out)
  end)

  it("refuses other files with a reason", function()
    local rc, _, err = run.run3(run.cli .. " report --hitches 2 " .. run.quote(collapsed))
    assert.equal(1, rc)
    assert.matches('--hitches needs a timeline file written by --timeline or :write("x.trace.json")', err, 1, true)
    rc, _, err = run.run3(run.cli .. " report --hitches 2 " .. run.quote(dir .. "/missing.trace.json"))
    assert.equal(1, rc)
    assert.matches("cannot read '" .. dir .. "/missing.trace.json'", err, 1, true)
    local bad = dir .. "/bad.trace.json"
    run.write(bad, '{"traceEvents":[{"name":')
    rc, _, err = run.run3(run.cli .. " report --hitches 2 " .. run.quote(bad))
    assert.equal(1, rc)
    assert.matches("bad.trace.json: not Chrome trace event JSON (", err, 1, true)
    local other = dir .. "/other.json"
    run.write(other, '{"traceEvents":[],"otherData":{"exporter":"another tool"}}')
    rc, _, err = run.run3(run.cli .. " report " .. run.quote(other))
    assert.equal(1, rc)
    assert.matches('from "another tool", not a timeline tecs-profile wrote', err, 1, true)
    rc, _, err = run.run3(run.cli .. " report --by line " .. run.quote(trace))
    assert.equal(1, rc)
    assert.matches("is a timeline: --by needs a collapsed-stack file", err, 1, true)
    rc, _, err = run.run3(run.cli .. " report --hitches 0 " .. run.quote(trace))
    assert.equal(2, rc)
    assert.matches("--hitches needs a positive integer, got 0", err, 1, true)
    -- The collapsed file still gets its views, also when its first frame
    -- starts with "[" (a C function's root frame, a truncated stack).
    rc = run.run3(run.cli .. " report " .. run.quote(collapsed))
    assert.equal(0, rc)
    local bracketed = dir .. "/bracketed.collapsed"
    run.write(bracketed, "[C:luajit+0x92c0];main.lua:3_[I] 7\n[truncated stack];a.lua:1_[N] 3\n")
    local out
    rc, out, err = run.run3(run.cli .. " report " .. run.quote(bracketed))
    assert.equal(0, rc, err)
    assert.matches("# 10 samples", out, 1, true)
    -- The help comes from the option table.
    local help = options.usage("report")
    assert.matches("--hitches N", help, 1, true)
    local _, out = run.run3(run.cli .. " report --help")
    assert.matches(help, out, 1, true)
  end)
end)
