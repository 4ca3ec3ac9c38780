--- Jumper (github.com/Yonaba/Jumper, from a checkout JUMPER_DIR names; not
-- part of this repository) on a 120x120 grid with one cell in eight a wall
-- (a fixed pseudo-random map), between four far-apart pairs of open cells
-- that every finder connects.
--
-- `rounds(finders)` returns a function that runs one search a call, the
-- finders (Jumper's names: "ASTAR", "JPS", ...) and the pairs in turn, and
-- returns the path's length; or nil and why when JUMPER_DIR is not set.
-- `patch(grid)`, if given, is called on the grid before any search.
local M = {}

--- The map: 120 rows of 120 cells, 1 a wall, 0 open.
function M.map()
  math.randomseed(7)
  local map = {}
  for y = 1, 120 do
    map[y] = {}
    for x = 1, 120 do map[y][x] = (math.random(0, 2147483647) % 8 == 0) and 1 or 0 end
  end
  return map
end

function M.rounds(names, patch)
  local dir = os.getenv("JUMPER_DIR")
  if not dir then return nil, "JUMPER_DIR is not set" end
  if not package.path:find(dir .. "/?.lua;", 1, true) then package.path = dir .. "/?.lua;" .. package.path end
  local Grid = require("jumper.grid")
  local Pathfinder = require("jumper.pathfinder")
  local map = M.map()
  local function rand() return math.random(0, 2147483647) end
  local grid = Grid(map)
  if patch then patch(grid) end
  local finders = {}
  for i, name in ipairs(names) do finders[i] = Pathfinder(grid, name, 0) end
  local ends = {}
  while #ends < 4 do
    local p = { rand() % 20 + 1, rand() % 120 + 1, rand() % 20 + 101, rand() % 120 + 1 }
    if #ends % 2 == 1 then p = { p[2], p[1], p[4], p[3] } end
    local ok = map[p[2]][p[1]] == 0 and map[p[4]][p[3]] == 0
    for _, f in ipairs(finders) do ok = ok and f:getPath(p[1], p[2], p[3], p[4]) ~= nil end
    if ok then ends[#ends + 1] = p end
  end
  local k = 0
  return function()
    k = k + 1
    local f, p = finders[(k - 1) % #finders + 1], ends[(k - 1) % #ends + 1]
    return assert(f:getPath(p[1], p[2], p[3], p[4]), "no path"):getLength()
  end
end

return M
