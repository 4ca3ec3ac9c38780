--- Neovim: the `:TecsProfile` command and profiling of the editor's
-- startup (see docs/neovim.md). `plugin/tecs_profile.lua` defines the
-- command and loads this module on its first use.
--
--    :TecsProfile start [option=value ...]   sample (profile.sample's options)
--    :TecsProfile stop [FILE [plugin]]       stop; write FILE (by its ending),
--                                            `plugin`: under a root level per plugin
--    :TecsProfile report [GROUP]             a view in a scratch buffer
--    :TecsProfile trace [FILE]               start, or stop and show, trace-abort tracking
--    :TecsProfile cover [FILE]               start, or stop and show, line coverage
--    :TecsProfile listen | close             the control channel (tecs-profile attach, mcp)
--
-- Errors are Neovim messages at level ERROR, never a stack trace, however
-- the command was run (see `notify`). Views name the plugin of each frame
-- from the runtime path (`tecs.profile.host.nvim`'s `plugins`).
-- @module tecs.profile.host.nvim_commands

local M = {}

--- The subcommands, in the order completion offers them.
M.SUBCOMMANDS = { "start", "stop", "report", "trace", "cover", "listen", "close" }

--- Rows of the plugin summary a stop shows.
M.SUMMARY_ROWS = 5

-- The sampling session of the command (running, or the last one stopped),
-- the trace-abort tracker and the coverage session while they run.
local sampling, tracing, covering

local function profile() return require("tecs.profile") end
local function host() return require("tecs.profile.host.nvim") end

-- A failure the user made: said as a message, without a location.
local function fail(fmt, ...)
  error({ message = string.format(fmt, ...) }, 0)
end

-- The message of an error: the library's own, without the "file:line: "
-- where it was raised, nor a method's name (`SampleSession:write: `), which
-- the command's user did not call.
local function message(err)
  if type(err) == "table" and err.message then return err.message end
  return (tostring(err):gsub("^[^\n]-:%d+: ", ""):gsub("^%u[%w_]*:[%l_][%w_]*: ", ""))
end

-- Whether `vim.notify` is Neovim's own (not nvim-notify's, noice's...):
-- a function of the runtime's `vim/` modules (built in, or read from
-- $VIMRUNTIME/lua/vim/).
local function builtin_notify()
  if type(vim.notify) ~= "function" then return false end
  local info = debug.getinfo(vim.notify, "S")
  local source = info and info.source or ""
  local runtime = vim.env.VIMRUNTIME
  return source:match("^@vim/") ~= nil
    or (type(runtime) == "string" and runtime ~= "" and source:find("@" .. runtime .. "/lua/vim/", 1, true) == 1)
end

-- Says `text` at `level` (INFO by default). Neovim's own vim.notify says an
-- ERROR with an `:echoerr`-like error, which inside a command run by
-- another's Lua (lazy.nvim's `cmd` handler runs the real command with
-- vim.cmd) becomes a Lua error, shown with a stack trace: with that
-- vim.notify an error is echoed in ErrorMsg's colours and kept in
-- :messages instead, which nothing turns into an error.
local function notify(text, level)
  level = level or vim.log.levels.INFO
  text = "tecs-profile: " .. text
  if level == vim.log.levels.ERROR and builtin_notify() then
    vim.api.nvim_echo({ { text, "ErrorMsg" } }, true, {})
  else
    vim.notify(text, level)
  end
end

-- `key=value` words as an options table: numbers and booleans as such.
local function parse_options(words)
  local opts = {}
  for _, w in ipairs(words) do
    local k, v = w:match("^([%a_][%w_]*)=(.*)$")
    if not k then fail("start: '%s' is not option=value (e.g. intervalMs=0.5)", w) end
    if v == "true" then
      opts[k] = true
    elseif v == "false" then
      opts[k] = false
    else
      opts[k] = tonumber(v) or v
    end
  end
  return opts
end

-- The buffer named `bufname`, or nil.
local function buffer_named(bufname)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(buf) == bufname then return buf end
  end
  return nil
end

-- Shows `text` in the scratch buffer `tecs-profile://NAME`: the one a
-- previous command showed, in its window if it has one, or a new one in a
-- new window.
local function show(name, text)
  local bufname = "tecs-profile://" .. name
  local buf = buffer_named(bufname)
  if buf and vim.fn.bufwinid(buf) ~= -1 then
    vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
  elseif buf then
    vim.cmd("sbuffer " .. buf)
  else
    vim.cmd("new")
    buf = vim.api.nvim_get_current_buf()
    vim.bo[buf].buftype = "nofile"
    vim.bo[buf].bufhidden = "wipe"
    vim.bo[buf].swapfile = false
    vim.api.nvim_buf_set_name(buf, bufname)
  end
  local lines = vim.split(text:gsub("\n$", ""), "\n", { plain = true })
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  return buf
end

