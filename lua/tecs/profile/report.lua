--- Text views, flamegraphs and speedscope files from a profile.
--
--    profile.report(source, opts) -> string
--    profile.hotAborts(source, traceReport, opts) -> string, ranked
--    profile.flamegraph(source, opts) -> SVG string
--    profile.speedscope(source, opts) -> JSON string
--
-- `source` is collapsed-stack text, the path of a collapsed file, a
-- `SampleSession` (running or stopped), or a profile object from
-- `report.load`. Sessions keep the samples of every VM state apart, so their
-- VM-state views are exact; a collapsed file carries one state per line.
-- @module tecs.profile.report

local check = require("tecs.profile.check")
local funcmap = require("tecs.profile.funcmap")

local native_ok, native = pcall(require, "tecs.profile.native")

local M = {}

local groups = { "function", "line", "module", "zone", "zonecomponent", "vmstate" }
local then_groups = { "function", "line", "module", "zone", "zonecomponent", "vmstate", "caller", "callee" }

local report_spec = {
  by = check.oneof(unpack(groups)),
  ["then"] = check.oneof(unpack(then_groups)),
  sort = check.oneof("self", "total"),
  minPercent = check.number(0, 100, "a percentage from 0 to 100"),
  depth = function(v)
    if type(v) ~= "number" or v ~= math.floor(v) or v == 0 or v < -100 or v > 100 then
      return false, "a non-zero integer from -100 to 100"
    end
    return true
  end,
  raw = check.boolean,
  limit = check.integer(1, 1e9, "a positive integer"),
  annotate = check.oneof("hot", "full"),
  context = check.integer(0, 1000, "an integer from 0 to 1000"),
  zone = function(v)
    if type(v) ~= "string" or v:gsub("/+$", "") == "" then return false, "a non-empty zone path string" end
    return true
  end,
  functions = check.boolean,
  mode = function(v)
    if type(v) ~= "string" then return false, "a -jp style mode string such as \"vf\" or \"3si\"" end
    return true
  end,
}
M.option_names = report_spec

local jp_group = { f = "function", F = "function", l = "line", v = "vmstate", z = "zonecomponent" }

