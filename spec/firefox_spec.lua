-- The Firefox Profiler's processed profile format ("firefox",
-- `.firefox.json`), through the API and the command line. Each file is read
-- back by spec/support/validate_firefox.js, which checks the tables the way
-- the profiler reads them and prints every sample as a collapsed line of
-- its functions: the samples must be the profile's stacks by function
-- (Lua frames named as the by-function report names them) with its counts.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local collapsed = require("spec.support.collapsed")
local run = require("spec.support.run")
local cpu = require("spec.support.cpu")
local sampling = require("spec.support.sampling")

local zone = require("jit.zone")

local CLI = run.cli
local GOLDEN = "spec/golden/input.collapsed"

-- The samples of a file as collapsed lines, or fails with the validator's reason.
local function read_back(path)
  local rc, out = run.run("node spec/support/validate_firefox.js " .. run.quote(path))
  assert.equal(0, rc, out)
  return collapsed.parse(out)
end

-- Counts by stack (zones and frames, without the VM state), and the total.
local function by_stack(rows)
  local counts, total = {}, 0
  for _, r in ipairs(rows) do
    local key = table.concat(r.frames, ";")
    counts[key] = (counts[key] or 0) + r.count
    total = total + r.count
  end
  return counts, total
end

-- The rows of `source` (a session or a file) with Lua frames grouped into
-- their functions.
local function by_function(source)
  return collapsed.parse(profile.render(source, "collapsed", { frames = "function" }))
end

local function record()
  local s = profile.sample({ timelineSamples = 0 })
  sampling.until_samples(s, 20, function()
    zone("update") cpu.busy(2000) zone()
    zone("render") cpu.busy(1000) zone()
  end)
  return s
end

describe("firefox format", function()
  local dir
  before_each(function() dir = run.tmpdir() end)
  after_each(function()
    sessions.stop_all()
    os.execute("rm -rf " .. run.quote(dir))
  end)

  it("stop(x.firefox.json) writes the session's stacks with their counts", function()
    local s = record()
    s:stop(dir .. "/p.firefox.json")
    local json = assert(run.read(dir .. "/p.firefox.json"))
    assert.matches('"weightType":"samples"', json, 1, true)
    assert.matches('"interval":' .. s.intervalMs, json, 1, true)
    local got, got_total = by_stack(read_back(dir .. "/p.firefox.json"))
    local want, want_total = by_stack(by_function(s))
    assert.same(want, got)
    assert.equal(want_total, got_total)
    assert.is_true(got_total > 0)
  end)

  it("write(path, \"firefox\"), the format option and profile.render give the same file", function()
    local s = profile.sample({ format = "firefox", timelineSamples = 0 })
    sampling.until_samples(s, 10, function() cpu.busy(2000) end)
    s:stop(dir .. "/a.data")
    s:write(dir .. "/b.json", "firefox")
    s:write(dir .. "/c.firefox.json")
    local a = assert(run.read(dir .. "/a.data"))
    assert.equal(a, run.read(dir .. "/b.json"))
    assert.equal(a, run.read(dir .. "/c.firefox.json"))
    assert.same(by_stack(by_function(s)), by_stack(read_back(dir .. "/a.data")))
    local rendered = profile.render(s, "firefox", { title = "named" })
    assert.matches('"product":"named"', rendered, 1, true)
    assert.has_error(function() profile.render(s, "firefox-timeline") end,
      'profile.render: bad argument #2 \'format\' ("collapsed" or "svg" or "speedscope" or "pprof" or "firefox" ' ..
      'expected, got string "firefox-timeline")')
  end)

  it("an allocation session's file weighs bytes", function()
    local s = profile.allocations({ bytesPerSample = 512 })
    local keep = {}
    for i = 1, 20000 do keep[i % 100 + 1] = { i } end
    s:stop(dir .. "/a.firefox.json")
    assert.matches('"weightType":"bytes"', run.read(dir .. "/a.firefox.json"), 1, true)
    assert.same(by_stack(by_function(s)), by_stack(read_back(dir .. "/a.firefox.json")))
  end)

  it("tecs-profile flamegraph FILE -o x.firefox.json: every line of FILE, by function", function()
    local rc, _, err = run.run3(string.format("%s flamegraph %s -o %s/g.firefox.json", CLI, GOLDEN, dir))
    assert.equal(0, rc, err)
    assert.matches("does not record its sampling interval, so the Firefox Profiler's time axis gives each sample 1 ms",
      err, 1, true)
    local input = by_function(GOLDEN)
    assert.same(by_stack(input), by_stack(read_back(dir .. "/g.firefox.json")))
    assert.matches('"interval":1.0,', run.read(dir .. "/g.firefox.json"), 1, true)
    -- With the interval, the time axis is in time and no note is needed;
    -- -f chooses the format whatever the name.
    rc, _, err = run.run3(string.format("%s flamegraph %s -i 2 -f firefox -o %s/g.json", CLI, GOLDEN, dir))
    assert.equal(0, rc, err)
    assert.equal("", err)
    assert.matches('"interval":2.0,', run.read(dir .. "/g.json"), 1, true)
    assert.same(by_stack(input), by_stack(read_back(dir .. "/g.json")))
  end)

  it("tecs-profile run -o x.firefox.json writes the program's profile", function()
    local rc, _, err = run.run3(string.format("%s run -q -o %s/r.firefox.json spec/fixtures/cli_script.lua normal 0.2",
      CLI, dir))
    assert.equal(0, rc, err)
    local _, total = by_stack(read_back(dir .. "/r.firefox.json"))
    assert.is_true(total > 0)
  end)

  it("the validator rejects a broken file (so its checks mean something)", function()
    run.write(dir .. "/in.collapsed", "main.lua:1;a.lua:2_[N] 3\n")
    local rc, _, err = run.run3(string.format("%s flamegraph %s/in.collapsed -o %s/ok.firefox.json", CLI, dir, dir))
    assert.equal(0, rc, err)
    local json = run.read(dir .. "/ok.firefox.json")
    for _, broken in ipairs({
      (json:gsub('"prefix":%[null,0%]', '"prefix":[null,5]')),
      (json:gsub('"preprocessedProfileVersion":49', '"preprocessedProfileVersion":1')),
      (json:gsub('"weight":%[3%]', '"weight":[]')),
    }) do
      assert.are_not.equal(json, broken)
      run.write(dir .. "/broken.json", broken)
      local brc, out = run.run("node spec/support/validate_firefox.js " .. run.quote(dir .. "/broken.json"))
      assert.equal(1, brc, out)
      assert.matches("^invalid: ", out)
    end
  end)
end)
