-- Known counts by construction: the loop body runs 1000 times, fib is
-- entered 21891 times for fib(20).
local function fib(n)
  if n < 2 then
    return n
  end
  return fib(n - 1) + fib(n - 2)
end

local sum = 0
for i = 1, 1000 do
  sum = sum + i
end

local function classify(x)
  if x % 15 == 0 then
    return "fizzbuzz"
  elseif x % 5 == 0 then
    return "buzz"
  elseif x < 0 then
    return "negative"
  end
  return "other"
end

local seen = {}
for i = 1, 30 do
  local c = classify(i)
  seen[c] = (seen[c] or 0) + 1
end

local function never()
  return "not run"
end

local i = 0
while i < 10 do
  i = i + 1
  if i == 7 then
    break
  end
end

return fib(20), sum, seen.fizzbuzz, i
