--- What the command line's commands do: `run`, `report`, `flamegraph`,
-- `cover`, `busted`, and `love`, `targets`, `attach`, `mcp`.
-- Each takes the parsed options and positional arguments and returns the
-- exit code, or raises a usage error through `usage_error`.
-- @module tecs.profile.cli.commands

local options = require("tecs.profile.cli.options")
local env = require("tecs.profile.cli.program")

local M = {}

--- The error raised for wrong usage: a table `{ msg = ... }` with this metatable.
M.UsageError = {}

--- Raise a usage error (the caller prints it with the command's usage).
-- @tparam string fmt `string.format` format
function M.usage_error(fmt, ...)
  error(setmetatable({ msg = string.format(fmt, ...) }, M.UsageError), 0)
end

local usage_error = M.usage_error

local function view_options(opts)
  local o = {}
  for _, s in ipairs(options.VIEW) do
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

-- The text of `path` when it holds a JSON object (a timeline: Chrome
-- trace files we write are objects), else nil (a collapsed file, whose
-- first frame may well start with "[", as "[C]" or "[truncated stack]"
-- do), and the error when it cannot be read.
local function time_line_file(path)
  local text, err = read_file(path)
  if text and text:match("^%s*{") then return text end
  return nil, err
end

-- `report` on a timeline: its frames, or with `--hitches N` its slowest
-- frames; nil after saying why not.
local function trace_report(path, text, opts)
  local timeline = require("tecs.profile.timeline")
  local given = {}
  for _, s in ipairs(options.VIEW) do
    if opts[s.key] ~= nil then given[#given + 1] = "--" .. s[1] end
  end
  if opts.aborts then given[#given + 1] = "--aborts" end
  if #given > 0 then
    io.stderr:write("tecs-profile: ", path, " is a timeline: ", table.concat(given, ", "),
      " need", #given == 1 and "s" or "", " a collapsed-stack file (tecs-profile run -o FILE, or ",
      ':write("x.collapsed")); a timeline gives its frames, and --hitches N\n')
    return nil
  end
  local trace, err = timeline.read_trace(text)
  if not trace then
    io.stderr:write("tecs-profile: ", path, ": ", clean(err), "\n")
    return nil
  end
  if opts.hitches then
    local ok, out = pcall(timeline.trace_hitches, trace, opts.hitches)
    if not ok then io.stderr:write("tecs-profile: ", path, ": ", clean(out), "\n") return nil end
    return timeline.hitches_text(out, #trace.frames)
  end
  return timeline.frames_text(trace) ..
    "(--hitches N: the N slowest frames and what ran in them; the other views need a collapsed-stack file)\n"
end

--- `report FILE`: a text view of a collapsed-stack file, or with
-- `--aborts CSV` its hot aborts; on a timeline (Chrome trace events) its
-- frames, or with `--hitches N` its slowest frames.
-- @tparam table opts parsed options
-- @tparam table pos positional arguments
-- @treturn number exit code
function M.report(opts, pos)
  if #pos ~= 1 then usage_error("report needs exactly one FILE (got %d)", #pos) end
  local report = require("tecs.profile.report")
  local text
  if opts.hitches ~= nil and (opts.hitches < 1 or opts.hitches ~= math.floor(opts.hitches)) then
    usage_error("--hitches needs a positive integer, got %s", tostring(opts.hitches))
  end
  if opts.hitches and opts.aborts then usage_error("--hitches and --aborts cannot be given together") end
  local timeline_text, read_err = time_line_file(pos[1])
  if timeline_text then
    text = trace_report(pos[1], timeline_text, opts)
    if not text then return 1 end
  elseif opts.hitches and read_err then
    io.stderr:write("tecs-profile: cannot read '", pos[1], "': ", tostring(read_err), "\n")
    return 1
  elseif opts.hitches then
    io.stderr:write("tecs-profile: --hitches needs a timeline file written by --timeline or ",
      ':write("x.trace.json"); ', pos[1], " is not one\n")
    return 1
  elseif opts.aborts then
    local csv, err = read_file(opts.aborts)
    if not csv then io.stderr:write("tecs-profile: cannot read '", opts.aborts, "': ", tostring(err), "\n") return 1 end
    local trace, perr = require("tecs.profile.trace.report").read_csv(csv)
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

--- `flamegraph FILE -o OUT`: an SVG flamegraph, or another format written
-- from a profile (speedscope, pprof, Firefox Profiler).
-- @tparam table opts parsed options
-- @tparam table pos positional arguments
-- @treturn number exit code
function M.flamegraph(opts, pos)
  if #pos ~= 1 then usage_error("flamegraph needs exactly one FILE (got %d)", #pos) end
  if not opts.output then usage_error("flamegraph needs -o OUT") end
  local report = require("tecs.profile.report")
  local output = require("tecs.profile.output")
  -- Standard output has no extension to go by: it gets the SVG unless -f says otherwise.
  local fmt = output.format_for(opts.output == "-" and "-.svg" or opts.output, opts.format)
  local allowed = options.flamegraph_formats()
  local known = false
  for _, name in ipairs(allowed) do known = known or name == fmt end
  if not known then usage_error("--format must be %s, got %q", options.either(allowed), fmt) end
  local ok, out = pcall(report.render, pos[1], fmt, { title = opts.title, inverted = opts.inverted, zone = opts.zone,
    frames = opts.functions and "function" or nil, intervalMs = opts.intervalMs, root = opts.root })
  if not ok then io.stderr:write("tecs-profile: ", clean(out), "\n") return 1 end
  local wok, err = write_file(opts.output, out)
  if not wok then io.stderr:write("tecs-profile: ", err, "\n") return 1 end
  -- A collapsed file does not record its sampling interval: without -i the
  -- numbers that stand for time are sample counts, where a session's files
  -- are in time.
  local note = output.declaration(fmt).withoutInterval
  if note and not opts.intervalMs then
    io.stderr:write("tecs-profile: note: ", pos[1], " does not record its sampling interval, so ", note,
      "; -i MS gives them in time (tecs-profile run -o and SampleSession:stop do this themselves)\n")
  end
  return 0
end

--- `targets`: the programs listening (see `tecs.profile.cli.attach`).
function M.targets(opts, pos)
  return require("tecs.profile.cli.attach").targets(opts, pos, usage_error)
end

--- `mcp`: an MCP server on stdin and stdout for agents (see `tecs.profile.mcp`).
function M.mcp(_, pos)
  if #pos > 0 then usage_error("mcp takes no argument (got %q)", pos[1]) end
  return require("tecs.profile.mcp").serve()
end

--- `love GAME [args...]`: an unmodified LÖVE game with the control
-- channel open (see `tecs.profile.cli.love`); returns only if love could
-- not be started.
function M.love(opts, pos)
  return require("tecs.profile.cli.love").run(opts, pos, usage_error)
end

--- `live [PID]`: a page on 127.0.0.1 that follows a listening program
-- (see `tecs.profile.cli.live`).
function M.live(opts, pos)
  return require("tecs.profile.cli.live").live(opts, pos, usage_error)
end

--- `attach [PID] COMMAND`: one command to a listening program.
function M.attach(opts, pos)
  return require("tecs.profile.cli.attach").attach(opts, pos, usage_error)
end

-- Runs `program` (a coroutine of the script's chunk) with `script_args` to
-- its end. `finish` runs once, when the program ends or calls os.exit
-- (which then exits with the status), and returns false when something it
-- had to write failed. Returns the exit status: 1 when the program raised
-- an error or `finish` failed.
local function run_to_end(program, script_args, finish)
  local finished, failed = false, false
  local function finish_once()
    if finished then return end
    finished = true
    if finish() == false then failed = true end
    io.stdout:flush()
  end
  -- A program that ends with os.exit still gets its profile.
  local real_exit = os.exit
  os.exit = function(code, ...)
    finish_once()
    if code == nil or code == true then code = failed and 1 or 0 end
    return real_exit(code, ...)
  end
  local ok, err = coroutine.resume(program, unpack(script_args, 1, #script_args))
  os.exit = real_exit
  if ok and coroutine.status(program) ~= "dead" then
    -- What luajit says of a yield outside any coroutine.
    ok, err = false, "attempt to yield across C-call boundary"
  end
  if not ok then
    io.stderr:write(debug.traceback(program, tostring(err)), "\n")
    failed = true
  end
  finish_once()
  return failed and 1 or 0
end

-- The sampling options `run --listen` leaves to `attach start`.
local NOT_WITH_LISTEN = { "intervalMs", "stackDepth", "zoneFilter", "clock", "precision", "nativeFrames", "output",
  "format",
  "reportFile", "quiet", "trace", "traceOutput", "timeline", "hitches", "slowFrameMs" }

-- `run --listen script.lua [args...]`: the program run with the control
-- channel open. It runs on a coroutine of its own, as under `run`, so that
-- the stacks of a session started through the channel hold its frames only.
-- A session still running at its end is stopped and written to the
-- control directory.
local function run_listening(opts, pos)
  for _, key in ipairs(NOT_WITH_LISTEN) do
    if opts[key] ~= nil then
      local spelled
      for _, o in pairs(options.by_spelling("run")) do
        if o.key == key then spelled = "--" .. o[1] end
      end
      usage_error("%s cannot be given with --listen (attach start takes the sampling options)", spelled)
    end
  end
  local script = pos[1]
  local chunk, lerr = loadfile(script)
  if not chunk then io.stderr:write("tecs-profile: ", tostring(lerr), "\n") return 1 end
  local script_args = {}
  for k = 2, #pos do script_args[k - 1] = pos[k] end
  local listen = require("tecs.profile.listen")
  -- The launcher's own thread (the main one) runs before and after the
  -- program's coroutine: a session a client starts skips it.
  local native = require("tecs.profile.native")
  local lok, info = pcall(listen.listen, { program = script, wake = true, skipThread = native.raw.currentThread() })
  if not lok then io.stderr:write("tecs-profile: ", clean(info), "\n") return 1 end
  if not info.woken then
    io.stderr:write("tecs-profile: note: commands run where the program calls profile.poll() (",
      tostring(info.whyNotWoken), ")\n")
  end
  env.enter(env.arg(script, script_args))
  return run_to_end(coroutine.create(chunk), script_args, function()
    local path, err = listen.finish_session()
    listen.close()
    if path then
      io.stderr:write("tecs-profile: the session started through the channel ran to the program's end: ", path, "\n")
    elseif err then
      io.stderr:write("tecs-profile: ", err, "\n")
      return false
    end
    return true
  end)
end

--- `run script.lua [args...]`: profile a whole program, then report.
-- @tparam table opts parsed options
-- @tparam table pos the script and its arguments
-- @treturn number exit code (1 when the program or an output failed)
function M.run(opts, pos)
  if #pos < 1 then usage_error("run needs a script") end
  if opts.listen then return run_listening(opts, pos) end
  local script = pos[1]
  local profile = require("tecs.profile")
  local report = require("tecs.profile.report")
  local output = require("tecs.profile.output")
  if opts.format and (opts.format == "auto" or not output.is_format(opts.format)) then
    usage_error("--format must be %s, got %q", output.format_list():gsub('"auto" or ', ""), tostring(opts.format))
  end
  if opts.hitches ~= nil and (opts.hitches < 1 or opts.hitches ~= math.floor(opts.hitches)) then
    usage_error("--hitches needs a positive integer, got %s", tostring(opts.hitches))
  end
  -- Check the view options before the program runs, not after.
  local vopts = view_options(opts)
  local vok, verr = pcall(report.report, "", vopts)
  if not vok then usage_error("%s", clean(verr):gsub("^profile%.report: ", "")) end

  local chunk, lerr = loadfile(script)
  if not chunk then io.stderr:write("tecs-profile: ", tostring(lerr), "\n") return 1 end

  local script_args = {}
  for k = 2, #pos do script_args[k - 1] = pos[k] end
  env.enter(env.arg(script, script_args))

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

  -- The program runs on a coroutine of its own and the session skips the
  -- samples of this (the starting) thread: the stacks hold the program's
  -- frames only, its main chunk outermost, and the
  -- launcher's work before and after the program is not sampled.
  local program = coroutine.create(chunk)
  local ok_s, session = pcall(profile.sample, {
    intervalMs = opts.intervalMs, stackDepth = opts.stackDepth, zone = opts.zoneFilter, clock = opts.clock,
    precision = opts.precision, skipStartingThread = true, slowFrameMs = opts.slowFrameMs,
    nativeFrames = opts.nativeFrames,
  })
  if not ok_s then usage_error("%s", clean(session)) end

  local function finish()
    local failed = false
    session:stop()
    local trace_report
    if tsession then
      local ok, r = pcall(tsession.stop, tsession)
      if ok then trace_report = r else io.stderr:write("tecs-profile: trace: ", clean(r), "\n") end
    end
    if opts.output then
      local ok, err = pcall(session.write, session, opts.output, opts.format)
      if not ok then io.stderr:write("tecs-profile: ", clean(err), "\n") failed = true end
    end
    if opts.timeline then
      local fmt = output.format_for(opts.timeline)
      if not output.is_timeline_format(fmt) then fmt = "chrome-trace" end
      local ok, err = pcall(session.write, session, opts.timeline, fmt)
      if not ok then io.stderr:write("tecs-profile: ", clean(err), "\n") failed = true end
    end
    local out = {}
    if not opts.quiet then
      -- The annotated source shows the tracker's abort sites, compiled
      -- shares and traces under their lines when both ran.
      if vopts.annotate and trace_report then vopts.trace = trace_report end
      local ok, text = pcall(report.report, session, vopts)
      out[#out + 1] = ok and text or ("tecs-profile: " .. clean(text) .. "\n")
    end
    if opts.hitches then
      local ok, text = pcall(function()
        local tl = require("tecs.profile.timeline")
        return tl.hitches_text(session:hitches(opts.hitches), #session:frames())
      end)
      out[#out + 1] = (#out > 0 and "\n" or "") .. (ok and text or ("tecs-profile: " .. clean(text) .. "\n"))
    end
    if trace_report then
      if opts.traceOutput then
        local ok, err = write_file(opts.traceOutput, tostring(trace_report))
        if not ok then io.stderr:write("tecs-profile: ", err, "\n") failed = true end
      end
      local ok, text = pcall(report.hotAborts, session, trace_report, { raw = opts.raw })
      out[#out + 1] = "\n" .. (ok and text or ("tecs-profile: " .. clean(text) .. "\n"))
    end
    -- The report goes to stderr (or --report FILE): stdout is the program's.
    local text = table.concat(out)
    if text ~= "" then
      if opts.reportFile then
        local ok, err = write_file(opts.reportFile, text)
        if not ok then io.stderr:write("tecs-profile: ", err, "\n") failed = true end
      else
        io.stdout:flush()
        io.stderr:write(text)
      end
    end
    return not failed
  end

  return run_to_end(program, script_args, finish)
end

--- `cover [options] script.lua [args]`: the script run under a coverage
-- session; the counts are written when it ends (also through os.exit).
-- @tparam table opts parsed options
-- @tparam table pos the script and its arguments
-- @treturn number exit code
function M.cover(opts, pos)
  if #pos < 1 then usage_error("cover needs a script") end
  local script, out = pos[1], opts.output or options.option("cover", "output").default
  local report = require("tecs.profile.coverage.report")
  local format = opts.format or report.format_for(out)
  if type(report[format]) ~= "function" or format == "format_for" then
    usage_error("--format must be %s, got %q", table.concat(report.formats, " or "), tostring(format))
  end
  local ok_s, session = pcall(require("tecs.profile").coverage, { include = opts.include, exclude = opts.exclude })
  if not ok_s then usage_error("%s", clean(session)) end
  local chunk, lerr = loadfile(script)
  if not chunk then
    session:stop()
    io.stderr:write("tecs-profile: ", tostring(lerr), "\n")
    return 1
  end
  local script_args = {}
  for k = 2, #pos do script_args[k - 1] = pos[k] end
  env.enter(env.arg(script, script_args))

  local finished, status = false, 0
  local function finish()
    if finished then return end
    finished = true
    session:stop()
    local ok, err = pcall(session.write, session, out, format)
    if not ok then
      io.stderr:write("tecs-profile: ", clean(err), "\n")
      status = 1
      return
    end
    local st = session:stats()
    io.stderr:write(string.format("tecs-profile cover: %d of %d lines (%.1f%%), %d of %d functions in %d chunks; %s\n",
      st.linesHit, st.lines, st.lines > 0 and 100 * st.linesHit / st.lines or 0, st.functionsHit, st.functions,
      st.chunks, out))
    for _, s in ipairs(st.skipped) do io.stderr:write("tecs-profile cover: ", s.name, ": ", s.reason, "\n") end
  end
  local real_exit = os.exit
  os.exit = function(code, ...)
    finish()
    if code == nil or code == true then code = status end
    return real_exit(code, ...)
  end
  local ok, err = xpcall(function() return chunk(unpack(script_args, 1, #script_args)) end, debug.traceback)
  os.exit = real_exit
  if not ok then
    io.stderr:write(tostring(err), "\n")
    status = 1
  end
  finish()
  return status
end

-- The path of the `busted` command on PATH (what `arg[0]` holds under
-- `luajit $(command -v busted)`), or "busted".
local function busted_command()
  for dir in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    local f = io.open(dir .. "/busted", "r")
    if f then
      f:close()
      return dir .. "/busted"
    end
  end
  return "busted"
end

--- `busted [busted args]`: busted's runner in this LuaJIT, with the
-- `tecs.profile.busted` helper loaded; the process exits as busted does.
-- @tparam table opts parsed options (none: every argument is busted's)
-- @tparam table pos busted's arguments
-- @treturn number exit code
function M.busted(opts, pos)
  for _, a in ipairs(pos) do
    local name = a:match("^(%-%-[%w-]+)")
    if name == "--helper" then
      usage_error("busted's helper is tecs.profile.busted here: %s cannot be given (helper arguments go in -Xhelper)", a)
    elseif name == "--lua" then
      usage_error("busted runs in this LuaJIT here: %s cannot be given", a)
    end
  end
  -- coverPreloaded=yes: the coverage session starts before busted's runner
  -- loads its modules (Penlight's pl.* among them), so a module busted and
  -- the specs share is rewritten at its one load and every call counts.
  -- The helper finds the session running and writes it at busted's exit.
  local busted_args = require("tecs.profile.host.busted_args")
  local ok_args, settings = pcall(busted_args.parse, busted_args.from_command_line(pos))
  if not ok_args then usage_error("%s", tostring(settings)) end
  if settings.coverPreloaded == "yes" and busted_args.covers(settings) then
    local ok_cov, err = pcall(require("tecs.profile").coverage, busted_args.coverage_options(settings))
    if not ok_cov then usage_error("%s", clean(err)) end
  end
  local found, runner = pcall(require, "busted.runner")
  if not found then
    -- LUA_PATH may hold a rock tree alone: busted installed where this
    -- LuaJIT looks by itself (Debian's lua-busted) is still found.
    local path, cpath = require("tecs.profile.cli.jitpath").builtin_paths()
    if path then
      package.path, package.cpath = package.path .. ";" .. path, package.cpath .. ";" .. cpath
      env.extend(path, cpath)
      found, runner = pcall(require, "busted.runner")
    end
  end
  if not found then
    io.stderr:write("tecs-profile: cannot load busted's runner (busted.runner) in this LuaJIT: ",
      clean(runner):match("^[^\n]*"), "\n",
      "install busted for Lua 5.1 (Debian: lua-busted; or luarocks --lua-version=5.1 install busted)",
      " and keep its directory on LUA_PATH\n")
    return 1
  end
  -- busted parses its arguments with the helper among them; the helper
  -- then gives the specs the arguments of a plain `luajit busted ...`.
  local command = busted_command()
  local parsed = { "--helper=tecs.profile.busted" }
  for _, a in ipairs(pos) do parsed[#parsed + 1] = a end
  env.enter_runner(env.arg(command, parsed), env.arg(command, pos))
  -- The busted script itself where it is a Lua file (Debian's is): the
  -- same frames and the same exit as under `luajit /usr/bin/busted`. A
  -- runner called from a script file raises an error with no message when
  -- specs fail, which luajit turns into exit code 1.
  local script = loadfile(command)
  if script then
    -- The script's `...` is busted's arguments, as luajit gives them.
    local ok, err = pcall(script, unpack(pos, 1, #pos))
    if not ok then
      if err ~= nil then io.stderr:write(tostring(err), "\n") end
      return 1
    end
    return 0
  end
  -- Elsewhere (a wrapper shell script, or no busted command on PATH): the
  -- runner called by pcall, a C function, finds no script file in the frame
  -- that called it, so it names itself busted and ends the process with
  -- os.exit when specs fail. No chunk of ours stands in for the script:
  -- one would be the root frame of every sample, under a file name that
  -- does not exist.
  local ok, err = pcall(runner, { standalone = false })
  if not ok then
    io.stderr:write(tostring(err), "\n")
    return 1
  end
  return 0
end

return M
