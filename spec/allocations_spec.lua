-- Allocation sessions (`profile.allocations`): bytes charged to the stacks
-- that allocated them, with the JIT on and off; the allocator given back at
-- the stop, or left as a pass-through when another wrapper came in between;
-- a state closed with a session running; errors; pprof read by Go's tool.
local profile = require("tecs.profile")
local native = require("tecs.profile.native")
local run = require("spec.support.run")
local collapsed = require("spec.support.collapsed")
local sampling = require("spec.support.sampling")
local sessions = require("spec.support.sessions")

local work = dofile("spec/fixtures/alloc_workload.lua")
local NAMES = { "strings", "tables", "closures" }
-- Calls per function: about 60%, 21% and 19% of the bytes.
local CALLS = { strings = 150000, tables = 50000, closures = 40000 }
local BYTES_PER_SAMPLE = 2048

-- Which workload function a row's innermost fixture frame lies in.
local owner = collapsed.owner_of(work, NAMES)

-- Exact bytes each function allocates for CALLS[name] calls: the session's
-- own counter (every byte goes through the allocator wrapper), with samples
-- rare (whether one is taken does not change the count).
local function exact_bytes(keep)
  local truth = {}
  for _, name in ipairs(NAMES) do
    work[name](CALLS[name], keep) -- compiled (when the JIT is on) before counting
    local s = profile.allocations({ bytesPerSample = 1073741824 })
    work[name](CALLS[name], keep)
    s:stop()
    truth[name] = s:stats().allocatedBytes
  end
  return truth
end

-- Byte shares of the workload functions under a session: the first round
-- compiles (a session start flushes traces), the second is measured.
-- Also returns whether the session ran attached to a sampling session.
local function measured_shares(keep)
  local s = profile.allocations({ bytesPerSample = BYTES_PER_SAMPLE })
  for _, name in ipairs(NAMES) do work[name](CALLS[name], keep) end
  s:delta()
  for _, name in ipairs(NAMES) do work[name](CALLS[name], keep) end
  local rows = collapsed.parse(s:delta("collapsed"))
  local attached = s._native:isAttached()
  s:stop()
  local by, states, total = {}, {}, 0
  for _, r in ipairs(rows) do
    local name = owner(r) or "other"
    by[name] = (by[name] or 0) + r.count
    states[r.state] = (states[r.state] or 0) + r.count
    total = total + r.count
  end
  return by, states, total, attached
end

-- Every share within 5 points of the truth; the bound is at least five
-- standard errors of a share at this sample count, so it does not flake.
local function assert_shares(truth, by, total)
  local truth_total = 0
  for _, name in ipairs(NAMES) do truth_total = truth_total + truth[name] end
  local samples = total / BYTES_PER_SAMPLE
  assert.is_true(samples > 5000, "samples: " .. samples)
  for _, name in ipairs(NAMES) do
    local want, got = truth[name] / truth_total, (by[name] or 0) / total
    assert.is_true(5 * math.sqrt(want * (1 - want) / samples) < 0.05)
    assert.is_true(math.abs(got - want) <= 0.05,
      string.format("%s: %.3f of the bytes, truly %.3f", name, got, want))
  end
  assert.is_true((by.other or 0) / total < 0.02, "bytes outside the workload: " .. tostring(by.other))
end

-- Closes what a failed test left running, and turns the JIT back on.
local function stop_sessions()
  jit.on()
  sessions.stop_all()
end

