--- The command line's commands and options, each declared once with its
-- help text; the usage texts and the option parser are made from these
-- declarations.
--
-- An option is `{ "long-name", short = "x", key = "optsKey", arg = "NAME",
-- number = true, negate = true, declared = "sample", help = "..." }`: `arg`
-- names its value (options without `arg` are flags), `number` converts the
-- value, `negate` makes the flag set `key` to false, and `declared` names the
-- public function whose option `key` it sets: its help then shows the
-- default declared there, never one of its own. An option of the command
-- line alone declares its default as `default`.
-- @module tecs.profile.cli.options

local output = require("tecs.profile.output")

local M = {}

--- Names joined for a sentence: `a, b or c`.
-- @tparam table names
-- @treturn string
function M.either(names)
  if #names < 2 then return names[1] or "" end
  return table.concat(names, ", ", 1, #names - 1) .. " or " .. names[#names]
end

--- The formats of the registry (`tecs.profile.output`) for which `keep(declaration)` is true.
-- @tparam function keep
-- @treturn table names, in the registry's order
function M.formats_where(keep)
  local names = {}
  for _, d in ipairs(output.registry) do
    if keep(d) then names[#names + 1] = d.name end
  end
  return names
end

-- Whether `flamegraph` writes the format: it is written from a profile,
-- and is not collapsed text (what the command reads).
local function picture(d) return not d.timeLine and d.name ~= "collapsed" end

--- The formats `flamegraph` writes, in the registry's order.
-- @treturn table names
function M.flamegraph_formats()
  return M.formats_where(picture)
end

-- The endings of the formats for which `keep(declaration)` is true, each
-- with what it writes: ".svg SVG flamegraph, .pb.gz gzipped pprof".
local function endings_help(keep)
  local parts = {}
  for _, d in ipairs(output.registry) do
    if keep(d) then
      for _, e in ipairs(d.endings) do parts[#parts + 1] = e .. " " .. d.help end
    end
  end
  return table.concat(parts, ", ")
end

local function any() return true end

-- `text` broken into lines of at most `width` characters, at spaces.
local function wrap(text, width)
  local lines, line = {}, ""
  for word in text:gmatch("%S+") do
    if line ~= "" and #line + 1 + #word > width then
      lines[#lines + 1] = line
      line = word
    else
      line = line == "" and word or (line .. " " .. word)
    end
  end
  lines[#lines + 1] = line
  return lines
end

--- Column where option help starts, and the width help is wrapped to.
local HELP_COLUMN, WIDTH = 24, 78

local HELP = { "help", short = "h", key = "help", help = "print this help" }

--- Options of the text views (`run` and `report`), handed to `profile.report`.
M.VIEW = {
  { "mode", short = "m", key = "mode", arg = "MODE",
    help = "a `luajit -jp` mode: f (functions), l (lines), v (VM states), z (zones), " ..
      "two nested (vf, fv, zf, fl, ...), s / -s (callers / callees), a number (stack depth), " ..
      "m<pct> (threshold), r (raw counts), a / A (annotated source)" },
  { "by", key = "by", arg = "GROUP",
    declared = "report", help = "function, line, module, zone (full path), zonecomponent, vmstate, plugin" },
  { "then", key = "then", arg = "GROUP", help = "second level: a GROUP, or caller, callee" },
  { "sort", key = "sort", arg = "self|total", declared = "report", help = "rank by self time or total time" },
  { "min", key = "minPercent", arg = "PCT", number = true, declared = "report",
    help = "hide rows below PCT percent" },
  { "depth", key = "depth", arg = "N", number = true,
    help = "frames per key, innermost first (negative: caller first)" },
  { "limit", key = "limit", arg = "N", number = true, help = "at most N rows" },
  { "raw", key = "raw", help = "sample counts instead of percentages" },
  { "annotate", key = "annotate", arg = "hot|full", help = "annotated source: hot excerpts or whole files" },
  { "context", key = "context", arg = "N", number = true,
    declared = "report", help = "lines around hot lines with --annotate hot" },
  { "zone", key = "zone", arg = "PATH", help = "keep only this zone and the zones below it" },
  { "no-functions", key = "functions", negate = true, help = "do not read sources to group lines into functions" },
}

local SAMPLING = {
  { "interval", short = "i", key = "intervalMs", arg = "MS", number = true, declared = "sample",
    help = "sampling interval in milliseconds" },
  { "stack-depth", short = "d", key = "stackDepth", arg = "N", number = true, declared = "sample",
    help = "stack frames kept per sample" },
  { "zone-filter", short = "z", key = "zoneFilter", arg = "PATH", help = "record only samples in this zone subtree" },
  { "clock", key = "clock", arg = "cpu|wall", declared = "sample", help = "CPU time or real time" },
  { "precision", key = "precision", arg = "auto|function|line", declared = "sample",
    help = "auto (compiled code read at each tick where this LuaJIT allows), function (LuaJIT's function " ..
      "mode) or line (LuaJIT's line mode: slows compiled code down)" },
  { "native-frames", key = "nativeFrames", declared = "sample",
    help = "below C functions, the native frames of the C code they run (Linux x86-64)" },
  { "output", short = "o", key = "output", arg = "FILE",
    help = "also write the profile: " .. endings_help(any) .. ", anything else collapsed text" },
  { "format", short = "f", key = "format", arg = "FMT",
    help = M.either(M.formats_where(any)) .. " (overrides the extension)" },
  { "report", key = "reportFile", arg = "FILE", help = "write the text report to FILE instead of stderr (stdout is the program's)" },
  { "quiet", short = "q", key = "quiet", help = "no text report" },
  { "trace", key = "trace",
    help = "also track JIT trace aborts; report them ranked by the sampled time at their locations" },
  { "trace-output", key = "traceOutput", arg = "FILE", help = "write the trace report (CSV) to FILE" },
  { "timeline", key = "timeline", arg = "FILE",
    help = "write the timeline, by the ending of FILE: " .. endings_help(function(d) return d.timeLine end) ..
      "; any other name Chrome trace events" },
  { "hitches", key = "hitches", arg = "N", number = true,
    help = "after the report, the N slowest frames (marked by profile.frame() or LÖVE) and what ran in them" },
  { "slow-frame-ms", key = "slowFrameMs", arg = "MS", number = true,
    help = "keep the samples of frames of at least MS milliseconds only on the timeline (the others stay " ..
      "counted, and in the profile)" },
  { "listen", key = "listen",
    help = "instead of profiling the whole program, run it with the control channel open (profile.listen()): " ..
      "tecs-profile attach then starts and stops sessions; the program needs no change: a command wakes it " ..
      "(SIGIO, then a one-shot hook at its next interpreted instruction), or it calls profile.poll()" },
  HELP,
}

local REPORT = {
  { "aborts", key = "aborts", arg = "CSV",
    help = "rank the abort sites of a trace report (CSV written by profile.trace():stop(file)) by sampled time" },
  { "output", short = "o", key = "output", arg = "FILE", help = "write the view to FILE instead of stdout" },
  { "hitches", key = "hitches", arg = "N", number = true,
    help = "the N slowest frames of a timeline (FILE written by run --timeline or :write(\"x.trace.json\")) " ..
      "and what ran in them" },
  HELP,
}

local FLAMEGRAPH = {
  { "output", short = "o", key = "output", arg = "OUT", help = "output file (required)" },
  { "format", short = "f", key = "format", arg = "FMT",
    help = M.either(M.flamegraph_formats()) .. " (overrides the extension)" },
  { "interval", short = "i", key = "intervalMs", arg = "MS", number = true,
    help = "the sampling interval FILE was recorded at, which a collapsed file does not record: speedscope " ..
      "weights in milliseconds and pprof times (without it: sample counts, speedscope unit \"none\")" },
  { "title", key = "title", arg = "TEXT", help = "title of the graph" },
  { "inverted", key = "inverted", help = "icicle graph (roots at the top)" },
  { "zone", key = "zone", arg = "PATH", help = "keep only this zone and the zones below it" },
  { "functions", key = "functions", help = "one box per function instead of per source line" },
  { "root", key = "root", arg = "plugin",
    help = "a root level above each stack: the plugin (runtime path directory) of its innermost Lua frame" },
  HELP,
}

-- Shared by the commands that talk to a running program.
local TIMEOUT = { "timeout", key = "timeout", arg = "S", number = true, default = 10,
  help = "seconds to wait for the program's answer; a command not answered in time still " ..
    "runs at the program's next poll" }

local ATTACH = {
  { "interval", short = "i", key = "intervalMs", arg = "MS", number = true, declared = "sample",
    help = "start: sampling interval in milliseconds" },
  { "zone", key = "zone", arg = "PATH", help = "start: record only samples in this zone subtree" },
  { "seconds", key = "seconds", arg = "S", number = true,
    help = "start: stop by itself after S seconds (at the program's first poll after them)" },
  { "allocations", key = "allocations",
    help = "start: profile the bytes the program allocates, by the stacks that allocate them, instead of its CPU " ..
      "time (an allocation session, docs/allocations.md)" },
  { "bytes-per-sample", key = "bytesPerSample", arg = "BYTES", number = true, declared = "allocations",
    help = "start --allocations: a sample about every BYTES bytes allocated" },
  { "output", short = "o", key = "output", arg = "FILE",
    help = "stop, trace_stop: the file the program writes (.collapsed, .svg flamegraph, .speedscope.json, " ..
      ".pb.gz pprof, .trace.json, .html; .csv for trace_stop): a bare name goes to its outputDir, else to the " ..
      "control directory; " ..
      "a path must lead to one of them; never over a file the program did not write; without it, a new file in " ..
      "the control directory" },
  { "by", key = "by", arg = "GROUP", declared = "report",
    help = "report: function, line, module, zone, zonecomponent, vmstate, plugin" },
  { "then", key = "then", arg = "GROUP", help = "report: second level: a GROUP, or caller, callee" },
  { "top", key = "top", arg = "N", number = true, help = "report: at most N rows" },
  { "hitches", key = "hitches", arg = "N", number = true,
    help = "report: the N slowest frames (marked by profile.frame() or LÖVE) and what ran in them" },
  TIMEOUT,
  HELP,
}

local LIVE = {
  { "port", key = "port", arg = "N", number = true, default = 0,
    help = "the port on 127.0.0.1; 0 for a free port the system chooses" },
  { "open", key = "open", help = "also open the page in the desktop's browser (xdg-open)" },
  { "interval", short = "i", key = "intervalMs", arg = "MS", number = true, declared = "sample",
    help = "the sampling interval of the session live starts when none runs" },
  { "output", short = "o", key = "output", arg = "FILE",
    help = "where the program writes the session live started, when live ends (formats and directories as " ..
      "attach stop -o); without it, a new file in the control directory" },
  TIMEOUT,
  HELP,
}

local LOVE = {
  { "love", key = "love", arg = "PATH", default = "love",
    help = "the LÖVE 11 executable to run: a build that links LuaJIT dynamically, as Debian's" },
  { "skip-version-check", key = "skipVersionCheck",
    help = "run a game made for an older LÖVE (t.version in its conf.lua) as made for this one: " ..
      "LÖVE shows no compatibility dialog, which waits for a click before main.lua loads" },
  HELP,
}

local COVER = {
  { "output", short = "o", key = "output", arg = "FILE", default = "coverage.info",
    help = "where to write the counts; a name ending in .stats.out gets luacov stats" },
  { "format", short = "f", key = "format", arg = "FMT", help = "lcov or luacov (overrides the file name)" },
  { "include", key = "include", arg = "PATTERN", help = "count only files whose path matches this Lua pattern" },
  { "exclude", key = "exclude", arg = "PATTERN", help = "do not count files whose path matches this Lua pattern" },
  HELP,
}

--- The commands, in the order the main usage lists them: `name`,
-- `synopsis` (for that list), `summary`, `usage` (the command's own usage
-- line), `about` (what it does), `sections` (`title`, `options`) and
-- `passthrough` (every argument but a lone `--help` goes to the command).
M.COMMANDS = {
  { name = "run", synopsis = "run [options] script.lua [args...]",
    summary = "profile a whole Lua program (like luajit -jp)",
    usage = "run [options] script.lua [args...]",
    about = "Runs script.lua with `arg` set as luajit would, sampling it from start to end,\n" ..
      "then prints a text report (functions by self time, like `luajit -jp`).",
    sections = { { title = "Sampling options:", options = SAMPLING }, { title = "View options:", options = M.VIEW } } },
  { name = "love", synopsis = "love [options] GAME [args...]",
    summary = "run an unmodified LÖVE game with the control channel open",
    usage = "love [options] GAMEDIR|GAME.love [args...]",
    about = "Runs `love GAME args...` in this process's place (the same pid and exit status)\n" ..
      "with the profiler's LD_PRELOAD library, which opens the control channel in the\n" ..
      "game's Lua state when LÖVE loads main.lua: tecs-profile targets lists the game\n" ..
      "(kind love, its identity), attach and mcp drive it. The game's files are not\n" ..
      "changed; it polls once per frame (love.timer.step). Where it listens goes to\n" ..
      "stderr; the control directory is $TECS_PROFILE_DIR's, as for every command.",
    script = true,
    sections = { { options = LOVE } } },
  { name = "targets", synopsis = "targets",
    summary = "list the running programs that can be attached",
    usage = "targets",
    about = "Lists the programs listening for tecs-profile attach (profile.listen(), or run\n" ..
      "--listen) of this user: pid, kind (luajit, love, nginx, nvim), start time,\n" ..
      "program.\n" ..
      "Entries of programs that have ended are removed.",
    sections = { { options = { HELP } } } },
  { name = "mcp", synopsis = "mcp",
    summary = "an MCP server on stdio: agents profile the running programs",
    usage = "mcp",
    about = "Speaks the Model Context Protocol on stdin and stdout (revisions 2025-11-25 and\n" ..
      "2026-07-28), with the tools list_targets, profiler_start, profiler_stop, report,\n" ..
      "trace_start and trace_stop, which drive the programs tecs-profile targets lists.\n" ..
      "Register it in an agent host as the command `tecs-profile mcp`.",
    sections = { { options = { HELP } } } },
  { name = "attach", synopsis = "attach [PID] status|start|stop|report|trace_start|trace_stop",
    summary = "profile a running program from outside",
    usage = "attach [PID] COMMAND [options]",
    about = "Sends COMMAND to the program PID (may be left out when one program is listening)\n" ..
      "and prints its answer. COMMAND is status (is a session running, its samples),\n" ..
      "start (begin sampling), stop (end it: the program writes the profile and answers\n" ..
      "with its file, heaviest functions and zones, and slowest frames) or report (a\n" ..
      "text view of the last profile, or its slowest frames); trace_start and\n" ..
      "trace_stop track JIT trace aborts (the report written as CSV, the most frequent\n" ..
      "sites printed). The program runs commands where it polls (profile.poll(); a\n" ..
      "LÖVE game once per frame).",
    sections = { { options = ATTACH } } },
  { name = "live", synopsis = "live [PID] [--port N] [--open]",
    summary = "a page in the browser that follows a running program",
    usage = "live [PID] [options]",
    about = "Serves a page on 127.0.0.1 that follows the program PID (may be left out when\n" ..
      "one program is listening) and updates itself each second: the frame times, the\n" ..
      "slowest frames with what ran in them, the flamegraph and the heaviest functions\n" ..
      "of its session so far. Prints the page's address, which holds a secret made for\n" ..
      "this run: requests without it are refused. Starts a session when none runs, and\n" ..
      "when it ends (Ctrl-C, SIGTERM) stops that session and prints where the program\n" ..
      "wrote it; the program goes on. It holds the program's channel meanwhile: another\n" ..
      "client (live, attach) is told it is busy.",
    sections = { { options = LIVE } } },
  { name = "report", synopsis = "report [options] FILE",
    summary = "text views of a collapsed-stack file, or the frames of a timeline",
    usage = "report [options] FILE",
    about = "Prints a text view of FILE (collapsed stacks, as written by tecs-profile,\n" ..
      "profile.sample():stop(file) or any collapsed-stack tool). On a timeline (Chrome\n" ..
      "trace events written by run --timeline or :write(\"x.trace.json\")) it prints\n" ..
      "the frames, and with --hitches N the slowest of them.",
    sections = { { options = REPORT }, { title = "View options:", options = M.VIEW } } },
  { name = "flamegraph", synopsis = "flamegraph FILE -o OUT.svg",
    summary = "draw an SVG flamegraph (or write speedscope JSON or pprof)",
    usage = "flamegraph [options] FILE -o OUT",
    about = "Draws FILE (collapsed stacks) as an interactive SVG flamegraph: zone frames\n" ..
      "aqua, leaf frames coloured by VM state. OUT's ending can choose another format:\n" ..
      table.concat(wrap(endings_help(function(d) return picture(d) and d.name ~= "svg" end) ..
        "; `-o -` writes to stdout.", 78), "\n"),
    sections = { { options = FLAMEGRAPH } } },
  { name = "cover", synopsis = "cover [-o FILE] script.lua [args...]",
    summary = "line and function coverage of a Lua program, with the JIT on",
    usage = "cover [options] script.lua [args...]",
    about = "Runs script.lua with `arg` set as luajit would, counting every line and function\n" ..
      "of the Lua files it loads (rewritten with counters as they load, so LuaJIT keeps\n" ..
      "compiling), then writes an lcov file (genhtml, CI) or luacov stats and prints a\n" ..
      "summary. The exit status is 1 if the program raised an error.",
    script = true,
    sections = { { options = COVER } } },
  { name = "busted", synopsis = "busted [busted args...]",
    summary = "run busted's specs under LuaJIT, profiled as a whole",
    usage = "busted [busted args...]",
    about = "Runs busted (its runner, found on package.path or else on this LuaJIT's\n" ..
      "built-in path) in this LuaJIT with the tecs.profile.busted helper: one profile\n" ..
      "of the whole run, split by spec file into zones, written to ./busted.collapsed,\n" ..
      "$TECS_PROFILE or -Xhelper out=FILE (also -Xhelper intervalMs=N,stackDepth=N).\n" ..
      "-Xhelper cover=FILE counts lines instead (coverInclude=, coverExclude= patterns);\n" ..
      "with coverPreloaded=yes the count starts before busted loads anything, so the\n" ..
      "modules busted itself loads (Penlight's pl.*) are counted too.\n" ..
      "Every argument is busted's, except --help alone; `tecs-profile busted -- --help`\n" ..
      "shows busted's own help. The exit status is busted's.",
    passthrough = true,
    sections = { { options = { HELP } } } },
}

--- The command named `name`, or nil.
function M.command(name)
  for _, c in ipairs(M.COMMANDS) do
    if c.name == name then return c end
  end
  return nil
end

--- The option `long` of the command `name` (its declaration), or nil.
function M.option(name, long)
  for _, section in ipairs(assert(M.command(name), "no such command").sections) do
    for _, o in ipairs(section.options) do
      if o[1] == long then return o end
    end
  end
  return nil
end


--- The default an option's help shows: its own `default`, or the declared
-- default of the option `key` of the public function `declared`
-- (`native.options`).
-- @treturn string or nil
function M.declared_default(o)
  if o.default ~= nil then return tostring(o.default) end
  if not o.declared then return nil end
  local ok, native = pcall(require, "tecs.profile.native")
  local v = ok and native.options[o.declared] and native.options[o.declared].defaults[o.key]
  if v == nil then return nil end
  return type(v) == "number" and string.format("%.14g", v) or tostring(v)
end

-- The help lines of one option.
local function option_help(o)
  local left = (o.short and ("  -" .. o.short .. ", ") or "      ") .. "--" .. o[1] .. (o.arg and (" " .. o.arg) or "")
  local out = {}
  local default = M.declared_default(o)
  local lines = wrap(o.help .. (default and (" (default " .. default .. ")") or ""), WIDTH - HELP_COLUMN)
  local indent = string.rep(" ", HELP_COLUMN)
  if #left + 2 <= HELP_COLUMN then
    out[1] = left .. string.rep(" ", HELP_COLUMN - #left) .. lines[1]
  else
    out[1] = left
    out[2] = indent .. lines[1]
  end
  for i = 2, #lines do out[#out + 1] = indent .. lines[i] end
  return table.concat(out, "\n") .. "\n"
end

--- The main usage text (the list of commands).
-- @treturn string
function M.main_usage()
  local width = 0
  for _, c in ipairs(M.COMMANDS) do width = math.max(width, #c.synopsis) end
  local out = { "Usage: tecs-profile <command> [options] ...\n\nCommands:\n" }
  for _, c in ipairs(M.COMMANDS) do
    out[#out + 1] = "  " .. c.synopsis .. string.rep(" ", width - #c.synopsis + 3) .. c.summary .. "\n"
  end
  out[#out + 1] = "\n`tecs-profile <command> --help` describes each command.\n"
  return table.concat(out)
end

--- The usage text of the command named `name`.
-- @tparam string name
-- @treturn string
function M.usage(name)
  local c = assert(M.command(name), "no such command")
  local out = { "Usage: tecs-profile " .. c.usage .. "\n\n" .. c.about .. "\n" }
  for _, section in ipairs(c.sections) do
    out[#out + 1] = "\n" .. (section.title and (section.title .. "\n") or "")
    for _, o in ipairs(section.options) do out[#out + 1] = option_help(o) end
  end
  return table.concat(out)
end

--- The options of the command named `name`, by "--long" and "-x" spelling.
-- @tparam string name
-- @treturn table
function M.by_spelling(name)
  local by = {}
  for _, section in ipairs(assert(M.command(name), "no such command").sections) do
    for _, o in ipairs(section.options) do
      by["--" .. o[1]] = o
      if o.short then by["-" .. o.short] = o end
    end
  end
  return by
end

return M
