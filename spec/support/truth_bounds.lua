--- Checking sampled shares against a measured truth.
--
-- A share is checked within 3 points, or, where that is wider, 4.5
-- standard errors of a share of n samples, plus three times the spread
-- between two measurements of the truth (timing a part that takes a
-- microsecond is itself uncertain, and the machine's load can change while
-- a test runs).
local M = {}

--- The bound for share `p` of `n` samples, with the truth measured twice
-- `spread` apart (0 when the truth is known by construction).
function M.tolerance(p, n, spread)
  return math.max(0.03, 4.5 * math.sqrt(math.max(p * (1 - p), 0.01) / n) + 3 * (spread or 0))
end

--- Runs `rounds` (even) stretches of `work(round)` under `session`,
-- timing the truth with `measure(round)` in the session's pauses before
-- each: the same compiled code (a pause flushes no trace) at the same
-- time. Returns the mean truth of the odd rounds and of the even ones
-- (tables of shares by part), whose difference is the spread.
function M.interleaved(session, rounds, measure, work)
  local sums = { {}, {} }
  for round = 1, rounds do
    session:pause()
    local t = measure(round)
    session:resume()
    local half = sums[round % 2 + 1]
    for k, v in pairs(t) do half[k] = (half[k] or 0) + v / (rounds / 2) end
    work(round)
  end
  return sums[1], sums[2]
end

return M