-- The plugin view of `source` and the rest of its options.
local function view(source, opts)
  opts.plugins = host().plugins()
  return profile().report(source, opts)
end

-- The time the session `s` samples: "CPU" or "wall", as its `clock`.
local function clock_name(s)
  return s.clock == "wall" and "wall" or "CPU"
end

-- What a stop says: samples, the time of the session's clock, and the
-- heaviest plugins.
local function summary(s)
  local st = s:stats()
  local text = view(s, { by = "plugin", limit = M.SUMMARY_ROWS, minPercent = 1 })
  local rows = {}
  for share, name in text:gmatch("\n%s*([%d.]+%%) ±[%d.]+%s+[%d.]+%% ±[%d.]+%s+([^\n]+)") do
    rows[#rows + 1] = name .. " " .. share
  end
  local clock = clock_name(s)
  local sec = clock == "wall" and st.durationSec or st.cpuSec
  return string.format("%d samples in %.2f s of %s time; by plugin (self): %s", st.samples, sec or 0, clock,
    #rows > 0 and table.concat(rows, ", ") or "none")
end

-- Writes the stopped session `s` to `path`: the session's own file, or
-- with `root` "plugin" every stack under a root frame naming its plugin.
local function write(s, path, root)
  if root == nil then
    s:write(path)
    return
  end
  local output = require("tecs.profile.output")
  local format = output.format_for(path, "auto")
  local content = profile().render(s, format, { root = root, plugins = host().plugins(),
    intervalMs = s.intervalMs, title = "Neovim" })
  local fs = require("tecs.profile.fs")
  local ok, err = fs.write_atomic(path, content)
  if not ok then fail("%s", err) end
  if format == "collapsed" then
    -- The functions beside it, named as the editor names them (the
    -- runtime's sources are on its runtime path, which a report made
    -- elsewhere does not read), as `SampleSession:write` writes them.
    local prof = s._native:profile()
    local functions = prof:functionsFile(require("tecs.profile.funcmap").build(prof:files()))
    if functions then
      ok, err = fs.write_atomic(path .. require("tecs.profile.native").functionsFileEnding, functions)
      if not ok then fail("%s", err) end
    end
  end
end

local commands = {}

function commands.start(args)
  if sampling and sampling:isRunning() then fail("a session is already running: :TecsProfile stop first") end
  sampling = profile().sample(parse_options(args))
  notify(string.format("sampling every %g ms of %s time (%s precision); :TecsProfile stop [file] ends it",
    sampling.intervalMs, clock_name(sampling), sampling:stats().precision))
end

function commands.stop(args)
  if not (sampling and sampling:isRunning()) then fail("no session is running: :TecsProfile start first") end
  local path, root = args[1], args[2]
  if root ~= nil and root ~= "plugin" then fail("stop: '%s' is not 'plugin' (stop FILE plugin)", root) end
  if args[3] then fail("stop takes a file and 'plugin' at most") end
  sampling:stop()
  local text = summary(sampling)
  if path then
    local ok, err = pcall(write, sampling, vim.fn.expand(path), root)
    if not ok then fail("%s (the profile is kept: :TecsProfile report shows it)", message(err)) end
    text = text .. "; written to " .. vim.fn.expand(path)
  end
  notify(text .. "; :TecsProfile report shows more")
end

function commands.report(args)
  if not sampling then fail("no profile yet: :TecsProfile start, then stop") end
  if args[2] then fail("report takes one grouping at most") end
  local text
  if args[1] then
    text = view(sampling, { by = args[1] })
  else
    text = view(sampling, { by = "plugin" }) .. "\n" .. view(sampling, { by = "function" })
  end
  show("report", text)
end

function commands.trace(args)
  if not tracing then
    if args[1] then fail("trace: a file is given when tracking stops (:TecsProfile trace, then trace FILE)") end
    tracing = profile().trace()
    notify("tracking trace aborts; :TecsProfile trace [file] stops and shows them")
    return
  end
  local t = tracing
  tracing = nil
  local report = t:stop(args[1] and vim.fn.expand(args[1]) or nil)
  show("trace", report:csv())
end

function commands.cover(args)
  if not covering then
    if args[1] then fail("cover: a file is given when counting stops (:TecsProfile cover, then cover FILE)") end
    covering = profile().coverage()
    notify("counting lines of the Lua files loaded from now on; :TecsProfile cover [file] stops and shows them")
    return
  end
  local c = covering
  covering = nil
  c:stop(args[1] and vim.fn.expand(args[1]) or nil)
  local lines = {}
  for name, file in pairs(c:files()) do
    local n, hit = 0, 0
    for _, count in pairs(file.lines) do
      n = n + 1
      if count > 0 then hit = hit + 1 end
    end
    lines[#lines + 1] = string.format("%6.1f%%  %5d/%-5d  %s", n > 0 and 100 * hit / n or 0, hit, n, name)
  end
  table.sort(lines, function(a, b) return a:sub(18) < b:sub(18) end)
  table.insert(lines, 1, "# lines run / lines, by chunk loaded while counting")
  show("coverage", table.concat(lines, "\n"))
end

function commands.listen(args)
  if args[1] then fail("listen takes no argument") end
  local info = profile().listen()
  notify("listening on " .. info.socket .. " (tecs-profile targets, attach, mcp)")
end

function commands.close(args)
  if args[1] then fail("close takes no argument") end
  local listen = package.loaded["tecs.profile.listen"]
  if not (listen and listen.listening()) then
    notify("not listening: nothing to close (:TecsProfile listen opens the control channel)", vim.log.levels.WARN)
    return
  end
  profile().close()
  notify("stopped listening: the control channel is closed")
end

--- Runs `:TecsProfile` with its words; a failure is an error message.
-- @tparam table args the words after the command's name
function M.command(args)
  local sub = args[1]
  local ok, err = pcall(function()
    if not sub then fail("which? %s", table.concat(M.SUBCOMMANDS, ", ")) end
    local run = commands[sub]
    if not run then fail("unknown subcommand '%s' (known: %s)", sub, table.concat(M.SUBCOMMANDS, ", ")) end
    run({ select(2, unpack(args)) })
  end)
  if not ok then notify(message(err), vim.log.levels.ERROR) end
end

--- `profile.sample`'s options `:TecsProfile start` does not offer, with
-- why: they do not apply to the editor or cannot be typed.
M.NOT_OFFERED = {
  loveZones = "LÖVE's callbacks only",
  skipThread = "takes a coroutine, not a word",
  skipStartingThread = "for tecs-profile run: the editor's Lua runs on the thread that starts the session",
}

-- The values completion offers after `:TecsProfile SUB`.
local function candidates(sub, words)
  local ok, native = pcall(require, "tecs.profile.native")
  if sub == "start" then
    local out = {}
    for _, name in ipairs(ok and native.options.sample.names or {}) do
      if not M.NOT_OFFERED[name] then out[#out + 1] = name .. "=" end
    end
    return out
  elseif sub == "report" then
    return ok and native.options.report.choices.by or {}
  elseif sub == "stop" and words == 1 then
    return { "plugin" }
  end
  return nil
end

--- Completion of `:TecsProfile` (the `complete` of the user command).
function M.complete(arglead, cmdline)
  local words = vim.split(cmdline, "%s+", { trimempty = true })
  -- The words before the one being typed, the command's name first.
  local before = #words - (arglead ~= "" and 1 or 0)
  local list
  if before <= 1 then
    list = M.SUBCOMMANDS
  else
    list = candidates(words[2], before - 2)
    if not list then return vim.fn.getcompletion(arglead, "file") end
  end
  local out = {}
  for _, c in ipairs(list) do
    if c:sub(1, #arglead) == arglead then out[#out + 1] = c end
  end
  return out
end

--- Profiles the editor's startup: a session starts now and stops once
-- `VimEnter` has run, and its profile goes to `path` with a root level per
-- plugin; a summary of the heaviest plugins is shown. Meant to run before
-- init.lua: `TECS_PROFILE_STARTUP=path nvim --cmd 'source .../plugin/tecs_profile.lua'`
-- (docs/neovim.md).
-- @tparam string path where the profile goes (its ending chooses the format)
-- @tparam[opt] table opts `profile.sample`'s options
function M.startup(path, opts)
  local clock = opts and opts.clock
  if clock ~= nil and clock ~= "cpu" and clock ~= "wall" then
    notify(string.format("startup: TECS_PROFILE_STARTUP_CLOCK must be \"cpu\" or \"wall\" (got %q): not profiled",
      tostring(clock)), vim.log.levels.ERROR)
    return
  end
  local ok, err = pcall(function()
    sampling = profile().sample(opts)
  end)
  if not ok then
    notify("startup: " .. message(err), vim.log.levels.ERROR)
    return
  end
  local s = sampling
  vim.api.nvim_create_autocmd("VimEnter", { once = true, callback = function()
    -- Scheduled: what other VimEnter handlers run or schedule is startup too.
    vim.schedule(function()
      if not s:isRunning() then return end
      local wok, werr = pcall(function()
        s:stop()
        write(s, path, "plugin")
      end)
      if not wok then
        notify("startup: " .. message(werr) .. " (:TecsProfile report shows the profile)", vim.log.levels.ERROR)
        return
      end
      notify("startup: " .. summary(s) .. "; written to " .. path)
    end)
  end })
end

return M
