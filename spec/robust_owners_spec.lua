-- LuaJIT has one profiler per process, and jit.p / jit.profile take it over
-- without asking. Nothing may crash, and the session says when it lost
-- samples that way (stats().warning, and one line on stderr at stop).
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local collapsed = require("spec.support.collapsed")
local jprofile = require("jit.profile")

local sampling = require("spec.support.sampling")

-- Stops `s` with stderr captured; returns the text and what went to stderr.
local function stop_capturing(s)
  local real, lines = io.stderr, {}
  io.stderr = { write = function(_, ...) for _, v in ipairs({ ... }) do lines[#lines + 1] = v end end }
  local ok, text = pcall(s.stop, s)
  io.stderr = real
  assert(ok, text)
  return text, table.concat(lines)
end

describe("competing owners", function()
  after_each(function()
    jprofile.stop()
    sessions.stop_all()
  end)

  it("a normal session has no warning", function()
    local s = profile.sample()
    sampling.for_cpu(0.3)
    local _, err = stop_capturing(s)
    assert.is_nil(s:stats().warning)
    assert.is_nil(s.warning)
    assert.equal("", err)
  end)

  it("jit.profile taking the profiler over mid-session is detected", function()
    local s = profile.sample({ intervalMs = 1 })
    sampling.for_cpu(0.3)
    local before = s:stats().samples
    assert.is_true(before >= sampling.floor(s), "samples before the takeover: " .. before)
    local theirs = 0
    jprofile.start("li1", function(_, n) theirs = theirs + n end)
    sampling.for_cpu(0.5)
    jprofile.stop()
    sampling.for_cpu(0.3)
    local mid = s:stats()
    assert.is_true(mid.samples - before < 20, "our callback stopped receiving samples")
    local text, err = stop_capturing(s)
    assert.is_true(theirs > 0, "jit.profile's callback ran")
    assert.is_true(#collapsed.parse(text) > 0, "what was collected before is kept")
    local st = s:stats()
    assert.matches("%d+ ticks %(about [%d.]+ s%) found LuaJIT's profiler no longer ours", st.warning)
    assert.matches("took it over or stopped it", st.warning)
    assert.equal(st.warning, s.warning)
    assert.equal("tecs.profile: warning: " .. st.warning .. "\n", err)
    -- the profiler is usable again afterwards
    local s2 = profile.sample()
    sampling.for_cpu(0.3)
    s2:stop()
    assert.is_true(s2:stats().samples >= sampling.floor(s2))
    assert.is_nil(s2:stats().warning)
  end)

  it("a session started while jit.p runs takes over and says so", function()
    local jp = require("jit.p")
    local out = os.tmpname()
    jp.start("l", out)
    sampling.for_cpu(0.2)
    local s = profile.sample()
    sampling.for_cpu(0.3)
    local st = s:stats()
    assert.is_true(st.samples >= sampling.floor(s), "our session samples after taking over: " .. st.samples)
    assert.matches("another sampler %(jit.p or jit.profile%) was running when this session started", st.warning)
    -- jit.p's stop now stops LuaJIT's profiler under our session
    jp.stop()
    sampling.for_cpu(0.5)
    local text, err = stop_capturing(s)
    os.remove(out)
    assert.is_true(#collapsed.parse(text) > 0)
    assert.matches("was running when this session started", err)
    assert.matches("found LuaJIT's profiler no longer ours", err)
  end)

  it("jit.profile can start after a session stops, and the reverse", function()
    local s = profile.sample()
    sampling.for_cpu(0.1)
    s:stop()
    local n = 0
    jprofile.start("i1", function(_, k) n = n + k end)
    sampling.for_cpu(0.2)
    jprofile.stop()
    assert.is_true(n > 0, "jit.profile works after our session")
    local s2 = profile.sample()
    sampling.for_cpu(0.2)
    s2:stop()
    assert.is_true(s2:stats().samples > 0)
    assert.is_nil(s2:stats().warning, s2:stats().warning)
  end)
end)
