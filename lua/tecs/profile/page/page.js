// The report page's script (tecs.profile.page writes it into the page):
// draws the chart and the tables from the page's data, again at each
// `draw` (the live page calls `tecsPage.draw` with each update). Its own
// scope: the flamegraph's script has globals of its own.
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
  // Where a frame waited, by kind (pages written before frames said so
  // have none).
  function waits(h) {
    return (h.waits || []).slice(0, 3).map(function (w) { return w.kind + " " + Math.round(w.share * 100) + "%"; });
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
        "in the timeline (tecs-profile run --timeline FILE.trace.json)."));
      return;
    }
    var list = el("ol", { "class": "detail-functions" });
    if (h.top.length === 0) list.appendChild(el("li", {}, "(no samples kept)"));
    h.top.forEach(function (t) {
      list.appendChild(el("li", { "class": "detail-function" }, Math.round(t.share * 100) + "% " + t.name));
    });
    box.appendChild(list);
    if (waits(h).length > 0) box.appendChild(el("p", { "class": "detail-waits" }, "waits: " + waits(h).join(", ")));
    data.aborts.forEach(function (a) {
      if (a.tMs >= f.startMs && a.tMs < f.startMs + f.ms) {
        box.appendChild(el("p", { "class": "detail-abort" }, "trace abort: " + a.details.reason + " at " +
          a.details.location));
      }
    });
  }
  // The frame-time chart: one bar per frame, the slowest in red, as wide as
  // its container (its coordinates stretch to the width: bars keep their
  // share of it, lines their width).
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
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("width", "100%");
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
      tr.appendChild(el("td", { "class": "hitch-functions" },
        tops(h).join(", ") + (waits(h).length > 0 ? "; waits: " + waits(h).join(", ") : "")));
      tr.addEventListener("click", function () { select(h.index); });
      tbody.appendChild(tr);
    });
  }
  // The trace aborts, one row per site (severity, location and reason) with
  // how many aborted there and when first, most first.
  function drawAborts() {
    var abody = document.querySelector("#aborts tbody"), sites = [], bySite = {};
    abody.textContent = "";
    data.aborts.forEach(function (a) {
      var d = a.details, key = [d.severity, d.location, d.reason].join("\u0000"), s = bySite[key];
      if (!s) {
        s = bySite[key] = { count: 0, firstMs: a.tMs, details: d };
        sites.push(s);
      }
      s.count += 1;
      if (a.tMs < s.firstMs) s.firstMs = a.tMs;
    });
    sites.sort(function (x, y) { return y.count - x.count || x.firstMs - y.firstMs; });
    sites.forEach(function (s) {
      var tr = el("tr", { "class": "abort-row" });
      tr.appendChild(el("td", {}, String(s.count)));
      tr.appendChild(el("td", {}, s.details.severity || ""));
      tr.appendChild(el("td", {}, s.details.location || ""));
      tr.appendChild(el("td", {}, s.details.reason || ""));
      tr.appendChild(el("td", {}, s.firstMs.toFixed(2)));
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
