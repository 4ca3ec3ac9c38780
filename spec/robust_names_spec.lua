-- Odd chunk names, zone names and paths: the collapsed output still parses
-- strictly, in the test reader and in the native reader, with `;`, CR and LF
-- replaced by `_` and invalid UTF-8 by U+FFFD.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local native = require("tecs.profile.native")
local collapsed = require("spec.support.collapsed")
local zone = require("jit.zone")
local sampling = require("spec.support.sampling")

local BODY = "local s = 0 for i = 1, 3000 do s = (s + i) % 7 end return s"

-- name as given, and as it must appear in the output
local NAMES = {
  { "semi;colon", "semi_colon" },
  { "with space", "with space" },
  { "new\nline", "new_line" },
  { "cr\rreturn", "cr_return" },
  { "quo\"te's", "quo\"te's" },
  { "com,ma", "com,ma" },
  { "ünï©ødé ☃", "ünï©ødé ☃" },
  { "bad\255\254utf8", "bad\239\191\189\239\191\189utf8" },
  { "tab\there", "tab\there" },
  { "ends with digits 42", "ends with digits 42" },
  { "x_[N] 5", "x_[N] 5" },
}

local function has_exact(rows, frame)
  for _, r in ipairs(rows) do
    for _, f in ipairs(r.frames) do if f == frame then return true end end
  end
  return false
end

local function check_both_readers(text)
  local rows = collapsed.parse(text)
  local n = native.parseCollapsed(text)
  assert.equal(#rows, n.rows)
  assert.equal(collapsed.sum(rows), n.samples)
  return rows
end

describe("odd names", function()
  after_each(function()
    sessions.stop_all()
    zone:flush()
  end)

  it("in chunk names (@file and =name forms) and zone names", function()
    local fns = {}
    for i, n in ipairs(NAMES) do
      fns[#fns + 1] = { assert(loadstring(BODY, "@" .. n[1] .. ".lua")), n[1] }
      fns[#fns + 1] = { assert(loadstring(BODY, "=" .. n[1])), n[1] }
      fns[#fns + 1] = { assert(loadstring(BODY, n[1])), n[1] }
    end
    local s = profile.sample({ intervalMs = 0.2, precision = "line" })
    -- About 50 samples for each chunk, whatever the clock's rate.
    sampling.until_samples(s, 50 * #fns, function()
      for _, f in ipairs(fns) do zone(f[2]) f[1]() zone() end
    end)
    local rows = check_both_readers(s:stop())
    assert.is_true(collapsed.sum(rows) >= 50 * #fns)
    for _, n in ipairs(NAMES) do
      assert.is_true(has_exact(rows, n[2]), "zone " .. n[2])
      assert.is_true(has_exact(rows, n[2] .. ".lua:1"), "chunk @" .. n[2])
      assert.is_true(has_exact(rows, n[2] .. ":1"), "chunk =" .. n[2])
    end
    for _, r in ipairs(rows) do
      assert.is_nil(r.line:find("\r", 1, true), "no CR in " .. r.line)
    end
  end)

  it("in file paths with spaces, for the profiled file and the output file", function()
    local base = os.tmpname()
    os.remove(base)
    local dir = base .. " dir with spaces; and more"
    assert(os.execute("mkdir -p '" .. dir .. "'") == 0)
    local src = dir .. "/my module.lua"
    local f = assert(io.open(src, "w"))
    f:write("return function() ", BODY, " end\n")
    f:close()
    local fn = dofile(src)
    local out = dir .. "/out file.collapsed"
    local s = profile.sample({ intervalMs = 0.2, precision = "line" })
    sampling.for_cpu(0.4, fn)
    local text = s:stop(out)
    local rows = check_both_readers(text)
    local expected = (dir:gsub(";", "_")) .. "/my module.lua:1"
    assert.is_true(has_exact(rows, expected), "frame " .. expected)
    local g = assert(io.open(out, "rb"))
    assert.equal(text, g:read("*a"))
    g:close()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("a 64 KiB chunk name and an empty zone name", function()
    local long = ("n"):rep(65536)
    local fn = assert(loadstring(BODY, "=" .. long))
    local s = profile.sample({ intervalMs = 0.2, precision = "line" })
    sampling.for_cpu(0.3, function() zone("") zone("inner") fn() zone() zone() end)
    local rows = check_both_readers(s:stop())
    assert.is_true(has_exact(rows, long .. ":1"))
    assert.is_true(collapsed.sum(rows, function(r) return r.frames[1] == "?" and r.frames[2] == "inner" end) > 0,
      "an empty zone name shows as ?")
  end)
end)
