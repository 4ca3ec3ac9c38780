-- The live page (tecs-profile live) in a real browser: Debian's chromium,
-- headless, loads the page a running `live` serves for a listening
-- program that marks frames (spec/fixtures/live_child.lua) and runs its
-- scripts, which fetch data.json once a second and draw it; the DOM it
-- dumps must show the frame times, the slowest frames, a flamegraph
-- naming the fixture's function and the updates; a later load must show
-- more samples. A screenshot goes to build/test-logs/live-page.png.
-- Run once (not per LuaJIT): busted platform_spec/live_page_spec.lua
local native = require("tecs.profile.native")
local run = require("spec.support.run")
local browser = require("spec.support.browser")

local chromium, count = browser.chromium, browser.count

local FIXTURE = "spec/fixtures/live_child.lua"
local QUICK = "M%.quick_work %(spec/fixtures/frames_work%.lua:15%)"
-- A bound on waiting for the program, not a guess at its speed.
local PATIENCE_SECONDS = 120
-- Virtual time chromium gives the page's timers: the page asks for
-- data.json once a second of it (virtual time waits for the fetches).
local VIRTUAL_MS = 4000

local q = run.quote


local function samples_in(dom)
  local samples = dom:match('<p id="summary">(%d+) samples in')
  assert.is_string(samples, "a summary")
  return tonumber(samples)
end

describe("the live page in chromium", function()
  local dir, child, live, url, stop_file

  local function data()
    local body = dir .. "/data.json"
    local rc, out, err = run.run3(string.format("curl -s -o %s -w '%%{http_code}' %s", q(body), q(url .. "data.json")))
    assert.equal(0, rc, err)
    assert.equal("200", out, run.read(body))
    return native.jsonDecode(run.read(body))
  end

  local function until_data(done)
    local deadline = os.time() + PATIENCE_SECONDS
    while true do
      local d = data()
      if done(d) then return d end
      assert.is_true(os.time() < deadline, "still not there: " .. d.summary)
      os.execute("sleep 0.2")
    end
  end

  local function load()
    local rc, dom, err = chromium("--virtual-time-budget=" .. VIRTUAL_MS .. " --dump-dom " .. q(url))
    assert.equal(0, rc, err)
    return dom
  end

  setup(function()
    assert.equal(0, (run.run("command -v chromium >/dev/null")), "chromium is needed (scripts/deps-platforms.sh)")
    dir = run.tmpdir()
    local ctl = dir .. "/ctl"
    stop_file = dir .. "/stop"
    child = assert(io.popen(string.format("TECS_PROFILE_DIR=%s timeout -k 10 %d %s %s %s 2>&1", q(ctl),
      run.TIMEOUT_SECONDS, run.luajit, q(FIXTURE), q(stop_file))))
    local first = child:read("*l")
    assert.matches("^listening ", first)
    live = { p = assert(io.popen(string.format("(TECS_PROFILE_DIR=%s %s live --timeout %d & echo \"pid=$!\"; " ..
      "wait $!) 2>&1", q(ctl), run.cli, PATIENCE_SECONDS))) }
    live.pid = tonumber(live.p:read("*l"):match("^pid=(%d+)$"))
    repeat
      local line = live.p:read("*l")
      url = line and line:match("^live page: (http://%S+)$")
    until url or not line
    assert.is_string(url, "live printed no address")
  end)

  teardown(function()
    if live then
      os.execute("kill -TERM " .. live.pid)
      live.p:read("*a")
      live.p:close()
    end
    if child then
      run.write(stop_file, "")
      child:read("*a")
      child:close()
    end
    if dir then os.execute("rm -rf " .. q(dir)) end
  end)

  it("draws the frame times, the slowest frames and the flamegraph, updates itself, and later shows more", function()
    until_data(function(d) return d.samples >= 100 and d.framesKept >= 30 and d.flamegraph:find(QUICK) end)
    local dom = load()
    -- A bar per frame drawn, with its time.
    local bars = count(dom, '<rect [^>]*class="frame%-bar[^"]*" data%-index="%d+"><title>frame %d+: [%d.]+ ms</title>')
    assert.is_true(bars >= 30, "bars: " .. bars)
    -- The slowest frames, with what ran in them.
    local rows, named = 0, 0
    for body in dom:gmatch('<tr class="hitch%-row[^"]*" data%-index="%d+">(.-)</tr>') do
      rows = rows + 1
      if body:find("M%.quick_work") or body:find("M%.slow_work") then named = named + 1 end
    end
    assert.equal(20, rows)
    assert.is_true(named >= 1, dom:match('<table id="hitches">.-</table>'))
    assert.matches('<h3 class="detail%-title">Frame %d+: [%d.]+ ms', dom)
    -- The flamegraph (the frame's document, escaped in its attribute)
    -- names the fixture's function; the top functions too.
    local srcdoc = assert(dom:match('<iframe class="flamegraph"[^>]*srcdoc="([^"]*)"'))
    assert.matches("&lt;svg", srcdoc)
    assert.matches(QUICK, srcdoc)
    assert.matches(QUICK, assert(dom:match('<pre id="functions">(.-)</pre>')))
    -- The page fetched data.json and drew it again.
    local updates = tonumber(dom:match('<body[^>]* data%-updates="(%d+)"'))
    assert.is_true(updates and updates >= 1, "updates: " .. tostring(updates))
    assert.matches('<span id="live%-status">updated ', dom)

    -- Later: more samples.
    local before = samples_in(dom)
    until_data(function(d) return d.samples > before end)
    local later = load()
    assert.is_true(samples_in(later) > before, samples_in(later) .. " after " .. before)

    os.execute("mkdir -p build/test-logs")
    chromium("--window-size=1100,1500 --virtual-time-budget=" .. VIRTUAL_MS .. " --screenshot=" ..
      q(run.root .. "/build/test-logs/live-page.png") .. " " .. q(url))
    local png = run.read(run.root .. "/build/test-logs/live-page.png")
    assert.is_truthy(png and png:sub(2, 4) == "PNG", "a screenshot")
  end)

  it("draws the flamegraph's legend inside the graph, wide and narrow", function()
    -- The document the page puts in its flamegraph's frame at each update.
    local document = until_data(function(d) return d.samples > 0 end).flamegraph
    local misfit = browser.legend_misfit(document)
    assert.is_nil(misfit, misfit)
  end)
end)
