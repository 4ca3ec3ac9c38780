-- The timeline outputs, read back by a real consumer: speedscope's own
-- importer (spec/support/import_speedscope.js) opens the Chrome trace
-- events and the time-ordered speedscope file, and what it shows must run
-- in the order the program ran. Phases are set by construction (CPU time
-- burned in known functions); bounds come from sample counts, never from
-- the machine's speed.
local profile = require("tecs.profile")
local sample = require("tecs.profile.sample")
local run = require("spec.support.run")

local work = dofile("spec/fixtures/frames_work.lua")
local sampling = require("spec.support.sampling")

-- Which workload a stack is in: its innermost frame of frames_work.lua,
-- by line (slow_work is defined above quick_work), or nil.
local QUICK_FROM = 15
local function phase_of(stack)
  local kind
  for line in stack:gmatch("frames_work%.lua:(%d+)") do
    kind = tonumber(line) < QUICK_FROM and "slow" or "quick"
  end
  return kind
end

-- What speedscope's importer made of `path`: { { name, weight, calls = { {start, stack} } } }.
local function import(path)
  local rc, out, err = run.run3("node spec/support/import_speedscope.js " .. run.quote(path))
  assert.equal(0, rc, err)
  local profiles = {}
  for line in out:gmatch("[^\n]+") do
    local kind, a, b = line:match("^(%a+)\t([^\t]*)\t(.*)$")
    if kind == "profile" then
      profiles[#profiles + 1] = { name = a, weight = tonumber(b), calls = {} }
    elseif kind == "call" then
      local calls = profiles[#profiles].calls
      calls[#calls + 1] = { start = tonumber(a), stack = b }
    end
  end
  return profiles
end

-- The phases the calls run through, in order, repeats merged.
local function phases(calls)
  local seq = {}
  for _, c in ipairs(calls) do
    local p = phase_of(c.stack)
    if p and seq[#seq] ~= p then seq[#seq + 1] = p end
  end
  return seq
end

local function find(profiles, pattern)
  for _, p in ipairs(profiles) do
    if p.name:match(pattern) then return p end
  end
end

describe("timeline outputs", function()
  local dir, s

  setup(function()
    work.quick_work(0.05)
    work.slow_work(0.05)
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. run.quote(dir)) == 0)
    -- Three frames: quick, slow, quick.
    s = profile.sample({ intervalMs = 1 })
    profile.frame()
    work.quick_work(0.04)
    profile.frame()
    work.slow_work(0.08)
    profile.frame()
    work.quick_work(0.04)
    s:stop()
  end)

  teardown(function()
    local active = sample.active()
    if active then active:stop() end
    os.execute("rm -rf " .. run.quote(dir))
  end)

  it("speedscope in time order: the samples in the order they were taken", function()
    local path = dir .. "/run.timeline.speedscope.json"
    s:write(path)
    local rc, out = run.run("node spec/support/validate_speedscope.js " .. run.quote(path))
    assert.equal(0, rc, out)
    local profiles = import(path)
    assert.equal(1, #profiles)
    local st = s:stats()
    assert.equal(0, st.timelineDroppedSamples)
    -- Every sample the timeline holds, weighted in milliseconds.
    assert.is_true(math.abs(profiles[1].weight - st.timelineSamples * s.intervalMs) < 1e-6,
      profiles[1].weight .. " vs " .. st.timelineSamples)
    assert.same({ "quick", "slow", "quick" }, phases(profiles[1].calls))
    -- The same text from the method.
    assert.equal(run.read(path), s:timeline("speedscope-timeline"))
  end)

  it("Chrome trace events: nested ranges in time order, and the frames on their own track", function()
    local path = dir .. "/run.trace.json"
    s:write(path)
    local text = assert(run.read(path))
    local profiles = import(path)
    local lua = assert(find(profiles, "Lua %(tid 1%)"), "a Lua track")
    assert.same({ "quick", "slow", "quick" }, phases(lua.calls))
    -- A range per stack frame: the calls below a range start inside it.
    for i, c in ipairs(lua.calls) do
      if i > 1 and c.stack:find(lua.calls[i - 1].stack .. ";", 1, true) == 1 then
        assert.is_true(c.start >= lua.calls[i - 1].start)
      end
    end
    local track = assert(find(profiles, "frames %(tid 2%)"), "a frames track")
    local frames = s:frames()
    assert.equal(3, #frames)
    assert.equal(#frames, #track.calls)
    for i, c in ipairs(track.calls) do
      assert.matches("^frame " .. frames[i].index .. " ", c.stack)
      assert.equal(frames[i].samples, tonumber(c.stack:match('"samples":(%d+)')))
    end
    -- 80 ms of CPU time: tens of ticks at 1 ms, at least 4 at the least
    -- kernel tick.
    assert.is_true(frames[2].samples >= sampling.least_samples(s, 0.08), "samples in the slow frame: " .. frames[2].samples)
    assert.matches('"traceEvents"', text)
    assert.equal(text, s:timeline("chrome-trace"))
  end)

  it("timeline(format) and delta(format) reject what does not apply", function()
    assert.has_error(function() s:timeline("svg") end,
      'SampleSession:timeline: bad argument #1 \'format\' ("speedscope-timeline" or "chrome-trace" or "html" expected, ' ..
      'got string "svg")')
    assert.has_error(function() s:delta("chrome-trace") end,
      'SampleSession:delta: bad argument #1 \'format\' (nil or "collapsed" or "svg" or "speedscope" or "pprof" or "firefox" ' ..
      'expected, got string "chrome-trace")')
  end)

  it("tecs-profile run --timeline FILE --hitches N", function()
    local trace, ss = dir .. "/game.trace.json", dir .. "/game.timeline.speedscope.json"
    -- The hitches on stderr: stdout is the program's.
    local rc, _, out = run.run3(run.cli .. " run -q --hitches 2 --timeline " .. run.quote(trace) ..
      " spec/fixtures/frames_game.lua")
    assert.equal(0, rc, out)
    local lines = {}
    for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.equal("Slowest 2 of 12 frames:", lines[1])
    assert.equal(4, #lines, out)
    -- The slow frame first, named by the function that burned its time.
    -- frame, ms, on CPU, waiting, samples, gc, what ran.
    assert.matches("^   frame        ms    on CPU   waiting  samples    gc  what ran", lines[2])
    assert.matches("^%s+8%s+[%d.]+%s+[%d.]+%s+[%d.]+%s+%d+%s+%d+  %d+%% M%.slow_work %(spec/fixtures/frames_work%.lua:6%)",
      lines[3])
    -- A quick frame (4 ms of CPU) names what ran in it, where the clock
    -- took a sample in it (a clock on the kernel's tick may not).
    local quick_samples = tonumber(lines[4]:match("^%s*%d+%s+[%d.]+%s+[%d.]+%s+[%d.]+%s+(%d+)"))
    assert.is_number(quick_samples, out)
    if quick_samples > 0 then
      assert.matches("M%.quick_work", lines[4])
    else
      assert.matches("%(no samples%)", lines[4])
    end
    local track = assert(find(import(trace), "frames %(tid 2%)"))
    assert.equal(12, #track.calls)
    assert.equal(0, (run.run3(run.cli .. " run -q --timeline " .. run.quote(ss) .. " spec/fixtures/frames_game.lua 0.02")))
    assert.matches('"$schema": "https://www.speedscope.app/file-format-schema.json"', run.read(ss), 1, true)
    local err
    rc, _, err = run.run3(run.cli .. " run -q --hitches 1 spec/fixtures/cli_script.lua x 0.01")
    assert.equal(0, rc, err)
    assert.matches("No frames marked: call profile.frame() once per frame", err, 1, true)
    rc, _, err = run.run3(run.cli .. " run --hitches 0 spec/fixtures/frames_game.lua")
    assert.equal(2, rc)
    assert.matches("--hitches needs a positive integer, got 0", err, 1, true)
  end)

  it("trace aborts of a trace session running beside are instant events on the timeline", function()
    local trace, csv = dir .. "/aborts.trace.json", dir .. "/aborts.csv"
    local rc, _, err = run.run3(run.cli .. " run -q --trace --trace-output " .. run.quote(csv) .. " --timeline " ..
      run.quote(trace) .. " spec/fixtures/trace_nyi.lua")
    assert.equal(0, rc, err)
    local sites, reported = {}, 0
    for line in assert(run.read(csv)):gmatch("[^\n]+") do
      local severity, count, reason, location = line:match("^(%a+),(%d+),([^,]*),([^,]*),")
      if severity and severity ~= "severity" then
        sites[location .. " " .. reason] = severity
        reported = reported + tonumber(count)
      end
    end
    assert.is_true(reported >= 2, "aborts reported: " .. reported)
    local events = 0
    for args in assert(run.read(trace)):gmatch('"name":"trace abort"[^{}]*"args":(%b{})') do
      events = events + 1
      local location, reason = args:match('"location":"([^"]*)"'), args:match('"reason":"([^"]*)"')
      assert.equal(sites[location .. " " .. reason], args:match('"severity":"([^"]*)"'), args)
    end
    -- The tracker runs a little longer than the sampling session (it starts
    -- before and stops after it): an abort in those moments, in the
    -- command's own code, is in the CSV but not on the timeline.
    assert.is_true(events >= 2 and events <= reported, events .. " events, " .. reported .. " aborts reported")
  end)

  it("the report page: its data as JSON that no text can break out of", function()
    local page = require("tecs.profile.page")
    assert.equal('{"a":[1,2.5,"x\\u003c/script\\u003e\\"\\n"],"b":[],"c":true}',
      page.json({ b = {}, a = { 1, 2.5, 'x</script>"\n' }, c = true }))
    local html = s:timeline("html")
    assert.matches("^<!DOCTYPE html>", html)
    local data = assert(html:match('<script type="application/json" id="tecs%-data">(.-)</script>'))
    assert.not_matches("<", data)
    assert.equal(3, select(2, data:gsub('"index":', "")) - #s:hitches(20))
    local path = dir .. "/run.html"
    s:write(path)
    assert.equal(html, run.read(path))
  end)
end)
