--- The specs' shared clean-up: a test that fails half way leaves no session
-- running for the next one.
local M = {}

--- Stops the running sampling session and allocation session, if any.
function M.stop_all()
  local s = require("tecs.profile.sample").active()
  if s then s:stop() end
  local a = require("tecs.profile.allocations").active()
  if a then a:stop() end
end

return M
