-- Functions of bytecode without lines (`string.dump(f, true)`, Neovim
-- 0.12's runtime): LuaJIT writes each frame of such a chunk `file:0`, so
-- the sampler writes them by their prototype (`file:@0xADDR`) and the views
-- place each in its source file by its bytecode, where the file can be
-- read. Shares against truth: the parts timed alone, unprofiled.
local profile = require("tecs.profile")
local sampling = require("spec.support.sampling")

local FIXTURE = "spec/fixtures/stripped_module.lua"

-- The fixture's module, loaded from its bytecode without lines under
-- `chunkname`, and its local `light` (an upvalue of `run`, which no path
-- reaches).
local function load_stripped(chunkname)
  local bytecode = string.dump(assert(loadfile(FIXTURE)), true)
  local m = assert(load(bytecode, chunkname))()
  assert(debug.getinfo(m.heavy, "S").linedefined == 0, "the module has no lines")
  local light
  for i = 1, 10 do
    local _, v = debug.getupvalue(m.run, i)
    if type(v) == "function" then light = v end
  end
  return m, assert(light, "run's upvalue light")
end

-- The self share (0-1) of the report row whose label contains `label`.
local function share(report, label)
  for line in report:gmatch("[^\n]+") do
    if not line:find("^#") and line:find(label, 1, true) then
      return tonumber(line:match("^%s*([%d.]+)%%")) / 100
    end
  end
  return 0
end

-- A session over `m.run` with heavy and light sized 2:1 by their cost
-- here, each call scaled by one random factor; and the truth, each part
-- timed alone.
local function profile_run(m, light, opts)
  local n = sampling.calibrate(m.heavy, 0.002)
  local k = sampling.calibrate(light, 0.001)
  local truth = sampling.time_parts({
    heavy = function() m.heavy(n) end,
    light = function() light(k) end,
  }, 0.4)
  local s = profile.sample(opts)
  sampling.until_samples(s, 600, function()
    local f = 0.5 + math.random()
    m.run(math.floor(n * f), math.floor(k * f))
  end)
  s:stop()
  return s, truth
end

describe("bytecode without lines", function()
  after_each(function() package.loaded["spec_stripped"] = nil end)

  it("names each function by its source file's definition, shares against truth", function()
    local m, light = load_stripped("@" .. FIXTURE)
    package.loaded["spec_stripped"] = m
    local s, truth = profile_run(m, light)
    local n = s:stats().recordedSamples
    local report = profile.report(s, { by = "function", minPercent = 0 })
    sampling.check_share("heavy", share(report, "heavy (" .. FIXTURE .. ":13)"), truth.heavy, n)
    sampling.check_share("light", share(report, "light (" .. FIXTURE .. ":7)"), truth.light, n)
    assert.is_nil(report:find("(main chunk) " .. FIXTURE, 1, true), report)
    local collapsed = s:collapsed()
    assert.truthy(collapsed:find("stripped_module.lua:@0x", 1, true), collapsed)
    assert.is_nil(collapsed:find("stripped_module%.lua:%d"), collapsed)
    -- The views and a written profile name them alike.
    local svg = profile.flamegraph(s, { frames = "function" })
    assert.truthy(svg:find("light (" .. FIXTURE .. ":7)", 1, true))
    local base = os.tmpname()
    local path = base .. ".collapsed"
    s:write(path)
    local back = profile.report(path, { by = "function", minPercent = 0 })
    assert.truthy(back:find("light (" .. FIXTURE .. ":7)", 1, true), back)
    for _, f in ipairs({ base, path, path .. ".functions.json" }) do os.remove(f) end
  end)

  it("keeps them apart in LuaJIT's own modes too", function()
    local m, light = load_stripped("@" .. FIXTURE)
    package.loaded["spec_stripped"] = m
    for _, precision in ipairs({ "function", "line" }) do
      local s = profile_run(m, light, { precision = precision })
      local report = profile.report(s, { by = "function", minPercent = 0 })
      local heavy_share = share(report, "heavy (" .. FIXTURE .. ":13)")
      assert.is_true(heavy_share > share(report, "light (" .. FIXTURE .. ":7)"), precision .. "\n" .. report)
      assert.is_true(share(report, "light (" .. FIXTURE .. ":7)") > 0, precision .. "\n" .. report)
      assert.is_nil(s:collapsed():find("stripped_module%.lua:%d"), precision)
    end
  end)

  it("names them by their paths where the source cannot be read, each its own row", function()
    local m, light = load_stripped("@elsewhere/stripped_module.lua")
    package.loaded["spec_stripped"] = m
    local s, truth = profile_run(m, light)
    local n = s:stats().recordedSamples
    local report = profile.report(s, { by = "function", minPercent = 0 })
    sampling.check_share("heavy", share(report, "spec_stripped.heavy (elsewhere/stripped_module.lua)"), truth.heavy, n)
    -- `light` is reached by no path: its frame is its prototype's.
    local light_row = report:match("\n[^\n]*(elsewhere/stripped_module%.lua:@0x%x+)")
    assert.truthy(light_row, report)
    sampling.check_share("light", share(report, light_row), truth.light, n)
    assert.is_nil(report:find("(main chunk) elsewhere/stripped_module.lua", 1, true), report)
  end)
end)
