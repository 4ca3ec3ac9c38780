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

--- Tells which of a module's functions a row's innermost frame in that
-- module's file belongs to (`file:line` inside its lines, or its own
-- `file:first-last`).
-- @param module a table of functions, all defined in one file
-- @param names the names of the functions told apart
-- @return `owner(row)`: the name, or nil when no frame lies in them
function M.owner_of(module, names)
  local file = debug.getinfo(module[names[1]], "S").short_src
  local ranges = {}
  for _, name in ipairs(names) do
    local info = debug.getinfo(module[name], "S")
    ranges[name] = { info.linedefined, info.lastlinedefined }
  end
  return function(row)
    for i = #row.frames, 1, -1 do
      local f = row.frames[i]
      if f:sub(1, #file + 1) == file .. ":" then
        local line = tonumber(f:sub(#file + 2):match("^(%d+)"))
        for name, r in pairs(ranges) do
          if line and line >= r[1] and line <= r[2] then return name end
        end
      end
    end
  end
end

return M
