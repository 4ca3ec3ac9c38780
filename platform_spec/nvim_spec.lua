-- Neovim (Debian's `neovim`, headless): the package installed as a plain
-- `packpath` plugin (`make nvim` puts the module at lua/tecs/profile/native.so),
-- the :TecsProfile commands, startup profiling of a configuration with real
-- plugins, time by plugin against measured truth, the control channel and
-- an MCP session against a running editor, and the autosave of an editor
-- stuck in a Lua loop and killed. The real plugins come from PyPI's
-- nvim-zsh-profile (scripts/nvim-plugins.sh). A check that fails inside
-- the editor exits with `cq` (a Lua error would not set the exit status).
local collapsed = require("spec.support.collapsed")
local run = require("spec.support.run")
local sampling = require("spec.support.sampling")

local root = run.root
local q = run.quote
local fixtures = root .. "/platform_spec/fixtures/nvim"
local cli = "luajit " .. q(root .. "/bin/tecs-profile")
-- The editor under test: Debian's `nvim` unless TECS_TEST_NVIM names another
-- (scripts/test.sh runs the suite again on the Neovim of scripts/nvim-latest.sh).
local NVIM = q(os.getenv("TECS_TEST_NVIM") or "nvim")

-- The real plugins the suite loads (all run on Neovim 0.7).
local REAL_PLUGINS = { "plenary.nvim", "Comment.nvim", "lualine.nvim", "nui.nvim", "catppuccin", "bufferline.nvim",
  "flash.nvim" }

local base -- the run's directory: XDG directories, control directory, outputs
local ctl -- the control directory
local pack -- the package directory the plugins are in

-- The environment of every editor and command of the suite.
local function env(extra)
  local words = { "env -u LUA_PATH -u LUA_CPATH", "XDG_DATA_HOME=" .. q(base .. "/data"),
    "XDG_STATE_HOME=" .. q(base .. "/state"), "XDG_CACHE_HOME=" .. q(base .. "/cache"),
    "TECS_PROFILE_DIR=" .. q(ctl) }
  for k, v in pairs(extra or {}) do words[#words + 1] = k .. "=" .. q(v) end
  return table.concat(words, " ")
end

-- What every script run in an editor starts with: `check(cond, fmt, ...)`
-- exits with `cq 3` and the message on stderr; `save(t)` writes the
-- result the spec reads; vim.notify's messages are kept in `messages`.
local PRELUDE = [[
local RESULT = os.getenv("TECS_TEST_RESULT")
local function check(cond, fmt, ...)
  if not cond then
    io.stderr:write("check failed: ", string.format(fmt, ...), "\n")
    vim.cmd("cq 3")
  end
  return cond
end
local function save(t)
  local f = assert(io.open(RESULT, "w"))
  f:write("return ", vim.inspect(t), "\n")
  f:close()
end
local messages = {}
vim.notify = function(text, level) messages[#messages + 1] = { text = text, level = level } end
local function spin_for(seconds, fn)
  local t0 = os.clock()
  while os.clock() - t0 < seconds do fn() end
  return os.clock() - t0
end
]]

local scripts = 0
-- Runs `body` (Lua, after PRELUDE) in a headless editor with the plain
-- configuration (no init.lua); returns the exit code, the output and what
-- the script saved.
local function nvim(body, opts)
  opts = opts or {}
  scripts = scripts + 1
  local script, result = base .. "/script" .. scripts .. ".lua", base .. "/result" .. scripts .. ".lua"
  run.write(script, PRELUDE .. "local ok, err = xpcall(function()\n" .. body ..
    "\nend, debug.traceback)\ncheck(ok, '%s', tostring(err))\n")
  local extra = opts.env or {}
  extra.TECS_TEST_RESULT = result
  extra.XDG_CONFIG_HOME = extra.XDG_CONFIG_HOME or (base .. "/plain")
  local rc, out = run.run(env(extra) .. " timeout 120 " .. NVIM .. " --headless " .. (opts.args or "") .. " -c " ..
    q("luafile " .. script) .. " -c 'qa!' </dev/null")
  local f = loadfile(result)
  if rc == 0 and not f then rc = -1 end -- the script ended early (a Lua error there sets no status)
  return rc, out, f and f()
end

-- The first row of a raw by-plugin view: { self, total, name } rows.
local function plugin_rows(text)
  local rows = {}
  for self_n, total, name in text:gmatch("\n%s*(%d+)%s+(%d+)%s+([^\n]+)") do
    rows[#rows + 1] = { self = tonumber(self_n), total = tonumber(total), name = name }
  end
  return rows
end

describe("Neovim (headless)", function()
  setup(function()
    base = os.tmpname()
    os.remove(base)
    ctl = base .. "/ctl"
    pack = base .. "/data/nvim/site/pack/p"
    assert(os.execute("mkdir -p " .. q(pack .. "/start") .. " " .. q(pack .. "/opt") .. " " .. q(base .. "/plain/nvim")
      .. " " .. q(base .. "/config") .. " && mkdir -m 700 " .. q(ctl)) == 0)
    -- The install a plain packpath user makes: the checkout (its module
    -- put beside its Lua files by `make nvim`) in a start package.
    local rc, out = run.run("make -s -C " .. q(root) .. " nvim")
    assert.equal(0, rc, out)
    assert(os.execute("ln -s " .. q(root) .. " " .. q(pack .. "/start/tecs-profile")) == 0)
    local prc, plugins = run.run("bash " .. q(root .. "/scripts/nvim-plugins.sh") .. " 2>&1")
    assert.equal(0, prc, plugins)
    local dir = plugins:match("([^\n]+)\n?$")
    for _, name in ipairs(REAL_PLUGINS) do
      assert(os.execute("ln -s " .. q(dir .. "/" .. name) .. " " .. q(pack .. "/start/" .. name)) == 0)
    end
    for _, name in ipairs({ "heavy.nvim", "light.nvim" }) do
      assert(os.execute("ln -s " .. q(fixtures .. "/" .. name) .. " " .. q(pack .. "/opt/" .. name)) == 0)
    end
    assert(os.execute("ln -s " .. q(fixtures .. "/config") .. " " .. q(base .. "/config/nvim")) == 0)
  end)
  teardown(function() os.execute("rm -rf " .. q(base)) end)

  it("loads as a plain packpath plugin: :TecsProfile, its completion, the module from the runtime path", function()
    local rc, out, r = nvim([[
      check(vim.fn.exists(":TecsProfile") == 2, "no :TecsProfile")
      check(package.loaded["tecs.profile"] == nil, "the package was loaded before the command was used")
      local so = vim.api.nvim_get_runtime_file("lua/tecs/profile/native.so", false)
      save({
        so = so[1],
        subcommands = vim.fn.getcompletion("TecsProfile st", "cmdline"),
        options = vim.fn.getcompletion("TecsProfile start autosave", "cmdline"),
        groups = vim.fn.getcompletion("TecsProfile report pl", "cmdline"),
        stop = vim.fn.getcompletion("TecsProfile stop x.svg p", "cmdline"),
      })
    ]])
    assert.equal(0, rc, out)
    assert.matches("/pack/p/start/tecs%-profile/lua/tecs/profile/native%.so$", r.so)
    assert.same({ "start", "stop" }, r.subcommands)
    assert.same({ "autosavePath=", "autosaveSeconds=" }, r.options)
    assert.same({ "plugin" }, r.groups)
    assert.same({ "plugin" }, r.stop)
  end)

  it("runs :TecsProfile start, stop FILE plugin, report, trace and cover; errors are messages", function()
    local svg, csv, lcov = base .. "/cmd.svg", base .. "/cmd.aborts.csv", base .. "/cmd.info"
    assert(os.execute("mkdir -p " .. q(pack .. "/start/covered/lua")) == 0)
    run.write(pack .. "/start/covered/lua/covered.lua", "local M = {}\nfunction M.add(a, b)\n  return a + b\nend\n" ..
      "function M.unused()\n  return 0\nend\nreturn M\n")
    local rc, out, r = nvim(string.format([[
      local buf = vim.api.nvim_create_buf(false, true)
      vim.cmd("TecsProfile start intervalMs=0.5")
      local session = require("tecs.profile.sample").active()
      check(session and session:isRunning(), "no session after start")
      -- Until the session holds enough samples, however fast the machine.
      while session:stats().samples < 300 do
        spin_for(0.02, function()
          vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "local x = 1", tostring(os.clock()) })
          vim.diagnostic.set(vim.api.nvim_create_namespace("t"), buf, { { lnum = 0, col = 0, message = "m" } })
        end)
      end
      vim.cmd("TecsProfile stop %s plugin")
      vim.cmd("TecsProfile report")
      local report = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
      local scratch = vim.bo.buftype
      vim.cmd("TecsProfile report line")
      local lines = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
      vim.cmd("TecsProfile trace")
      local t = {}
      for i = 1, 300 do t[i] = tostring(i) .. vim.api.nvim_get_current_line() end
      vim.cmd("TecsProfile trace %s")
      local trace = vim.api.nvim_buf_get_lines(0, 0, 1, false)[1]
      vim.cmd("TecsProfile cover")
      local covered = require("covered")
      check(covered.add(1, 2) == 3, "covered module broken")
      vim.cmd("TecsProfile cover %s")
      local cover = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
      local before = #messages
      vim.cmd("TecsProfile bogus")
      vim.cmd("TecsProfile stop")
      vim.cmd("TecsProfile start intervalMs=fast")
      vim.cmd("TecsProfile report nothing")
      vim.cmd("TecsProfile start intervalMs")
      local errors = {}
      for i = before + 1, #messages do errors[#errors + 1] = { text = messages[i].text, level = messages[i].level } end
      save({ messages = messages, errors = errors, report = report, scratch = scratch, lines = lines, trace = trace,
        cover = cover })
    ]], svg, csv, lcov))
    assert.equal(0, rc, out)
    assert.matches("tecs%-profile: %d+ samples in [%d.]+ s of CPU time; by plugin %(self%): [^\n]*nvim [%d.]+%%",
      r.messages[2].text)
    assert.matches("written to " .. svg, r.messages[2].text, 1, true)
    assert.matches("^<%?xml", run.read(svg))
    assert.matches("[plugin nvim]", run.read(svg), 1, true)
    assert.matches("^# %d+ samples; by plugin;", r.report)
    assert.matches("\n# %d+ samples; by function;", r.report)
    assert.matches("\n%s+[%d.]+%% ±[%d.]+%s+[%d.]+%% ±[%d.]+%s+nvim\n", r.report)
    assert.equal("nofile", r.scratch)
    assert.matches("^# %d+ samples; by line;", r.lines)
    assert.matches("^severity,", r.trace)
    assert.matches("^severity,", run.read(csv))
    -- covered.lua: 5 of its 6 lines ran (not the body of unused()).
    assert.matches("83.3%%%s+5/6%s+[^\n]*covered%.lua", r.cover)
    assert.matches("SF:[^\n]*covered%.lua", run.read(lcov))
    local texts = {}
    for i, m in ipairs(r.errors) do
      texts[i] = m.text
      assert.equal(4, m.level, m.text) -- vim.log.levels.ERROR
      assert.not_matches("traceback", m.text)
      assert.not_matches("%.lua:%d+:", m.text)
    end
    assert.same({
      "tecs-profile: unknown subcommand 'bogus' (known: start, stop, report, trace, cover, listen, close)",
      "tecs-profile: no session is running: :TecsProfile start first",
      "tecs-profile: profile.sample: option 'intervalMs' must be a number of milliseconds from 0.1 to 60000 (got string \"fast\")",
      "tecs-profile: profile.report: option 'by' must be \"function\" or \"line\" or \"module\" or \"zone\" or \"zonecomponent\" or \"vmstate\" or \"plugin\" (got string \"nothing\")",
      "tecs-profile: start: 'intervalMs' is not option=value (e.g. intervalMs=0.5)",
    }, texts)
  end)

  it("shows an error of :TecsProfile as an error message, without a stack trace", function()
    local rc, out = run.run(env({ XDG_CONFIG_HOME = base .. "/plain" }) ..
      " timeout 60 " .. NVIM .. " --headless -c 'TecsProfile stop' -c 'qa!' </dev/null")
    assert.equal(0, rc, out)
    assert.matches("tecs-profile: no session is running: :TecsProfile start first", out, 1, true)
    assert.not_matches("traceback", out)
  end)

  it("shows a second report in the same named buffer; says what close and an unwritable stop did; " ..
    "start completes only the options that apply", function()
    local rc, out, r = nvim(string.format([[
      vim.cmd("TecsProfile close")
      vim.cmd("TecsProfile start")
      local session = require("tecs.profile.sample").active()
      while session:stats().samples < 50 do spin_for(0.01, function() end) end
      vim.cmd("TecsProfile stop %s")
      local kept = session:stats().samples
      vim.cmd("TecsProfile report")
      local first, windows = vim.api.nvim_get_current_buf(), #vim.api.nvim_list_wins()
      vim.cmd("wincmd p")
      vim.cmd("TecsProfile report function")
      local second = vim.api.nvim_get_current_buf()
      local shown = vim.api.nvim_buf_get_lines(second, 0, 1, false)[1]
      local reports = {
        first = first, second = second, name = vim.api.nvim_buf_get_name(second),
        windows = #vim.api.nvim_list_wins() - windows, shown = shown,
      }
      -- Its window closed (the buffer goes with it), a third one is named too.
      vim.cmd("close")
      vim.cmd("TecsProfile report")
      reports.third = vim.api.nvim_buf_get_name(0)
      vim.cmd("TecsProfile listen")
      vim.cmd("TecsProfile close")
      local offered = vim.fn.getcompletion("TecsProfile start ", "cmdline")
      save({ messages = messages, reports = reports, kept = kept, offered = offered })
    ]], base .. "/no-such-dir/x.svg"))
    assert.equal(0, rc, out)
    local m = r.messages
    assert.same({ text = "tecs-profile: not listening: nothing to close (:TecsProfile listen opens the control channel)",
      level = 3 }, m[1]) -- vim.log.levels.WARN
    -- The unwritable path: said with the file and the system's reason, no
    -- method of the library's.
    assert.equal(4, m[3].level, m[3].text)
    assert.equal("tecs-profile: cannot write '" .. base .. "/no-such-dir/x.svg': No such file or directory " ..
      "(the profile is kept: :TecsProfile report shows it)", m[3].text)
    assert.not_matches("Session", m[3].text)
    assert.equal(r.reports.first, r.reports.second)
    assert.equal(0, r.reports.windows)
    assert.equal("tecs-profile://report", r.reports.name)
    assert.matches("^# %d+ samples; by function;", r.reports.shown)
    assert.equal("tecs-profile://report", r.reports.third)
    assert.matches("^tecs%-profile: listening on ", m[4].text)
    assert.same({ text = "tecs-profile: stopped listening: the control channel is closed", level = 2 }, m[5])
    local offered = {}
    for _, o in ipairs(r.offered) do offered[o] = true end
    assert.is_true(offered["intervalMs="] and offered["clock="] and offered["autosavePath="], table.concat(r.offered, " "))
    for _, name in ipairs({ "loveZones=", "skipThread=", "skipStartingThread=" }) do
      assert.is_nil(offered[name], table.concat(r.offered, " "))
    end
  end)

  it("names the session's clock and that clock's time in what start and stop say", function()
    local rc, out, r = nvim([[
      local said = {}
      for _, clock in ipairs({ "wall", "cpu" }) do
        vim.cmd("TecsProfile start clock=" .. clock)
        local session = require("tecs.profile.sample").active()
        -- Until the session holds 100 samples: the wall clock also samples
        -- the editor asleep, the CPU clock its work.
        while session:stats().samples < 100 do
          if clock == "wall" then vim.loop.sleep(10) else spin_for(0.01, function() end) end
        end
        vim.cmd("TecsProfile stop")
        local st = session:stats()
        said[clock] = { start = messages[#messages - 1].text, stop = messages[#messages].text,
          durationSec = st.durationSec, cpuSec = st.cpuSec }
      end
      save(said)
    ]])
    assert.equal(0, rc, out)
    assert.matches("^tecs%-profile: sampling every 1 ms of wall time %(", r.wall.start)
    assert.matches("^tecs%-profile: sampling every 1 ms of CPU time %(", r.cpu.start)
    -- The time said is that of the session's clock.
    local n, sec = r.wall.stop:match("^tecs%-profile: (%d+) samples in ([%d.]+) s of wall time; by plugin")
    assert.is_string(sec, r.wall.stop)
    assert.equal(string.format("%.2f", r.wall.durationSec), sec)
    assert.is_true(tonumber(n) >= 100, r.wall.stop)
    n, sec = r.cpu.stop:match("^tecs%-profile: (%d+) samples in ([%d.]+) s of CPU time; by plugin")
    assert.is_string(sec, r.cpu.stop)
    assert.equal(string.format("%.2f", r.cpu.cpuSec), sec)
    assert.is_true(tonumber(n) >= 100, r.cpu.stop)
  end)

  it("says an error of :TecsProfile run by another command's Lua, as lazy.nvim's cmd handler runs it, " ..
    "as a message: no Lua error, no stack trace", function()
    local script, result = base .. "/lazy-cmd.lua", base .. "/lazy-cmd-result.lua"
    run.write(script, [[
      -- What lazy.nvim's `cmd = "TecsProfile"` makes (lazy/core/handler/cmd.lua):
      -- a command that, on its first use, deletes itself, loads the plugin,
      -- then runs the real command with vim.cmd from its Lua callback.
      vim.api.nvim_del_user_command("TecsProfile")
      vim.g.loaded_tecs_profile = nil
      vim.api.nvim_create_user_command("TecsProfile", function(event)
        vim.api.nvim_del_user_command("TecsProfile")
        vim.cmd("runtime plugin/tecs_profile.lua")
        vim.cmd("TecsProfile " .. event.args)
      end, { nargs = "*" })
      local calls = {}
      -- Through the handler, then the real command, both run by Lua.
      for _, cmd in ipairs({ "TecsProfile stop", "TecsProfile stop", "TecsProfile bogus" }) do
        local ok, err = pcall(vim.cmd, cmd)
        calls[#calls + 1] = { ok = ok, err = err and tostring(err) }
      end
      local f = assert(io.open(os.getenv("TECS_TEST_RESULT"), "w"))
      f:write("return ", vim.inspect({ calls = calls, messages = vim.api.nvim_exec("messages", true) }), "\n")
      f:close()
    ]])
    local rc, out = run.run(env({ XDG_CONFIG_HOME = base .. "/plain", TECS_TEST_RESULT = result }) ..
      " timeout 60 " .. NVIM .. " --headless -c " .. q("luafile " .. script) .. " -c 'qa!' </dev/null")
    assert.equal(0, rc, out)
    local r = assert(loadfile(result), "the script did not finish:\n" .. out)()
    for _, call in ipairs(r.calls) do
      assert.is_true(call.ok, call.err)
    end
    local _, stopped = r.messages:gsub("tecs%-profile: no session is running: :TecsProfile start first", "")
    assert.equal(2, stopped, r.messages)
    assert.matches("tecs-profile: unknown subcommand 'bogus'", r.messages, 1, true)
    assert.not_matches("traceback", r.messages)
    assert.not_matches("Error executing", r.messages)
    assert.not_matches("traceback", out)
  end)

  it("profiles startup from before init.lua: a configuration with several plugins, time by plugin against truth",
    function()
      local path, result = base .. "/startup.collapsed", base .. "/startup-truth.lua"
      local rc, out = run.run(env({ XDG_CONFIG_HOME = base .. "/config", TECS_PROFILE_STARTUP = path,
        TECS_TEST_RESULT = result, TECS_TEST_HEAVY_SECONDS = "0.3", TECS_TEST_LIGHT_SECONDS = "0.1" }) ..
        " timeout 120 " .. NVIM .. " --headless --cmd " .. q("source " .. pack .. "/start/tecs-profile/plugin/tecs_profile.lua")
        .. " </dev/null")
      assert.equal(0, rc, out)
      assert.matches("tecs%-profile: startup: %d+ samples in [%d.]+ s of CPU time; by plugin %(self%): heavy%.nvim", out)
      local truth = assert(loadfile(result), "the configuration did not finish:\n" .. out)()
      local text = assert(run.read(path), "no startup profile:\n" .. out)
      -- The functions beside it, named as the editor named them.
      assert.matches('"frames"', assert(run.read(path .. ".functions.json"), "no functions file:\n" .. out))
      -- Every stack is under its plugin's root frame.
      local rows = collapsed.parse(text)
      local by_root = {}
      for _, row in ipairs(rows) do
        local name = row.frames[1]:match("^%[plugin (.+)%]$")
        assert.is_string(name, "a stack without a plugin root: " .. row.line)
        by_root[name] = (by_root[name] or 0) + row.count
      end
      local heavy, light = by_root["heavy.nvim"] or 0, by_root["light.nvim"] or 0
      sampling.check_share("heavy.nvim's share of the two plugins' samples", heavy / (heavy + light),
        truth.heavy / (truth.heavy + truth.light), heavy + light)
      -- The command line names the plugins from the paths alone.
      local crc, report = run.run(env() .. " " .. cli .. " report " .. q(path) .. " --by plugin --raw --min 0")
      assert.equal(0, crc, report)
      local first = plugin_rows(report)[1]
      assert.equal("heavy.nvim", first.name, report)
      assert.equal(heavy, first.self, report)
    end)

  it("profiles startup on the wall clock with TECS_PROFILE_STARTUP_CLOCK=wall: a plugin that waits is seen", function()
    -- A configuration that waits 300 ms for another process at one line.
    local config = base .. "/waiting/nvim"
    assert.equal(0, os.execute("mkdir -p " .. q(config)))
    run.write(config .. "/init.lua", table.concat({
      "vim.fn.system('sleep 0.3')",
      "vim.api.nvim_create_autocmd('VimEnter', { callback = function()",
      "  vim.schedule(function() vim.schedule(function() vim.cmd('qa!') end) end)",
      "end })",
    }, "\n") .. "\n")
    local function startup(clock)
      local path = base .. "/waiting-" .. clock .. ".collapsed"
      local rc, out = run.run(env({ XDG_CONFIG_HOME = base .. "/waiting", TECS_PROFILE_STARTUP = path,
        TECS_PROFILE_STARTUP_CLOCK = clock }) .. " timeout 120 " .. NVIM .. " --headless --cmd " ..
        q("source " .. pack .. "/start/tecs-profile/plugin/tecs_profile.lua") .. " </dev/null")
      assert.equal(0, rc, out)
      local text = assert(run.read(path), "no startup profile:\n" .. out)
      local at_wait = collapsed.sum(collapsed.parse(text), function(r) return collapsed.has_frame(r, "init%.lua:1$") end)
      return out, at_wait, collapsed.sum(collapsed.parse(text))
    end
    local out, at_wait = startup("wall")
    assert.matches("tecs%-profile: startup: %d+ samples in [%d.]+ s of wall time", out)
    -- 300 ms of real time at 1 ms: counted whatever the machine's speed
    -- (half of it, for a clock on the kernel's tick).
    assert.is_true(at_wait >= 0.5 * 300 / 4, out .. "\n" .. at_wait .. " samples at the wait")
    local cpu_out, cpu_wait, cpu_total = startup("cpu")
    assert.matches("tecs%-profile: startup: %d+ samples in [%d.]+ s of CPU time", cpu_out)
    assert.is_true(cpu_wait < at_wait, cpu_out .. "\n" .. cpu_wait .. " of " .. cpu_total)
    -- A clock it does not know is said, and nothing is profiled.
    local rc, bad = run.run(env({ XDG_CONFIG_HOME = base .. "/waiting", TECS_PROFILE_STARTUP = base .. "/x.collapsed",
      TECS_PROFILE_STARTUP_CLOCK = "sun" }) .. " timeout 120 " .. NVIM .. " --headless --cmd " ..
      q("source " .. pack .. "/start/tecs-profile/plugin/tecs_profile.lua") .. " </dev/null")
    assert.equal(0, rc, bad)
    assert.matches('TECS_PROFILE_STARTUP_CLOCK must be "cpu" or "wall" (got "sun")', bad, 1, true)
  end)

  it("walks the native frames below the editor's C functions (nativeFrames)", function()
    local rc, out, r = nvim([[
      local profile = require("tecs.profile")
      local s = profile.sample({ nativeFrames = true })
      local note = s:stats().nativeFramesNote
      local buf = vim.api.nvim_create_buf(false, true)
      local lines = {}
      for i = 1, 2000 do lines[i] = ("line %d of a scratch buffer"):format(i) end
      repeat
        vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
      until note or (s:stats().nativeFrames or {}).stacks >= 200
      s:stop()
      local st = s:stats()
      save({ note = note, collapsed = s:collapsed(), unread = st.nativeFrames and st.nativeFrames.unread,
        leaves = st.cFunctionLeaves })
    ]])
    assert.equal(0, rc, out)
    if r.note then
      pending("no native frames here: " .. r.note)
      return
    end
    local in_c, below = 0, 0
    for _, row in ipairs(collapsed.parse(r.collapsed)) do
      for i = 1, #row.frames do
        if row.frames[i] == "vim.api.nvim_buf_set_lines" then
          in_c = in_c + row.count
          if (row.frames[i + 1] or ""):match("^%[native:") then below = below + row.count end
          break
        end
      end
    end
    -- The session stops at 200 samples with native frames, nearly all in
    -- the function's callees (the rest of its samples are in its own code,
    -- which its Lua path names); nearly every walk succeeds.
    assert.is_true(below >= 100, string.format("%d of %d samples in nvim_buf_set_lines with native frames:\n%s",
      below, in_c, r.collapsed))
    assert.is_true(r.unread <= 0.05 * r.leaves, string.format("%d of %d C samples unread", r.unread, r.leaves))
  end)

  it("names the runtime's functions by their definitions, not by a caller that tail-called them", function()
    -- get_config tail-calls vim.tbl_extend, which tail-calls the local
    -- tbl_extend of vim/shared.lua: the loop's call site names neither.
    -- On 0.12 the runtime is bytecode without lines: its functions are
    -- placed in the runtime's source files by their bytecode.
    local rc, out, r = nvim([[
      local profile = require("tecs.profile")
      local M = {}
      function M.get_config(a, b) return vim.tbl_extend("force", a, b) end
      save({ stripped = debug.getinfo(vim.tbl_extend, "S").linedefined == 0 })
      local s = profile.sample()
      local a, b = { x = 1, y = 2 }, { z = 3 }
      repeat
        for _ = 1, 100 do M.get_config(a, b) end
      until s:stats().samples >= 200
      s:stop()
      save({ report = profile.report(s, { by = "function", minPercent = 0 }), collapsed = s:collapsed() })
    ]])
    assert.equal(0, rc, out)
    assert.is_nil(r.report:find("get_config (vim/shared.lua", 1, true), r.report)
    assert.matches("\n[^\n]*%%[^\n]*  tbl_extend %(vim/shared%.lua:%d+%)\n", r.report)
    if r.stripped then
      assert.is_nil(r.report:find("(main chunk) vim/shared.lua", 1, true), r.report)
      assert.is_nil(r.collapsed:find("vim/shared%.lua:%d"), r.collapsed)
    end
  end)

  it("names the plugin of Neovim's runtime and of a real plugin driven hard, shares against truth", function()
    local rc, out, r = nvim([[
      local profile = require("tecs.profile")
      local host = require("tecs.profile.host.nvim")
      local buf = vim.api.nvim_create_buf(false, true)
      local lines = {}
      for i = 1, 200 do lines[i] = "local value_" .. i .. " = " .. i .. " -- comment" end
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
      local ns = vim.api.nvim_create_namespace("truth")
      local diagnostics = {}
      for i = 1, 100 do diagnostics[i] = { lnum = i, col = 0, message = "d" .. i, severity = i % 4 + 1 } end
      local match = vim.fn.has("nvim-0.8") == 1 and function() return vim.filetype.match({ filename = "x.rs", buf = buf }) end
        or function() return vim.filetype.match("x.rs", buf) end
      -- Neovim's own Lua: vim.filetype, vim.lsp's protocol code, vim.diagnostic.
      local function runtime_part()
        match()
        vim.lsp.protocol.make_client_capabilities()
        vim.diagnostic.set(ns, buf, diagnostics)
        vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.WARN })
      end
      -- A real plugin: plenary.nvim's paths and strings.
      local Path, strings = require("plenary.path"), require("plenary.strings")
      local function plugin_part()
        for i = 1, 20 do
          Path:new("/a/b/../c", "d" .. i, "e.lua"):normalize("/a")
          strings.align_str("x" .. i, 12, true)
        end
      end
      local s = profile.sample({ intervalMs = 0.5 })
      -- Slices of each part in turn, timed on the CPU clock (the truth),
      -- until the session holds enough samples.
      local spent = { runtime = 0, plugin = 0 }
      while s:stats().samples < 2000 do
        spent.runtime = spent.runtime + spin_for(0.01, runtime_part)
        spent.plugin = spent.plugin + spin_for(0.01, plugin_part)
      end
      s:stop()
      local view = profile.report(s, { by = "plugin", sort = "total", raw = true, minPercent = 0,
        plugins = host.plugins() })
      save({ spent = spent, view = view, text = s:collapsed(), samples = s:stats().samples })
    ]])
    assert.equal(0, rc, out)
    local rows = plugin_rows(r.view)
    local by = {}
    for _, row in ipairs(rows) do by[row.name] = row end
    assert.is_table(by["plenary.nvim"], r.view)
    assert.is_table(by.nvim, r.view)
    local n = r.samples
    local truth = r.spent.plugin / (r.spent.plugin + r.spent.runtime)
    -- plenary.nvim's frames are on the stack for the whole of its slices
    -- but the slice loop's own calls.
    sampling.check_share("plenary.nvim's total share", by["plenary.nvim"].total / n, truth, n)
    -- Neovim's runtime holds the whole of its slices, and more: plenary
    -- calls it too.
    local runtime_truth = 1 - truth
    assert.is_true(by.nvim.total / n >= runtime_truth - sampling.tolerance(runtime_truth, n),
      string.format("nvim's total %.3f under its slices' %.3f:\n%s", by.nvim.total / n, runtime_truth, r.view))
    -- vim.api's C functions are named as such, under the Lua line that
    -- called them.
    local api_leaf = 0
    for _, row in ipairs(collapsed.parse(r.text)) do
      local leaf, caller = row.frames[#row.frames], row.frames[#row.frames - 1]
      if leaf:match("^vim%.api%.nvim_[%w_]+$") and caller and caller:match("%.lua:%d+$") then
        api_leaf = api_leaf + row.count
      end
    end
    assert.is_true(api_leaf > 0, "no vim.api.nvim_* leaf under a Lua line:\n" .. r.text)
  end)

  describe("from outside", function()
    local pid, log

    setup(function()
      -- An editor whose timer keeps it busy (Neovim's runtime and a real
      -- plugin, every 20 ms), listening since :TecsProfile listen.
      log = base .. "/listening.log"
      run.write(base .. "/listening.lua", [[
        local buf = vim.api.nvim_create_buf(false, true)
        local Path = require("plenary.path")
        local timer = vim.loop.new_timer()
        -- vim.filetype.match takes a table since Neovim 0.8.
        local function match()
          if vim.fn.has("nvim-0.8") == 1 then return vim.filetype.match({ filename = "x.rs", buf = buf }) end
          return vim.filetype.match("x.rs", buf)
        end
        timer:start(0, 20, vim.schedule_wrap(function()
          local t0 = os.clock()
          while os.clock() - t0 < 0.005 do match() end
          while os.clock() - t0 < 0.01 do Path:new("/a/b/../c", "d", "e.lua"):normalize("/a") end
        end))
        vim.cmd("TecsProfile listen")
      ]])
      local rc, out = run.run(env({ XDG_CONFIG_HOME = base .. "/plain" }) .. " nohup timeout 300 " .. NVIM .. " --headless -c "
        .. q("luafile " .. base .. "/listening.lua") .. " </dev/null >" .. q(log) .. " 2>&1 & echo $!")
      assert.equal(0, rc, out)
      pid = tonumber(out:match("(%d+)"))
      -- Listening once its discovery entry is there (60 s at most).
      local entry = ctl .. "/" .. pid .. ".json"
      for _ = 1, 600 do
        if run.read(entry) then break end
        os.execute("sleep 0.1")
      end
      -- `timeout` runs the editor as its child: the entry is the editor's.
      local found = run.run("ls " .. q(ctl))
      assert(found == 0)
    end)
    teardown(function()
      if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
    end)

    local function target_pid()
      local rc, out = run.run(env() .. " " .. cli .. " targets")
      assert.equal(0, rc, out .. "\n" .. tostring(run.read(log)))
      local p, kind, program = out:match("\n(%d+)%s+(%S+)%s+%S+ %S+%s+([^\n]+)")
      return tonumber(p), kind, program, out
    end

    it("is a target of kind nvim that attach drives: start, status, report --by plugin, stop", function()
      local p, kind, program, listing = target_pid()
      assert.equal("nvim", kind, listing)
      assert.matches("^nvim /", program)
      local rc, out = run.run(env() .. " " .. cli .. " attach start")
      assert.equal(0, rc, out)
      -- Until the session holds enough samples (60 s at most).
      local samples = 0
      for _ = 1, 600 do
        local _, st = run.run(env() .. " " .. cli .. " attach status")
        samples = tonumber(st:match("(%d+) samples")) or 0
        if samples >= 300 then break end
        os.execute("sleep 0.1")
      end
      assert.is_true(samples >= 300, "the session took " .. samples .. " samples")
      rc, out = run.run(env() .. " " .. cli .. " attach report --by plugin")
      assert.equal(0, rc, out)
      assert.matches("\n%s+[%d.]+%% ±[%d.]+%s+[%d.]+%% ±[%d.]+%s+nvim\n", out)
      assert.matches("\n%s+[%d.]+%% ±[%d.]+%s+[%d.]+%% ±[%d.]+%s+plenary%.nvim\n", out)
      rc, out = run.run(env() .. " " .. cli .. " attach stop -o editor.collapsed")
      assert.equal(0, rc, out)
      assert.matches("written to " .. ctl .. "/editor.collapsed", out, 1, true)
      assert.is_true(#collapsed.parse(run.read(ctl .. "/editor.collapsed")) > 0)
      assert.is_number(p)
    end)

    it("is followed by tecs-profile live: its page's data names the editor's code; ended, it writes the session",
      function()
      local p = target_pid()
      local native = require("tecs.profile.native")
      local lp = assert(io.popen("(" .. env() .. " " .. cli .. " live --timeout 60 " .. p
        .. " & echo \"pid=$!\"; wait $!; echo \"rc=$?\") 2>&1"))
      local live_pid = tonumber(lp:read("*l"):match("^pid=(%d+)$"))
      local lines, url = {}, nil
      for line in lp:lines() do
        lines[#lines + 1] = line
        url = line:match("^live page: (http://%S+)$")
        if url or line:match("^rc=") then break end
      end
      local ok, err = pcall(function()
        assert.is_string(url, table.concat(lines, "\n"))
        assert.matches("^pid " .. p .. ": no session was running: started one", lines[1])
        -- The page's data once the session holds enough samples (60 s at most).
        local d
        for _ = 1, 600 do
          local rc, body = run.run("curl -s " .. q(url .. "data.json"))
          assert.equal(0, rc, body)
          d = native.jsonDecode(body)
          if d and d.samples and d.samples >= 200 then break end
          os.execute("sleep 0.1")
        end
        assert.is_true(d.samples >= 200, native.json(d))
        assert.is_true(d.running)
        assert.matches("functions by self time", d.functions, 1, true)
        -- The editor's timer runs Neovim's runtime and plenary.nvim.
        assert.truthy(d.functions:find("plenary/path.lua", 1, true), d.functions)
        assert.matches("<svg", d.flamegraph, 1, true)
      end)
      os.execute("kill -TERM " .. live_pid)
      local rest = lp:read("*a")
      lp:close()
      assert(ok, tostring(err) .. "\n" .. table.concat(lines, "\n") .. rest)
      assert.matches("rc=0%s*$", rest)
      local path = rest:match("written to (%S+)")
      assert.is_string(path, rest)
      assert.is_true(#collapsed.parse(assert(run.read(path))) > 0)
    end)

    it("serves today's MCP clients (PyPI's mcp, both eras): an agent's session, then a report by plugin", function()
      local mcp = require("spec.support.mcp")
      local p = target_pid()
      local seconds = 2
      for _, mode in ipairs({ "legacy", "2026-07-28" }) do
        -- What an agent does (spec/support/mcp.lua), then time by plugin
        -- of the profile it took.
        local calls = mcp.agent_calls(p, seconds)
        calls[#calls + 1] = { "report", { target = p, by = "plugin" } }
        local r = mcp.drive(ctl, { kind = "python", mode = mode }, calls)
        local profiled = mcp.assert_agent_session(r, p, seconds, mode)
        assert.is_true(profiled.structured.samples > 0, r.client .. ": " .. profiled.text)
        local kinds = {}
        for _, t in ipairs(r.calls[1].structured.targets) do kinds[t.pid] = t.kind end
        assert.equal("nvim", kinds[p], r.client .. ": " .. r.calls[1].text)
        local by_plugin = r.calls[#calls]
        assert.is_false(by_plugin.isError, r.client .. ": " .. tostring(by_plugin.text))
        assert.matches("by plugin", by_plugin.text, 1, true)
        assert.matches("\n%s+[%d.]+%% ±[%d.]+%s+[%d.]+%% ±[%d.]+%s+plenary%.nvim\n", by_plugin.text)
      end
    end)
  end)

  it("leaves the autosaved profile of an editor stuck in a Lua loop and killed", function()
    local path = base .. "/stuck.collapsed"
    local script = base .. "/stuck.lua"
    run.write(script, string.format([[
      vim.cmd("TecsProfile start autosavePath=%s autosaveSeconds=0.2")
      local function stuck()
        local x = 0
        while true do x = x + 1 end -- STUCK
      end
      stuck()
    ]], path))
    -- The editor is killed once the file shows the loop with 200 samples
    -- (60 s at most: the loop takes samples as fast as it gets CPU time).
    local check = string.format([[luajit -e 'local f = io.open(%q); local t = f and f:read("*a") or ""; ]] ..
      [[local n = tonumber(t:match("stuck.lua:4_%%[N%%] (%%d+)") or 0); os.exit(n >= 200 and 0 or 1)']], path)
    local rc, out = run.run(env({ XDG_CONFIG_HOME = base .. "/plain" }) .. " " .. NVIM .. " --headless -c " ..
      q("luafile " .. script) .. " </dev/null >/dev/null 2>&1 & p=$!; i=0; while [ $i -lt 600 ]; do if " .. check ..
      "; then break; fi; sleep 0.1; i=$((i+1)); done; kill -9 $p; wait $p; echo waited $i")
    assert.matches("waited %d+", out)
    local text = assert(run.read(path), "no autosaved profile")
    local rows = collapsed.parse(text)
    assert.matches("stuck%.lua:4$", rows[1].frames[#rows[1].frames], 1)
    assert.is_true(rows[1].count >= 200, text)
    assert.equal("N", rows[1].state)
  end)
end)
