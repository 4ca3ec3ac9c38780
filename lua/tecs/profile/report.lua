--- Text views, flamegraphs and speedscope files from a profile.
--
--    profile.report(source, opts) -> string
--    profile.hotAborts(source, traceReport, opts) -> string, ranked
--    profile.flamegraph(source, opts) -> SVG string
--    profile.speedscope(source, opts) -> JSON string
--    profile.render(source, format, opts) -> the content in any format
--                                            written from a profile
--
-- `source` is collapsed-stack text (a string with a line break, or empty),
-- the path of a collapsed file (any other string), a `SampleSession` (running or
-- stopped), or a profile object from `report.load`. Sessions keep the samples of every VM state apart, so their
-- VM-state views are exact; a collapsed file carries one state per line.
-- @module tecs.profile.report

local check = require("tecs.profile.check")
local funcmap = require("tecs.profile.funcmap")

local native_ok, native = pcall(require, "tecs.profile.native")

local M = {}

-- Option names, accepted values and defaults are declared in the native
-- module (`native.options`); `checked` raises its messages under the public
-- function's name.

local function checked(fname, kind, opts, level)
  level = level + 1
  if not native_ok then
    check.fail(level, "%s: cannot load the native module tecs.profile.native: %s", fname, tostring(native))
  end
  local ok, err = native.call(native.raw.checkOptions, kind, opts)
  if not ok then check.fail(level, "%s: %s", fname, err) end
  return opts or {}
end

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

