-- A program that keeps generating new code cannot grow the profiler's memory
-- without bound: past `maxStacks` unique stacks, new stacks are counted on one
-- overflow line, and the stats say how many samples went there.
local collapsed = require("spec.support.collapsed")
local native = require("tecs.profile.native")

local LUAJIT = require("spec.support.run").luajit

local function run(max_stacks, seconds)
  local p = io.popen(string.format("%s spec/fixtures/new_code.lua %s %s 2>&1", LUAJIT, max_stacks, seconds))
  local out = p:read("*a")
  p:close()
  local head, text = out:match("^(.-)\n%-%-%-\n(.*)$")
  assert.is_truthy(head, out)
  local v = {}
  for k, val in head:gmatch("([%w_]+)=(%S+)") do v[k] = tonumber(val) or val end
  return v, text
end

describe("bounded memory", function()
  it("folds new stacks past maxStacks into the overflow line", function()
    local v, text = run(2000, 1.5)
    assert.is_true(v.functions > 10000, "new functions generated: " .. v.functions)
    assert.equal(2000, v.stacks)
    assert.is_true(v.overflow > 1000, "samples of new stacks after the cap: " .. v.overflow)
    local rows = collapsed.parse(text)
    local over = collapsed.sum(rows, function(r) return r.frames[1] == "[overflow: stack table full]" end)
    assert.equal(v.overflow, over, "the overflow line carries exactly the overflowed samples")
    assert.equal(v.recorded, collapsed.sum(rows), "every recorded sample is in the output")
    -- the table does not grow once full, and neither does the process
    assert.is_number(v.mem_full)
    assert.equal(v.mem_full, v.mem_end, "stack table bytes after the cap")
    assert.is_true(v.rss_end - v.rss_full < 8192,
      string.format("resident memory grew %d KiB after the cap", v.rss_end - v.rss_full))
  end)

  it("has a documented default cap", function()
    assert.equal(100000, native.defaultMaxStacks)
    -- The option table of profile.sample lives in the API reference.
    local f = assert(io.open("docs/api.md"))
    local doc = f:read("*a")
    f:close()
    local documented = false
    for line in doc:gmatch("[^\n]+") do
      -- its row: | `maxStacks` | `100000` | meaning |
      local default = line:match("^|%s*`maxStacks`%s*|%s*`(%d+)`%s*|")
      if default == tostring(native.defaultMaxStacks) then documented = true end
    end
    assert.is_true(documented, "docs/api.md documents the maxStacks default")
  end)
end)