describe("profile.allocations", function()
  after_each(stop_sessions)

  it("charges strings, tables and closures their byte shares in compiled code", function()
    local keep = {}
    local truth = exact_bytes(keep)
    local by, states, total = measured_shares(keep)
    assert_shares(truth, by, total)
    -- The string and table loops ran compiled: most bytes were allocated
    -- by traces ('N'), and traces exist.
    assert.is_true((states.N or 0) / total > 0.5, "bytes from compiled code: " .. tostring(states.N))
    assert.is_not_nil(require("jit.util").traceinfo(1))
  end)

  it("charges the same shares interpreted (jit.off)", function()
    jit.off()
    jit.flush()
    local keep = {}
    local truth = exact_bytes(keep)
    local by, states, total = measured_shares(keep)
    assert_shares(truth, by, total)
    assert.is_nil(states.N)
  end)

  it("counts exactly the bytes the VM accounts for", function()
    local keep = {}
    work.tables(1000, keep)
    collectgarbage()
    collectgarbage("stop")
    local s = profile.allocations({ bytesPerSample = 4096 })
    local before = collectgarbage("count")
    work.tables(20000, keep)
    local grown = (collectgarbage("count") - before) * 1024
    s:stop()
    collectgarbage("restart")
    local st = s:stats()
    -- Tables from a template: one block each, nothing freed or resized.
    assert.is_true(st.allocatedBytes >= grown and st.allocatedBytes <= grown + 4096,
      st.allocatedBytes .. " counted, " .. grown .. " grown")
    assert.is_true(st.allocatedObjects >= 20000 and st.allocatedObjects <= 20100, st.allocatedObjects)
    -- Sample points crossed follow the bytes: mean bytes / bytesPerSample.
    local expect = st.allocatedBytes / 4096
    assert.is_true(math.abs(st.triggeredSamples - expect) < 5 * math.sqrt(expect), st.triggeredSamples)
    assert.equal(st.triggeredSamples, st.samples + st.pendingSamples)
    assert.equal(st.samples * 4096, collapsed.sum(collapsed.parse(s:collapsed())))
  end)

  it("leaves the workload's results unchanged", function()
    local function results()
      local keep, out = {}, {}
      for _, name in ipairs(NAMES) do out[#out + 1] = work[name](20000, keep) end
      out[#out + 1] = #keep
      return table.concat(out, ",")
    end
    local plain = results()
    local s = profile.allocations({ bytesPerSample = 512 })
    local profiled = results()
    s:stop()
    assert.is_true(s:stats().samples > 100)
    assert.equal(plain, profiled)
  end)

  it("gives the allocator back at the stop and counts nothing after", function()
    assert.is_false(native.raw._testAllocatorWrapped())
    local s = profile.allocations({ bytesPerSample = 1024 })
    assert.is_true(native.raw._testAllocatorWrapped())
    work.tables(5000, {})
    s:stop()
    assert.is_false(native.raw._testAllocatorWrapped())
    local st = s:stats()
    assert.equal("restored", st.allocator)
    work.tables(50000, {})
    local after = s:stats()
    assert.equal(st.allocatedBytes, after.allocatedBytes)
    assert.equal(st.triggeredSamples, after.triggeredSamples)
  end)

  it("pauses: bytes allocated while paused are not charged to a stack", function()
    local s = profile.allocations({ bytesPerSample = 1024 })
    s:pause()
    work.tables(20000, {})
    s:resume()
    work.strings(100, {})
    s:stop()
    local st = s:stats()
    assert.is_true(st.pausedSamples > 500, st.pausedSamples)
    assert.equal(st.samples - st.pausedSamples - st.filteredSamples, st.recordedSamples)
    assert.equal(st.recordedSamples * 1024, collapsed.sum(collapsed.parse(s:collapsed())))
  end)

  it("leaves its wrapper as a pass-through when another one wrapped it", function()
    local s = profile.allocations({ bytesPerSample = 1024 })
    -- Another library wraps the allocator: it wraps ours.
    assert.is_true(native.raw._testWrapAllocator())
    work.strings(5000, {})
    s:stop()
    local st = s:stats()
    assert.equal("pass-through", st.allocator)
    assert.is_true(st.samples > 100, st.samples)
    -- Ours still sits in the chain, counting nothing; allocation works.
    local keep = {}
    local sum = work.tables(50000, keep)
    collectgarbage()
    assert.equal(50000 * 7 + (50000 * 50001) / 2 * 1, sum)
    assert.equal(st.allocatedBytes, s:stats().allocatedBytes)
    -- A new session wraps the chain and counts again.
    local s2 = profile.allocations({ bytesPerSample = 1024 })
    work.tables(5000, {})
    s2:stop()
    assert.is_true(s2:stats().allocatedBytes > 5000 * 64, s2:stats().allocatedBytes)
    assert.equal("restored", s2:stats().allocator)
  end)

  it("survives lua_close with a session running, wrapped, attached or not (24 runs)", function()
    local script = [[
      local profile = require("tecs.profile")
      local work = dofile("spec/fixtures/alloc_workload.lua")
      -- Attached: both sessions run at the close.
      if arg[1] == "attached" then profile.sample() end
      local s = profile.allocations({ bytesPerSample = 1024 })
      if arg[1] == "wrapped" then require("tecs.profile.native").raw._testWrapAllocator() end
      local keep = {}
      work.strings(20000, keep) work.tables(20000, keep)
      if arg[1] == "dropped" then
        -- A native handle nobody stops: its finaliser gives the allocator back.
        s:stop()
        local native = require("tecs.profile.native")
        native.raw.startAllocations({ bytesPerSample = 1024 })
        work.tables(20000, keep)
        collectgarbage() collectgarbage()
        if native.raw._testAllocatorWrapped() then error("wrapper left after the finaliser") end
        s = profile.allocations({ bytesPerSample = 1024 })
        work.tables(20000, keep)
      end
      io.write("ok ", #keep, "\n")
    ]]
    run.runs_alike(script, { "end", "wrapped", "dropped", "attached" }, 24, "ok 16")
  end)

  it("refuses a second session while one runs, and a sampling session beside it", function()
    local s = profile.allocations()
    local ok, err = pcall(profile.allocations)
    assert.is_false(ok)
    assert.matches("profile.allocations: an allocation session is already active", err, 1, true)
    ok, err = pcall(profile.sample)
    assert.is_false(ok)
    assert.matches("one profiler per process", err, 1, true)
    s:stop()
    -- The other way round, the allocation session attaches.
    local t = profile.sample()
    local a = profile.allocations()
    assert.is_true(a._native:isAttached())
    ok, err = pcall(profile.allocations)
    assert.is_false(ok)
    assert.matches("profile.allocations: an allocation session is already active", err, 1, true)
    a:stop()
    t:stop()
  end)

  it("rejects bad options, naming the option, at the caller's line", function()
    local line = debug.getinfo(1, "l").currentline
    local cases = {
      { { bytesPerSample = 10 }, "option 'bytesPerSample' must be an integer number of bytes from 64" },
      { { bytesPerSample = "big" }, "option 'bytesPerSample' must be an integer" },
      { { bytesPerSample = 1000.5 }, "option 'bytesPerSample'" },
      { { intervalMs = 1 }, "unknown option 'intervalMs' (known options: bytesPerSample," },
      { { precision = "word" }, "option 'precision' must be \"auto\" or \"function\" or \"line\"" },
      { 5, "bad argument #1 'opts' (table or nil expected, got number 5)" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(profile.allocations, c[1])
      assert.is_false(ok)
      assert.matches(c[2], err, 1, true)
    end
    local ok, err = pcall(function() profile.allocations({ bytesPerSample = 0 }) end)
    assert.is_false(ok)
    assert.matches("allocations_spec.lua:" .. (line + 14) .. ": profile.allocations: option 'bytesPerSample'", err,
      1, true)
    assert.is_nil(require("tecs.profile.allocations").active())
  end)

  it("reports byte shares with errors from the sample count, and writes every format", function()
    local dir = run.tmpdir()
    local s = profile.allocations({ bytesPerSample = 1024 })
    work.strings(20000, {})
    s:stop()
    local text = s:report({ by = "function" })
    local st = s:stats()
    assert.matches("^# allocations: " .. st.allocatedBytes .. " bytes in " .. st.allocatedObjects .. " blocks", text)
    assert.matches("\n# " .. st.recordedSamples .. " samples; by function", text, 1, true)
    assert.matches("M.strings", text, 1, true)
    s:write(dir .. "/a.svg")
    s:write(dir .. "/a.speedscope.json")
    local svg, json = run.read(dir .. "/a.svg"), run.read(dir .. "/a.speedscope.json")
    os.execute("rm -rf " .. run.quote(dir))
    assert.matches("<svg", svg, 1, true)
    assert.matches("allocations (bytes)", json, 1, true)
    assert.matches('"endValue": ' .. collapsed.sum(collapsed.parse(s:collapsed())), json, 1, true)
  end)

  it("writes pprof alloc_space that go tool pprof reads, with the collapsed bytes", function()
    local dir = run.tmpdir()
    local s = profile.allocations({ bytesPerSample = 1024 })
    work.strings(20000, {})
    work.tables(20000, {})
    local text = s:stop(dir .. "/a.pb.gz")
    local total = collapsed.sum(collapsed.parse(text))
    local rc, top = run.run("go tool pprof -top -sample_index=alloc_space " .. run.quote(dir .. "/a.pb.gz"))
    local rc2, raw = run.run("go tool pprof -raw " .. run.quote(dir .. "/a.pb.gz"))
    os.execute("rm -rf " .. run.quote(dir))
    assert.equal(0, rc, top)
    assert.equal(0, rc2, raw)
    assert.matches("Type: alloc_space", top, 1, true)
    assert.matches("PeriodType: space bytes", raw, 1, true)
    assert.matches("Period: 1024", raw, 1, true)
    assert.matches("alloc_objects/count alloc_space/bytes[dflt]", raw, 1, true)
    -- -raw lists each sample's values (objects, bytes, then live objects
    -- and bytes): the bytes add up to
    -- the collapsed total.
    local sum = 0
    local in_samples = false
    for line in raw:gmatch("[^\n]+") do
      if line == "Samples:" then in_samples = true elseif line == "Locations" then in_samples = false end
      local v = in_samples and line:match("^%s+%d+%s+(%d+)[%s%d]*:")
      if v then sum = sum + tonumber(v) end
    end
    assert.equal(total, sum)
    assert.is_true(total > 1000 * 1024, total)
  end)
  it("estimates objects per function (pprof alloc_objects) within the error its samples give", function()
    local keep, n = {}, 20000
    -- Exact blocks per function: the session's counter, samples rare.
    local truth = {}
    for _, name in ipairs(NAMES) do
      work[name](n, keep)
      local s = profile.allocations({ bytesPerSample = 1073741824 })
      work[name](n, keep)
      s:stop()
      truth[name] = s:stats().allocatedObjects
    end
    local dir = run.tmpdir()
    local s = profile.allocations({ bytesPerSample = 512 })
    for _, name in ipairs(NAMES) do work[name](n, keep) end
    s:stop(dir .. "/o.pb.gz")
    local st = s:stats()
    local rc, top = run.run("go tool pprof -top -nodefraction=0 -sample_index=alloc_objects "
      .. run.quote(dir .. "/o.pb.gz"))
    local rc2, raw = run.run("go tool pprof -raw " .. run.quote(dir .. "/o.pb.gz"))
    os.execute("rm -rf " .. run.quote(dir))
    assert.equal(0, rc, top)
    assert.equal(0, rc2, raw)
    -- The estimate against the exact count, within five standard errors;
    -- the error (from the samples) is small enough for the check to bite.
    local err = st.estimatedObjectsError
    assert.is_true(st.triggeredSamples > 5000, st.triggeredSamples)
    assert.is_true(err > 0 and err < 0.03 * st.allocatedObjects, err)
    assert.is_true(math.abs(st.estimatedObjects - st.allocatedObjects) <= 5 * err,
      string.format("estimated %.0f objects, counted %d (error %.0f)", st.estimatedObjects, st.allocatedObjects, err))
    -- pprof's alloc_objects values add up to the estimate (each stack's
    -- count rounded to a whole object).
    local objects, rows, in_samples = 0, 0, false
    for line in raw:gmatch("[^\n]+") do
      if line == "Samples:" then in_samples = true elseif line == "Locations" then in_samples = false end
      local v = in_samples and line:match("^%s+(%d+)%s+%d+[%s%d]*:")
      if v then objects, rows = objects + tonumber(v), rows + 1 end
    end
    if st.pendingSamples == 0 then
      assert.is_true(math.abs(objects - st.estimatedObjects) <= 0.5 * rows + 1e-6,
        string.format("pprof %d, estimated %.1f, %d rows", objects, st.estimatedObjects, rows))
    end
    -- Each function's flat objects in `go tool pprof -top`: its exact count
    -- within five standard errors of the whole estimate (a bound above
    -- each function's own error).
    for _, name in ipairs(NAMES) do
      local flat = top:match("\n%s*(%d+)%s+[%d.]+%%%s+[%d.]+%%%s+%d+%s+[%d.]+%%%s+M%." .. name .. " ")
      assert.is_not_nil(flat, name .. " missing in\n" .. top)
      assert.is_true(math.abs(tonumber(flat) - truth[name]) <= 5 * err,
        string.format("%s: %s objects estimated, %d counted (error %.0f)", name, flat, truth[name], err))
    end
  end)

  it("is a source for profile.report (shares of samples) and the pictures (bytes)", function()
    local s = profile.allocations({ bytesPerSample = 2048 })
    work.strings(20000, {})
    local text = s:stop()
    local samples = s:stats().samples
    assert.is_true(samples > 50, samples)
    local view = profile.report(s, { by = "function" })
    assert.matches("^# " .. samples .. " samples", view)
    local svg = profile.flamegraph(s)
    -- The picture's total is the collapsed text's: bytes, not samples.
    local total = collapsed.sum(collapsed.parse(text))
    assert.is_true(total >= samples * 2048 / 2, total)
    assert.matches("<svg", svg, 1, true)
    assert.matches(tostring(total), svg:gsub(",", ""), 1, true)
  end)
end)

describe("profile.allocations beside a sampling session", function()
  after_each(stop_sessions)

  it("attaches: the same byte shares, and the sampling session counts only its timer's ticks", function()
    local keep = {}
    local truth = exact_bytes(keep)
    local t = profile.sample({ intervalMs = 1 })
    local c0 = os.clock()
    local by, _, total, attached = measured_shares(keep)
    local cpu_ms = (os.clock() - c0) * 1000
    t:stop()
    assert.is_true(attached)
    assert_shares(truth, by, total)
    -- Thousands of allocation samples went through the sampling session's
    -- callback; a 1 ms CPU timer gives at most about one tick per CPU ms.
    local ticks = t:stats().samples
    assert.is_true(total / BYTES_PER_SAMPLE > 5000)
    assert.is_true(ticks > 0 and ticks <= cpu_ms * 1.1 + 20,
      string.format("%d timer samples in %.0f CPU ms", ticks, cpu_ms))
    local rows = collapsed.parse(t:collapsed())
    assert.equal(ticks, collapsed.sum(rows))
  end)

  it("gives the sampling session's frames, hitches and timeline the bytes allocated", function()
    local t = profile.sample({ intervalMs = 1 })
    local a = profile.allocations({ bytesPerSample = 4096 })
    local keep = {}
    local x = 0
    for frame = 1, 40 do
      profile.frame()
      if frame % 2 == 0 then
        work.tables(20000, keep) -- about 1.3 MB of tables
      else
        for i = 1, 300000 do x = x + i % 7 end -- allocates nothing
      end
      if frame % 10 == 0 then
        collectgarbage("collect") -- GC runs on the timeline
      end
    end
    t:stop()
    assert.is_false(a:isRunning()) -- stopped with the sampling session
    local frames = t:frames()
    assert.equal(40, #frames)
    local even, odd = 0, 0
    for i, f in ipairs(frames) do
      assert.is_number(f.allocatedBytes)
      assert.equal(0, f.allocatedBytes % 4096)
      if i % 2 == 0 then even = even + f.allocatedBytes else odd = odd + f.allocatedBytes end
    end
    -- About 330 samples per allocating frame: far from the quiet ones.
    assert.is_true(even / 20 > 1e6, "bytes per allocating frame: " .. even / 20)
    assert.is_true(odd < 0.02 * even, string.format("quiet frames %d, allocating %d", odd, even))
    -- Every sampled byte was taken within the frames.
    assert.is_true(even + odd <= a:stats().samples * 4096)
    assert.matches("alloc KB", require("tecs.profile.timeline").hitches_text(t:hitches(3), #frames), 1, true)
    -- Each GC run of the timeline says what allocated before it.
    local trace = t:timeline("chrome-trace")
    local runs, named = 0, 0
    for args in trace:gmatch('"name":"GC".-"args":(%b{})') do
      runs = runs + 1
      assert.matches('"allocatedBytes":%d+', args)
      if args:find("alloc_workload.lua", 1, true) then named = named + 1 end
    end
    assert.is_true(runs > 0, "no GC run on the timeline")
    assert.is_true(named > 0, "no GC run names the workload")
    assert.matches('"name":"frame 2".-"allocatedBytes":%d+', trace)
  end)

  it("charges bytes a C function allocated to that function, timer ticks or not", function()
    -- Interpreted, so that `string.rep` runs as a C function (state C); a
    -- 0.25 ms CPU timer ticks inside many of its calls, and those ticks'
    -- callbacks carry allocation samples too. Every string has a length of
    -- its own: an equal one still alive would be reused, not allocated.
    local chunk = "local function reps(from, n)\n" ..
      "  local t = 0\n" ..
      "  for i = from, from + n - 1 do t = t + #string.rep('x', 10000 + i) end\n" ..
      "  return t\n" ..
      "end\n" ..
      "return reps\n"
    local reps = assert(load(chunk, "@alloc c leaf.lua"))()
    jit.off(reps)
    local t = profile.sample({ intervalMs = 0.25 })
    local a = profile.allocations({ bytesPerSample = 65536 })
    assert.is_true(a._native:isAttached())
    -- Until the timer has ticked 1000 times and 5000 allocation samples
    -- are taken, however fast string.rep runs here: every chunk's strings
    -- are longer than the last's.
    sampling.until_samples(t, 1000, function(k) reps((k - 1) * 2000, 2000) end, {
      count = function() return math.min(t:stats().recordedSamples, a:stats().triggeredSamples / 5) end,
      minSeconds = 10,
    })
    t:stop()
    local st = a:stats()
    if st.cFunctionLeavesNote then
      pending("no C leaves here: " .. st.cFunctionLeavesNote)
      return
    end
    local rows = collapsed.parse(a:collapsed())
    local in_reps = function(r) return collapsed.has_frame(r, "^alloc c leaf%.lua:") end
    local total = collapsed.sum(rows, in_reps)
    local on_rep = collapsed.sum(rows, function(r)
      return in_reps(r) and r.frames[#r.frames] == "string.rep" and r.state == "C"
    end)
    -- The timer's ticks (a thousand or more) take the C functions they
    -- found, not those the allocation samples found.
    assert.is_true(total / 65536 >= 5000, "samples: " .. total / 65536)
    assert.is_true(on_rep >= 0.998 * total,
      string.format("%d of %d bytes on string.rep:\n%s", on_rep, total, a:collapsed()))
    assert.is_true(t:stats().samples >= 1000)
  end)

  it("keeps its data when stopped first, and runs alone after the sampling session", function()
    local t = profile.sample()
    local a = profile.allocations({ bytesPerSample = 4096 })
    work.strings(20000, {})
    local text = a:stop()
    assert.is_true(t:isRunning())
    assert.is_true(collapsed.sum(collapsed.parse(text)) > 0)
    work.strings(20000, {})
    t:stop()
    assert.equal(text, a:collapsed())
    local b = profile.allocations({ bytesPerSample = 4096 })
    assert.is_false(b._native:isAttached())
    work.strings(20000, {})
    assert.is_true(collapsed.sum(collapsed.parse(b:stop())) > 0)
  end)

  it("writes its collapsed file with the unit, and a report of the file says bytes, shares without an error", function()
    local dir = run.tmpdir()
    local path = dir .. "/alloc.collapsed"
    local s = profile.allocations({ bytesPerSample = BYTES_PER_SAMPLE })
    -- Until the session holds enough samples, however fast the machine.
    while s:stats().samples < 200 do work.strings(1000, {}) end
    s:stop(path)
    local bytes = collapsed.sum(collapsed.parse(run.read(path)))
    local side = native.jsonDecode(run.read(path .. native.functionsFileEnding))
    assert.equal("bytes", side.unit)
    local cli = run.luajit .. " " .. run.quote(run.root .. "/bin/tecs-profile")
    local rc, out = run.run(cli .. " report " .. run.quote(path))
    assert.equal(0, rc, out)
    local raw_rc, raw = run.run(cli .. " report --raw " .. run.quote(path))
    assert.equal(0, raw_rc, raw)
    local api = profile.report(path)
    -- A sampling session's file stays in samples, with their errors.
    local sampled = profile.sample()
    sampling.until_samples(sampled, 20, function() work.strings(1000, {}) end)
    sampled:stop(dir .. "/cpu.collapsed")
    local cpu = profile.report(dir .. "/cpu.collapsed")
    os.execute("rm -rf " .. run.quote(dir))
    for _, text in ipairs({ out, api }) do
      assert.equal(bytes, tonumber(text:match("^# (%d+) bytes; by function;")), text)
      assert.not_matches("samples", text)
      assert.not_matches("±", text, 1, true)
      assert.matches("\n%s+[%d.]+%%%s+[%d.]+%%%s+%S", text)
    end
    assert.equal(bytes, tonumber(raw:match("^# (%d+) bytes;")), raw)
    assert.matches("^# %d+ samples; by function;", cpu)
    assert.matches("±", cpu, 1, true)
  end)
end)
