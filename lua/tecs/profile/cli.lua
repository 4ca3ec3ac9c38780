--- The `tecs-profile` command line: `run`, `report`, `flamegraph`.
-- `main(args)` returns the process exit code: 0 on success, 1 when the
-- profiled program or an output failed, 2 on wrong usage (after printing the
-- usage to stderr).
-- @module tecs.profile.cli

local M = {}

local USAGE = {}

USAGE.main = [[
Usage: tecs-profile <command> [options] ...

Commands:
  run [options] script.lua [args...]   profile a whole Lua program (like luajit -jp)
  report [options] FILE                text views of a collapsed-stack file
  flamegraph FILE -o OUT.svg           draw an SVG flamegraph (or speedscope JSON)

`tecs-profile <command> --help` describes each command.
]]

local VIEW_OPTIONS = [[
View options:
  -m, --mode MODE       a `luajit -jp` mode: f (functions), l (lines), v (VM
                        states), z (zones), two nested (vf, fv, zf, fl, ...),
                        s / -s (callers / callees), a number (stack depth),
                        m<pct> (threshold), r (raw counts), a / A (annotated source)
      --by GROUP        function (default), line, module, zone (full path),
                        zonecomponent, vmstate
      --then GROUP      second level: a GROUP, or caller, callee
      --sort self|total rank by self time (default) or total time
      --min PCT         hide rows below PCT percent (default 3)
      --depth N         frames per key, innermost first (negative: caller first)
      --limit N         at most N rows
      --raw             sample counts instead of percentages
      --annotate hot|full   annotated source: hot excerpts or whole files
      --context N       lines around hot lines with --annotate hot (default 3)
      --zone PATH       keep only this zone and the zones below it
      --no-functions    do not read sources to group lines into functions
]]

