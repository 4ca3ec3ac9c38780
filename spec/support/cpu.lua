-- A CPU-bound workload for the specs that need samples: an integer loop the
-- JIT compiles. How long it runs is for spec/support/sampling.lua to say; a
-- spec whose assertions name the frame of the loop (its file and line)
-- defines its own loop.
local M = {}

-- An integer loop of `n` steps; returns its result so it is not dead code.
function M.busy(n)
  local s = 0
  for i = 1, n do s = (s + i * 3) % 65537 end
  return s
end

return M
