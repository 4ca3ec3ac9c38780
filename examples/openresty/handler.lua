--- A request handler with some CPU work, to have something to profile.
local M = {}

local function checksum(n)
  local h = 0
  for i = 1, n do h = (h * 31 + i) % 2147483647 end
  return h
end

function M.run()
  local t0 = os.clock()
  local h = 0
  while os.clock() - t0 < 0.002 do h = checksum(20000) end
  ngx.say(h)
end

return M
