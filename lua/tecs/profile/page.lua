--- A report page: one self-contained HTML file (no network) with the
-- flamegraph, the top functions, the zones, the frame-time chart with the
-- slowest frames marked (clicking a frame shows what ran in it) and the
-- trace aborts of a trace session run beside.
--
--    s:write("report.html")     -- or s:page()
--
-- The live page of `tecs-profile live` is the same page, drawn by the same
-- script from a snapshot of a running session and again once a second.
--
-- The data is written into the page as JSON; a small script draws the
-- chart and the tables from it. `#frame=N` in the address selects frame N
-- when the page opens.
-- @module tecs.profile.page

local M = {}

--- Slowest frames whose functions the page lists (the others show their
-- time and sample counts only).
M.HITCHES = 20

--- `v` as JSON text, safe inside a `<script>` element (the native
-- module's serde writer: tables with a [1], or empty ones, as arrays, others
-- as objects with their string keys sorted; `<`, `>` and `&` escaped).
-- @return string
function M.json(v)
  return require("tecs.profile.native").json(v)
end

local function escape_html(s)
  return (s:gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end

-- The page's style and scripts, files in `page/` beside this module
-- (installed with it): the stylesheet, the script that draws the page
-- from its data, and the live page's updates. Read at the first page,
-- then kept.
local ASSETS = { style = "page.css", script = "page.js", live_script = "live.js" }
local assets

-- The directory this module was loaded from (its source's, else where
-- `package.path` finds it).
local function module_dir()
  local source = debug.getinfo(1, "S").source
  local file = source:match("^@(.*)$") or package.searchpath("tecs.profile.page", package.path)
  if not file then return nil end
  return file:match("^(.*)[/\\]") or "."
end

-- The text of the file at `path`, or nil and why not. A game run from a
-- .love archive had this module loaded from inside it by LÖVE's loader,
-- its path relative to the archive: the assets beside it are read there.
local function read_file(path)
  local f, err = io.open(path, "rb")
  if f then
    local text = f:read("*a")
    f:close()
    return text
  end
  local fs = type(rawget(_G, "love")) == "table" and love.filesystem
  if type(fs) == "table" and type(fs.read) == "function" then
    local ok, text = pcall(fs.read, path)
    if ok and type(text) == "string" then return text end
  end
  return nil, err
end

-- The assets' texts, by the names of `ASSETS`; raises, at the level of
-- the caller of `render` or `live` (which call this first), naming a file
-- it cannot read.
local function read_assets()
  if assets then return assets end
  local dir = module_dir()
  if not dir then error("tecs.profile.page: cannot find the directory of tecs.profile.page, whose page/ holds "
    .. "the page's style and scripts", 3) end
  local texts = {}
  for name, file in pairs(ASSETS) do
    local text, err = read_file(dir .. "/page/" .. file)
    if not text then error("tecs.profile.page: cannot read the page's " .. file .. " (installed beside the module): "
      .. tostring(err), 3) end
    texts[name] = text
  end
  assets = texts
  return assets
end

-- Starts the flamegraph's script (inferno's `init`, which the SVG runs on
-- its load) once the graph has a width: it sizes the graph to the width it
-- has then, and a frame hidden at its load (a background tab, a section
-- not shown yet) has none, which left the graph -20 px wide, drawn wrong
-- until the window was resized.
local START_WHEN_LAID_OUT = [[<script>
(function () {
  var svg = document.getElementsByTagName("svg")[0], started = false;
  function start() {
    var width = document.documentElement.clientWidth;
    if (started || width <= 0 || svg.getBoundingClientRect().width <= 0) return;
    started = true;
    // The width the script draws to is the frame's, whether or not the
    // graph's style has been applied yet.
    svg.setAttribute("width", width);
    init();
  }
  if (window.ResizeObserver) new ResizeObserver(start).observe(document.documentElement);
  window.addEventListener("resize", start);
  start();
  // A frame shown later does not always tell its document (no resize
  // seen): looked at again until it has a width.
  var again = setInterval(function () { start(); if (started) clearInterval(again); }, 250);
})();
</script>]]

