-- Golden-file tests: fixed input (spec/golden/input.collapsed, whose frames
-- point into spec/golden/game.lua) rendered by every view and format, compared
-- byte for byte with spec/golden/expected/. After an intended change to an
-- output, regenerate with:  UPDATE_GOLDEN=1 make test-lua
local profile = require("tecs.profile")
local trace_report = require("tecs.profile.trace.report")
local run = require("spec.support.run")

local dir = "spec/golden/"
local update = os.getenv("UPDATE_GOLDEN") == "1"

local function read(path) return assert(run.read(path), "cannot read " .. path) end
local write = run.write

local function golden(name, actual)
  local path = dir .. "expected/" .. name
  if update then
    os.execute("mkdir -p " .. dir .. "expected")
    write(path, actual)
  end
  local expected = read(path)
  assert.are.equal(expected, actual, "output differs from " .. path)
end

local input = dir .. "input.collapsed"

local views = {
  { "functions.txt", {} },
  { "functions-total.txt", { sort = "total", minPercent = 1 } },
  { "lines.txt", { by = "line", minPercent = 1 } },
  { "modules.txt", { by = "module", sort = "total", minPercent = 0 } },
  { "callers.txt", { mode = "s" } },
  { "callees.txt", { mode = "-s", sort = "total" } },
  { "zones.txt", { by = "zone", sort = "total", minPercent = 0 } },
  { "zone-components.txt", { by = "zonecomponent", minPercent = 0 } },
  { "vmstate-by-function.txt", { mode = "vf" } },
  { "function-by-vmstate.txt", { mode = "fv" } },
  { "zone-by-function.txt", { mode = "zf" } },
  { "function-lines.txt", { mode = "fl" } },
  { "depth3-raw.txt", { by = "line", depth = 3, raw = true } },
  { "caller-first.txt", { by = "function", depth = -2 } },
  { "render-zone-only.txt", { zone = "render", minPercent = 0 } },
  { "annotate-hot.txt", { annotate = "hot", context = 2, minPercent = 1 } },
  { "annotate-full.txt", { annotate = "full" } },
}

describe("golden outputs", function()
  for _, case in ipairs(views) do
    it("report " .. case[1], function()
      golden(case[1], profile.report(input, case[2]))
    end)
  end

  it("hot aborts from a trace report CSV", function()
    local trace = assert(trace_report.read_csv(read(dir .. "trace.csv")))
    assert.equal(4, #trace.sites)
    local text, ranked = profile.hotAborts(input, trace)
    golden("hot-aborts.txt", text)
    -- The blacklisted loop in collide() is where the time goes: first.
    assert.equal("spec/golden/game.lua:14", trace.sites[ranked[1].site].location)
  end)

  it("annotated source with a trace report's abort sites", function()
    local trace = assert(trace_report.read_csv(read(dir .. "trace.csv")))
    golden("annotate-trace.txt", profile.report(input, { annotate = "hot", context = 1, minPercent = 1, trace = trace }))
    -- a session's report carries the trace counts too
    trace.tracesStarted, trace.tracesCompleted, trace.tracesAborted, trace.blacklistings = 30, 10, 20, 1
    local text = profile.report(input, { annotate = "hot", context = 1, minPercent = 1, trace = trace })
    assert.matches("# traces: 30 started, 10 completed, 20 aborted, 1 loops blacklisted", text, 1, true)
  end)

  it("flamegraph.svg", function()
    golden("flamegraph.svg", profile.flamegraph(input, { title = "golden" }))
  end)

  it("flamegraph-functions.svg", function()
    golden("flamegraph-functions.svg", profile.flamegraph(input, { title = "golden", frames = "function" }))
  end)

  it("speedscope.json", function()
    golden("speedscope.json", profile.speedscope(input, { name = "golden", intervalMs = 1 }))
  end)

  -- Time by plugin: runtime path directories as Neovim lays them out
  -- (spec/golden/nvim.collapsed), named from the paths or by the caller.
  it("plugins.txt, plugins-total-functions.txt and a plugin root level", function()
    local nvim = dir .. "nvim.collapsed"
    golden("plugins.txt", profile.report(nvim, { by = "plugin", minPercent = 0 }))
    golden("plugins-total-functions.txt", profile.report(nvim, { by = "plugin", ["then"] = "function",
      sort = "total", minPercent = 0, functions = false,
      plugins = { ["my config"] = "/home/u/.config/nvim", telescope = "/home/u/.local/share/nvim/lazy/telescope.nvim" } }))
    golden("plugins-root.collapsed", profile.render(nvim, "collapsed", { root = "plugin" }))
  end)

  it("collapsed text round-trips unchanged", function()
    local prof = require("tecs.profile.report").load("test", input)
    assert.equal(read(input), prof:collapsed())
  end)
end)