USAGE.run = [[
Usage: tecs-profile run [options] script.lua [args...]

Runs script.lua with `arg` set as luajit would, sampling it from start to end,
then prints a text report (functions by self time, like `luajit -jp`).

Sampling options:
  -i, --interval MS     sampling interval in milliseconds (default 1)
  -d, --stack-depth N   stack frames kept per sample (default 16)
  -z, --zone-filter PATH  record only samples in this zone subtree
      --clock cpu|wall  CPU time (default) or real time
      --precision function|line
                        compiled code by function (default, cheap) or by
                        line (LuaJIT's line mode: slows compiled code down)
  -o, --output FILE     also write the profile: .svg flamegraph,
                        .speedscope.json, anything else collapsed text
  -f, --format FMT      collapsed, svg or speedscope (overrides the extension)
      --report FILE     write the text report to FILE instead of stdout
  -q, --quiet           no text report
      --trace           also track JIT trace aborts; report them ranked by
                        the sampled time at their locations
      --trace-output FILE   write the trace report (CSV) to FILE

]] .. VIEW_OPTIONS

USAGE.report = [[
Usage: tecs-profile report [options] FILE

Prints a text view of FILE (collapsed stacks, as written by tecs-profile,
profile.sample():stop(file) or any collapsed-stack tool).

      --aborts CSV      rank the abort sites of a trace report (CSV written by
                        profile.trace():stop(file)) by sampled time
  -o, --output FILE     write the view to FILE instead of stdout

]] .. VIEW_OPTIONS

USAGE.flamegraph = [[
Usage: tecs-profile flamegraph [options] FILE -o OUT

Draws FILE (collapsed stacks) as an interactive SVG flamegraph: zone frames
aqua, leaf frames coloured by VM state. OUT ending in .speedscope.json gets a
speedscope file instead; `-o -` writes to stdout.

  -o, --output OUT      output file (required)
  -f, --format FMT      svg or speedscope (overrides the extension)
      --title TEXT      title of the graph
      --inverted        icicle graph (roots at the top)
      --zone PATH       keep only this zone and the zones below it
      --functions       one box per function instead of per source line
]]

local UsageError = {}

local function usage_error(fmt, ...)
  error(setmetatable({ msg = string.format(fmt, ...) }, UsageError), 0)
end

-- Option table: long name -> { key, takes_value, short }.
local function spec(list)
  local by_name = {}
  for _, o in ipairs(list) do
    by_name["--" .. o[1]] = o
    if o.short then by_name["-" .. o.short] = o end
  end
  return by_name
end

local view_opts = {
  { "mode", key = "mode", value = true, short = "m" },
  { "by", key = "by", value = true },
  { "then", key = "then", value = true },
  { "sort", key = "sort", value = true },
  { "min", key = "minPercent", value = "number" },
  { "depth", key = "depth", value = "number" },
  { "limit", key = "limit", value = "number" },
  { "raw", key = "raw" },
  { "annotate", key = "annotate", value = true },
  { "context", key = "context", value = "number" },
  { "zone", key = "zone", value = true },
  { "no-functions", key = "functions", negate = true },
}

local function with(list, extra)
  local out = {}
  for _, o in ipairs(list) do out[#out + 1] = o end
  for _, o in ipairs(extra) do out[#out + 1] = o end
  return spec(out)
end

local specs = {
  run = with(view_opts, {
    { "interval", key = "intervalMs", value = "number", short = "i" },
    { "stack-depth", key = "stackDepth", value = "number", short = "d" },
    { "zone-filter", key = "zoneFilter", value = true, short = "z" },
    { "clock", key = "clock", value = true },
    { "precision", key = "precision", value = true },
    { "output", key = "output", value = true, short = "o" },
    { "format", key = "format", value = true, short = "f" },
    { "report", key = "reportFile", value = true },
    { "quiet", key = "quiet", short = "q" },
    { "trace", key = "trace" },
    { "trace-output", key = "traceOutput", value = true },
  }),
  report = with(view_opts, {
    { "aborts", key = "aborts", value = true },
    { "output", key = "output", value = true, short = "o" },
  }),
  flamegraph = spec({
    { "output", key = "output", value = true, short = "o" },
    { "format", key = "format", value = true, short = "f" },
    { "title", key = "title", value = true },
    { "inverted", key = "inverted" },
    { "zone", key = "zone", value = true },
    { "functions", key = "functions" },
  }),
}

--- Parse `args[first..]` against a command's options. For `run`, parsing
-- stops at the script name; the rest are the script's arguments.
local function parse(cmd, args, first)
  local opts, positional = {}, {}
  local i = first
  while i <= #args do
    local a = args[i]
    if a == "--help" or a == "-h" then
      opts.help = true
    elseif a == "--" then
      for j = i + 1, #args do positional[#positional + 1] = args[j] end
      break
    elseif a:sub(1, 1) == "-" and #a > 1 then
      local name, inline = a:match("^(%-%-[^=]+)=(.*)$")
      name = name or a
      local o = specs[cmd][name]
      if not o then usage_error("unknown option %s", a) end
      local v = true
      if o.value then
        if inline then
          v = inline
        else
          i = i + 1
          v = args[i]
          if v == nil then usage_error("option %s needs a value", name) end
        end
        if o.value == "number" then
          local n = tonumber(v)
          if not n then usage_error("option %s needs a number, got %q", name, v) end
          v = n
        end
      elseif inline then
        usage_error("option %s takes no value", name)
      end
      if o.negate then v = false end
      opts[o.key] = v
    else
      positional[#positional + 1] = a
      if cmd == "run" then
        for j = i + 1, #args do positional[#positional + 1] = args[j] end
        break
      end
    end
    i = i + 1
  end
  return opts, positional
end

local function view_options(opts)
  local o = {}
  for _, s in ipairs(view_opts) do
    if opts[s.key] ~= nil then o[s.key] = opts[s.key] end
  end
  return o
end

local function write_file(path, text)
  if path == "-" then
    io.stdout:write(text)
    return true
  end
  return require("tecs.profile.fs").write_atomic(path, text)
end

local function read_file(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local text = f:read("*a")
  f:close()
  return text
end

-- Strips the "file:line: " prefix of an error raised by the library.
local function clean(err)
  return (tostring(err):gsub("^[^\n]-:%d+: ", ""))
end

--- Reads trace-report CSV (RFC 4180) into `{ sites = {...} }`.
function M.read_abort_csv(text)
  local rows, row, field, i, n = {}, {}, {}, 1, #text
  local in_quotes = false
  while i <= n do
    local c = text:sub(i, i)
    if in_quotes then
      if c == '"' then
        if text:sub(i + 1, i + 1) == '"' then field[#field + 1] = '"'; i = i + 1 else in_quotes = false end
      else
        field[#field + 1] = c
      end
    elseif c == '"' then
      in_quotes = true
    elseif c == "," then
      row[#row + 1] = table.concat(field); field = {}
    elseif c == "\n" or c == "\r" then
      if c == "\r" and text:sub(i + 1, i + 1) == "\n" then i = i + 1 end
      row[#row + 1] = table.concat(field); field = {}
      rows[#rows + 1] = row; row = {}
    else
      field[#field + 1] = c
    end
    i = i + 1
  end
  if #field > 0 or #row > 0 then row[#row + 1] = table.concat(field); rows[#rows + 1] = row end
  local header = rows[1]
  if not header or header[1] ~= "severity" then return nil, "not a trace report CSV (no 'severity,...' header)" end
  local col = {}
  for k, name in ipairs(header) do col[name] = k end
  local sites = {}
  for r = 2, #rows do
    local x = rows[r]
    if #x > 1 then
      sites[#sites + 1] = {
        severity = x[col.severity], count = tonumber(x[col.count]) or 0, reason = x[col.reason] or "",
        location = x[col.location] or "", zone = x[col.zone] or "",
      }
    end
  end
  return { sites = sites }
end

local commands = {}

function commands.report(opts, pos)
  if #pos ~= 1 then usage_error("report needs exactly one FILE (got %d)", #pos) end
  local report = require("tecs.profile.report")
  local text
  if opts.aborts then
    local csv, err = read_file(opts.aborts)
    if not csv then io.stderr:write("tecs-profile: cannot read '", opts.aborts, "': ", tostring(err), "\n") return 1 end
    local trace, perr = M.read_abort_csv(csv)
    if not trace then io.stderr:write("tecs-profile: ", opts.aborts, ": ", perr, "\n") return 1 end
    local ok, out = pcall(report.hotAborts, pos[1], trace, { raw = opts.raw, functions = opts.functions })
    if not ok then io.stderr:write("tecs-profile: ", clean(out), "\n") return 1 end
    text = out
  else
    local ok, out = pcall(report.report, pos[1], view_options(opts))
    if not ok then io.stderr:write("tecs-profile: ", clean(out), "\n") return 1 end
    text = out
  end
  local ok, err = write_file(opts.output or "-", text)
  if not ok then io.stderr:write("tecs-profile: ", err, "\n") return 1 end
  return 0
end

function commands.flamegraph(opts, pos)
  if #pos ~= 1 then usage_error("flamegraph needs exactly one FILE (got %d)", #pos) end
  if not opts.output then usage_error("flamegraph needs -o OUT") end
  local report = require("tecs.profile.report")
  local output = require("tecs.profile.output")
  -- Standard output has no extension to go by: it gets the SVG unless -f says otherwise.
  local fmt = output.format_for(opts.output == "-" and "-.svg" or opts.output, opts.format)
  if fmt ~= "svg" and fmt ~= "speedscope" then usage_error("--format must be svg or speedscope, got %q", fmt) end
  local ok, out
  local frames = opts.functions and "function" or nil
  if fmt == "svg" then
    ok, out = pcall(report.flamegraph, pos[1],
      { title = opts.title, inverted = opts.inverted, zone = opts.zone, frames = frames })
  else
    ok, out = pcall(report.speedscope, pos[1], { name = opts.title, zone = opts.zone, frames = frames })
  end
  if not ok then io.stderr:write("tecs-profile: ", clean(out), "\n") return 1 end
  local wok, err = write_file(opts.output, out)
  if not wok then io.stderr:write("tecs-profile: ", err, "\n") return 1 end
  return 0
end

function commands.run(opts, pos)
  if #pos < 1 then usage_error("run needs a script") end
  local script = pos[1]
  local profile = require("tecs.profile")
  local report = require("tecs.profile.report")
  if opts.format and opts.format ~= "collapsed" and opts.format ~= "svg" and opts.format ~= "speedscope" then
    usage_error("--format must be collapsed, svg or speedscope, got %q", tostring(opts.format))
  end
  -- Check the view options before the program runs, not after.
  local vopts = view_options(opts)
  local vok, verr = pcall(report.report, "", vopts)
  if not vok then usage_error("%s", clean(verr):gsub("^profile%.report: ", "")) end

  local chunk, lerr = loadfile(script)
  if not chunk then io.stderr:write("tecs-profile: ", tostring(lerr), "\n") return 1 end

  local script_args = { [0] = script }
  for k = 2, #pos do script_args[k - 1] = pos[k] end
  script_args[-1] = "tecs-profile run"
  _G.arg = script_args

  local trace_mod, tsession
  if opts.trace then
    local tok, tm = pcall(require, "tecs.profile.trace")
    if tok and type(tm) == "table" then
      local sok, s = pcall(profile.trace)
      if sok then tsession, trace_mod = s, tm else io.stderr:write("tecs-profile: --trace: ", clean(s), "\n") end
    else
      io.stderr:write("tecs-profile: --trace: the trace tracker (tecs.profile.trace) is not available\n")
    end
  end

  local ok_s, session = pcall(profile.sample, {
    intervalMs = opts.intervalMs, stackDepth = opts.stackDepth, zone = opts.zoneFilter, clock = opts.clock,
    precision = opts.precision,
  })
  if not ok_s then usage_error("%s", clean(session)) end

  local finished, status = false, 0
  local function finish()
    if finished then return end
    finished = true
    session:stop()
    local trace_report
    if tsession then
      local ok, r = pcall(tsession.stop, tsession)
      if ok then trace_report = r else io.stderr:write("tecs-profile: trace: ", clean(r), "\n") end
    end
    if opts.output then
      local ok, err = pcall(session.write, session, opts.output, opts.format)
      if not ok then io.stderr:write("tecs-profile: ", clean(err), "\n") status = 1 end
    end
    local out = {}
    if not opts.quiet then
      local ok, text = pcall(report.report, session, vopts)
      out[#out + 1] = ok and text or ("tecs-profile: " .. clean(text) .. "\n")
    end
    if trace_report then
      if opts.traceOutput then
        local ok, err = write_file(opts.traceOutput, tostring(trace_report))
        if not ok then io.stderr:write("tecs-profile: ", err, "\n") status = 1 end
      end
      local ok, text = pcall(report.hotAborts, session, trace_report, { raw = opts.raw })
      out[#out + 1] = "\n" .. (ok and text or ("tecs-profile: " .. clean(text) .. "\n"))
    end
    local text = table.concat(out)
    if text ~= "" then
      local ok, err = write_file(opts.reportFile or "-", text)
      if not ok then io.stderr:write("tecs-profile: ", err, "\n") status = 1 end
    end
    io.stdout:flush()
  end

  -- A program that ends with os.exit still gets its profile.
  local real_exit = os.exit
  os.exit = function(code, ...)
    finish()
    if code == nil or code == true then code = status end
    io.stdout:flush()
    return real_exit(code, ...)
  end
  local ok, err = xpcall(chunk, debug.traceback, unpack(script_args, 1, #script_args))
  os.exit = real_exit
  if not ok then
    io.stderr:write(tostring(err), "\n")
    status = 1
  end
  finish()
  return status
end

--- Run the command line `args` (as in `arg`); returns the exit code.
function M.main(args)
  local cmd = args[1]
  if cmd == nil or cmd == "--help" or cmd == "-h" or cmd == "help" then
    local out = cmd == nil and io.stderr or io.stdout
    out:write(USAGE.main)
    return cmd == nil and 2 or 0
  end
  if not commands[cmd] then
    io.stderr:write("tecs-profile: unknown command '", tostring(cmd), "'\n\n", USAGE.main)
    return 2
  end
  local ok, res = pcall(function()
    local opts, pos = parse(cmd, args, 2)
    if opts.help then
      io.stdout:write(USAGE[cmd])
      return 0
    end
    return commands[cmd](opts, pos)
  end)
  if ok then return res end
  if getmetatable(res) == UsageError then
    io.stderr:write("tecs-profile ", cmd, ": ", res.msg, "\n\n", USAGE[cmd])
    return 2
  end
  error(res, 0)
end

return M
