-- CPU-bound workloads for the specs that need samples: burn CPU time in a
-- function, and an integer loop the JIT compiles. A spec whose assertions
-- name the frame of the loop (its file and line) defines its own loop.
local M = {}

-- An integer loop of `n` steps; returns its result so it is not dead code.
function M.busy(n)
  local s = 0
  for i = 1, n do s = (s + i * 3) % 65537 end
  return s
end

-- Calls `fn(i)` (i = 1, 2, ...) until `seconds` of CPU time (os.clock) have
-- passed; without `fn`, runs `busy(5000)`. Returns the number of calls.
function M.burn(seconds, fn)
  local busy = M.busy
  fn = fn or function() busy(5000) end
  local t0 = os.clock()
  local n = 0
  while os.clock() - t0 < seconds do
    n = n + 1
    fn(n)
  end
  return n
end

return M
