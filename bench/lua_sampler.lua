--- A pure-Lua sampling profiler built on `jit.profile`, written for the
-- benchmark as the baseline a Lua-only implementation of the session API
-- would be: a Lua callback per sample that dumps the stack with "lZ;" 16
-- frames deep (caller first), prefixes the `jit.zone` path, and counts
-- samples per (key, VM state) in Lua tables. `stop()` renders collapsed text
-- with the dominant VM state on the leaf frame.
local profile = require("jit.profile")
local zone = require("jit.zone")

local concat = table.concat
local dumpstack = profile.dumpstack

local M = {}

local counts  -- key -> { [vmstate] = samples }
local total

local function on_sample(thread, samples, vmstate)
  total = total + samples
  local stack = dumpstack(thread, "lZ;", -16)
  local key
  local nz = #zone
  if nz > 0 then
    key = concat(zone, ";", 1, nz) .. ";" .. stack
  else
    key = stack
  end
  local per_state = counts[key]
  if not per_state then
    per_state = {}
    counts[key] = per_state
  end
  per_state[vmstate] = (per_state[vmstate] or 0) + samples
end

--- Start sampling every `interval_ms` milliseconds (LuaJIT's timer).
function M.start(interval_ms)
  counts, total = {}, 0
  profile.start("li" .. tostring(interval_ms or 1), on_sample)
end

local order = { "N", "I", "C", "G", "J" }

--- Stop sampling; returns the collapsed text and the number of samples.
function M.stop()
  profile.stop()
  local lines = {}
  for key, per_state in pairs(counts) do
    local best, best_n, sum = "N", -1, 0
    for _, s in ipairs(order) do
      local n = per_state[s] or 0
      sum = sum + n
      if n > best_n then best, best_n = s, n end
    end
    lines[#lines + 1] = { text = (key == "" and "<root>" or key) .. "_[" .. best .. "] " .. sum, n = sum }
  end
  table.sort(lines, function(a, b) return a.n > b.n or (a.n == b.n and a.text < b.text) end)
  local out = {}
  for i = 1, #lines do out[i] = lines[i].text end
  return concat(out, "\n") .. "\n", total
end

return M
