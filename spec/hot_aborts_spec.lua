-- Hot aborts: abort sites ranked by the sampled time at their locations.
local profile = require("tecs.profile")
local work = dofile("spec/fixtures/views_work.lua")

local FILE = "spec/fixtures/views_work.lua"

local sampling = require("spec.support.sampling")

describe("profile.hotAborts", function()
  it("puts sites in hot code first, whatever their abort counts", function()
    local s = profile.sample({ precision = "line" })
    -- compiled sized to about a tenth of the time here: present, not first.
    local nl = sampling.calibrate(work.two_lines, 9e-4)
    local nc = sampling.calibrate(work.compiled, 1e-4)
    sampling.until_samples(s, 600, function() work.two_lines(nl) work.compiled(nc) end)
    s:stop()
    -- A TraceReport as profile.trace() returns it (sites sorted by severity, count).
    local trace = { durationSec = 1, totalAborts = 3, blacklisted = 1, sites = {
      { severity = "warn", count = 500, reason = "NYI: bytecode UCLO", location = FILE .. ":22", zone = "" },
      { severity = "warn", count = 7, reason = "trace too long", location = FILE .. ":7", zone = "" },
      { severity = "info", count = 1, reason = "leaving loop", location = FILE .. ":15", zone = "" },
    } }
    local text, ranked = profile.hotAborts(s, trace)
    assert.equal(3, #ranked)
    assert.equal(2, ranked[1].site, text)       -- two_lines: most of the time
    assert.equal(1, ranked[2].site, text)       -- compiled: some
    assert.equal(3, ranked[3].site, text)       -- interpreted(): never ran
    assert.is_true(ranked[1].lineTotal >= 100 and ranked[1].functionTotal >= ranked[1].lineTotal)
    assert.is_true(ranked[2].functionTotal > 0)
    assert.equal(0, ranked[3].functionTotal)
    -- After the header lines (#), the column titles, then the first site.
    assert.matches("trace too long", text:match("\n fn self[^\n]+\n([^\n]+)"))
  end)

  -- Registered only where the trace tracker exists, so that a build without
  -- it neither fails nor counts a test that did not run.
  local has_trace = pcall(require, "tecs.profile.trace")
  if has_trace then it("works with a real trace session", function()
    -- A loop creating a closure per iteration: bytecode FNEW, which no
    -- LuaJIT version compiles, so every trace started here aborts.
    local function nyi_loop(n)
      local t = {}
      for i = 1, n do
        local f = function() return i end
        t[#t + 1] = f()
      end
      return #t
    end
    local tr = profile.trace()
    local s = profile.sample()
    sampling.for_cpu(0.5, function() nyi_loop(2000) end)
    s:stop()
    local report = tr:stop()
    assert.is_true(#report.sites > 0, "aborts recorded")
    local text, ranked = profile.hotAborts(s, report)
    assert.equal(#report.sites, #ranked)
    assert.is_true(ranked[1].functionTotal > 0 or ranked[1].lineTotal > 0, text)
  end) end
end)
