local a, b =
  1, 2
local c
local function f()
  local d
  return a + b
end
return f(), c
