-- What an allocation session finds still live at its stop (`s:live()`,
-- pprof's `inuse_space` and `inuse_objects`): kept bytes against the bytes
-- kept by construction, dropped ones gone after a full GC, blocks moved by
-- realloc; the table's limits; a state closed with blocks tracked, wrapped
-- or not; and the object counts `profile.pprof` gives a session's profiles.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local run = require("spec.support.run")
local collapsed = require("spec.support.collapsed")

local work = dofile("spec/fixtures/alloc_live_workload.lua")
local NAMES = { "kept", "dropped", "grown" }
local N = 100000 -- tables kept, and tables dropped
local GROWN = 2 ^ 20 -- numbers in the grown list
local BYTES_PER_SAMPLE = 1024
-- Room for the kept blocks and for the dropped ones not collected yet.
local OPTS = { bytesPerSample = BYTES_PER_SAMPLE, maxLiveBlocks = 100000 }

local owner = collapsed.owner_of(work, NAMES)

-- Bytes per workload function in a profile object; and the bytes of the
-- JIT compiler (state J: the traces of the function's loop, which stay).
local function by_owner(prof)
  local by, jit_bytes = {}, {}
  for _, r in ipairs(collapsed.parse(prof:collapsed())) do
    local name = owner(r) or "other"
    by[name] = (by[name] or 0) + r.count
    if r.state == "J" then jit_bytes[name] = (jit_bytes[name] or 0) + r.count end
  end
  return by, jit_bytes
end

-- A list of `n` slots, made before a session counts.
local function sized_list(n)
  local list = {}
  for i = 1, n do list[i] = false end
  return list
end

-- Exact bytes and blocks each function allocates (a session's own counters,
-- samples rare): everything `kept` and `grown` allocate stays reachable.
local function exact()
  local truth = {}
  local list = sized_list(N)
  local runs = {
    kept = function() work.kept(list, N) end,
    grown = function() return work.grown(GROWN) end,
  }
  for name, f in pairs(runs) do
    f() -- compiled before counting
    list = sized_list(N)
    collectgarbage()
    local s = profile.allocations({ bytesPerSample = 1073741824 })
    local keep = f()
    s:stop()
    local st = s:stats()
    truth[name] = { bytes = st.allocatedBytes, objects = st.allocatedObjects, keep = keep }
  end
  return truth
end

-- The workload under a session: tables kept and dropped, a list grown,
-- then a full GC before the stop.
local function measured(opts, pprof_file)
  local list = sized_list(N)
  collectgarbage()
  local s = profile.allocations(opts or OPTS)
  work.kept(list, N)
  work.dropped(N)
  local grown = work.grown(GROWN)
  collectgarbage()
  collectgarbage()
  s:stop(pprof_file)
  return s, list, grown
end

-- Five standard errors of an estimate of `bytes` from Poisson sample
-- points `m` bytes apart.
local function bound(bytes, m)
  return 5 * m * math.sqrt(bytes / m)
end

local function values_of(raw)
  local rows, in_samples = {}, false
  for line in raw:gmatch("[^\n]+") do
    if line == "Samples:" then in_samples = true elseif line == "Locations" then in_samples = false end
    local v = in_samples and line:match("^%s+([%d%s]+):")
    if v then
      local row = {}
      for n in v:gmatch("%d+") do row[#row + 1] = tonumber(n) end
      rows[#rows + 1] = row
    end
  end
  return rows
end

local function sum_column(rows, k)
  local sum = 0
  for _, r in ipairs(rows) do sum = sum + r[k] end
  return sum
end

describe("profile.allocations live blocks", function()
  after_each(function()
    jit.on()
    sessions.stop_all()
  end)

  it("finds the kept bytes live, the dropped ones gone, and lists moved by realloc", function()
    local truth = exact()
    local s, list, grown = measured()
    local by, jit_bytes = by_owner(s:live())
    local st = s:stats()
    assert.equal(N, #list)
    assert.equal(GROWN, #grown)
    -- No block lacked room; the points of the last blocks, allocated
    -- after the last sample callback (in the stop's own call), have no
    -- stack and are counted dropped: a few KB at most.
    assert.is_true(st.liveDroppedSamples <= 8, "dropped points: " .. st.liveDroppedSamples)
    assert.equal(st.liveSamples * BYTES_PER_SAMPLE, collapsed.sum(collapsed.parse(s:live():collapsed())))
    -- Kept by construction against estimated, within five standard errors
    -- of the estimate (about 5% here: the bound bites).
    for _, name in ipairs({ "kept", "grown" }) do
      local want, got = truth[name].bytes, by[name] or 0
      local b = bound(want, BYTES_PER_SAMPLE)
      assert.is_true(b < 0.06 * want, string.format("%s: bound %d of %d bytes", name, b, want))
      assert.is_true(math.abs(got - want) <= b,
        string.format("%s: %d live bytes estimated, %d kept (bound %d)", name, got, want, b))
    end
    -- The dropped tables were as many bytes as the kept ones: all freed by
    -- the full GC (the last few may wait on dead stack slots): a few KB
    -- at most, of 10 MB. The trace compiled for its loop stays (a few KB,
    -- charged in state J).
    local dropped = (by.dropped or 0) - (jit_bytes.dropped or 0)
    assert.is_true(dropped <= 8 * BYTES_PER_SAMPLE, "dropped: " .. dropped)
    assert.is_true((jit_bytes.dropped or 0) <= 32 * BYTES_PER_SAMPLE, "dropped, compiler: " .. tostring(jit_bytes.dropped))
    assert.is_true(collapsed.sum(collapsed.parse(s:collapsed()), function(r) return owner(r) == "dropped" end)
      > 0.5 * truth.kept.bytes)
    -- The text view ranks the live sample points, so that its errors are
    -- those of their count; the pictures count bytes.
    local view = profile.report(s:live(), { by = "function" })
    assert.matches("^# " .. st.liveSamples .. " samples; by function", view)
    assert.matches("M.kept", view, 1, true)
    assert.matches(tostring(st.liveSamples * BYTES_PER_SAMPLE), profile.flamegraph(s:live()):gsub(",", ""), 1, true)
    -- Frees after the stop change nothing: live means at the stop.
    list, grown = nil, nil
    collectgarbage()
    assert.equal(s:live():collapsed(), s:live():collapsed())
    assert.same(by, by_owner(s:live()))
  end)

  it("writes inuse_space and inuse_objects that go tool pprof reads, objects within their error", function()
    local truth = exact()
    local dir = run.tmpdir()
    local s = measured(nil, dir .. "/h.pb.gz")
    run.write(dir .. "/p.pb.gz", profile.pprof(s:profile()))
    run.write(dir .. "/l.pb.gz", profile.pprof(s:live()))
    local rc, top = run.run("go tool pprof -top -nodefraction=0 -sample_index=inuse_objects "
      .. run.quote(dir .. "/h.pb.gz"))
    local rc2, raw = run.run("go tool pprof -raw " .. run.quote(dir .. "/h.pb.gz"))
    local rc3, raw2 = run.run("go tool pprof -raw " .. run.quote(dir .. "/p.pb.gz"))
    local rc4, live = run.run("go tool pprof -top -nodefraction=0 " .. run.quote(dir .. "/l.pb.gz"))
    os.execute("rm -rf " .. run.quote(dir))
    for _, r in ipairs({ { rc, top }, { rc2, raw }, { rc3, raw2 }, { rc4, live } }) do assert.equal(0, r[1], r[2]) end
    assert.matches("alloc_objects/count alloc_space/bytes[dflt] inuse_objects/count inuse_space/bytes", raw, 1, true)
    assert.matches("Type: inuse_space", live, 1, true)
    -- The session's file and profile.pprof(s:profile()) hold the same samples.
    local rows, rows2 = values_of(raw), values_of(raw2)
    assert.same(rows, rows2)
    local st = s:stats()
    assert.equal(st.liveSamples * BYTES_PER_SAMPLE, sum_column(rows, 4))
    assert.equal(st.recordedSamples * BYTES_PER_SAMPLE, sum_column(rows, 2))
    -- Live objects of `kept`: its exact block count within five standard
    -- errors (each block of `s` bytes weighs `m / s` with variance about
    -- `m / s`).
    local size = truth.kept.bytes / truth.kept.objects
    local err = math.sqrt(truth.kept.objects * BYTES_PER_SAMPLE / size)
    assert.is_true(err < 0.02 * truth.kept.objects, err)
    local flat = top:match("\n%s*(%d+)%s+[%d.]+%%%s+[%d.]+%%%s+%d+%s+[%d.]+%%%s+M%.kept ")
    assert.is_not_nil(flat, top)
    assert.is_true(math.abs(tonumber(flat) - truth.kept.objects) <= 5 * err,
      string.format("kept: %s live objects estimated, %d kept (error %.0f)", flat, truth.kept.objects, err))
    -- Of the 100000 dropped tables, a few at most are left (dead stack
    -- slots, and the blocks of the trace compiled for the loop).
    local dropped = top:match("\n%s*(%d+)%s+[%d.]+%%%s+[%d.]+%%%s+%d+%s+[%d.]+%%%s+M%.dropped ")
    assert.is_true(tonumber(dropped or 0) <= N / 1000, top)
    -- The live profile alone: its bytes, first the kept tables.
    assert.matches("\n%s*[%d.]+%a*%s+[%d.]+%%%s+[%d.]+%%%s+[%d.]+%a*%s+[%d.]+%%%s+M%.kept ", live)
  end)

  it("counts blocks beyond maxLiveBlocks as dropped, and tracks none at 0, the default", function()
    local s = measured({ bytesPerSample = BYTES_PER_SAMPLE, maxLiveBlocks = 100 })
    local st = s:stats()
    assert.is_true(st.liveBlocks <= 100, st.liveBlocks)
    assert.is_true(st.liveBlocks > 50, st.liveBlocks)
    -- Points beyond the table: most of the kept ones.
    assert.is_true(st.liveDroppedSamples > 1000, st.liveDroppedSamples)
    local default = measured({ bytesPerSample = BYTES_PER_SAMPLE })
    assert.is_nil(default:live())
    assert.is_nil(default:stats().liveBlocks)
    local off = measured({ bytesPerSample = BYTES_PER_SAMPLE, maxLiveBlocks = 0 })
    assert.is_nil(off:live())
    assert.is_nil(off:stats().liveBlocks)
    local dir = run.tmpdir()
    run.write(dir .. "/o.pb.gz", profile.pprof(off:profile()))
    local rc, raw = run.run("go tool pprof -raw " .. run.quote(dir .. "/o.pb.gz"))
    os.execute("rm -rf " .. run.quote(dir))
    assert.equal(0, rc, raw)
    assert.matches("alloc_objects/count alloc_space/bytes[dflt]\n", raw, 1, true)
    local ok, err = pcall(profile.allocations, { maxLiveBlocks = -1 })
    assert.is_false(ok)
    assert.matches("option 'maxLiveBlocks' must be an integer from 0 to 16777216", err, 1, true)
  end)

  it("gives blocks allocated while paused no stack, and reads live blocks while running", function()
    local list = sized_list(N)
    local s = profile.allocations(OPTS)
    s:pause()
    work.kept(list, N)
    s:resume()
    local running = by_owner(s:live())
    assert.is_nil(running.kept)
    local more = sized_list(N)
    work.kept(more, N)
    local now = by_owner(s:live())
    s:stop()
    assert.is_true((now.kept or 0) > 0.5 * N * 64, tostring(now.kept))
    -- Blocks the session's own reading allocated are "other"; the kept
    -- tables are as they were.
    assert.equal(now.kept, by_owner(s:live()).kept)
  end)

  it("closes a state with blocks tracked, its wrapper wrapped or not (12 runs)", function()
    local script = [[
      local profile = require("tecs.profile")
      local work = dofile("spec/fixtures/alloc_live_workload.lua")
      local list = {}
      local s = profile.allocations({ bytesPerSample = 256, maxLiveBlocks = 16384 })
      if arg[1] == "wrapped" then require("tecs.profile.native").raw._testWrapAllocator() end
      work.kept(list, 20000)
      local grown = work.grown(50000)
      if arg[1] == "stopped" or arg[1] == "wrapped" then
        s:stop()
        -- The tracked blocks freed after the stop, through the wrapper when
        -- it stays as a pass-through.
        list, grown = {}, nil
        collectgarbage()
        work.kept(list, 20000)
        if not s:live() then error("no live profile") end
      end
      io.write("ok ", #list, "\n")
    ]]
    run.runs_alike(script, { "running", "wrapped", "stopped" }, 12, "ok 20000")
  end)

  it("labels a session's profile and deltas as allocations in profile.pprof, deltas with their own objects", function()
    local s = profile.allocations({ bytesPerSample = 512 })
    local keep = {}
    work.kept(keep, 10000)
    local d = s:delta()
    work.kept(keep, 10000)
    local d2 = s:delta()
    s:stop()
    local st = s:stats()
    local dir = run.tmpdir()
    run.write(dir .. "/p.pb.gz", profile.pprof(s:profile()))
    run.write(dir .. "/s.pb.gz", profile.pprof(s))
    run.write(dir .. "/d.pb.gz", profile.pprof(d))
    run.write(dir .. "/d2.pb.gz", profile.pprof(d2))
    local out = {}
    for _, f in ipairs({ "p", "s", "d", "d2" }) do
      local rc, raw = run.run("go tool pprof -raw " .. run.quote(dir .. "/" .. f .. ".pb.gz"))
      assert.equal(0, rc, raw)
      out[f] = raw
    end
    os.execute("rm -rf " .. run.quote(dir))
    for _, f in ipairs({ "p", "s", "d" }) do
      assert.matches("PeriodType: space bytes", out[f], 1, true)
      assert.matches("Period: 512\n", out[f], 1, true)
      assert.matches("alloc_objects/count alloc_space/bytes[dflt]", out[f], 1, true)
    end
    -- The objects estimated, per stack rounded, in the profile's pprof.
    local rows = values_of(out.p)
    assert.is_true(st.estimatedObjects > 1000, st.estimatedObjects)
    if st.pendingSamples == 0 then
      assert.is_true(math.abs(sum_column(rows, 1) - st.estimatedObjects) <= 0.5 * #rows + 1e-6,
        string.format("pprof %d, estimated %.1f", sum_column(rows, 1), st.estimatedObjects))
    end
    assert.same(rows, values_of(out.s))
    -- Each delta carries the objects of its own bytes: about half each,
    -- adding up to the whole (each stack's share rounded; the stop's own
    -- few allocations after the second delta are in the whole only).
    local d1_rows, d2_rows = values_of(out.d), values_of(out.d2)
    local o1, o2 = sum_column(d1_rows, 1), sum_column(d2_rows, 1)
    assert.is_true(o1 > 0.3 * st.estimatedObjects and o2 > 0.3 * st.estimatedObjects,
      string.format("deltas %d and %d of %.1f objects", o1, o2, st.estimatedObjects))
    if st.pendingSamples == 0 then
      assert.is_true(math.abs(o1 + o2 - st.estimatedObjects) <= 0.5 * (#d1_rows + #d2_rows) + 0.01 * st.estimatedObjects,
        string.format("deltas %d + %d, estimated %.1f", o1, o2, st.estimatedObjects))
    end
  end)
end)