-- The flamegraph's SVG as the document of the page's frame (an iframe of
-- inline text: its script and styles address the whole document they are
-- in): an HTML document (no XML prolog or SVG doctype) in which the graph
-- takes the frame's width (its script draws to the width it is given,
-- started once it has one). Returns the document and the height the
-- frame needs.
local function flamegraph_document(svg)
  local height = (tonumber(svg:match('<svg[^>]-height="(%d+)"')) or 600) + 4
  svg = svg:gsub("^%s*<%?xml.-%?>%s*", ""):gsub("^%s*<!DOCTYPE.->%s*", ""):gsub(' onload="init%(evt%)"', "", 1)
  return "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>svg { width: 100%; }</style></head>" ..
    "<body style=\"margin:0\">" .. svg .. START_WHEN_LAID_OUT .. "</body></html>", height
end

-- The page: `parts` has `title`, `summary`, `flamegraph` (its document)
-- and `flamegraphHeight`, `functions`, `zones` (texts), `data` (what the
-- script draws, as JSON) and `live` (the page updates itself); `a` the
-- assets' texts.
local function document(parts, a)
  local title = escape_html(parts.title)
  return table.concat({
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", title,
    "</title>\n<style>\n", a.style, "</style>\n</head>\n<body>\n<h1>", title, "</h1>\n",
    parts.live and "<p><label><input type=\"checkbox\" id=\"live-pause\"> pause updates</label> " ..
      "<span id=\"live-status\"></span></p>\n" or "",
    "<p id=\"summary\">", escape_html(parts.summary), "</p>\n",
    "<h2>Frame times</h2>\n<p>One bar per frame; red: hitches (at least twice the median frame time); " ..
      "purple lines: trace aborts. Click a bar or a row to see what ran in the frame.</p>\n" ..
      "<div id=\"frames-chart\"></div>\n",
    "<h2>Selected frame</h2>\n<div id=\"frame-detail\"></div>\n",
    "<h2>Slowest frames</h2>\n<table id=\"hitches\"><thead><tr><th>frame</th><th>time</th>" ..
      "<th>samples</th><th>GC</th><th>what ran (share of its samples)</th></tr></thead><tbody></tbody></table>\n",
    "<h2>Flamegraph</h2>\n<iframe class=\"flamegraph\" title=\"flamegraph\" style=\"width:100%;border:0;height:",
    tostring(parts.flamegraphHeight), "px\" srcdoc=\"", escape_html(parts.flamegraph), "\"></iframe>\n",
    "<h2>Top functions</h2>\n<pre id=\"functions\">", escape_html(parts.functions), "</pre>\n",
    "<h2>Zones</h2>\n<pre id=\"zones\">", escape_html(parts.zones), "</pre>\n",
    "<h2>Trace aborts</h2>\n<table id=\"aborts\"><thead><tr><th>count</th><th>severity</th><th>location</th>" ..
      "<th>reason</th><th>first at (ms)</th></tr></thead><tbody></tbody></table>\n",
    "<p id=\"no-aborts\" hidden>No trace aborts recorded (run a trace session beside: tecs-profile run --trace).</p>\n",
    "<script type=\"application/json\" id=\"tecs-data\">", parts.data, "</script>\n",
    "<script>\n", a.script, "</script>\n",
    parts.live and ("<script>\n" .. a.live_script .. "</script>\n") or "",
    "</body>\n</html>\n",
  })
end

