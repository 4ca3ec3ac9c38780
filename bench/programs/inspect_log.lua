--- lua-inspect (Debian's lua-inspect) writing a debug log: each request a
-- server handles is built as a table of nested values, rendered with
-- inspect() for the log (a line per request, as with a debug flag on) and
-- dropped. inspect builds each rendering from many small strings and
-- tables, the live set stays small, and the collector runs all the time.
-- REQUESTS requests (default 24000).
local inspect = require("inspect")
local requests = tonumber(arg and arg[1]) or 24000

local logged = 0
for i = 1, requests do
  local req = {
    id = string.format("%08x", i * 2654435761 % 4294967296),
    method = i % 5 == 0 and "POST" or "GET",
    path = "/api/v1/items/" .. i % 997,
    query = { page = i % 20 + 1, per_page = 50, sort = i % 2 == 0 and "name" or "-created" },
    headers = { ["user-agent"] = "client/" .. i % 7, accept = "application/json", ["x-trace"] = i * 31 },
    user = { id = i % 300, roles = { "reader", i % 10 == 0 and "admin" or nil } },
    timings = { db = (i * 13) % 50 / 10, render = (i * 7) % 30 / 10, total = (i * 29) % 90 / 10 },
  }
  local line = inspect(req, { newline = " ", indent = "" })
  logged = logged + #line
end
io.stderr:write("inspect_log ", logged, "\n")
