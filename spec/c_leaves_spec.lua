-- C functions as the leaf of their samples: the tick handler reads the C
-- function the VM is in, so a sample taken in `table.sort` or
-- `love.graphics.present` names it, above the Lua line that called it.
-- Checked against the truth (spec/fixtures/c_leaves.lua: two C functions
-- called from one line, each timed while the session is paused), at both
-- precisions.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local collapsed = require("spec.support.collapsed")
local sampling = require("spec.support.sampling")
local work = dofile("spec/fixtures/c_leaves.lua")

local FILE = "spec/fixtures/c_leaves.lua"

-- Whether a frame lies in the workload's step function.
local function in_step(frame)
  if frame:sub(1, #FILE + 1) ~= FILE .. ":" then return false end
  local rest = frame:sub(#FILE + 2)
  local a = tonumber(rest:match("^(%d+)%-%d+$"))
  local l = tonumber(rest:match("^(%d+)$"))
  return a == work.first or (l ~= nil and l >= work.first and l <= work.last)
end

-- Samples of the step by part: its leaf C function, or the Lua part.
local function parts(text)
  local counts, n = { sort = 0, clock = 0, lua = 0 }, 0
  for _, r in ipairs(collapsed.parse(text)) do
    local k
    for i = 1, #r.frames do if in_step(r.frames[i]) then k = i end end
    if k then
      local leaf = r.frames[#r.frames]
      local part = (k == #r.frames - 1 and leaf == "table.sort" and "sort")
        or (k == #r.frames - 1 and leaf == "os.clock" and "clock") or "lua"
      counts[part] = counts[part] + r.count
      n = n + r.count
    end
  end
  return counts, n
end

describe("C functions as leaves", function()
  after_each(function()
    sessions.stop_all()
  end)

  -- The step as the fixture sizes it, at both precisions; then sized to
  -- half and to the whole of the interval, where a fixed interval would
  -- meet the step at the same point tick after tick (docs/sampling.md,
  -- Intervals drawn at random).
  local cases = {
    { precision = "function" },
    { precision = "line" },
    { steps_per_tick = 2 },
    { steps_per_tick = 1 },
  }
  for _, case in ipairs(cases) do
    local title = case.precision and ("precision " .. case.precision)
      or string.format("a step %s of the interval long", case.steps_per_tick == 1 and "the whole" or "half")
    it("two C functions on one line get their true shares (" .. title .. ")", function()
      local interval_ms = 1
      work.iterations = 20000
      if case.steps_per_tick then
        work.iterations = sampling.calibrate(function(n)
          work.iterations = n
          work.step()
        end, interval_ms / 1000 / case.steps_per_tick)
      end
      -- The truth is timed in the session's pauses, six times between its
      -- six stretches of work: the same compiled code (a pause flushes no
      -- trace) at the same time. Odd and even rounds give two estimates,
      -- whose difference widens the bound as the truth suite's does.
      local s = profile.sample({ precision = case.precision, intervalMs = interval_ms })
      local want, again = sampling.interleaved(s, 6, function() return work.truth(0.1) end,
        function() sampling.until_samples(s, 250, work.step) end)
      local text = s:stop()
      local st = s:stats()
      if st.cFunctionLeavesNote then
        -- Only LuaJIT's own timer leaves nothing to read the VM from.
        assert.equal("process-cpu-itimer", st.clock, st.cFunctionLeavesNote)
        pending("no C leaves with LuaJIT's own timer: " .. st.cFunctionLeavesNote)
        return
      end
      local counts, n = parts(text)
      -- 1,500 samples recorded, nearly all in the step.
      assert.is_true(n >= 0.9 * st.recordedSamples, "samples of the step: " .. n .. "\n" .. text)
      assert.is_true(st.cFunctionLeaves >= counts.sort + counts.clock, text)
      local report = {}
      for _, name in ipairs({ "sort", "clock", "lua" }) do
        report[#report + 1] = string.format("%s %.1f%% (truth %.1f%% / %.1f%%)", name, 100 * counts[name] / n,
          100 * want[name], 100 * again[name])
      end
      local msg = table.concat(report, "; ") .. string.format(" [%d samples, %s, %d iterations]", n, st.clock,
        work.iterations)
      print(title .. ": " .. msg)
      for _, name in ipairs({ "sort", "clock", "lua" }) do
        local p = (want[name] + again[name]) / 2
        sampling.check_share(name .. " (" .. msg .. ")", counts[name] / n, p, n, math.abs(want[name] - again[name]),
          name ~= "clock" and "table_sort" or nil)
      end
      -- In every view by line, the C time stays on the line that called it.
      local by_line = profile.report(text, { by = "line", minPercent = 0 })
      assert.is_nil(by_line:find("table.sort", 1, true), by_line)
      assert.is_nil(by_line:find("os.clock", 1, true), by_line)
      -- By function, each C function is a row of its own.
      local by_function = profile.report(text, { by = "function", minPercent = 0 })
      assert.matches("table%.sort\n", by_function)
      assert.matches("os%.clock\n", by_function)
    end)
  end

  it("a C function that called back into Lua is not drawn above its callee", function()
    local cmp = function(a, b) return a < b end
    local base = {}
    for i = 1, 2000 do base[i] = (i * 7919) % 1009 end
    local s = profile.sample({ intervalMs = 0.5 })
    sampling.until_samples(s, 500, function()
      local t = {}
      for i = 1, #base do t[i] = base[i] end
      table.sort(t, cmp)
    end)
    local text = s:stop()
    local callee, leaf_over_callee = 0, 0
    for _, r in ipairs(collapsed.parse(text)) do
      for i = 1, #r.frames - 1 do
        if r.frames[i] == "table.sort" then
          callee = callee + r.count
          if r.frames[#r.frames] == "table.sort" then leaf_over_callee = leaf_over_callee + r.count end
          break
        end
      end
    end
    -- The comparator runs under table.sort: the stacks show that, and
    -- no sample puts table.sort again above the comparator.
    local total = collapsed.sum(collapsed.parse(text))
    assert.is_true(total >= 50 and callee >= 0.2 * total, string.format("%d of %d samples under table.sort:\n%s",
      callee, total, text))
    assert.equal(0, leaf_over_callee, text)
  end)

  it("a sample is charged to no C function while a trace is recorded (the state a record event leaves)", function()
    -- LuaJIT leaves the VM state C after a `record` event's handler (the
    -- session attaches one) while it records and interprets on, with the
    -- thread's base at whatever frame it saved last: a fast function's,
    -- here, which never runs as a C function. Traces are recorded over
    -- and over (the cache flushed each round) through an ipairs loop.
    local t = {}
    for i = 1, 64 do t[i] = i end
    local function round()
      local sum = 0
      for _, v in ipairs(t) do
        for k = 1, 60 do sum = (sum + v * k) % 65521 end
      end
      return sum
    end
    local s = profile.sample({ intervalMs = 0.2 })
    sampling.for_cpu(1, function()
      jit.flush()
      for _ = 1, 3 do round() end
    end)
    local st = s:stats()
    local text = s:stop()
    local rows = collapsed.parse(text)
    local total = collapsed.sum(rows)
    assert.is_true(total >= sampling.floor(s), "samples: " .. total)
    if jit.status() and st.traceMap then
      assert.is_true(st.traceMap.tracesMapped >= 100, "traces recorded: " .. tostring(st.traceMap.tracesMapped))
    end
    local wrong = collapsed.sum(rows, function(r)
      local leaf = r.frames[#r.frames]
      return r.state == "C" and (leaf == "ipairs_aux" or leaf == "ipairs")
    end)
    assert.equal(0, wrong, text)
  end)

  it("a module's C function by its Lua path (lfs.attributes)", function()
    local ok, lfs = pcall(require, "lfs")
    if not ok then
      pending("LuaFileSystem is not installed")
      return
    end
    local s = profile.sample({ intervalMs = 0.5 })
    local n = 0
    -- For CPU time, not until a count of samples: reading the count would
    -- put a C function of ours in the profile.
    sampling.for_cpu(0.5, function()
      for _ = 1, 50 do n = n + (lfs.attributes("/", "size") and 1 or 0) end
    end)
    local text = s:stop()
    local rows = collapsed.parse(text)
    local total = collapsed.sum(rows)
    assert.is_true(total >= sampling.floor(s), "samples: " .. total)
    local named = collapsed.sum(rows, function(r) return r.frames[#r.frames] == "lfs.attributes" end)
    -- stat() is most of this loop; its samples name it, not an address.
    assert.is_true(named >= 0.5 * total, string.format("%d of %d samples in lfs.attributes:\n%s", named, total, text))
    assert.is_nil(text:find("[C:", 1, true), text)
  end)
end)