--- The page of a sampling session.
-- @param session a `SampleSession`
-- @tparam[opt] table opts `title`
-- @treturn string the HTML text
function M.render(session, opts)
  local a = read_assets()
  opts = opts or {}
  local report = require("tecs.profile.report")
  local title = opts.title or "tecs-profile"
  local frames = session:frames()
  local hitches = session:hitches(M.HITCHES)
  local aborts = {}
  for _, e in ipairs(session._native:events()) do
    if e.name == "trace abort" then aborts[#aborts + 1] = e end
  end
  local st = session:stats()
  -- Boxes by function, named as the tables and the live page name them.
  local flamegraph, height = flamegraph_document(report.flamegraph(session, { title = title, frames = "function" }))
  return document({
    title = title,
    summary = string.format("%d samples, %.3f s, %d frames, %d trace aborts.", st.samples, st.durationSec,
      #frames, #aborts),
    flamegraph = flamegraph, flamegraphHeight = height,
    functions = report.report(session, { limit = 30 }),
    zones = report.report(session, { by = "zone", limit = 30 }),
    data = M.json({ frames = frames, hitches = hitches, aborts = aborts }),
  }, a)
end

-- The heaviest functions of a snapshot as text, one per line.
local function functions_text(top, samples)
  local out = { string.format("%d samples; functions by self time:\n", samples) }
  for _, f in ipairs(top) do
    out[#out + 1] = string.format("%6.1f%%  %8d  %s\n", f.share * 100, f.samples, f.name)
  end
  return table.concat(out)
end

--- What the live page draws (see `live`), made from the answer of the
-- control channel's `snapshot` command; its flamegraph is drawn here, from
-- the snapshot's stacks.
-- @tparam table answer the `snapshot` answer
-- @tparam[opt] table opts `title` (of the flamegraph)
-- @treturn table `frames`, `hitches`, `aborts`, `summary`, `functions`,
--   `zones`, `flamegraph` (its frame's document), `flamegraphHeight`,
--   `samples`, `framesKept`, `running`
function M.live_data(answer, opts)
  opts = opts or {}
  local report = require("tecs.profile.report")
  local flamegraph, height
  if answer.samples > 0 then
    flamegraph, height = flamegraph_document(report.flamegraph(answer.stacks, { title = opts.title }))
  else
    flamegraph, height = "<!DOCTYPE html><html><body><p>No samples yet.</p></body></html>", 60
  end
  local shown = #answer.frames
  return {
    frames = answer.frames, hitches = answer.hitches, aborts = answer.events,
    summary = string.format("%d samples in %.1f s, every %g ms (%s); %d frames%s; %d trace aborts.",
      answer.samples, answer.elapsedSec or 0, answer.intervalMs or 0, answer.running and "sampling" or "stopped",
      answer.framesKept, shown < answer.framesKept and string.format(" (the last %d drawn)", shown) or "",
      #answer.events),
    functions = functions_text(answer.top, answer.samples),
    zones = answer.samples > 0 and report.report(answer.stacks, { by = "zone", limit = 30, functions = false }) or "",
    flamegraph = flamegraph, flamegraphHeight = height,
    samples = answer.samples, framesKept = answer.framesKept, running = answer.running,
  }
end

--- The live page (`tecs-profile live`): the report page's parts, drawn by
-- its script from `data` (`live_data`), then again from `data.json`
-- (beside the page's address) once a second.
-- @tparam table data from `live_data`
-- @tparam[opt] table opts `title`
-- @treturn string the HTML text
function M.live(data, opts)
  local a = read_assets()
  opts = opts or {}
  -- The texts go in the page's text; the script draws the rest.
  local drawn = {}
  for k, v in pairs(data) do drawn[k] = v end
  drawn.summary, drawn.flamegraph, drawn.flamegraphHeight, drawn.functions, drawn.zones = nil, nil, nil, nil, nil
  return document({
    title = opts.title or "tecs-profile live",
    summary = data.summary, flamegraph = data.flamegraph, flamegraphHeight = data.flamegraphHeight,
    functions = data.functions, zones = data.zones, data = M.json(drawn), live = true,
  }, a)
end

return M
