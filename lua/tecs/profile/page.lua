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

local STYLE = [[
body { font: 14px sans-serif; margin: 1em 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; font-size: 12px; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: left; }
tr.hitch-row, rect.frame-bar { cursor: pointer; }
tr.hitch-row:hover, tr.selected { background: #fde2c8; }
rect.frame-bar { fill: #8ab; } rect.frame-bar.hitch { fill: #d63; } rect.frame-bar.selected { fill: #222; }
line.abort-mark { stroke: #a0a; stroke-width: 1; }
#frame-detail { border: 1px solid #ccc; padding: .5em 1em; min-height: 2em; }
#live-status { margin-left: 1.5em; color: #666; }
]]

-- Draws the chart and the tables from the data, again at each `draw` (the
-- live page calls `tecsPage.draw` with each update). Its own scope: the
-- flamegraph's script has globals of its own.
local SCRIPT = [[
var tecsPage = (function () {
  var SVG = "http://www.w3.org/2000/svg";
  var data, byIndex, hitchOf, median, chosen = null;
  // A hitch: a frame at least twice as long as the median frame.
  function isHitch(f) { return f.ms >= 2 * median && f.ms > 0; }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmt(ms) { return ms.toFixed(2) + " ms"; }
  function tops(h) {
    return h.top.slice(0, 5).map(function (t) { return Math.round(t.share * 100) + "% " + t.name; });
  }
  function select(index) {
    chosen = index;
    var f = byIndex[index] || hitchOf[index], box = document.getElementById("frame-detail");
    box.textContent = "";
    document.querySelectorAll(".selected").forEach(function (e) { e.classList.remove("selected"); });
    document.querySelectorAll('[data-index="' + index + '"]').forEach(function (e) { e.classList.add("selected"); });
    if (!f) { box.appendChild(el("p", {}, "No frame " + index + ".")); return; }
    box.appendChild(el("h3", { "class": "detail-title" }, "Frame " + f.index + ": " + fmt(f.ms) + ", " +
      f.samples + " samples (" + f.gcSamples + " in the GC), from " + fmt(f.startMs)));
    var h = hitchOf[index];
    if (!h) {
      box.appendChild(el("p", {}, "Not among the " + data.hitches.length + " slowest frames: see its samples " +
        "in the time line (tecs-profile run --timeline FILE.trace.json)."));
      return;
    }
    var list = el("ol", { "class": "detail-functions" });
    if (h.top.length === 0) list.appendChild(el("li", {}, "(no samples kept)"));
    h.top.forEach(function (t) {
      list.appendChild(el("li", { "class": "detail-function" }, Math.round(t.share * 100) + "% " + t.name));
    });
    box.appendChild(list);
    data.aborts.forEach(function (a) {
      if (a.tMs >= f.startMs && a.tMs < f.startMs + f.ms) {
        box.appendChild(el("p", { "class": "detail-abort" }, "trace abort: " + a.details.reason + " at " +
          a.details.location));
      }
    });
  }
  // The frame-time chart: one bar per frame, the slowest in red.
  function drawChart() {
    var chart = document.getElementById("frames-chart");
    chart.textContent = "";
    if (data.frames.length === 0) {
      chart.appendChild(el("p", {}, "No frames marked: call profile.frame() once per frame " +
        "(LÖVE games are marked by themselves)."));
      return;
    }
    var W = 900, H = 160, max = 0, n = data.frames.length, bw = W / n;
    data.frames.forEach(function (f) { if (f.ms > max) max = f.ms; });
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + (H + 2));
    svg.setAttribute("width", W);
    svg.setAttribute("height", H + 2);
    data.frames.forEach(function (f, i) {
      var h = max > 0 ? Math.max(1, f.ms / max * H) : 1;
      var r = document.createElementNS(SVG, "rect");
      r.setAttribute("x", i * bw); r.setAttribute("width", Math.max(bw - (bw > 3 ? 1 : 0), 0.5));
      r.setAttribute("y", H - h); r.setAttribute("height", h);
      r.setAttribute("class", "frame-bar" + (isHitch(f) ? " hitch" : ""));
      r.setAttribute("data-index", f.index);
      var title = document.createElementNS(SVG, "title");
      title.textContent = "frame " + f.index + ": " + fmt(f.ms);
      r.appendChild(title);
      r.addEventListener("click", function () { select(f.index); });
      svg.appendChild(r);
    });
    // An abort is drawn in the bar of its frame, at its time in the frame.
    data.aborts.forEach(function (a) {
      var i = -1;
      data.frames.forEach(function (f, k) { if (a.tMs >= f.startMs && a.tMs < f.startMs + f.ms) i = k; });
      if (i < 0) return;
      var f = data.frames[i];
      var x = (i + (f.ms > 0 ? (a.tMs - f.startMs) / f.ms : 0)) * bw;
      var l = document.createElementNS(SVG, "line");
      l.setAttribute("x1", x); l.setAttribute("x2", x); l.setAttribute("y1", 0); l.setAttribute("y2", H);
      l.setAttribute("class", "abort-mark");
      svg.appendChild(l);
    });
    chart.appendChild(svg);
  }
  // The slowest frames.
  function drawHitches() {
    var tbody = document.querySelector("#hitches tbody");
    tbody.textContent = "";
    data.hitches.forEach(function (h) {
      var tr = el("tr", { "class": "hitch-row" + (isHitch(h) ? " hitch" : ""), "data-index": h.index });
      tr.appendChild(el("td", {}, String(h.index)));
      tr.appendChild(el("td", {}, fmt(h.ms)));
      tr.appendChild(el("td", {}, String(h.samples)));
      tr.appendChild(el("td", {}, String(h.gcSamples)));
      tr.appendChild(el("td", { "class": "hitch-functions" }, tops(h).join(", ")));
      tr.addEventListener("click", function () { select(h.index); });
      tbody.appendChild(tr);
    });
  }
  // The trace aborts.
  function drawAborts() {
    var abody = document.querySelector("#aborts tbody");
    abody.textContent = "";
    data.aborts.forEach(function (a) {
      var tr = el("tr", { "class": "abort-row" });
      tr.appendChild(el("td", {}, a.tMs.toFixed(2)));
      tr.appendChild(el("td", {}, a.details.severity || ""));
      tr.appendChild(el("td", {}, a.details.location || ""));
      tr.appendChild(el("td", {}, a.details.reason || ""));
      abody.appendChild(tr);
    });
    document.getElementById("aborts").hidden = data.aborts.length === 0;
    document.getElementById("no-aborts").hidden = data.aborts.length > 0;
  }
  // Parts the live page sends with each update; the report page has them
  // in its text already.
  function drawTexts() {
    if (data.summary !== undefined) document.getElementById("summary").textContent = data.summary;
    if (data.functions !== undefined) document.getElementById("functions").textContent = data.functions;
    if (data.zones !== undefined) document.getElementById("zones").textContent = data.zones;
    if (data.flamegraph !== undefined) {
      var frame = document.querySelector("iframe.flamegraph");
      frame.style.height = data.flamegraphHeight + "px";
      frame.srcdoc = data.flamegraph;
    }
  }
  function draw(d) {
    data = d;
    byIndex = {}; hitchOf = {};
    data.frames.forEach(function (f) { byIndex[f.index] = f; });
    data.hitches.forEach(function (h) { hitchOf[h.index] = h; });
    var sorted = data.frames.map(function (f) { return f.ms; }).sort(function (a, b) { return a - b; });
    median = sorted.length ? sorted[Math.floor(sorted.length / 2)] : 0;
    drawTexts();
    drawChart();
    drawHitches();
    drawAborts();
    var m = /frame=(\d+)/.exec(location.hash);
    if (chosen !== null && (byIndex[chosen] || hitchOf[chosen])) select(chosen);
    else if (m) select(Number(m[1]));
    else if (data.hitches.length > 0) select(data.hitches[0].index);
    else document.getElementById("frame-detail").textContent = "";
  }
  draw(JSON.parse(document.getElementById("tecs-data").textContent));
  return { draw: draw };
})();
]]

-- The live page's updates: `data.json` (beside the page, under its
-- secret) once a second, drawn by `tecsPage.draw`.
local LIVE_SCRIPT = [[
(function () {
  var updates = 0, waiting = false, status = document.getElementById("live-status");
  function update() {
    if (waiting || document.getElementById("live-pause").checked) return;
    waiting = true;
    fetch("data.json", { cache: "no-store" }).then(function (r) {
      return r.json().then(function (d) {
        if (!r.ok) throw new Error(d.error || r.statusText);
        tecsPage.draw(d);
        updates += 1;
        document.body.setAttribute("data-updates", updates);
        status.textContent = "updated " + new Date().toLocaleTimeString();
      });
    }).catch(function (e) {
      status.textContent = "not updated: " + e.message;
    }).then(function () { waiting = false; });
  }
  setInterval(update, 1000);
})();
]]

-- The flamegraph's SVG as the document of the page's frame (an iframe of
-- inline text: its script and styles address the whole document they are
-- in): an HTML document (no XML prolog or SVG doctype) in which the graph
-- takes the frame's width (its script draws to the width it is given).
-- Returns the document and the height the frame needs.
local function flamegraph_document(svg)
  local height = (tonumber(svg:match('<svg[^>]-height="(%d+)"')) or 600) + 4
  return "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>svg { width: 100%; }</style></head>" ..
    "<body style=\"margin:0\">" ..
    svg:gsub("^%s*<%?xml.-%?>%s*", ""):gsub("^%s*<!DOCTYPE.->%s*", "") .. "</body></html>", height
end

-- The page: `parts` has `title`, `summary`, `flamegraph` (its document)
-- and `flamegraphHeight`, `functions`, `zones` (texts), `data` (what the
-- script draws, as JSON) and `live` (the page updates itself).
local function document(parts)
  local title = escape_html(parts.title)
  return table.concat({
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", title,
    "</title>\n<style>\n", STYLE, "</style>\n</head>\n<body>\n<h1>", title, "</h1>\n",
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
    "<h2>Trace aborts</h2>\n<table id=\"aborts\"><thead><tr><th>at (ms)</th><th>severity</th><th>location</th>" ..
      "<th>reason</th></tr></thead><tbody></tbody></table>\n",
    "<p id=\"no-aborts\" hidden>No trace aborts recorded (run a trace session beside: tecs-profile run --trace).</p>\n",
    "<script type=\"application/json\" id=\"tecs-data\">", parts.data, "</script>\n",
    "<script>\n", SCRIPT, "</script>\n",
    parts.live and ("<script>\n" .. LIVE_SCRIPT .. "</script>\n") or "",
    "</body>\n</html>\n",
  })
end

--- The page of a sampling session.
-- @param session a `SampleSession`
-- @tparam[opt] table opts `title`
-- @treturn string the HTML text
function M.render(session, opts)
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
  })
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
  opts = opts or {}
  -- The texts go in the page's text; the script draws the rest.
  local drawn = {}
  for k, v in pairs(data) do drawn[k] = v end
  drawn.summary, drawn.flamegraph, drawn.flamegraphHeight, drawn.functions, drawn.zones = nil, nil, nil, nil, nil
  return document({
    title = opts.title or "tecs-profile live",
    summary = data.summary, flamegraph = data.flamegraph, flamegraphHeight = data.flamegraphHeight,
    functions = data.functions, zones = data.zones, data = M.json(drawn), live = true,
  })
end

return M
