-- Source for the golden-file tests: input.collapsed refers to these lines.
local M = {}

local function integrate(bodies, dt)
  for _, b in ipairs(bodies) do
    b.x = b.x + b.vx * dt
    b.y = b.y + b.vy * dt
  end
end

local function collide(bodies)
  local hits = 0
  for i = 1, #bodies do
    for j = i + 1, #bodies do
      local dx = bodies[i].x - bodies[j].x
      if dx * dx < 1 then hits = hits + 1 end
    end
  end
  return hits
end

function M.label(b)
  return string.format("%s@%d,%d", b.name, b.x, b.y)
end

function M.update(world, dt)
  integrate(world.bodies, dt)
  return collide(world.bodies)
end

function M.render(world)
  local out = {}
  for i, b in ipairs(world.bodies) do
    out[i] = M.label(b)
  end
  return table.concat(out, "\n")
end

return M