--- Translate a `luajit -jp` mode string into report options: `f`/`F`
-- functions, `l` lines, `v` VM states, `z` zones, two of them nested (`vf`,
-- `fl`, `zf`, ...), `s` callers (`-s` callees), a number for the stack depth,
-- `m<n>` the minimum percentage, `r` raw counts, `a`/`A` annotated source.
-- `p` and `i<n>` are accepted and ignored (paths are always kept; the
-- interval belongs to the sampler).
-- @return options table, or nil and an error message
function M.parse_mode(mode)
  local o = {}
  local rest = mode:gsub("i%d*", "")
  rest = rest:gsub("m(%d+)", function(n) o.minPercent = tonumber(n); return "" end)
  local negative = false
  rest = rest:gsub("(%-?)(%d+)", function(sign, n)
    negative = sign == "-"
    o.depth = tonumber(sign .. n)
    return ""
  end)
  local letters, split = {}, false
  for c in rest:gmatch(".") do
    if jp_group[c] then
      letters[#letters + 1] = jp_group[c]
    elseif c == "s" then
      split = true
    elseif c == "-" then
      negative = true
    elseif c == "r" then
      o.raw = true
    elseif c == "a" then
      o.annotate = "hot"
    elseif c == "A" then
      o.annotate = "full"
    elseif c ~= "p" then
      return nil, string.format("has unknown letter %q (known: f F l v z s r a A p m<n> i<n> <depth>)", c)
    end
  end
  if #letters > 2 or (split and #letters > 1) then
    return nil, "combines too many views (at most two of f, l, v, z, or one with s)"
  end
  o.by = letters[1] or "function"
  if split then
    o["then"] = negative and "callee" or "caller"
    o.depth = nil
  elseif letters[2] then
    o["then"] = letters[2]
    o.depth = nil
  end
  if o.depth == 0 then o.depth = nil end
  return o
end

--- Resolve a source argument into a native profile object.
-- @return profile object, interval in ms (or nil), or raises at `level`
function M.load(fname, source, level)
  level = (level or 1) + 1
  if not native_ok then
    check.fail(level, "%s: cannot load the native module tecs.profile.native: %s", fname, tostring(native))
  end
  local t = type(source)
  if t == "table" and type(source._native) == "userdata" then
    return source._native:profile(), source.intervalMs
  elseif t == "userdata" and type(source) == "userdata" and pcall(function() return source.samples end) then
    return source, nil
  elseif t ~= "string" then
    check.fail(level, "%s: bad argument #1 'source' (collapsed text, file path, SampleSession or profile expected, got %s)",
      fname, check.describe(source))
  end
  local text = source
  if not source:find("\n", 1, true) and source ~= "" then
    local f = io.open(source, "rb")
    if f then
      text = f:read("*a")
      f:close()
    elseif not source:find("%s%d+%s*$") then
      check.fail(level, "%s: bad argument #1 'source': cannot read file '%s'", fname, source)
    end
  end
  local ok, prof = pcall(native.parse_profile, text)
  if not ok then
    check.fail(level, "%s: bad argument #1 'source': not collapsed-stack text (%s)", fname,
      tostring(prof):gsub("^runtime error: ", ""))
  end
  return prof, nil
end

local function functions_for(prof, opts)
  if opts.functions == false then return nil end
  return funcmap.build(prof:files())
end

local function prepare(fname, source, opts, level)
  level = level + 1
  opts = check.options(fname, opts, report_spec, level)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if o.mode then
    local parsed, err = M.parse_mode(o.mode)
    if not parsed then check.fail(level, "%s: option 'mode' %s", fname, err) end
    for k, v in pairs(parsed) do if opts[k] == nil then o[k] = v end end
  end
  if o["then"] and o["then"] == o.by then
    check.fail(level, "%s: options 'by' and 'then' must differ (both %q)", fname, o.by)
  end
  local prof, interval = M.load(fname, source, level)
  if o.zone then prof = prof:filterZone((o.zone:gsub("/+$", ""))) end
  return prof, o, interval
end

--- Render a text view of a profile.
-- @param source collapsed text, a file path, a SampleSession or a profile
-- @tparam[opt] table opts `by` ("function" default, "line", "module",
--   "zone" (full path), "zonecomponent", "vmstate"), `then` (a second level:
--   the same groupings plus "caller" and "callee"), `sort` ("self" default or
--   "total"), `minPercent` (default 3), `depth` (frames per key, negative for
--   caller first), `raw` (counts instead of percentages), `limit` (rows),
--   `annotate` ("hot" excerpts or "full" files, with `context` lines),
--   `zone` (keep one zone subtree), `functions` (map lines to functions from
--   the source, default true), `mode` (a `-jp` mode string such as "vf")
-- @treturn string
function M.report(source, opts)
  local prof, o = prepare("profile.report", source, opts, 2)
  return prof:report(o, functions_for(prof, o))
end

--- Rank trace-abort sites by the sampled time at their locations.
-- @param source sample profile (as for `report`)
-- @param trace a TraceReport (or any table with a `sites` list of
--   `{severity, count, reason, location, zone}`)
-- @tparam[opt] table opts `raw`, `functions`
-- @treturn string the view
-- @treturn table ranked `{site, lineSelf, lineTotal, functionSelf, functionTotal}`
--   where `site` indexes `trace.sites`
function M.hotAborts(source, trace, opts)
  opts = check.options("profile.hotAborts", opts, { raw = check.boolean, functions = check.boolean }, 2)
  if type(trace) ~= "table" or type(trace.sites) ~= "table" then
    check.fail(2, "profile.hotAborts: bad argument #2 'trace' (TraceReport with a 'sites' list expected, got %s)",
      check.describe(trace))
  end
  local prof = M.load("profile.hotAborts", source, 2)
  return prof:hotAborts(trace.sites, opts, functions_for(prof, opts))
end

local flame_spec = {
  title = function(v) return type(v) == "string", "a string" end,
  countName = function(v) return type(v) == "string", "a string" end,
  inverted = check.boolean,
  zone = report_spec.zone,
  frames = check.oneof("line", "function"),
}

-- Applies the `zone` and `frames` options shared by the picture formats.
local function shape(prof, opts)
  if opts.zone then prof = prof:filterZone((opts.zone:gsub("/+$", ""))) end
  if opts.frames == "function" then prof = prof:byFunction(funcmap.build(prof:files())) end
  return prof
end

--- Render an interactive SVG flamegraph (zones aqua, leaves coloured by VM state).
-- @tparam[opt] table opts `title`, `countName`, `inverted`, `zone`,
--   `frames` ("line" default: one box per source line; "function": lines
--   grouped into their functions)
-- @treturn string SVG document
function M.flamegraph(source, opts)
  opts = check.options("profile.flamegraph", opts, flame_spec, 2)
  local prof = shape(M.load("profile.flamegraph", source, 2), opts)
  local ok, svg = pcall(prof.flamegraph, prof, opts)
  if not ok then check.fail(2, "profile.flamegraph: %s", tostring(svg):gsub("^runtime error: ", "")) end
  return svg
end

--- Render a speedscope JSON document (`sampled` profile).
-- @tparam[opt] table opts `name`, `intervalMs` (weights in ms), `zone`, `frames`
-- @treturn string JSON
function M.speedscope(source, opts)
  opts = check.options("profile.speedscope", opts, {
    name = flame_spec.title,
    intervalMs = check.number(0.001, 1e6, "a positive number of milliseconds"),
    zone = report_spec.zone,
    frames = flame_spec.frames,
  }, 2)
  local prof, interval = M.load("profile.speedscope", source, 2)
  prof = shape(prof, opts)
  local ok, json = pcall(prof.speedscope, prof, { name = opts.name, intervalMs = opts.intervalMs or interval })
  if not ok then check.fail(2, "profile.speedscope: %s", tostring(json):gsub("^runtime error: ", "")) end
  return json
end

return M
