-- A strict collapsed-stack reader for the tests: every non-empty line must be
-- `frame;frame;... count` with non-empty frames, exactly one space before an
-- integer count, and a `_[X]` VM-state marker on the leaf frame.
local M = {}

function M.parse(text)
  local rows = {}
  local n = 0
  for line in text:gmatch("([^\n]*)\n") do
    n = n + 1
    assert(not line:find("\r"), "line " .. n .. " has a CR")
    local frames, count = line:match("^(.+) (%d+)$")
    assert(frames, "line " .. n .. " is not 'frames count': " .. line)
    assert(not frames:find(" %d+$"), "line " .. n .. " has two counts")
    local list = {}
    for f in (frames .. ";"):gmatch("([^;]*);") do
      assert(f ~= "", "line " .. n .. " has an empty frame: " .. line)
      list[#list + 1] = f
    end
    local leaf = list[#list]
    local state = leaf:match("_%[([NICGJ])%]$")
    assert(state, "line " .. n .. " leaf has no _[X] marker: " .. line)
    list[#list] = leaf:sub(1, -5)
    rows[#rows + 1] = { frames = list, count = tonumber(count), state = state, line = line }
  end
  assert(text == "" or text:sub(-1) == "\n", "text does not end with a newline")
  return rows
end

-- Total samples of rows matching pred(row).
function M.sum(rows, pred)
  local s = 0
  for _, r in ipairs(rows) do
    if not pred or pred(r) then s = s + r.count end
  end
  return s
end

function M.has_frame(row, pattern)
  for _, f in ipairs(row.frames) do
    if f:find(pattern) then return true end
  end
  return false
end

return M
