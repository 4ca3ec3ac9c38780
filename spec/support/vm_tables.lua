-- The running VM's string table and registry, read without loading
-- anything into the VM (no FFI, no module of ours): what the profiler
-- leaves there is measured against the VM before it was loaded
-- (spec/support/footprint.lua uses it).
--
-- `strings()` is the exact count of interned strings after full
-- collections. LuaJIT keeps that count in its global state; the field is
-- read through /proc/self/mem (unbuffered, so each read is fresh). Its
-- offset differs between builds, so it is found, not assumed: with the
-- collector stopped, the one 32-bit field of the global state that grows
-- by K when K new strings are made, for two different K. The global state
-- is found from a thread's header (a GC64 build keeps it at offset 16).
-- Each read makes one string (the bytes read), which the next full
-- collection frees, so counts taken the same way are comparable exactly.
--
-- `registry()` is the set of the registry's keys (the key values
-- themselves, no strings made for them), and `describe(before, after)`
-- lists the keys added.
local M = {}

local mem

local function u32(s, i)
  local b1, b2, b3, b4 = s:byte(i, i + 3)
  return b1 + b2 * 256 + b3 * 65536 + b4 * 16777216
end

local function read(addr, n)
  assert(mem:seek("set", addr))
  return assert(mem:read(n), "/proc/self/mem could not be read")
end

local function word(addr)
  local s = read(addr, 8)
  local v = 0
  for i = 8, 1, -1 do v = v * 256 + s:byte(i) end
  return v
end

--- Full collections until one frees nothing more (traces flushed first:
-- they are the program's, and they hold strings).
function M.live()
  if jit then jit.flush() end
  local previous
  repeat
    previous = collectgarbage("count")
    collectgarbage()
  until collectgarbage("count") >= previous
end

local G, COUNT_AT
local SCAN = 512

local function snapshot()
  return read(G, SCAN)
end

--- Finds the string count's field; an error where it cannot.
function M.open()
  if COUNT_AT then return end
  mem = assert(io.open("/proc/self/mem", "rb"), "/proc/self/mem cannot be opened")
  mem:setvbuf("no")
  local thread = tostring(coroutine.create(function() end))
  local address = tonumber(thread:match("0x(%x+)"), 16)
  G = word(address + 16)
  local candidates
  for _, k in ipairs({ 3000, 1000 }) do
    M.live()
    collectgarbage("stop")
    local before = snapshot()
    local keep = {}
    for i = 1, k do keep[i] = "vm_tables." .. k .. "." .. i end
    local after = snapshot()
    collectgarbage("restart")
    local found = {}
    for off = 0, SCAN - 4, 4 do
      local d = u32(after, off + 1) - u32(before, off + 1)
      -- k strings made, and the snapshot read before them.
      if d >= k and d <= k + 2 and (not candidates or candidates[off]) then found[off] = true end
    end
    candidates = found
    keep = nil
  end
  for off in pairs(candidates) do
    assert(not COUNT_AT, "more than one field counts the strings")
    COUNT_AT = off
  end
  assert(COUNT_AT, "no field of the global state counts the strings")
  M.live()
end

--- The number of interned strings, after full collections.
function M.strings()
  M.open()
  M.live()
  return u32(read(G + COUNT_AT, 4), 1)
end

--- The string table's slots now (no collection first): its hash mask, the
-- field right before the count in every LuaJIT 2.1 layout, plus one; an
-- error if that field is not a mask.
function M.slots()
  M.open()
  local mask = u32(read(G + COUNT_AT - 4, 4), 1)
  local slots = mask + 1
  assert(slots >= 256 and slots % 256 == 0 and math.floor(math.log(slots) / math.log(2) + 0.5) ==
    math.log(slots) / math.log(2), "the field before the string count is not a hash mask")
  return slots
end

--- The registry's keys, as a set.
function M.registry()
  local keys = {}
  for k in pairs(debug.getregistry()) do keys[k] = true end
  return keys
end

--- The keys in `after` and not in `before`, described and sorted: a string
-- key as itself, any other as its type in brackets (`[number]` for the
-- slots `luaL_ref` hands out, `[userdata]` for a light userdata).
function M.added(before, after)
  local out = {}
  for k in pairs(after) do
    if not before[k] then out[#out + 1] = type(k) == "string" and k or "[" .. type(k) .. "]" end
  end
  table.sort(out)
  return out
end

--- How many keys of each type `keys` has, as `type:N` words, sorted.
function M.census(keys)
  local n = {}
  for k in pairs(keys) do n[type(k)] = (n[type(k)] or 0) + 1 end
  local out = {}
  for t, c in pairs(n) do out[#out + 1] = t .. ":" .. c end
  table.sort(out)
  return table.concat(out, " ")
end

--- How many of the light userdata keys in `after` and not in `before`
-- point outside the file `path` as mapped in this process (a C module's
-- own statics are inside it).
function M.outside(before, after, path)
  local ranges = {}
  for line in io.lines("/proc/self/maps") do
    local lo, hi, file = line:match("^(%x+)%-(%x+)%s+%S+%s+%S+%s+%S+%s+%S+%s+(.*)$")
    if file == path then ranges[#ranges + 1] = { tonumber(lo, 16), tonumber(hi, 16) } end
  end
  assert(#ranges > 0, path .. " is not mapped")
  local n = 0
  for k in pairs(after) do
    if not before[k] and type(k) == "userdata" then
      local at = tonumber(tostring(k):match("0x(%x+)"), 16)
      local inside = false
      for _, r in ipairs(ranges) do inside = inside or (at >= r[1] and at < r[2]) end
      if not inside then n = n + 1 end
    end
  end
  return n
end

return M
