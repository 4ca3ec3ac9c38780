--- dkjson (Debian's lua-dkjson) on an API-shaped document: 1,500 records
-- with nested objects and arrays, encoded and decoded ROUNDS times.
local json = require("dkjson")
local rounds = tonumber(arg and arg[1]) or 12
local records = {}
for i = 1, 1500 do
  records[i] = {
    id = i, name = "user" .. i, email = "user" .. i .. "@example.org", active = i % 3 ~= 0,
    score = i * 1.25, tags = { "t" .. i % 7, "t" .. i % 11, "t" .. i % 13 },
    address = { street = i .. " Main St", city = "City" .. i % 50, zip = string.format("%05d", i * 37 % 100000) },
    history = { { at = 1600000000 + i, kind = "login" }, { at = 1600000500 + i, kind = "purchase", amount = i % 97 } },
  }
end
local doc = { page = 1, total = #records, items = records }
local n = 0
for _ = 1, rounds do
  local text = json.encode(doc)
  local back = json.decode(text)
  n = n + #back.items + #text
end
io.stderr:write("json_api ", n, "\n")
