-- What the profiler leaves on a program's Lua heap, measured in a fresh
-- process (spec/footprint_spec.lua runs it; run it by hand for the
-- figures):
--
--    luajit spec/support/footprint.lua require|sample|allocations|trace|frame
--    luajit spec/support/footprint.lua cycle [function]
--
-- Prints `kb=N` (live heap, in KB, over the bare interpreter's, with the
-- module loaded and for a session kind a session running) and `loaded=...`
-- (the modules that were not loaded before, sorted). The heap is what the
-- collector marks on every cycle: measured after full collections, repeated
-- until one frees nothing more (a collection also halves idle coroutine
-- stacks, one step each), so the figure is the same on every run. Compiled
-- traces are flushed before each reading: they live on the heap too, but
-- they are the program's (its loops), not the profiler's.
-- `frame` prints `kb=` the heap growth over 10000 calls of `profile.frame()`
-- and of `profile.poll()`, after a first round (the first calls may set
-- things up once), with the JIT off for the loop and no collection in
-- between, before and during a session (`kb_running=`).
-- `cycle` counts what `require` and then two default sampling sessions,
-- each started and stopped, leave in the VM's string table and registry
-- (spec/support/vm_tables.lua): `strings_require=`, `strings_first=` (the
-- first session, over the VM after `require`), `strings_again=` (the
-- second, over the first), the registry keys `require` and the first
-- session added (`registry_require=`, `registry_first=`), the registry's
-- keys by type after each session (`registry_census_first=`, `_again=`),
-- and how many light userdata keys the first added point outside the
-- native module's image (`userdata_outside=`), and whether both sessions
-- read compiled code in the tick handler (`compiled=read`, else `off`);
-- with `function`, the sessions run at
-- `precision = "function"` (which reads no compiled code, so runs no
-- probe). Nothing here is timed: each session runs until it has taken 20
-- samples.

local kind = arg[1]
local vm_tables = kind == "cycle" and require("spec.support.vm_tables")
if vm_tables then vm_tables.open() end

local function live()
  if jit then jit.flush() end
  local previous
  repeat
    previous = collectgarbage("count")
    collectgarbage()
  until collectgarbage("count") >= previous
  return collectgarbage("count")
end

-- The session's work: what it records until it has enough to show it
-- runs. Nothing here is timed: the loop stops on a count the session gives.
local function spin(n)
  local s = 0
  for i = 1, n do s = (s + i * 3) % 65537 end
  return s
end

local function until_true(done, what)
  local started = os.clock()
  while not done() do
    if os.clock() - started > 120 then error("no " .. what .. " after 120 s of CPU time", 0) end
    spin(1e5)
  end
end

local before = {}
for name in pairs(package.loaded) do before[name] = true end
local base = live()
local strings, registry = {}, {}
if vm_tables then
  strings[1], registry[1] = vm_tables.strings(), vm_tables.registry()
end

local profile = require("tecs.profile")
local session

if kind == "frame" then
  local function growth()
    if jit then jit.off(true, true) end
    collectgarbage()
    collectgarbage("stop")
    local at = collectgarbage("count")
    for _ = 1, 10000 do
      profile.frame()
      profile.poll()
    end
    local grown = collectgarbage("count") - at
    collectgarbage("restart")
    if jit then jit.on(true, true) end
    return grown
  end
  growth()
  local idle = growth()
  session = profile.sample()
  growth()
  local running = growth()
  session:stop()
  io.write(string.format("kb=%.3f\nkb_running=%.3f\n", idle, running))
  base = nil
elseif kind == "sample" then
  session = profile.sample()
  until_true(function() return session:stats().samples >= 20 end, "20 samples")
elseif kind == "allocations" then
  session = profile.allocations()
  local keep = {}
  until_true(function()
    for i = 1, 1000 do keep[i % 16 + 1] = { i } end
    return session:stats().samples >= 20
  end, "20 allocation samples")
elseif kind == "trace" then
  session = profile.trace()
  -- A trace LuaJIT completed (the session lists its lines), asked of the
  -- VM rather than of a report, which would load the report's modules.
  local traceinfo = require("jit.util").traceinfo
  until_true(function() return traceinfo(1) ~= nil end, "completed trace")
elseif kind == "cycle" then
  local opts = arg[2] == "function" and { precision = "function" } or nil
  strings[2], registry[2] = vm_tables.strings(), vm_tables.registry()
  local read = true
  for round = 3, 4 do
    local s = profile.sample(opts)
    until_true(function() return s:stats().samples >= 20 end, "20 samples")
    read = read and s:stats().precision == "exact"
    s:stop()
    s = nil
    strings[round], registry[round] = vm_tables.strings(), vm_tables.registry()
  end
  io.write("compiled=", read and "read" or "off", "\n")
  local names = { "require", "first", "again" }
  for i, name in ipairs(names) do
    io.write(string.format("strings_%s=%d\n", name, strings[i + 1] - strings[i]))
  end
  for i = 1, 2 do
    local added = vm_tables.added(registry[i], registry[i + 1])
    io.write(string.format("registry_%s=%s\n", names[i], table.concat(added, "|")))
  end
  -- The slots `luaL_ref` hands out are reused, not in the same order: the
  -- second session is compared by how many keys of each type.
  io.write(string.format("registry_census_first=%s\nregistry_census_again=%s\n", vm_tables.census(registry[3]),
    vm_tables.census(registry[4])))
  local native = package.searchpath("tecs.profile.native", package.cpath)
  io.write(string.format("userdata_outside=%d\n", vm_tables.outside(registry[2], registry[3], native)))
  base = nil
elseif kind ~= "require" then
  error("usage: footprint.lua require|sample|allocations|trace|frame|cycle", 0)
end

if base then
  local kb = live() - base
  local loaded = {}
  for name in pairs(package.loaded) do
    if not before[name] then loaded[#loaded + 1] = name end
  end
  table.sort(loaded)
  io.write(string.format("kb=%.1f\nloaded=%s\n", kb, table.concat(loaded, " ")))
  if session then session:stop() end
end
