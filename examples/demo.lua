-- A small "game loop" profiled by tecs-profile: run by `make demo`.
--   luajit examples/demo.lua [output-dir]
-- Writes demo.collapsed (collapsed stacks) into the output directory.
local profile = require("tecs.profile")
local zone = require("jit.zone")

local outdir = arg and arg[1] or "."

local entities = {}
for i = 1, 2000 do
  entities[i] = { x = i, y = i * 0.5, vx = (i % 7) - 3, vy = (i % 5) - 2, name = "e" .. i }
end

local function integrate(dt)
  for _, e in ipairs(entities) do
    e.x = e.x + e.vx * dt
    e.y = e.y + e.vy * dt
  end
end

local function collide()
  local hits = 0
  for i = 1, #entities, 4 do
    local a = entities[i]
    for j = i + 1, math.min(i + 40, #entities) do
      local b = entities[j]
      local dx, dy = a.x - b.x, a.y - b.y
      if dx * dx + dy * dy < 4 then hits = hits + 1 end
    end
  end
  return hits
end

local function build_labels()
  local out = {}
  for i = 1, #entities, 10 do
    local e = entities[i]
    out[#out + 1] = e.name .. "@" .. math.floor(e.x) .. "," .. math.floor(e.y)
  end
  -- Not `return table.concat(...)`: at function precision the time of a
  -- function ending in a tail call to a built-in is charged to its caller
  -- (docs/sampling.md, "What function precision misses").
  local labels = table.concat(out, ";")
  return labels
end

local function draw_sprites()
  local sum = 0
  for i = 1, #entities do
    local e = entities[i]
    sum = sum + math.sin(e.x) * math.cos(e.y)
  end
  return sum
end

local function frame(dt)
  zone("update")
    zone("physics") integrate(dt) collide() zone()
  zone()
  zone("render")
    zone("sprites") draw_sprites() zone()
    zone("hud") build_labels() zone()
  zone()
end

local session = profile.sample({ intervalMs = 1 })
local t0 = os.clock()
local frames = 0
while os.clock() - t0 < 2.0 do
  frame(1 / 60)
  frames = frames + 1
end
local path = outdir .. "/demo.collapsed"
local text = session:stop(path)
local st = session:stats()
print(string.format("%d frames, %d samples at %.0f/s (%s clock), %d unique stacks",
  frames, st.samples, st.rate, st.clock, st.stacks))
print("wrote " .. path)
local n = 0
for line in text:gmatch("[^\n]+") do
  n = n + 1
  if n > 8 then break end
  print("  " .. line)
end
