--- dkjson (Debian's lua-dkjson) on a log stream: request events arrive one
-- JSON line at a time, are decoded, counted by route and status, and each
-- gets a compact JSON summary line, which is dropped. The live set stays
-- small (the counters and a handful of user agents) while every event
-- allocates its line, its decoded table and its summary: the collector runs
-- all the time over a small heap, as in a log shipper or a game's network
-- code. EVENTS events (default 24000).
local json = require("dkjson")
local events = tonumber(arg and arg[1]) or 24000

local METHODS = { "GET", "GET", "GET", "POST", "PUT", "DELETE" }
local ROUTES = { "/api/users", "/api/users/%d", "/api/orders", "/api/orders/%d/items", "/static/app.js", "/health" }
local STATUSES = { 200, 200, 200, 201, 204, 304, 400, 404, 500 }
local AGENTS = {
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
  "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15",
  "curl/8.4.0", "Go-http-client/2.0", "okhttp/4.12.0",
}

-- The i-th line of the stream, as a client library would have written it.
local function event_line(i)
  local route = ROUTES[i % #ROUTES + 1]:format(i % 9973)
  return json.encode({
    ts = 1700000000 + i * 0.013, level = i % 50 == 0 and "warn" or "info", method = METHODS[i % #METHODS + 1],
    path = route, status = STATUSES[i % #STATUSES + 1], ms = (i * 7919) % 1000 / 10,
    bytes = (i * 104729) % 65536, agent = AGENTS[i % #AGENTS + 1], user = i % 17 == 0 and json.null or ("u" .. i % 500),
    tags = { "edge-" .. i % 4, i % 3 == 0 and "cached" or "origin" },
  })
end

local by_route, by_status, slow, out_bytes = {}, {}, 0, 0
for i = 1, events do
  local e = json.decode(event_line(i))
  local route = e.path:gsub("/%d+", "/:id")
  by_route[route] = (by_route[route] or 0) + 1
  by_status[e.status] = (by_status[e.status] or 0) + 1
  if e.ms > 90 then slow = slow + 1 end
  local summary = json.encode({ t = e.ts, r = route, s = e.status, ms = e.ms, u = e.user ~= json.null and e.user or nil })
  out_bytes = out_bytes + #summary
end
io.stderr:write("json_log ", slow, " ", out_bytes, "\n")
