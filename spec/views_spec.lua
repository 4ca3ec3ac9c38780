-- Views of live sessions: function identity from the source, VM state by
-- function, lines within a function, callers, annotation, options and errors.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local report = require("tecs.profile.report")
local work = dofile("spec/fixtures/views_work.lua")

local FILE = "spec/fixtures/views_work.lua"

local sampling = require("spec.support.sampling")

-- Parses a raw report into first-level {self, total} and second-level counts.
local function parse(text)
  local first, second, current = {}, {}, nil
  for line in text:gmatch("[^\n]+") do
    if not line:find("^#") and not line:find("^ +self +total") then
      local c2, k2 = line:match("^ +(%d+)  [-<>][-<>] (.+)$")
      if c2 then
        second[current][k2] = tonumber(c2)
      else
        local s, t, k = line:match("^ *(%d+) +(%d+)  (.+)$")
        assert(s, "unexpected line: " .. line)
        current = k
        first[k] = { self = tonumber(s), total = tonumber(t) }
        second[k] = {}
      end
    end
  end
  return first, second
end

describe("views of a session", function()
  after_each(function()
    sessions.stop_all()
  end)

  it("gives each share its sampling error, and says when a profile is too small to rank", function()
    local small = profile.report("a.lua:1_[I] 10\nb.lua:2_[I] 2\n", { by = "line" })
    assert.matches("# only 12 samples: too few to rank reliably", small, 1, true)
    -- 10 of 12: 83.3%, with a 95% Wilson interval ±20.1 points wide.
    assert.matches("83.3% ±20.1", small, 1, true)
    local big = profile.report("a.lua:1_[I] 610\nb.lua:2_[I] 390\n", { by = "line" })
    assert.is_nil(big:find("too few", 1, true))
    assert.matches("at most ±3.1 points here", big, 1, true)
    assert.matches("61.0% ±3.0", big, 1, true)
  end)

  it("names functions from the source and groups their lines", function()
    -- Interpreted, the two loops' 2:1 time is set by construction; compiled,
    -- it depends on how each loop's trace fared (one run in a few hundred
    -- gave line 7 46% of the samples).
    jit.off(work.two_lines)
    -- Calls of several ticks each: what happens between two calls (the
    -- clock read, the scheduler's switch at that system call on a busy
    -- machine) stays a small part of the time.
    local n = sampling.calibrate(work.two_lines, 5e-3)
    local s = profile.sample({ precision = "line" })
    sampling.until_samples(s, 600, function() work.two_lines(n) end)
    s:stop()
    jit.on(work.two_lines)
    local first, second = parse(profile.report(s, { mode = "fl", raw = true, minPercent = 0 }))
    local key = "M.two_lines (" .. FILE .. ":5)"
    assert.is_table(first[key], "function key present")
    local a, b = second[key][FILE .. ":7"] or 0, second[key][FILE .. ":8"] or 0
    -- The two loops are nearly all of the work.
    assert.is_true(a + b >= 0.9 * s:stats().recordedSamples, "samples in the two lines: " .. (a + b))
    sampling.check_share("line 7", a / (a + b), 2 / 3, a + b, 0, "next_line")
  end)

  it("answers: which hot functions only run interpreted?", function()
    work.compiled(100000)
    -- Sized so that each takes half of the time here, whatever the
    -- interpreter's speed against compiled code on this machine.
    local ni = sampling.calibrate(work.interpreted, 1e-4)
    local nc = sampling.calibrate(work.compiled, 1e-4)
    local s = profile.sample()
    sampling.until_samples(s, 800, function() work.interpreted(ni) work.compiled(nc) end)
    s:stop()
    local first, second = parse(profile.report(s, { mode = "vf", raw = true, minPercent = 0 }))
    local interp = "M.interpreted (" .. FILE .. ":13)"
    local comp = "M.compiled (" .. FILE .. ":20)"
    assert.is_table(first.Interpreted, "no interpreted samples")
    assert.is_true(first.Interpreted.self >= 100, "interpreted samples: " .. first.Interpreted.self)
    assert.is_true(second.Interpreted[interp] / first.Interpreted.self > 0.9)
    assert.is_true((second.Compiled[interp] or 0) < 0.05 * first.Interpreted.self)
    assert.is_true(second.Compiled[comp] >= 100, "compiled samples: " .. tostring(second.Compiled[comp]))
  end)

  it("splits a function's time by caller, and shows callees", function()
    local s = profile.sample()
    sampling.until_samples(s, 800, function() work.caller_a(30000) work.caller_b(10000) end)
    s:stop()
    local comp = "M.compiled (" .. FILE .. ":20)"
    local first, second = parse(profile.report(s, { by = "function", ["then"] = "caller", raw = true, minPercent = 0 }))
    local a = second[comp]["M.caller_a (" .. FILE .. ":26)"] or 0
    local b = second[comp]["M.caller_b (" .. FILE .. ":27)"] or 0
    -- Every sample of the callee is under one of its two callers, and each
    -- caller has its part (where the shares land is for the truth suite:
    -- spec/truth_spec.lua).
    assert.equal(first[comp].self, a + b)
    assert.is_true(a >= 50 and b >= 20, "caller split " .. a .. ":" .. b)
    local _, callees = parse(profile.report(s, { mode = "-s", sort = "total", raw = true, minPercent = 0 }))
    assert.is_true(callees["M.caller_a (" .. FILE .. ":26)"][comp] > 100)
  end)

  it("annotates the hot lines of the source with their shares", function()
    -- Interpreted, where the two lines' 2:1 time holds by construction
    -- (see "groups their lines" above).
    jit.off(work.two_lines)
    local s = profile.sample({ precision = "line" })
    sampling.until_samples(s, 500, function() work.two_lines(20000) end)
    s:stop()
    jit.on(work.two_lines)
    local text = profile.report(s, { annotate = "hot", context = 0 })
    assert.truthy(text:find("====== " .. FILE .. " ======", 1, true))
    local pct7 = text:match("\n +([%d.]+)%% +[%d.]+%% |     7 | ")
    local pct8 = text:match("\n +([%d.]+)%% +[%d.]+%% |     8 | ")
    assert.is_truthy(pct7, text)
    assert.is_true(tonumber(pct7) > tonumber(pct8))
    local full = profile.report(s, { annotate = "full" })
    assert.truthy(full:find("|    28 | return M", 1, true), "whole file shown")
  end)

  it("applies the threshold and the row limit", function()
    -- Two rows for certain: `compiled` sized to about a tenth of the time
    -- here, two_lines the rest, on either side of the 20% threshold.
    local nl = sampling.calibrate(work.two_lines, 9e-4)
    local nc = sampling.calibrate(work.compiled, 1e-4)
    local s = profile.sample()
    sampling.until_samples(s, 400, function() work.two_lines(nl) work.compiled(nc) end)
    s:stop()
    local all = profile.report(s, { by = "line", minPercent = 0 })
    local some = profile.report(s, { by = "line", minPercent = 20 })
    local one = profile.report(s, { by = "line", minPercent = 0, limit = 1 })
    local function rows(t) local n = 0 for _ in t:gmatch("\n +[%d.]+%% ") do n = n + 1 end return n end
    assert.is_true(rows(all) > rows(some))
    assert.equal(1, rows(one))
  end)

  it("reports a running session, a profile object and collapsed text alike", function()
    local s = profile.sample()
    sampling.for_cpu(0.3, function() work.compiled(10000) end)
    local live = profile.report(s, { minPercent = 0 })
    assert.matches("M.compiled", live)
    local text = s:stop()
    assert.matches("M.compiled", profile.report(text, { minPercent = 0 }))
    assert.matches(FILE .. ":%d+", profile.report(text, { minPercent = 0, functions = false }))
    assert.not_matches("M%.compiled", profile.report(text, { minPercent = 0, functions = false }))
  end)

  it("reports an empty profile", function()
    assert.matches("no samples", profile.report(""))
  end)

  it("saturates sample sums at the largest u64 instead of wrapping", function()
    local max = "18446744073709551615"
    local text = "a.lua:1_[N] " .. max .. "\nb.lua:2_[N] " .. max .. "\n"
    local header = "# " .. max .. " samples; "
    local out = profile.report(text)
    assert.equal(header, out:sub(1, #header), out)
    out = profile.report(text, { by = "vmstate", ["then"] = "function", raw = true, minPercent = 0 })
    assert.equal(header, out:sub(1, #header), out)
    assert.matches("\n *" .. max .. " +" .. max .. "  Compiled\n", out)
  end)

  describe("errors", function()
    local cases = {
      { { by = "stack" }, "option 'by'" },
      { { ["then"] = "nothing" }, "option 'then'" },
      { { by = "line", ["then"] = "line" }, "must differ" },
      { { minPercent = -1 }, "minPercent" },
      { { depth = 0 }, "depth" },
      { { mode = "fq" }, "unknown letter" },
      { { mode = "fvl" }, "too many" },
      { { annotate = "yes" }, "annotate" },
      { { colour = true }, "unknown option 'colour'" },
      { "fast", "table or nil expected" },
    }
    for _, c in ipairs(cases) do
      it("rejects " .. c[2], function()
        local ok, err = pcall(profile.report, "a.lua:1_[N] 1\n", c[1])
        assert.is_false(ok)
        assert.matches(c[2], err, 1, true)
        assert.matches("^profile.report: ", (err:gsub("^[^:]+:%d+: ", "")))
      end)
    end

    it("names bad sources and reports at the caller's line", function()
      local ok, err = pcall(function() profile.report("/no/such/file.collapsed") end)
      assert.is_false(ok)
      assert.matches("views_spec.lua:%d+: profile.report: bad argument #1 'source': cannot read file", err)
      ok, err = pcall(profile.report, "a;b x\n")
      assert.is_false(ok)
      assert.matches("not collapsed%-stack text %(line 1", err)
      ok, err = pcall(profile.report, 42)
      assert.matches("'source'", err)
      ok, err = pcall(profile.hotAborts, "a.lua:1 1\n", "report")
      assert.matches("profile.hotAborts: bad argument #2 'trace'", err)
    end)

    it("tells sources apart by type, not by their contents", function()
      -- A one-line string is a path, even when it reads like collapsed text.
      local ok, err = pcall(profile.report, "a.lua:1_[N] 5")
      assert.is_false(ok)
      assert.matches("cannot read file 'a.lua:1_[N] 5'", err, 1, true)
      assert.matches("collapsed text needs a line break", err, 1, true)
      assert.matches("a.lua:1", profile.report("a.lua:1_[N] 5\n", { by = "line" }), 1, true)
      -- Tables that only look like sessions or profiles are refused.
      for _, fake in ipairs({ { _native = newproxy() }, { samples = 1 }, newproxy(true) }) do
        ok, err = pcall(profile.report, fake)
        assert.is_false(ok)
        assert.matches("AllocationSession or profile expected", err, 1, true)
      end
      -- A profile object from report.load goes through as it is.
      local prof = report.load("test", "a.lua:1_[N] 5\n")
      assert.matches("a.lua:1", profile.report(prof, { by = "line" }), 1, true)
    end)
  end)

  it("parses -jp mode strings", function()
    local m = report.parse_mode("vf")
    assert.same({ by = "vmstate", ["then"] = "function" }, m)
    assert.same({ by = "function", ["then"] = "caller", minPercent = 1 }, report.parse_mode("3si4m1"))
    assert.same({ by = "function", ["then"] = "callee" }, report.parse_mode("-s"))
    assert.same({ by = "line", depth = -3, raw = true }, report.parse_mode("l-3r"))
    assert.same({ by = "function", annotate = "full" }, report.parse_mode("A"))
    assert.same({ by = "zonecomponent", ["then"] = "line" }, report.parse_mode("zl"))
  end)
end)
