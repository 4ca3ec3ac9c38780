-- The annotated source with exact hit counts from a coverage session
-- (option `counts`), beside the sampled shares.
local profile = require("tecs.profile")
local run = require("spec.support.run")

local FIXTURE = "spec/fixtures/annot_counts.lua"
-- Known by construction: the loop body runs 1000 times, `add` is called 7
-- times, the `if` branch never runs; comments and `end` are not counted.
local KNOWN = { [1] = "", [2] = "1", [3] = "7", [4] = "", [8] = "1000", [11] = "7", [14] = "0", [16] = "1" }

--- The count column of each line of `file`'s section in an annotated view.
local function count_column(text, file)
  local head = "====== " .. file .. " ======"
  local at = assert(text:find(head, 1, true), "no section for " .. file .. " in:\n" .. text)
  local section = text:sub(at):match("^[^\n]*\n(.-)\n======") or text:sub(at):match("^[^\n]*\n(.*)$")
  local header = assert(section:match("^([^\n]*)\n"), section)
  assert.matches("count | +line | source$", header)
  local cols = {}
  for left, n in section:gmatch("\n([^\n|]*)| +(%d+) | ") do
    cols[tonumber(n)] = left:sub(-10):match("^%s*(.-)%s*$")
  end
  return cols
end

local function counted_run(times)
  local cov = profile.coverage({ include = "annot_counts%.lua$" })
  local s = profile.sample({ precision = "line" })
  local ok, err = pcall(function()
    for _ = 1, times do dofile(FIXTURE) end
  end)
  s:stop()
  cov:stop()
  assert(ok, err)
  return s, cov
end

describe("annotated source with hit counts", function()
  it("shows each counted line's exact count, 0 for lines never run, blank for the rest", function()
    local s, cov = counted_run(1)
    local text = profile.report(s, { annotate = "full", counts = cov })
    assert.matches("# count: times each line ran, from a coverage session", text, 1, true)
    local cols = count_column(text, FIXTURE)
    for line, want in pairs(KNOWN) do
      assert.are.equal(want, cols[line], "line " .. line .. " in:\n" .. text)
    end
    -- The session and its files() table give the same view.
    assert.are.equal(text, profile.report(s, { annotate = "full", counts = cov:files() }))
  end)

  it("adds up the counts of a chunk loaded more than once", function()
    local s, cov = counted_run(3)
    local cols = count_column(profile.report(s, { annotate = "full", counts = cov }), FIXTURE)
    assert.are.equal("3000", cols[8])
    assert.are.equal("21", cols[3])
    assert.are.equal("0", cols[14])
    assert.are.equal("", cols[1])
  end)

  it("matches a fixed sample profile (golden)", function()
    -- Shares from fixed collapsed text, counts from a real run: both exact.
    local _, cov = counted_run(1)
    local input = FIXTURE .. ":8 90\n" .. FIXTURE .. ":11;" .. FIXTURE .. ":3 10\n"
    local text = profile.report(input, { annotate = "hot", context = 1, counts = cov })
    local path = "spec/golden/expected/annotate-counts.txt"
    if os.getenv("UPDATE_GOLDEN") == "1" then run.write(path, text) end
    assert.are.equal(assert(run.read(path), "cannot read " .. path), text)
  end)

  it("goes with the trace notes", function()
    local _, cov = counted_run(1)
    local input = FIXTURE .. ":8_[N] 3\n" .. FIXTURE .. ":8_[I] 1\n"
    local text = profile.report(input, { annotate = "hot", context = 0, counts = cov, trace = { sites = {} } })
    assert.matches("   self   total   jit     count |  line | source\n", text, 1, true)
    assert.matches(" 100.0%  100.0%   75%      1000 |     8 |   sum = sum + i % 7\n", text, 1, true)
  end)

  it("checks the option", function()
    local function fails(opts, msg)
      assert.error_matches(function() profile.report("a:1 1\n", opts) end, msg, 1, true)
    end
    local expected = "option 'counts' must be a CoverageSession from profile.coverage or its files() table"
    fails({ annotate = "hot", counts = 5 }, expected .. " (got number 5)")
    fails({ annotate = "hot", counts = { x = 1 } }, expected)
    fails({ annotate = "hot", counts = { x = {} } }, expected .. " (entry 'x' has no 'lines' table)")
    fails({ annotate = "hot", counts = { x = { lines = { a = 1 } } } }, expected)
    fails({ counts = {} }, "option 'counts' goes with option 'annotate'")
  end)
end)
