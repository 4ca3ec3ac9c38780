-- Deltas of a running session (`SampleSession:delta`): every sample lands in
-- exactly one delta, the session keeps running without a trace flush, and a
-- delta renders in every format (pprof read back by the real go tool pprof).
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local run = require("spec.support.run")
local sampling = require("spec.support.sampling")
local collapsed = require("spec.support.collapsed")
local zone = require("jit.zone")

local function spin(n)
  local s = 0
  for i = 1, n do s = (s + i * 7) % 65521 end
  return s
end

-- Collapsed rows summed by stack, as a map. The VM-state marker is left
-- out of the key: a collapsed line carries its stack's dominant state, which
-- can differ between a delta and the whole.
local function by_line(text)
  local m = {}
  for _, r in ipairs(collapsed.parse(text)) do
    local key = table.concat(r.frames, ";")
    m[key] = (m[key] or 0) + r.count
  end
  return m
end

-- The highest trace number that exists now (0 when none).
local function newest_trace()
  local util = require("jit.util")
  local n = 0
  for i = 1, 100000 do
    if util.traceinfo(i) then n = i elseif i > n + 100 then break end
  end
  return n
end

describe("SampleSession:delta", function()
  after_each(function()
    sessions.stop_all()
  end)

  it("hands out every sample exactly once, in deltas that add up to the whole profile", function()
    local s = profile.sample()
    local parts, running = {}, {}
    -- Nothing but the workload and the deltas runs while sampling.
    for round = 1, 4 do
      sampling.for_cpu(0.25, function() zone(round % 2 == 0 and "even" or "odd") spin(20000) zone() end)
      parts[#parts + 1] = s:delta("collapsed")
      running[round] = s:isRunning()
    end
    s:stop()
    assert.same({ true, true, true, true }, running)
    parts[#parts + 1] = s:delta("collapsed") -- what came between the last delta and stop
    assert.equal("", s:delta("collapsed"), "nothing is handed out twice")
    local summed = {}
    for _, text in ipairs(parts) do
      for k, n in pairs(by_line(text)) do summed[k] = (summed[k] or 0) + n end
    end
    local whole = by_line(s:collapsed())
    assert.same(whole, summed)
    -- Each delta holds the zone its round ran in, and enough samples to show it.
    for round = 1, 4 do
      local rows = collapsed.parse(parts[round])
      local mine = round % 2 == 0 and "even" or "odd"
      local other = round % 2 == 0 and "odd" or "even"
      assert.is_true(collapsed.sum(rows, function(r) return r.frames[1] == mine end) >= sampling.least_samples(s, 0.2),
        parts[round])
      -- The other zone can only appear through the one sample taken while
      -- the previous round's last call was still in it.
      assert.is_true(collapsed.sum(rows, function(r) return r.frames[1] == other end) <= 1, parts[round])
    end
  end)

  it("does not flush compiled traces or stop the session", function()
    local s = profile.sample()
    sampling.for_cpu(0.2, function() spin(20000) end)
    local n = newest_trace()
    assert.is_true(n > 0, "the workload was compiled")
    local d = s:delta()
    assert.is_true(require("tecs.profile.report").load("test", d) == d)
    assert.is_not_nil(require("jit.util").traceinfo(n), "trace " .. n .. " survives a delta")
    assert.is_true(s:isRunning())
    sampling.for_cpu(0.2, function() spin(20000) end)
    assert.is_true(profile.report(s:delta(), { raw = true }):match("^# (%d+) samples") + 0 >= sampling.least_samples(s, 0.2))
    s:stop()
  end)

  it("renders a delta as pprof that go tool pprof reads, with the delta's samples", function()
    local dir = run.tmpdir()
    local function pprof_total(bytes)
      run.write(dir .. "/d.pb.gz", bytes)
      local rc, out = run.run("go tool pprof -raw " .. run.quote(dir .. "/d.pb.gz"))
      assert.equal(0, rc, out)
      local n = 0
      for count in out:gmatch("\n%s+(%d+)%s+%d+: [%d ]+") do n = n + tonumber(count) end
      return n, tonumber(out:match("\nPeriod: (%d+)"))
    end
    local s = profile.sample()
    sampling.for_cpu(0.2, function() spin(20000) end)
    s:delta() -- the first part is not looked at
    sampling.for_cpu(0.3, function() spin(20000) end)
    local d = s:delta()
    local n = pprof_total(profile.pprof(d, { intervalMs = s.intervalMs }))
    assert.equal(collapsed.sum(collapsed.parse(d:collapsed())), n)
    assert.is_true(n >= sampling.least_samples(s, 0.3), "samples in the delta: " .. n)
    sampling.for_cpu(0.2, function() spin(20000) end)
    local m, period = pprof_total(s:delta("pprof"))
    assert.is_true(m >= sampling.least_samples(s, 0.2), "samples in the pprof delta: " .. m)
    assert.equal(1000000, period, "the session's 1 ms interval")
    s:stop()
    os.execute("rm -rf " .. run.quote(dir))
  end)

  it("rejects a bad format and a dot call", function()
    local s = profile.sample()
    local ok, err = pcall(s.delta, s, "auto")
    assert.is_false(ok)
    assert.matches("SampleSession:delta: bad argument #1 'format' (nil or \"collapsed\"", err, 1, true)
    ok, err = pcall(s.delta, s, 3)
    assert.matches("got number 3", err, 1, true)
    ok, err = pcall(s.delta)
    assert.matches("use a colon", err, 1, true)
    s:stop()
  end)
end)
