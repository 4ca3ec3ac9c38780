-- The tecs-profile command line, run as a separate process.
local collapsed = require("spec.support.collapsed")
local sampling = require("spec.support.sampling")
local run = require("spec.support.run")

local CLI = run.cli
local SCRIPT = "spec/fixtures/cli_script.lua"

describe("tecs-profile", function()
  local dir
  before_each(function() dir = run.tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("prints help for each command and exits 0", function()
    for _, cmd in ipairs({ "--help", "run --help", "report --help", "flamegraph --help", "busted --help" }) do
      local rc, out = run.run3(CLI .. " " .. cmd)
      assert.equal(0, rc, cmd)
      assert.matches("Usage: tecs%-profile", out, 1)
    end
  end)

  it("runs as a command on the luajit on PATH, and without one says how to get it back on Debian", function()
    local rc, out, err = run.run3("bin/tecs-profile --help")
    assert.equal(0, rc, err)
    assert.matches("^Usage: tecs%-profile", out)
    -- No luajit on PATH (as after installing libnginx-mod-http-lua on
    -- Debian, which removes Debian's luajit).
    rc, out, err = run.run3("env PATH=" .. run.quote(dir) .. " /bin/sh bin/tecs-profile --help")
    assert.equal(127, rc, err)
    assert.equal("", out)
    assert.matches("^tecs%-profile: no luajit command on PATH", err)
    assert.matches("libnginx-mod-http-lua", err, 1, true)
    assert.matches("libluajit2-5.1-2", err, 1, true)
    assert.matches("'apt-get install luajit2'", err, 1, true)
  end)

  it("help lists every declared option of the command, and the parser takes them all", function()
    local options = require("tecs.profile.cli.options")
    local main = options.main_usage()
    for _, c in ipairs(options.COMMANDS) do
      assert.matches("\n " .. c.synopsis .. " " .. c.summary .. "\n", (main:gsub(" +", " ")), 1, true)
      local _, help = run.run3(CLI .. " " .. c.name .. " --help")
      assert.equal(options.usage(c.name), help)
      local spelled = options.by_spelling(c.name)
      for _, section in ipairs(c.sections) do
        if section.title then assert.matches("\n" .. section.title .. "\n", help, 1, true) end
        for _, o in ipairs(section.options) do
          local left = (o.short and ("-" .. o.short .. ", ") or "") .. "--" .. o[1] .. (o.arg and (" " .. o.arg) or "")
          local at = help:find("\n  " .. (o.short and "" or "    ") .. left, 1, true)
          assert.is_number(at, left)
          assert.equal(o.help:match("^%S+"), help:match("^%s+(%S+)", at + 3 + #left + (o.short and 0 or 4)), left)
          assert.equal(o, spelled["--" .. o[1]])
          if o.short then assert.equal(o, spelled["-" .. o.short]) end
        end
      end
    end
    -- What the help of earlier versions said, still said.
    local _, run_help = run.run3(CLI .. " run --help")
    for _, text in ipairs({ "Sampling options:", "View options:", "--trace-output FILE", "--precision auto|function|line",
                            "LuaJIT's line mode", "-z, --zone-filter PATH" }) do
      assert.matches(text, run_help, 1, true)
    end
  end)

  it("help lists exactly the formats and file endings of the registry", function()
    local output = require("tecs.profile.output")
    local function flat(text) return (text:gsub("%s+", " ")) end
    -- The names of a `-f` help: "a, b or c (overrides the extension)".
    local function format_names(help)
      local list = assert(flat(help):match("%-f, %-%-format FMT (.-) %(overrides the extension%)"))
      local names = {}
      for name in (list:gsub(" or ", ", ") .. ", "):gmatch("(.-), ") do names[#names + 1] = name end
      return names
    end
    -- Every word that starts with a dot (file endings), in order.
    local function endings(text)
      local found = {}
      for e in (" " .. text):gmatch("%s(%.[%w%.]+)") do found[#found + 1] = e end
      return found
    end
    local every, from_profile, all_endings, profile_endings = {}, {}, {}, {}
    for _, d in ipairs(output.registry) do
      every[#every + 1] = d.name
      if not d.timeLine and d.name ~= "collapsed" then from_profile[#from_profile + 1] = d.name end
      for _, e in ipairs(d.endings) do
        all_endings[#all_endings + 1] = e
        if not d.timeLine and d.name ~= "svg" then profile_endings[#profile_endings + 1] = e end
      end
    end
    assert.is_true(#every > 1, "the registry is read")
    local _, run_help = run.run3(CLI .. " run --help")
    assert.same(every, format_names(run_help))
    local o_help = assert(flat(run_help):match("%-o, %-%-output FILE (.-) anything else collapsed text"))
    assert.same(all_endings, endings(o_help))
    for _, d in ipairs(output.registry) do
      for _, e in ipairs(d.endings) do assert.matches(e .. " " .. d.help, o_help, 1, true) end
    end
    local _, flamegraph_help = run.run3(CLI .. " flamegraph --help")
    assert.same(from_profile, format_names(flamegraph_help))
    local about = assert(flat(flamegraph_help):match("choose another format: (.-); `%-o %-` writes"))
    assert.same(profile_endings, endings(about))
    -- Every format the help names is one `-f` takes, and no other is.
    local rc, _, err = run.run3(CLI .. " flamegraph spec/golden/input.collapsed -f png -o " .. dir .. "/x")
    assert.equal(2, rc)
    assert.matches("--format must be " .. table.concat(from_profile, ", ", 1, #from_profile - 1) .. " or " ..
      from_profile[#from_profile] .. ', got "png"', err, 1, true)
  end)

  it("prints the usage and exits 2 on wrong usage", function()
    local cases = {
      { "", "Usage: tecs%-profile <command>" },
      { "frobnicate", "unknown command 'frobnicate'" },
      { "report", "report needs exactly one FILE" },
      { "report a b", "report needs exactly one FILE" },
      { "report --bogus f", "unknown option %-%-bogus" },
      { "report --min", "option %-%-min needs a value" },
      { "report --min lots f", "needs a number" },
      { "flamegraph spec/golden/input.collapsed", "needs %-o OUT" },
      { "run", "run needs a script" },
      { "run --interval 0 " .. SCRIPT, "intervalMs" },
      { "run --by stack " .. SCRIPT, "option 'by'" },
      { "busted --helper=other", "%-%-helper=other cannot be given" },
      { "busted --lua=lua5.1 spec", "%-%-lua=lua5.1 cannot be given" },
      { "love", "love needs a game: a folder with main%.lua, or a %.love file" },
      { "love /nonexistent/game", 'no game at "/nonexistent/game" %(a folder with main%.lua, or a %.love file, expected%)' },
      { "love --love", "option %-%-love needs a value" },
    }
    for _, c in ipairs(cases) do
      local rc, out, err = run.run3(CLI .. " " .. c[1])
      assert.equal(2, rc, c[1] .. ": " .. out .. err)
      assert.matches(c[2], err, 1)
      assert.matches("Usage:", err, 1)
      assert.equal("", out, "nothing on stdout for: " .. c[1])
    end
  end)

  it("love from the source tree finds its boot chunk and LD_PRELOAD library, and says when love cannot start", function()
    local rc, out, err = run.run3(CLI .. " love --love /nonexistent/love platform_spec/fixtures/love_plain")
    assert.equal(1, rc, err)
    assert.equal("", out)
    assert.equal("tecs-profile love: cannot run /nonexistent/love: No such file or directory\n", err)
    -- The files it hands to love are the source tree's.
    local love = require("tecs.profile.cli.love")
    local files = assert(love.files())
    assert.equal(run.root .. "/lua", files.luadir)
    assert.equal(run.root .. "/build/lib", files.libdir)
    assert.equal(run.root .. "/build/lib/tecs/profile/love_preload.so", files.preload)
  end)

  it("run profiles a whole program, passes its arguments, writes the outputs", function()
    local rc, out, err = run.run3(string.format("%s run -i 1 -o %s/p.svg --report %s/r.txt %s normal 0.4",
      CLI, dir, dir, SCRIPT))
    assert.equal(0, rc, err)
    assert.matches("arg0=" .. SCRIPT .. " arg1=normal n=2", out, 1, true)
    assert.matches("^<%?xml", run.read(dir .. "/p.svg"))
    local rep = run.read(dir .. "/r.txt")
    assert.matches("spin %(" .. SCRIPT:gsub("%p", "%%%0") .. ":3%)", rep)
    local pct = tonumber(rep:match("\n +([%d.]+)%% ±[%d.]+ +[%d.]+%% ±[%d.]+  spin"))
    assert.is_true(pct > 50, rep)
    -- The second header line: the profiled thread's CPU time beside the
    -- whole process's; the program spins for 0.4 s of CPU time.
    local thread, process = rep:match("^[^\n]*\n# CPU time: ([%d.]+) s in the profiled thread, ([%d.]+) s in the whole process\n")
    assert.is_truthy(thread, rep)
    assert.is_true(tonumber(thread) >= 0.35 and tonumber(process) >= tonumber(thread) - 0.001, rep)
    -- A file does not record CPU time: a report of one has no such line.
    run.write(dir .. "/p.collapsed", "a.lua:1_[I] 3\n")
    local _, from_file = run.run3(CLI .. " report " .. dir .. "/p.collapsed")
    assert.not_matches("CPU time", from_file)
  end)

  it("run writes speedscope and collapsed files and honours the view options", function()
    local rc, out, err = run.run3(string.format("%s run -o %s/p.speedscope.json -m l %s normal 0.3", CLI, dir, SCRIPT))
    assert.equal(0, rc, err)
    -- Written from the session, which knows its interval: the session's unit.
    assert.matches('"unit": "milliseconds"', run.read(dir .. "/p.speedscope.json"), 1, true)
    -- The report on stderr; stdout is the program's alone.
    assert.matches("by line", err)
    assert.equal("arg0=spec/fixtures/cli_script.lua arg1=normal n=2\n", out)
    assert.equal(0, (run.run("node spec/support/validate_speedscope.js " .. dir .. "/p.speedscope.json")))
    rc, out, err = run.run3(string.format("%s run -q -f collapsed -o %s/p.svg %s normal 0.2", CLI, dir, SCRIPT))
    assert.equal(0, rc, err)
    assert.not_matches("self", out)
    assert.matches("_%[[NICGJ]%] %d+\n", run.read(dir .. "/p.svg"))
  end)

  it("run profiles the program only: no launcher frames, depth counts the program's frames", function()
    -- LUA_PATH without ";;" hides LuaJIT's jit/ modules from the search
    -- path: the command line finds them itself, so pcall keeps its name.
    local nested = "spec/fixtures/cli_nested.lua"
    local env = "env LUA_PATH='/nonexistent/?.lua' LUA_CPATH='/nonexistent/?.so' "
    local rc, out, err = run.run3(string.format("%s%s run -q -d 4 -o %s/n.collapsed %s 0.3", env, CLI, dir, nested))
    assert.equal(0, rc, out .. err)
    local text = run.read(dir .. "/n.collapsed")
    local rows = collapsed.parse(text)
    assert.is_true(collapsed.sum(rows) >= sampling.least_samples_elsewhere({}, 0.3), text)
    for _, r in ipairs(rows) do
      -- The program's main chunk is the outermost frame of every stack.
      assert.equal(nested .. ":", r.frames[1]:sub(1, #nested + 1), r.line)
      for i, f in ipairs(r.frames) do
        -- The leaf may be the builtin the program was in (os.clock).
        local builtin_leaf = i == #r.frames and i > 1 and not f:find(":", 1, true)
        assert.is_true(f == "pcall" or builtin_leaf or f:sub(1, #nested) == nested, "not the program's frame: " .. r.line)
      end
      assert.is_true(#r.frames <= 4, r.line)
    end
    -- The hot stack whole within 4 frames: main chunk, pcall, outer, spin.
    table.sort(rows, function(a, b) return a.count > b.count end)
    local hot = rows[1].frames
    assert.same({ nested .. ":5", "pcall", nested .. ":3" }, { hot[1], hot[2], hot[3] })
    assert.matches("^" .. nested:gsub("%p", "%%%0") .. ":2", hot[4])
    -- The annotated source covers the program's file alone.
    rc, out, err = run.run3(string.format("%s%s run --annotate full %s 0.2", env, CLI, nested))
    assert.equal(0, rc, err)
    local files = {}
    for file in err:gmatch("\n====== (.-) ======") do files[#files + 1] = file end
    assert.same({ nested }, files)
  end)

  -- CPU time spent in Lua, for the thread-skipping options.
  local function spin(seconds)
    local t0, x = os.clock(), 0
    while os.clock() - t0 < seconds do for i = 1, 1000 do x = (x + i) % 7 end end
    return x
  end

  it("samples with skipStartingThread = true come from coroutines only", function()
    local profile = require("tecs.profile")
    local s = profile.sample({ skipStartingThread = true })
    spin(0.15)
    local on_main = s:stats().recordedSamples
    coroutine.wrap(spin)(0.15)
    s:stop()
    local st = s:stats()
    assert.equal(0, on_main)
    -- 150 ms of CPU on the coroutine, and those on the main thread counted
    -- as filtered.
    assert.is_true(st.recordedSamples >= sampling.least_samples(s, 0.15), tostring(st.recordedSamples))
    assert.is_true(st.filteredSamples >= sampling.least_samples(s, 0.15), tostring(st.filteredSamples))
  end)

  it("samples with skipThread = a thread leave that thread out, the main thread included", function()
    local profile = require("tecs.profile")
    local native = require("tecs.profile.native")
    -- A coroutine skipped: its time is filtered, the main thread's recorded.
    local skipped = coroutine.create(spin)
    local s = profile.sample({ skipThread = skipped })
    -- Counted from here: the session's start runs on the main thread, which
    -- is recorded, and may take a tick (it flushes the traces).
    local before = s:stats().recordedSamples
    assert(coroutine.resume(skipped, 0.15))
    local on_skipped = s:stats().recordedSamples - before
    spin(0.15)
    s:stop()
    local st = s:stats()
    -- None of the coroutine's 0.15 s; one tick may land on the main thread
    -- between the count and the resume.
    assert.is_true(on_skipped <= 1, tostring(on_skipped))
    assert.is_true(st.recordedSamples >= sampling.least_samples(s, 0.15), tostring(st.recordedSamples))
    assert.is_true(st.filteredSamples >= sampling.least_samples(s, 0.15), tostring(st.filteredSamples))
    -- The main thread skipped, as run --listen skips its launcher.
    s = profile.sample({ skipThread = native.raw.currentThread() })
    spin(0.15)
    on_skipped = s:stats().recordedSamples
    coroutine.wrap(spin)(0.15)
    s:stop()
    st = s:stats()
    assert.equal(0, on_skipped)
    assert.is_true(st.recordedSamples >= sampling.least_samples(s, 0.15), tostring(st.recordedSamples))
    assert.is_true(st.filteredSamples >= sampling.least_samples(s, 0.15), tostring(st.filteredSamples))
    local ok, err = pcall(profile.sample, { skipThread = "main" })
    assert.is_false(ok)
    assert.matches("option 'skipThread' must be a thread %(a coroutine%) %(got string \"main\"%)", err)
    ok, err = pcall(profile.sample, { skipThread = skipped, skipStartingThread = true })
    assert.is_false(ok)
    assert.matches("'skipStartingThread' and 'skipThread' cannot both be given", err, 1, true)
  end)

  it("run gives a program's error with its own traceback, and a yield outside coroutines as luajit does", function()
    local rc, _, err = run.run3(string.format("%s run -q %s error 0.05", CLI, SCRIPT))
    assert.equal(1, rc)
    assert.matches("cli_script.lua:8: boom from the script\nstack traceback:\n", err, 1, true)
    assert.not_matches("tecs/profile", err)
    assert.not_matches("bin/tecs%-profile", err)
    run.write(dir .. "/y.lua", "coroutine.yield(1)\n")
    rc, _, err = run.run3(string.format("%s run -q %s/y.lua", CLI, dir))
    assert.equal(1, rc)
    assert.matches("attempt to yield across C-call boundary", err, 1, true)
  end)

  it("run keeps the profile when the program calls os.exit or fails", function()
    local rc, out, err = run.run3(string.format("%s run -o %s/e.collapsed %s exit 0.2", CLI, dir, SCRIPT))
    assert.equal(3, rc, err)
    assert.matches("self +total", err)
    assert.truthy(run.read(dir .. "/e.collapsed"))
    rc, out, err = run.run3(string.format("%s run -o %s/f.collapsed %s error 0.2", CLI, dir, SCRIPT))
    assert.equal(1, rc)
    assert.matches("boom from the script", err)
    assert.matches("self +total", err)
    assert.truthy(run.read(dir .. "/f.collapsed"))
  end)

  it("run --trace --annotate puts the tracker's abort sites under their lines", function()
    local file = "spec/fixtures/cli_aborts.lua"
    local rc, _, out = run.run3(string.format("%s run --trace --annotate full %s", CLI, file))
    assert.equal(0, rc, out)
    local at
    local n = 0
    for text in io.lines(file) do n = n + 1 if text:find("function() return i end", 1, true) then at = n end end
    -- The closure's line, then its abort note, in the annotated source.
    local line_row = out:match("\n([^\n]*|%s+" .. at .. " |[^\n]*)\n")
    assert.truthy(line_row, out)
    assert.matches("|%s+" .. at .. " |[^\n]*\n[^\n]*|%s+| %^ trace aborted %d+ times? %(%a+%): NYI: bytecode FNEW", out)
    assert.matches("# traces: %d+ started", out)
    -- And the hot-aborts ranking after it, as before.
    assert.matches(file:gsub("%p", "%%%0") .. ":" .. at .. ": NYI: bytecode FNEW", out)
  end)

  it("report prints views of a file, and hot aborts from a trace CSV", function()
    local rc, out, err = run.run3(CLI .. " report spec/golden/input.collapsed --mode vf")
    assert.equal(0, rc, err)
    assert.equal(run.read("spec/golden/expected/vmstate-by-function.txt"), out)
    rc, out, err = run.run3(CLI .. " report spec/golden/input.collapsed --aborts spec/golden/trace.csv")
    assert.equal(0, rc, err)
    assert.equal(run.read("spec/golden/expected/hot-aborts.txt"), out)
    rc, out, err = run.run3(CLI .. " report /no/such.collapsed")
    assert.equal(1, rc)
    assert.matches("cannot read file '/no/such.collapsed'", err, 1, true)
  end)

  it("flamegraph draws SVG or speedscope by the output's extension", function()
    local rc, _, err = run.run3(string.format("%s flamegraph spec/golden/input.collapsed -o %s/g.svg --title golden", CLI, dir))
    assert.equal(0, rc, err)
    assert.equal(run.read("spec/golden/expected/flamegraph.svg"), run.read(dir .. "/g.svg"))
    rc, _, err = run.run3(string.format("%s flamegraph spec/golden/input.collapsed -o %s/g.speedscope.json", CLI, dir))
    assert.equal(0, rc, err)
    assert.equal(0, (run.run("node spec/support/validate_speedscope.js " .. dir .. "/g.speedscope.json")))
    -- The file does not record its interval: sample counts, and a note that says so.
    assert.matches('"unit": "none"', run.read(dir .. "/g.speedscope.json"), 1, true)
    assert.matches('does not record its sampling interval, so the speedscope weights are sample counts (unit "none"); -i MS',
      err, 1, true)
    rc, _, err = run.run3(string.format("%s flamegraph spec/golden/input.collapsed -i 2 -o %s/g.speedscope.json", CLI, dir))
    assert.equal(0, rc, err)
    assert.equal("", err)
    assert.matches('"unit": "milliseconds"', run.read(dir .. "/g.speedscope.json"), 1, true)
  end)

  it("is installed by make install and runs from there", function()
    local prefix = dir .. "/prefix"
    local rc, out = run.run("make -s install PREFIX='" .. prefix .. "'")
    assert.equal(0, rc, out)
    local bin = prefix .. "/bin/tecs-profile"
    rc, out = run.run(string.format("cd / && env -u LUA_PATH -u LUA_CPATH '%s' --help", bin))
    assert.equal(0, rc, out)
    rc, out = run.run(string.format("cd '%s' && env -u LUA_PATH -u LUA_CPATH '%s' report '%s/spec/golden/input.collapsed' --no-functions",
      dir, bin, os.getenv("PWD")))
    assert.equal(0, rc, out)
    assert.matches("string.format", out)
  end)
end)
