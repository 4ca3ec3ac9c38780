-- The report page (tecs.profile.page) in a real browser: Debian's chromium,
-- headless, loads the page written by `tecs-profile run --timeline x.html`
-- and runs its scripts; the DOM it dumps must show the frames, the
-- slowest frames with the functions that ran in them, the selected frame
-- and the trace aborts. A screenshot goes to build/test-logs/report-page.png.
-- Run once (not per LuaJIT): busted platform_spec/page_spec.lua
local run = require("spec.support.run")
local browser = require("spec.support.browser")

local chromium, count = browser.chromium, browser.count

local FIXTURE = "spec/fixtures/frames_page.lua"
local SLOW_FRAME = 8 -- the fixture's slow frame, which also aborts traces

describe("the report page in chromium", function()
  local dir, page, csv, dom

  setup(function()
    assert.equal(0, (run.run("command -v chromium >/dev/null")), "chromium is needed (scripts/deps-platforms.sh)")
    dir = run.tmpdir()
    page, csv = dir .. "/report.html", dir .. "/aborts.csv"
    local rc, _, err = run.run3(run.cli .. " run -q --trace --trace-output " .. run.quote(csv) .. " --timeline " ..
      run.quote(page) .. " " .. FIXTURE)
    assert.equal(0, rc, err)
    local out
    rc, out, err = chromium("--dump-dom " .. run.quote("file://" .. page .. "#frame=" .. SLOW_FRAME))
    assert.equal(0, rc, err)
    dom = out
    os.execute("mkdir -p build/test-logs")
    chromium("--window-size=1100,1500 --screenshot=" .. run.quote(run.root .. "/build/test-logs/report-page.png") ..
      " " .. run.quote("file://" .. page .. "#frame=" .. SLOW_FRAME))
  end)

  teardown(function()
    if dir then os.execute("rm -rf " .. run.quote(dir)) end
  end)

  it("needs no network", function()
    local html = assert(run.read(page))
    assert.is_nil(html:find("https?://[%w.-]+/[^\"]*%.js"), "no script from the network")
    assert.is_nil(html:find("<link", 1, true))
  end)

  it("draws a bar per frame and lists the slowest frames, the slow one first with its function", function()
    -- A bar per frame; red (hitch) when at least twice the median frame.
    local bars = {}
    for class, index, ms in dom:gmatch('<rect [^>]*class="(frame%-bar[^"]*)" data%-index="(%d+)"><title>frame %d+: ' ..
      '([%d.]+) ms</title>') do
      bars[#bars + 1] = { index = tonumber(index), ms = tonumber(ms), hitch = class:find("hitch", 1, true) ~= nil }
    end
    assert.equal(12, #bars)
    local sorted = {}
    for i, b in ipairs(bars) do
      assert.equal(i, b.index)
      sorted[i] = b.ms
    end
    table.sort(sorted)
    local median = sorted[7]
    for _, b in ipairs(bars) do
      -- The titles round to 0.01 ms: frames that close to the bound are not checked.
      if math.abs(b.ms - 2 * median) > 0.02 then assert.equal(b.ms >= 2 * median, b.hitch, b.index) end
    end
    local rows = {}
    for index, body in dom:gmatch('<tr class="hitch%-row[^"]*" data%-index="(%d+)">(.-)</tr>') do
      rows[#rows + 1] = { index = tonumber(index), body = body }
    end
    assert.equal(12, #rows)
    assert.equal(SLOW_FRAME, rows[1].index)
    assert.matches("%d+%% M%.slow_work %(spec/fixtures/frames_work%.lua:6%)", rows[1].body)
    -- Quick frames (4 ms of CPU) name what ran in them, where the clock
    -- took a sample in them (a clock on the kernel's tick may not).
    for i = 2, #rows do
      local functions = rows[i].body:match('class="hitch%-functions">(.-)</td>')
      assert.is_truthy(functions, rows[i].body)
      if functions ~= "" then assert.matches("M%.quick_work", functions) end
    end
  end)

  it("shows what ran in the frame selected by #frame=N, and the aborts in it", function()
    local detail = assert(dom:match('<div id="frame%-detail">(.-)</div>'))
    assert.matches('<h3 class="detail%-title">Frame ' .. SLOW_FRAME .. ': [%d.]+ ms, %d+ samples', detail)
    assert.matches('<li class="detail%-function">%d+%% M%.slow_work %(spec/fixtures/frames_work%.lua:6%)</li>', detail)
    assert.matches("trace abort: NYI: bytecode FNEW at spec/fixtures/frames_page%.lua:12", detail)
  end)

  it("lists the trace aborts the trace session counted while sampling, a row per site with its count", function()
    local site_count, total = 0, 0
    for line in assert(run.read(csv)):gmatch("[^\n]+") do
      local n, reason, location = line:match("^%a+,(%d+),([^,]*),([^,]*),")
      if n then
        total = total + tonumber(n)
        if reason == "NYI: bytecode FNEW" and location == FIXTURE .. ":12" then site_count = tonumber(n) end
      end
    end
    assert.is_true(site_count >= 2, "FNEW aborts in the trace report: " .. site_count)
    local rows, seen, listed = {}, {}, 0
    for n, severity, location, reason in dom:gmatch('<tr class="abort%-row"><td>(%d+)</td><td>([^<]*)</td>' ..
      '<td>([^<]*)</td><td>([^<]*)</td><td>[%d.]+</td></tr>') do
      local key = severity .. "|" .. location .. "|" .. reason
      assert.is_nil(seen[key], "two rows for " .. key)
      seen[key] = tonumber(n)
      rows[#rows + 1] = tonumber(n)
      listed = listed + tonumber(n)
    end
    assert.equal(count(dom, '<tr class="abort%-row">'), #rows)
    assert.equal(site_count, seen["warn|spec/fixtures/frames_page.lua:12|NYI: bytecode FNEW"])
    for i = 2, #rows do assert.is_true(rows[i] <= rows[i - 1], "rows not by count") end
    -- Aborts after the sampling session stopped are in the report only.
    assert.is_true(listed <= total)
  end)

  it("draws the frame chart as wide as its container, and the flamegraph in a frame shown after the page's load",
    function()
      local html = assert(run.read(page))
      for _, width in ipairs({ 600, 1400 }) do
        local value, console = browser.measure(html, width, [[
          setTimeout(function () {
            var chart = document.getElementById("frames-chart"), svg = chart.querySelector("svg");
            document.documentElement.setAttribute("data-measure",
              [svg.getBoundingClientRect().width, chart.clientWidth, document.documentElement.clientWidth].join(" "));
          }, 500);]])
        assert.is_string(value, console)
        local svg_width, chart_width, page_width = value:match("^([%d.]+) ([%d.]+) ([%d.]+)$")
        svg_width, chart_width, page_width = tonumber(svg_width), tonumber(chart_width), tonumber(page_width)
        assert.is_true(math.abs(svg_width - chart_width) <= 1, value)
        assert.is_true(svg_width <= page_width and svg_width > width / 2, value)
        assert.not_matches("negative value", console)
      end
      -- The flamegraph's frame hidden while the page loads (as in a tab
      -- opened in the background), shown after: the graph takes the
      -- frame's width then, less its margins of 10 px each side.
      local hidden = html:gsub('<iframe class="flamegraph" title="flamegraph" style="', "%0display:none;", 1)
      local value, console = browser.measure(hidden, 1100, [[
        setTimeout(function () { document.querySelector("iframe.flamegraph").style.display = "block"; }, 300);
        setTimeout(function () {
          var frame = document.querySelector("iframe.flamegraph");
          document.documentElement.setAttribute("data-measure",
            frame.contentDocument.getElementById("frames").getAttribute("width") + " " + frame.clientWidth);
        }, 1500);]])
      assert.is_string(value, console)
      local graph, frame = value:match("^(%-?[%d.]+) ([%d.]+)$")
      assert.is_true(math.abs(tonumber(graph) - (tonumber(frame) - 20)) <= 1, value)
      assert.not_matches("negative value", console)
    end)

  it("holds the flamegraph, the top functions and the zones", function()
    assert.matches('<iframe class="flamegraph"[^>]*srcdoc="[^"]*&lt;svg', dom)
    -- The flamegraph's boxes are functions, named as the tables name them.
    local svg = assert(dom:match('<iframe class="flamegraph"[^>]*srcdoc="([^"]*)"'))
    assert.matches("M%.slow_work %(spec/fixtures/frames_work%.lua:6%)", svg)
    assert.is_nil(svg:match("frames_work%.lua:%d+[^%d)]"), "a box named by its line")
    assert.matches("M%.slow_work %(spec/fixtures/frames_work%.lua:6%)", assert(dom:match('<pre id="functions">(.-)</pre>')))
    assert.matches("zone path", assert(dom:match('<pre id="zones">(.-)</pre>')))
    local png = run.read(run.root .. "/build/test-logs/report-page.png")
    assert.is_truthy(png and png:sub(2, 4) == "PNG", "a screenshot")
  end)

  it("draws the flamegraph's legend inside the graph, in the page's frame and in an SVG file", function()
    local srcdoc = assert(dom:match('<iframe class="flamegraph"[^>]*srcdoc="([^"]*)"'))
    local entities = { lt = "<", gt = ">", quot = '"', amp = "&", nbsp = "\194\160" }
    local misfit = browser.legend_misfit((srcdoc:gsub("&(%a+);", entities)))
    assert.is_nil(misfit, "the page's frame: " .. tostring(misfit))
    -- The SVG file make demo writes, by the same command.
    local collapsed_file, svg = dir .. "/demo.collapsed", dir .. "/demo.svg"
    run.write(collapsed_file, "main.lua:1;work.lua:5_[N] 70\nmain.lua:1;draw.lua:9_[C] 30\n")
    local rc, out = run.run(run.cli .. " flamegraph " .. run.quote(collapsed_file) .. " -o " .. run.quote(svg) ..
      " --title demo")
    assert.equal(0, rc, out)
    misfit = browser.legend_misfit(assert(run.read(svg)))
    assert.is_nil(misfit, "the SVG file: " .. tostring(misfit))
  end)

  it("says where a frame waited, on the wall clock: in its row and when it is selected", function()
    local waited = dir .. "/waits.html"
    local rc, _, err = run.run3(run.cli .. " run -q --clock wall --timeline " .. run.quote(waited) ..
      " spec/fixtures/frames_wait.lua")
    assert.equal(0, rc, err)
    local out
    rc, out, err = chromium("--dump-dom " .. run.quote("file://" .. waited .. "#frame=4"))
    assert.equal(0, rc, err)
    local row = assert(out:match('<tr class="hitch%-row[^"]*" data%-index="4">(.-)</tr>'), out)
    assert.matches("; waits: process %d+%%", row)
    local detail = assert(out:match('<div id="frame%-detail">(.-)</div>'), out)
    assert.matches('<p class="detail%-waits">waits: process %d+%%', detail)
  end)
end)
