-- Output formats, checked by real consumers: inferno-flamegraph reads our
-- collapsed text, an XML parser reads our SVG, and the speedscope
-- file-format schema (npm package `speedscope`, validated with ajv) accepts
-- our speedscope files. `make consumers` installs them.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local run = require("spec.support.run")

local cpu = require("spec.support.cpu")
local sampling = require("spec.support.sampling")

local zone = require("jit.zone")

local function record(sec)
  local s = profile.sample()
  sampling.for_cpu(sec or 0.4, function()
    zone("update") cpu.busy(20000) zone()
    zone("render") cpu.busy(10000) zone()
  end)
  return s
end

local function titles(svg)
  local t = {}
  for title in svg:gmatch("<title>(.-)</title>") do t[#t + 1] = title end
  table.sort(t)
  return t
end

local function xml_ok(path)
  return run.run("python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' '" .. path .. "'")
end

local function speedscope_ok(path)
  return run.run("node spec/support/validate_speedscope.js '" .. path .. "'")
end

local inferno = os.getenv("HOME") .. "/.cargo/bin/inferno-flamegraph"
if run.run("command -v inferno-flamegraph >/dev/null") == 0 then inferno = "inferno-flamegraph" end

describe("output formats", function()
  local dir
  before_each(function() dir = run.tmpdir() end)
  after_each(function()
    sessions.stop_all()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("stop(file.svg) writes an SVG flamegraph and still returns collapsed text", function()
    local s = record()
    local text = s:stop(dir .. "/p.svg")
    assert.matches("^[^\n]+_%[[NICGJ]%] %d+\n", text)
    local svg = assert(run.read(dir .. "/p.svg"))
    assert.matches("^<%?xml", svg)
    assert.equal(0, (xml_ok(dir .. "/p.svg")))
    assert.truthy(svg:find("update", 1, true))
    assert.truthy(svg:find("rgb(108,207,214)", 1, true), "zone frames coloured")
  end)

  it("inferno-flamegraph accepts the collapsed text and draws the same frames as our SVG", function()
    local s = record()
    local text = s:stop(dir .. "/p.collapsed")
    assert.is_true(#text > 0)
    local rc, out = run.run(string.format("%s '%s/p.collapsed' > '%s/inferno.svg'", inferno, dir, dir))
    assert.equal(0, rc, out)
    assert.matches("^<%?xml", run.read(dir .. "/inferno.svg"))
    -- Our SVG draws one box per frame whatever its VM states (the state is
    -- its colour and in its tooltip): inferno draws the same boxes from the
    -- text with the markers taken off.
    run.write(dir .. "/plain.collapsed", (text:gsub("_%[[NICGJ]%] (%d+)\n", " %1\n")))
    rc, out = run.run(string.format("%s '%s/plain.collapsed' > '%s/plain.svg'", inferno, dir, dir))
    assert.equal(0, rc, out)
    local theirs = titles(assert(run.read(dir .. "/plain.svg")))
    local mine = profile.flamegraph(dir .. "/p.collapsed")
    local a = titles((mine:gsub("; self time, all its boxes: [^)<]*%)</title>", ")</title>")))
    assert.is_true(#a > 3, "frames drawn: " .. #a)
    assert.same(theirs, a)
    assert.not_matches("_%[[NICGJ]%]", mine)
    assert.matches("; self time, all its boxes: compiled %d+%%", mine)
  end)

  it("stop(file.speedscope.json) writes a file the speedscope schema accepts", function()
    local s = record()
    s:stop(dir .. "/p.speedscope.json")
    local json = assert(run.read(dir .. "/p.speedscope.json"))
    assert.truthy(json:find('"type": "sampled"', 1, true))
    assert.truthy(json:find('"unit": "milliseconds"', 1, true))
    local rc, out = speedscope_ok(dir .. "/p.speedscope.json")
    assert.equal(0, rc, out)
    -- The validator does reject a broken file (so the check above means something).
    run.write(dir .. "/broken.speedscope.json", (json:gsub('"weights"', '"weightz"')))
    rc = speedscope_ok(dir .. "/broken.speedscope.json")
    assert.equal(1, rc)
  end)

  it("the format option and write(path, format) override the extension", function()
    local s = profile.sample({ format = "svg" })
    sampling.for_cpu(0.2, function() cpu.busy(5000) end)
    s:stop(dir .. "/out.data")
    assert.matches("^<%?xml", run.read(dir .. "/out.data"))
    s:write(dir .. "/again.svg", "collapsed")
    assert.matches("_%[[NICGJ]%] %d+\n", run.read(dir .. "/again.svg"))
    s:write(dir .. "/x.txt", "speedscope")
    assert.equal(0, (speedscope_ok(dir .. "/x.txt")))
    local ok, err = pcall(s.write, s, dir .. "/y", "png")
    assert.is_false(ok)
    assert.matches("'format'", err)
    assert.has_error(function() profile.sample({ format = "png" }) end)
  end)

  it("a failed SVG write loses nothing", function()
    local s = record(0.2)
    local ok, err = pcall(s.stop, s, "/nonexistent-dir/p.svg")
    assert.is_false(ok)
    assert.matches("/nonexistent%-dir/p.svg", err)
    assert.is_true(#s:collapsed() > 0)
    s:write(dir .. "/retry.svg")
    assert.matches("^<%?xml", run.read(dir .. "/retry.svg"))
  end)

  it("flamegraph and speedscope from a collapsed file of another tool", function()
    run.write(dir .. "/plain.collapsed", "main;foo;bar 30\nmain;baz 10\n")
    local svg = profile.flamegraph(dir .. "/plain.collapsed", { title = "plain", inverted = true })
    assert.truthy(svg:find("bar (30 samples, 75.00%; self time, all its boxes: compiled 100%)", 1, true),
      "read as compiled (N) when a line has no VM-state marker")
    run.write(dir .. "/plain.speedscope.json", profile.speedscope(dir .. "/plain.collapsed"))
    assert.equal(0, (speedscope_ok(dir .. "/plain.speedscope.json")))
  end)
end)
