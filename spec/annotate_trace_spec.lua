local profile = require("tecs.profile")

local FIXTURE = "spec/fixtures/trace_nyi.lua" -- a closure made in a hot loop (line 4)

describe("annotated source with a trace report", function()
  it("puts each abort site under its line, with the trace counts", function()
    -- Traced alone: a sample taken while a trace is recorded can abort it
    -- for its own reason before the closure is reached.
    local tr = profile.trace()
    dofile(FIXTURE)
    local rep = tr:stop()
    local s = profile.sample({ precision = "line" })
    dofile(FIXTURE)
    s:stop()
    local site
    for _, x in ipairs(rep.sites) do
      if x.location == FIXTURE .. ":4" then site = x end
    end
    assert.is_table(site, "no abort at line 4: " .. tostring(rep))
    local text = profile.report(s, { annotate = "full", trace = rep })
    assert.matches(string.format("# traces: %d started, %d completed, %d aborted, %d loops blacklisted",
      rep.tracesStarted, rep.tracesCompleted, rep.tracesAborted, rep.blacklistings), text, 1, true)
    local note = string.format("^ trace aborted %d time%s (%s): %s", site.count, site.count == 1 and "" or "s",
      site.severity, site.reason)
    local line4 = text:find("|     4 |   local f = function() return i end\n", 1, true)
    local at = text:find(note, 1, true)
    assert.is_truthy(line4, text)
    assert.is_truthy(at, text)
    assert.is_true(at > line4 and not text:sub(line4, at):find("|     5 |", 1, true), text)
    -- The plain view has no notes. (The note itself is looked for: a full
    -- view can show this spec's own source, where the words are.)
    local plain = profile.report(s, { annotate = "full" })
    assert.is_nil(plain:find(note, 1, true))
  end)

  it("checks the option", function()
    assert.error_matches(function() profile.report("a:1 1\n", { annotate = "hot", trace = 5 }) end,
      "option 'trace' must be a TraceReport from profile.trace", 1, true)
    assert.error_matches(function() profile.report("a:1 1\n", { annotate = "hot", trace = {} }) end,
      "option 'trace' must be a TraceReport from profile.trace (no 'sites' list)", 1, true)
    assert.error_matches(function() profile.report("a:1 1\n", { trace = { sites = {} } }) end,
      "option 'trace' goes with option 'annotate'", 1, true)
  end)
end)
