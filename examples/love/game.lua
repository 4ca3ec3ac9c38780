-- The game itself: particles that fall, bounce and collide with a cursor.
-- Enough work per frame in Lua (update) and in LÖVE's C code (draw) to give
-- the profiler something to see.
local game = {}

local W, H = 640, 360
local N = 40000
local xs, ys, vxs, vys = {}, {}, {}, {}

function game.load()
  love.math.setRandomSeed(42)
  for i = 1, N do
    xs[i], ys[i] = love.math.random() * W, love.math.random() * H
    vxs[i], vys[i] = love.math.random() * 200 - 100, love.math.random() * 200 - 100
  end
end

local function step_particles(dt)
  local gravity = 300 * dt
  for i = 1, N do
    local vy = vys[i] + gravity
    local x, y = xs[i] + vxs[i] * dt, ys[i] + vy * dt
    if x < 0 or x > W then vxs[i] = -vxs[i] * 0.9; x = x < 0 and 0 or W end
    if y > H then vy = -vy * 0.8; y = H end
    xs[i], ys[i], vys[i] = x, y, vy
  end
end

local function push_from_cursor(cx, cy)
  for i = 1, N do
    local dx, dy = xs[i] - cx, ys[i] - cy
    local d2 = dx * dx + dy * dy
    if d2 < 2500 and d2 > 0 then
      local f = 50 / math.sqrt(d2)
      vxs[i], vys[i] = vxs[i] + dx * f, vys[i] + dy * f
    end
  end
end

function game.update(dt)
  dt = math.min(dt, 1 / 30)
  step_particles(dt)
  local t = love.timer.getTime()
  for k = 1, 4 do -- four attractors circling the screen
    local a = t + k * math.pi / 2
    push_from_cursor(W / 2 + math.cos(a) * 200, H / 2 + math.sin(a) * 100)
  end
end

function game.draw()
  love.graphics.clear(0.05, 0.05, 0.1)
  love.graphics.setColor(1, 0.8, 0.3)
  for i = 1, N, 16 do
    love.graphics.points(xs[i], ys[i])
  end
  love.graphics.setColor(1, 1, 1)
  love.graphics.print("P: save profile and quit", 10, 10)
end

return game
