--- Binary-trees-like work, written here for machines without LuaJIT's
-- benchmark sources: complete binary trees of small tables are built,
-- walked and dropped, many shallow ones and fewer deep ones, beside one
-- tree that lives throughout. Nearly all its time is allocation and
-- collection, as in LuaJIT's binary-trees (bench/alloc.lua's default
-- program for the allocation session's overhead).
--
--   luajit bench/trees.lua [MAXDEPTH]   (default 15)
local max_depth = math.max(6, tonumber(arg and arg[1]) or 15)

local function build(depth)
  if depth == 0 then return { false, false } end
  return { build(depth - 1), build(depth - 1) }
end

local function nodes(tree)
  if not tree[1] then return 1 end
  return 1 + nodes(tree[1]) + nodes(tree[2])
end

local kept = build(max_depth)
local total = 0
for depth = 4, max_depth, 2 do
  local rounds = 2 ^ (max_depth - depth + 4)
  local count = 0
  for _ = 1, rounds do count = count + nodes(build(depth)) end
  total = total + count
  io.write(string.format("%d trees of depth %d: %d nodes\n", rounds, depth, count))
end
io.write(string.format("kept tree: %d nodes; %d nodes in all\n", nodes(kept), total))
