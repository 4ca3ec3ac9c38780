--- Debian's chromium, headless, for the tests of the pages: the DOM a page
-- leaves once its scripts ran, and screenshots.
local run = require("spec.support.run")

local M = {}

--- Runs chromium headless with `args` (its options and the page's address).
-- @return exit code, stdout, stderr
function M.chromium(args)
  -- --no-sandbox: the test may run as root, where chromium's sandbox refuses to start.
  return run.run3("timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars " .. args)
end

--- How many times `pattern` matches in `text`.
function M.count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

return M
