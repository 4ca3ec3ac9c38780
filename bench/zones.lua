--- Cost of a zone push+pop pair: with no session, while a tecs-profile
-- session runs, while jit.p (zone mode) runs, and an empty function call
-- pair for comparison. CPU time of this thread, medians over alternating
-- rounds, nanoseconds per pair.
--
--   luajit bench/zones.lua
local bench_dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = bench_dir .. "/?.lua;" .. package.path

local clock = require("clock")
local jzone = require("jit.zone")
local fallback = require("tecs.profile.zone")
local profile = require("tecs.profile")
local jp = require("jit.p")

local REPS = tonumber(os.getenv("BENCH_REPS") or "5")
local PAIRS = tonumber(os.getenv("ZONE_PAIRS") or "3000000")

-- A fresh loop per measurement (loadstring), so every case gets its own
-- traces and none inherits another's compiled code.
local function make_loop(body)
  return assert(loadstring([[
    local zone, f, n = ...
    local name = "work"
    for i = 1, n do
      ]] .. body .. [[
    end
  ]], "=zoneloop"))
end

local cases = {
  { label = "empty function call pair, no session", body = "f(name) f()", zone = jzone },
  { label = "jit.zone push+pop, no session", body = "zone(name) zone()", zone = jzone },
  { label = "jit.zone push+pop, tecs-profile session (1 ms)", body = "zone(name) zone()", zone = jzone,
    start = function() return profile.sample({ intervalMs = 1 }) end, stop = function(s) s:stop() end },
  { label = "jit.zone push+pop, jit.p session (zone mode, 1 ms)", body = "zone(name) zone()", zone = jzone,
    start = function() jp.start("zi1", "/dev/null") end, stop = function() jp.stop() end },
  { label = "tecs.profile.zone push+pop, tecs-profile session (1 ms)", body = "zone(name) zone()", zone = fallback,
    start = function() return profile.sample({ intervalMs = 1 }) end, stop = function(s) s:stop() end },
}

local function empty() end

local results = {}
for _, c in ipairs(cases) do results[c] = {} end
for rep = 1, REPS do
  for i = 0, #cases - 1 do
    local c = cases[(i + rep - 1) % #cases + 1]
    local loop = make_loop(c.body)
    collectgarbage("collect")
    local s = c.start and c.start()
    local t0 = clock.cpu()
    loop(c.zone, empty, PAIRS)
    local t1 = clock.cpu()
    if c.stop then c.stop(s) end
    table.insert(results[c], (t1 - t0) / PAIRS * 1e9)
  end
end

local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[(n + 1) / 2] or (t[n / 2] + t[n / 2 + 1]) / 2
end

print("| case | ns per pair (median of " .. REPS .. ") |")
print("|---|---:|")
for _, c in ipairs(cases) do
  print(string.format("| %s | %.1f |", c.label, median(results[c])))
end
