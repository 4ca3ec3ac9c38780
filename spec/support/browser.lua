--- Debian's chromium, headless, for the tests of the pages: the DOM a page
-- leaves once its scripts ran, and screenshots.
local run = require("spec.support.run")

local M = {}

--- Runs chromium headless with `args` (its options and the page's address).
-- @return exit code, stdout, stderr
function M.chromium(args)
  -- --no-sandbox: the test may run as root, where chromium's sandbox refuses to start.
  return run.run3("timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars " .. args)
end

--- How many times `pattern` matches in `text`.
function M.count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

-- Measures the flamegraph's legend once the graph's script has drawn it:
-- its left and right edges and the graph's width, in the root element's
-- data-legend attribute.
local MEASURE = [[
setTimeout(function () {
  var svg = document.getElementsByTagName("svg")[0], legend = document.getElementById("legend");
  var s = svg.getBoundingClientRect(), l = legend ? legend.getBoundingClientRect() : null;
  document.documentElement.setAttribute("data-legend",
    l ? [l.left - s.left, l.right - s.left, s.width].join(" ") : "none");
}, 500);
]]

--- Where a flamegraph's legend lies, drawn by chromium in a window `width`
-- pixels wide: `document` is the flamegraph as a file shows it (an SVG
-- document) or as the pages' frame holds it (an HTML document, which the
-- frame gives the page's width). The document is drawn as it is, with a
-- script added at its end that measures the legend.
-- @treturn table `{ left, right, width }` in pixels from the graph's left
--   edge, or nil and what went wrong
function M.legend_box(document, width)
  local svg = document:find("^%s*<%?xml") ~= nil
  local measured
  if svg then
    measured = document:gsub("</svg>%s*$", "<script><![CDATA[" .. MEASURE .. "]]></script></svg>")
  else
    measured = document:gsub("</body>", "<script>" .. MEASURE .. "</script></body>")
  end
  local dir = run.tmpdir()
  local file = dir .. (svg and "/graph.svg" or "/graph.html")
  run.write(file, measured)
  local rc, dom, err = M.chromium(string.format("--window-size=%d,600 --virtual-time-budget=3000 --dump-dom %s",
    width, run.quote("file://" .. file)))
  os.execute("rm -rf " .. run.quote(dir))
  if rc ~= 0 then return nil, err end
  local left, right, graph = dom:match('data%-legend="([%d.e+-]+) ([%d.e+-]+) ([%d.e+-]+)"')
  if not left then return nil, "no legend measured: " .. (dom:match('data%-legend="[^"]*"') or dom:sub(1, 300)) end
  return { left = tonumber(left), right = tonumber(right), width = tonumber(graph) }
end

--- Loads the HTML page `html` in a window `width` pixels wide with
-- `script` run at the end of its body; the script leaves what it measured
-- in the root element's `data-measure` attribute.
-- @treturn string|nil the attribute's value, or nil and what went wrong
-- @treturn string what the page logged to its console (and its frames'), a
--   line each
function M.measure(html, width, script)
  local dir = run.tmpdir()
  local file = dir .. "/page.html"
  run.write(file, (html:gsub("</body>", function() return "<script>" .. script .. "</script></body>" end)))
  local rc, dom, err = M.chromium(string.format("--enable-logging=stderr --v=0 --window-size=%d,900 " ..
    "--virtual-time-budget=3000 --dump-dom %s", width, run.quote("file://" .. file)))
  os.execute("rm -rf " .. run.quote(dir))
  local console = {}
  for line in err:gmatch("[^\n]+") do
    if line:find(":CONSOLE", 1, true) then console[#console + 1] = line end
  end
  if rc ~= 0 then return nil, err end
  local value = dom:match('data%-measure="([^"]*)"')
  if not value then return nil, "nothing measured: " .. dom:sub(1, 300) end
  return value, table.concat(console, "\n")
end

--- The window widths the legend is checked at: the pages' screenshots'
-- window, a narrower one, and one narrower than the legend's longest line.
M.LEGEND_WIDTHS = { 1100, 700, 420 }

--- Where the legend of the flamegraph `document` (as for `legend_box`)
-- does not lie inside the graph, at each of `LEGEND_WIDTHS`: nil when it
-- always does, else what was measured.
-- @treturn string|nil
function M.legend_misfit(document)
  for _, width in ipairs(M.LEGEND_WIDTHS) do
    local box, err = M.legend_box(document, width)
    if not box then return err end
    if box.width <= 0.5 * width or box.left < 0 or box.right > box.width then
      return string.format("at %d px: legend from %.1f to %.1f in a graph %.1f wide", width, box.left, box.right,
        box.width)
    end
  end
  return nil
end

return M