--- Resolve a source argument into a native profile object. Each kind is
-- told apart by its type, never by probing: a `SampleSession` (by its
-- class), a profile object (by the native module), a string with a line
-- break or empty (collapsed text), any other string (a file path).
-- @return profile object, interval in ms (or nil), and what a file's counts
-- are when its functions file says ("bytes"; else nil); or raises at `level`
function M.load(fname, source, level)
  level = (level or 1) + 1
  if not native_ok then
    check.fail(level, "%s: cannot load the native module tecs.profile.native: %s", fname, tostring(native))
  end
  local class = type(source) == "table" and getmetatable(source)
  if class and class == require("tecs.profile.sample").SampleSession then
    return source._native:profile(), source.intervalMs
  elseif class and class == require("tecs.profile.allocations").AllocationSession then
    -- Text views rank by samples, so that each share carries the error of
    -- its sample count; pictures and files are in bytes.
    local text_view = fname == "profile.report" or fname == "profile.hotAborts"
    return text_view and source._native:sampleProfile() or source._native:profile(), nil
  elseif native.raw.isProfile(source) then
    -- An allocation session's live profile: text views rank its samples.
    local text_view = fname == "profile.report" or fname == "profile.hotAborts"
    return text_view and require("tecs.profile.allocations").sample_profile(source) or source, nil
  elseif type(source) ~= "string" then
    check.fail(level, "%s: bad argument #1 'source' (collapsed text, file path, SampleSession, AllocationSession or profile expected, got %s)",
      fname, check.describe(source))
  end
  local text, path = source, nil
  if source ~= "" and not source:find("\n", 1, true) then
    local f, err = io.open(source, "rb")
    if not f then
      check.fail(level, "%s: bad argument #1 'source': cannot read file '%s' (%s; collapsed text needs a line break)",
        fname, source, err)
    end
    text, path = f:read("*a"), source
    f:close()
  end
  local ok, prof = native.call(native.raw.parseProfile, text)
  if not ok then
    check.fail(level, "%s: bad argument #1 'source': not collapsed-stack text (%s)", fname, prof)
  end
  -- The functions the session recorded, written beside the file: its
  -- frames are named as the session named them, whatever the sources are
  -- now (see `tecs.profile.session`'s `_write_file`).
  -- It also says what the counts are when they are not samples (an
  -- allocation session's bytes).
  local side = path and prof.withFunctions and io.open(path .. native.functionsFileEnding, "rb")
  local unit
  if side then
    local functions = side:read("*a")
    side:close()
    local named_ok, named = pcall(prof.withFunctions, prof, functions)
    if named_ok then prof = named end
    local decoded_ok, decoded = pcall(native.jsonDecode, functions)
    unit = decoded_ok and type(decoded) == "table" and type(decoded.unit) == "string" and decoded.unit or nil
  end
  return prof, nil, unit
end

local function functions_for(prof, opts)
  if opts.functions == false then return nil end
  return funcmap.build(prof:files())
end

local function prepare(fname, source, opts, level)
  level = level + 1
  opts = checked(fname, "report", opts, level)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if o.mode then
    local parsed, err = M.parse_mode(o.mode)
    if not parsed then check.fail(level, "%s: option 'mode' %s", fname, err) end
    for k, v in pairs(parsed) do if opts[k] == nil then o[k] = v end end
  end
  -- A CoverageSession (known by its class) gives its counts so far; a
  -- files() table passes as it is.
  if type(o.counts) == "table" and getmetatable(o.counts) == require("tecs.profile.coverage").CoverageSession then
    o.counts = o.counts:files()
  end
  if o["then"] and o["then"] == o.by then
    check.fail(level, "%s: options 'by' and 'then' must differ (both %q)", fname, o.by)
  end
  local prof, interval, unit = M.load(fname, source, level)
  if o.unit == nil then o.unit = unit end
  if o.zone then prof = prof:filterZone(o.zone) end
  return prof, o, interval
end

-- A session knows the CPU time of the thread it sampled and of the whole
-- process; its views say both under the first header line. (A collapsed
-- file does not carry them.)
local function with_cpu_line(text, source)
  if type(source) ~= "table" or type(source._native) ~= "userdata" or type(source.stats) ~= "function" then
    return text
  end
  local ok, st = pcall(source.stats, source)
  if not ok or type(st) ~= "table" then return text end
  local function seconds(v) return v and string.format("%.3f s", v) or "unknown" end
  local line = string.format("# CPU time: %s in the profiled thread, %s in the whole process\n",
    seconds(st.cpuSec), seconds(st.processCpuSec))
  local first = text:find("\n", 1, true)
  if not first then return text .. "\n" .. line end
  return text:sub(1, first) .. line .. text:sub(first + 1)
end

--- Render a text view of a profile.
-- @param source collapsed text, a file path, a SampleSession or a profile
-- @tparam[opt] table opts `by` ("function" default, "line", "module",
--   "zone" (full path), "zonecomponent", "vmstate", "plugin": the runtime
--   path directory of the innermost Lua frame, see docs/neovim.md), `then` (a second level:
--   the same groupings plus "caller" and "callee"), `sort` ("self" default or
--   "total"), `minPercent` (default 3), `depth` (frames per key, negative for
--   caller first), `raw` (counts instead of percentages), `limit` (rows),
--   `annotate` ("hot" excerpts or "full" files, with `context` lines),
--   `trace` (with `annotate`: a TraceReport whose abort sites go under
--   their lines, with each line's compiled share and the traces that
--   cover it),
--   `counts` (with `annotate`: a CoverageSession, or its `files()` table,
--   whose exact count of runs goes beside each line it counts),
--   `zone` (keep one zone subtree), `functions` (map lines to functions from
--   the source, default true), `mode` (a `-jp` mode string such as "vf"),
--   `plugins` (the directories plugins live in: `{ [name] = dir }` or a
--   list of directories; others are read from the runtime path's layout),
--   `unit` ("samples", or "bytes": shares without a sampling error; a
--   file's functions file gives it)
-- @treturn string the view; from a SampleSession, its second line gives
--   the CPU time of the profiled thread and of the whole process
function M.report(source, opts)
  local prof, o = prepare("profile.report", source, opts, 2)
  local ok, text = native.call(prof.report, prof, o, functions_for(prof, o))
  if not ok then check.fail(2, "profile.report: %s", text) end
  return with_cpu_line(text, source)
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
  opts = checked("profile.hotAborts", "hotAborts", opts, 2)
  if type(trace) ~= "table" or type(trace.sites) ~= "table" then
    check.fail(2, "profile.hotAborts: bad argument #2 'trace' (TraceReport with a 'sites' list expected, got %s)",
      check.describe(trace))
  end
  local prof = M.load("profile.hotAborts", source, 2)
  local ok, text, ranked = native.call(prof.hotAborts, prof, trace.sites, opts, functions_for(prof, opts))
  if not ok then check.fail(2, "profile.hotAborts: bad argument #2 'trace': %s", text) end
  return text, ranked
end

-- Applies the `zone`, `root` and `frames` options shared by the picture
-- formats (`frames` may be left to a format whose readers group lines).
local function shape(prof, opts, keep_lines)
  if opts.zone then prof = prof:filterZone(opts.zone) end
  -- The plugin of each stack is read from its lines, before any grouping.
  if opts.root == "plugin" then prof = prof:withPluginRoot(opts.plugins) end
  if opts.frames == "function" and not keep_lines then prof = prof:byFunction(funcmap.build(prof:files())) end
  return prof
end

-- `prof` in `format` (see `tecs.profile.output`), the errors raised under
-- `fname` at `level`.
local function render(fname, prof, format, meta, level)
  local out, err = require("tecs.profile.output").render(prof, format, meta)
  if not out then check.fail(level + 1, "%s: %s", fname, err) end
  return out
end

--- Render an interactive SVG flamegraph (zones aqua, leaves coloured by VM state).
-- @tparam[opt] table opts `title`, `countName`, `inverted`, `zone`,
--   `frames` ("line" default: one box per source line; "function": lines
--   grouped into their functions), `root` ("plugin": every stack under a
--   `[plugin NAME]` frame), `plugins` (the directories plugins live in, as
--   for `report`)
-- @treturn string SVG document
function M.flamegraph(source, opts)
  opts = checked("profile.flamegraph", "flamegraph", opts, 2)
  local prof = shape(M.load("profile.flamegraph", source, 2), opts)
  return render("profile.flamegraph", prof, "svg",
    { title = opts.title, countName = opts.countName, inverted = opts.inverted }, 2)
end

--- Render a speedscope JSON document (`sampled` profile).
-- @tparam[opt] table opts `name`, `intervalMs` (weights in ms), `zone`, `frames`
-- @treturn string JSON
function M.speedscope(source, opts)
  opts = checked("profile.speedscope", "speedscope", opts, 2)
  local prof, interval = M.load("profile.speedscope", source, 2)
  prof = shape(prof, opts)
  return render("profile.speedscope", prof, "speedscope",
    { title = opts.name, intervalMs = opts.intervalMs or interval }, 2)
end

--- Render a gzipped pprof profile (`profile.proto`), as read by
-- `go tool pprof`, Pyroscope and Parca. Lua functions are named by the
-- function view's labels where their sources can be read.
-- @tparam[opt] table opts `intervalMs` (the sampling period; a session's
--   own by default), `clock` ("cpu" or "wall": names the time value),
--   `zone`
-- @treturn string the bytes of a `.pb.gz` file
function M.pprof(source, opts)
  opts = checked("profile.pprof", "pprof", opts, 2)
  local prof, interval = M.load("profile.pprof", source, 2)
  prof = shape(prof, opts)
  -- An allocation session or its profiles: bytes, objects and live values.
  local heap = require("tecs.profile.allocations").pprof_meta(source) or {}
  local clock = opts.clock or heap.clock or (type(source) == "table" and source.clock) or "cpu"
  local o = { intervalMs = opts.intervalMs or interval or heap.intervalMs, clock = clock }
  if heap.clock and clock == heap.clock then
    for _, k in ipairs({ "objects", "inuseSpace", "inuseObjects" }) do
      if heap[k] then o[k] = shape(heap[k], opts) end
    end
  end
  return render("profile.pprof", prof, "pprof", o, 2)
end

--- Render a profile in any format of the registry written from a profile
-- (`tecs.profile.output`; the command line's `flamegraph` command).
-- @param source as for `report`
-- @tparam string format a format name, such as "svg" or "firefox"
-- @tparam[opt] table opts `title`, `inverted`, `intervalMs` (a session's
--   own by default), `zone`, `frames` ("function": lines grouped into their
--   functions, except for a format whose readers group them, pprof and
--   Firefox), `root` and `plugins` (as for `flamegraph`)
-- @treturn string the content
function M.render(source, format, opts)
  local output = require("tecs.profile.output")
  local d = output.declaration(format)
  if not d or d.timeLine then
    local names = {}
    for _, f in ipairs(output.registry) do
      if not f.timeLine then names[#names + 1] = '"' .. f.name .. '"' end
    end
    check.fail(2, "profile.render: bad argument #2 'format' (%s expected, got %s)", table.concat(names, " or "),
      check.describe(format))
  end
  if opts ~= nil and type(opts) ~= "table" then
    check.fail(2, "profile.render: bad argument #3 'opts' (table or nil expected, got %s)", check.describe(opts))
  end
  opts = opts or {}
  local prof, interval = M.load("profile.render", source, 2)
  prof = shape(prof, opts, d.groupsFunctions)
  return render("profile.render", prof, format,
    { title = opts.title, inverted = opts.inverted, intervalMs = opts.intervalMs or interval }, 2)
end

return M
