-- Runs the LÖVE example (examples/love), small fixtures and an unmodified
-- game launched by `tecs-profile love` with Debian's `love` under
-- `xvfb-run -a`, default conf.lua (audio module on).
local collapsed = require("spec.support.collapsed")
local run = require("spec.support.run")
local sampling = require("spec.support.sampling")

local root = run.root
local sh_quote, read = run.quote, run.read
local save_root -- XDG_DATA_HOME of every run: LÖVE's save directories go there

-- xvfb-run with an X authority file of its own in the save root: no
-- temporary directory of xvfb-run's to remove at the end, whose removal
-- may fail after the game has run.
local xauth_files = 0
local function xvfb_run()
  xauth_files = xauth_files + 1
  return "xvfb-run -a -f " .. sh_quote(save_root .. "/xauth-" .. xauth_files)
end

-- Run love on `game` with `args`; `env` maps variables to values (false
-- unsets). Returns exit code and output.
local function love(game, args, env)
  local unset, set = {}, { "XDG_DATA_HOME=" .. sh_quote(save_root) }
  for k, v in pairs(env or {}) do
    if v then set[#set + 1] = k .. "=" .. sh_quote(v) else unset[#unset + 1] = "-u " .. k end
  end
  return run.run("env " .. table.concat(unset, " ") .. " " .. table.concat(set, " ") .. " timeout 60 " .. xvfb_run() ..
    " love " .. sh_quote(game) .. " " .. (args or ""))
end

local function save_dir(identity) return save_root .. "/love/" .. identity end

-- Zone totals and whether the game's own frames (file:line) appear.
local function summarize(text)
  local rows = collapsed.parse(text)
  local s = { total = collapsed.sum(rows), zones = {}, game_frames = 0, main_frames = 0 }
  for _, r in ipairs(rows) do
    local z = r.frames[1]
    if z == "love.update" or z == "love.draw" then s.zones[z:sub(6)] = (s.zones[z:sub(6)] or 0) + r.count end
    if collapsed.has_frame(r, "^game%.lua:%d+$") then s.game_frames = s.game_frames + r.count end
    if collapsed.has_frame(r, "^main%.lua:%d+$") then s.main_frames = s.main_frames + r.count end
  end
  s.rows = rows
  return s
end

describe("LÖVE 11 (xvfb-run, audio on)", function()
  setup(function()
    save_root = os.tmpname()
    os.remove(save_root)
    assert(os.execute("mkdir -p " .. sh_quote(save_root)) == 0)
  end)
  teardown(function() os.execute("rm -rf " .. sh_quote(save_root)) end)

  it("blocks SIGPROF on the main thread, so jit.p records no samples", function()
    local rc, out = love(root .. "/examples/love", "--seconds 1.5 --profiler jitp")
    assert.equal(0, rc, out)
    local report = read(save_dir("tecs-profile-example") .. "/jitp.txt")
    assert.is_string(report, "jit.p wrote no report:\n" .. out)
    assert.matches("No samples collected", report)
  end)

  it("profiles the example game: samples, update/draw zones, game stacks", function()
    local rc, out = love(root .. "/examples/love", "--seconds 2", { LUA_PATH = false, LUA_CPATH = false })
    assert.equal(0, rc, out)
    local path = save_dir("tecs-profile-example") .. "/tecs.collapsed"
    assert.matches("tecs: " .. path:gsub("%p", "%%%0") .. " samples=%d+", out)
    local text = assert(read(path), "no profile written:\n" .. out)
    local s = summarize(text)
    assert.is_true(s.total > 0, "no samples:\n" .. out)
    assert.is_true((s.zones.update or 0) > 0, "no update zone samples:\n" .. text)
    assert.is_true((s.zones.draw or 0) > 0, "no draw zone samples:\n" .. text)
    assert.is_true(s.game_frames > 0, "no game.lua:N frames:\n" .. text)
    assert.is_true(s.main_frames > 0, "no main.lua:N frames:\n" .. text)
    -- The update zone's stacks run through love.update in main.lua, in the
    -- game's own zone nested in it, into game.lua.
    local update_stack = collapsed.sum(s.rows, function(r)
      return r.frames[1] == "love.update" and r.frames[2] == "world" and collapsed.has_frame(r, "^main%.lua:%d+$")
        and r.frames[#r.frames]:match("^game%.lua:%d+%-?%d*$") ~= nil
    end)
    assert.is_true(update_stack > 0, text)
    -- jit.vmdef is there: builtins are named.
    assert.is_true(collapsed.sum(s.rows, function(r) return collapsed.has_frame(r, "^xpcall$") end) > 0, text)
    -- The frames LÖVE marked: the slowest printed, the timeline and the page written.
    local shown, frames = out:match("Slowest (%d+) of (%d+) frames:\n")
    assert.equal("3", shown, out)
    assert.is_true(tonumber(frames) > 3, out)
    assert.matches('"name":"frame 1"', assert(read(save_dir("tecs-profile-example") .. "/tecs.trace.json")), 1, true)
    local html = assert(read(save_dir("tecs-profile-example") .. "/tecs-report.html"))
    assert.matches('"hitches":%[{"cpuMs":[%d.e-]+,"gcSamples":', html)
  end)

  it("names the C functions samples were taken in: love.graphics.present, love.graphics.print", function()
    local rc, out = love(root .. "/examples/love", "--seconds 2", { LUA_PATH = false, LUA_CPATH = false })
    assert.equal(0, rc, out)
    local text = assert(read(save_dir("tecs-profile-example") .. "/tecs.collapsed"), "no profile written:\n" .. out)
    local rows = collapsed.parse(text)
    local by_leaf, in_c = {}, 0
    for _, r in ipairs(rows) do
      if r.state == "C" then
        in_c = in_c + r.count
        local leaf = r.frames[#r.frames]
        by_leaf[leaf] = (by_leaf[leaf] or 0) + r.count
      end
    end
    -- The standard love.run presents every frame, and the example's draw
    -- prints text: both are C functions of LÖVE, named by their Lua path
    -- and drawn above the Lua frame that called them.
    assert.is_true((by_leaf["love.graphics.present"] or 0) > 0, text)
    assert.is_true((by_leaf["love.graphics.print"] or 0) > 0, text)
    assert.is_true(collapsed.sum(rows, function(r)
      return r.frames[#r.frames] == "love.graphics.print" and r.frames[#r.frames - 1]:match("^game%.lua:") ~= nil
    end) > 0, text)
    -- Nearly every sample in state C knows its C function; an address left
    -- unnamed would read [C:...].
    local named = 0
    for leaf, n in pairs(by_leaf) do
      if leaf:match("^love%.%a+%.%a+$") or leaf:match("^%a+%.%a+$") or leaf:match("^%a+$") or leaf:match("^%a+:%a+$") then
        named = named + n
      end
    end
    assert.is_true(named >= 0.8 * in_c, string.format("%d of %d C samples named:\n%s", named, in_c, text))
  end)

  it("walks the native frames below LÖVE's C functions: LÖVE's code and the GL driver's", function()
    local rc, out = love(root .. "/platform_spec/fixtures/love_native", "", {
      LUA_PATH = root .. "/lua/?.lua;;", LUA_CPATH = root .. "/build/lib/?.so;;" })
    assert.equal(0, rc, out)
    local note = out:match("note=([^\n]*)\n")
    if note ~= "nil" then
      pending("no native frames here: " .. tostring(note))
      return
    end
    local text = assert(read(save_dir("tecs-profile-native") .. "/native.collapsed"), "no profile written:\n" .. out)
    local drawing = { ["love.graphics.points"] = true, ["love.graphics.present"] = true }
    local in_c, below, objects = 0, 0, {}
    for _, r in ipairs(collapsed.parse(text)) do
      for i = 1, #r.frames do
        if drawing[r.frames[i]] then
          in_c = in_c + r.count
          if r.frames[i + 1] and r.frames[i + 1]:match("^%[native:") then below = below + r.count end
          for j = i + 1, #r.frames do
            local object = r.frames[j]:match("^%[native:([^%]]-)%+0x%x+%]$")
            if object then objects[object] = true end
          end
          break
        end
      end
    end
    -- The game stops once 300 samples have native frames; nearly all of
    -- them are drawing the points (the software driver draws at present).
    assert.is_true(in_c >= 150 and below >= 0.8 * in_c,
      string.format("%d of %d samples in the drawing functions with native frames:\n%s", below, in_c, text))
    -- LÖVE's own code (the program, named by its file where its symbols are
    -- stripped) and a library below it, the software GL driver under Xvfb.
    local names = {}
    for o in pairs(objects) do names[#names + 1] = o end
    table.sort(names)
    assert.is_true(objects["love-11.4"] or objects["love"], table.concat(names, ", "))
    assert.is_true(#names >= 2, table.concat(names, ", "))
  end)

  it("unblocks SIGPROF only while sampling and restores the mask at stop", function()
    local rc, out = love(root .. "/platform_spec/fixtures/love_sigmask", "", {
      LUA_PATH = root .. "/lua/?.lua;;", LUA_CPATH = root .. "/build/lib/?.so;;" })
    assert.equal(0, rc, out)
    local before, during, after, samples = out:match("SIGMASK before=(%x+) during=(%x+) after=(%x+) samples=(%d+)")
    assert.is_string(before, out)
    local SIGPROF_BIT = 2 ^ 26 -- signal 27
    local function blocked(hex) return math.floor(tonumber(hex, 16) / SIGPROF_BIT) % 2 == 1 end
    assert.is_true(blocked(before), "LÖVE did not block SIGPROF here: " .. before)
    assert.is_false(blocked(during), during)
    assert.is_true(blocked(after), after)
    assert.equal(before, after)
    assert.is_true(tonumber(samples) > 0, out)
  end)

  it("runs an allocation session: bytes charged to the game's functions", function()
    local rc, out = love(root .. "/platform_spec/fixtures/love_alloc", "", {
      LUA_PATH = root .. "/lua/?.lua;;", LUA_CPATH = root .. "/build/lib/?.so;;" })
    assert.equal(0, rc, out)
    local bytes, objects, samples, estimated, err =
      out:match("ALLOC bytes=(%d+) objects=(%d+) samples=(%d+) estimated=(%d+) error=(%d+)")
    assert.is_string(bytes, out)
    bytes, objects, samples = tonumber(bytes), tonumber(objects), tonumber(samples)
    estimated, err = tonumber(estimated), tonumber(err)
    -- The collapsed lines printed after the counters (LÖVE's audio set-up
    -- may write to stderr in between).
    local lines = {}
    for line in assert(out:match("ALLOC [^\n]*\n(.-)END"), out):gmatch("[^\n]+") do
      if line:match("_%[%u%] %d+$") then lines[#lines + 1] = line end
    end
    local rows = collapsed.parse(table.concat(lines, "\n") .. "\n")
    local total = collapsed.sum(rows)
    -- Each sample stands for the 4096 bytes per sample of the fixture.
    assert.is_true(samples > 1000, out)
    assert.equal(samples * 4096, total)
    local function charged(first, last)
      return collapsed.sum(rows, function(r)
        return collapsed.has_frame(r, "^main%.lua:" .. first .. "%-" .. last .. "$")
          or collapsed.has_frame(r, "^main%.lua:" .. first .. "$")
      end)
    end
    local labels, points = charged(16, 20), charged(22, 26)
    -- Nearly every byte is the game's: strings in update, tables in draw.
    assert.is_true(labels > points and points > 0, out)
    assert.is_true(labels + points >= 0.95 * total, out)
    -- The objects the samples stand for, against the wrapper's exact count.
    assert.is_true(math.abs(estimated - objects) <= 5 * err + 1, out)
  end)

  it("marks a frame at each love.timer.step of the standard love.run, and finds the slow one", function()
    local rc, out = love(root .. "/platform_spec/fixtures/love_frames", "", {
      LUA_PATH = root .. "/lua/?.lua;;", LUA_CPATH = root .. "/build/lib/?.so;;",
      TECS_PROFILE_DIR = save_root .. "/frames-ctl" })
    assert.equal(0, rc, out)
    assert.matches("wrapped=true\n", out)
    -- The channel's poll and the session's frame mark share one wrapper.
    assert.matches("one wrapper=true\n", out)
    -- The standard love.run steps the timer once after love.load, then once
    -- per frame before love.update: one frame more than updates.
    local frames, updates, hitch_frame = out:match("frames=(%d+) updates=(%d+) hitch_frame=(%d+)\n")
    assert.equal("40", updates, out)
    assert.equal("41", frames, out)
    local index, samples, top, share = out:match("hitch index=(%d+) samples=(%d+) top=([^\n]-) share=([%d.]+)\n")
    assert.equal(hitch_frame, index, out)
    -- 0.2 s of CPU time at 1 ms: about 200 samples (fewer with a tick-rate clock).
    assert.is_true(tonumber(samples) >= 20, out)
    -- Named by function when the source is readable from the working
    -- directory (LÖVE's is not: its files are the game's); else the span
    -- of the compiled function, which is hitch_work's lines.
    local first, last, n = nil, nil, 0
    for line in io.lines(root .. "/platform_spec/fixtures/love_frames/main.lua") do
      n = n + 1
      if line:match("^local function hitch_work") then first = n end
      if first and not last and line:match("^end") then last = n end
    end
    assert.is_true(top == ("hitch_work (main.lua:%d)"):format(first) or top == ("main.lua:%d-%d"):format(first, last),
      top)
    assert.is_true(tonumber(share) >= 0.8, out)
    -- The wrapper stays while the channel polls, and goes with the last
    -- of the two; under a library's wrapper it stays, used again.
    assert.matches("still polled=true\n", out)
    assert.matches("restored=true\n", out)
    assert.matches("library kept=true\n", out)
    assert.matches("wrapped again=false\n", out)
  end)

  it("says where a frame waited on the wall clock: love.timer.sleep is a sleep, a busy frame no wait", function()
    local rc, out = love(root .. "/platform_spec/fixtures/love_waits", "", {
      LUA_PATH = root .. "/lua/?.lua;;", LUA_CPATH = root .. "/build/lib/?.so;;" })
    assert.equal(0, rc, out)
    -- 150 ms asleep at 1 ms of real time: about 150 samples (about 40 on
    -- a clock of the kernel's tick), nearly all in love.timer.sleep.
    local samples, kind, share = out:match("sleep_frame samples=(%d+) wait=(%S+) share=([%d.]+)\n")
    assert.equal("sleep", kind, out)
    assert.is_true(tonumber(share) >= 0.5, out)
    local _, busy_kind, busy_share = out:match("busy_frame samples=(%d+) wait=(%S+) share=([%d.]+)\n")
    assert.is_true(busy_kind ~= "sleep" or tonumber(busy_share) < 0.2, out)
    assert.is_true(tonumber(samples) >= 10, out)
    assert.matches("love.timer.sleep[^\n]*; waits: sleep %d+%%", out)
  end)

  it("runs each LÖVE callback in a zone named after it, the game's own zones inside", function()
    local env = { LUA_PATH = root .. "/lua/?.lua;;", LUA_CPATH = root .. "/build/lib/?.so;;" }
    local rc, out = love(root .. "/platform_spec/fixtures/love_zones", "", env)
    assert.equal(0, rc, out)
    assert.matches("restored=true\n", out)
    local rows = collapsed.parse(assert(out:match("<<<\n(.-)>>>\n"), out))
    local function zone_sum(first, second)
      return collapsed.sum(rows, function(r) return r.frames[1] == first and (not second or r.frames[2] == second) end)
    end
    assert.is_true(collapsed.sum(rows) >= 600, out)
    assert.is_true(zone_sum("love.update") > 0, out)
    assert.is_true(zone_sum("love.update", "physics") > 0, out)
    assert.is_true(zone_sum("love.draw") > 0, out)
    -- love.load was defined after the session started.
    assert.is_true(zone_sum("love.load") > 0, out)
    -- Each callback's zone holds its share of the main thread's CPU time,
    -- timed in the game.
    local update, draw, total = out:match("truth update=([%d.]+) draw=([%d.]+) total=([%d.]+)\n")
    assert.is_not_nil(total, out)
    local n = collapsed.sum(rows)
    sampling.check_share("love.update", zone_sum("love.update") / n, tonumber(update) / tonumber(total), n)
    sampling.check_share("love.draw", zone_sum("love.draw") / n, tonumber(draw) / tonumber(total), n)
    assert.equal(0, collapsed.sum(rows, function(r) return collapsed.has_frame(r, "love_zones%.lua") end), out)
    env.TECS_LOVE_ZONES = "off"
    rc, out = love(root .. "/platform_spec/fixtures/love_zones", "", env)
    assert.equal(0, rc, out)
    rows = collapsed.parse(assert(out:match("<<<\n(.-)>>>\n"), out))
    assert.equal(0, collapsed.sum(rows, function(r) return r.frames[1]:match("^love%.") ~= nil end), out)
    assert.is_true(zone_sum("physics") > 0, out)
  end)

  it("refuses a love.thread worker while the main thread samples, then lets it sample", function()
    local rc, out = love(root .. "/platform_spec/fixtures/love_thread", "", {
      LUA_PATH = root .. "/lua/?.lua;;", LUA_CPATH = root .. "/build/lib/?.so;;" })
    assert.equal(0, rc, out)
    assert.matches("worker while main samples: error profile%.sample: a sampling session is already running " ..
      "in this process %(LuaJIT has one profiler per process;[^\n]*%)\n", out)
    assert.is_nil(out:find("stack traceback", 1, true), out)
    local main_n = tonumber(out:match("main samples=(%d+)"))
    local worker_n = tonumber(out:match("worker after main stopped: ok samples=(%d+)"))
    assert.is_true(main_n and main_n > 0, out)
    assert.is_true(worker_n and worker_n > 0, out)
  end)

  it("falls back to its own zone stack and names builtins by their Lua path when jit/*.lua is missing", function()
    -- A LUA_PATH without `;;` hides LuaJIT's jit/ directory, as in LÖVE
    -- builds that do not ship it.
    local rc, out = love(root .. "/examples/love", "--seconds 1.5",
      { LUA_PATH = "/nonexistent/?.lua", LUA_CPATH = false })
    assert.equal(0, rc, out)
    local text = assert(read(save_dir("tecs-profile-example") .. "/tecs.collapsed"), out)
    local s = summarize(text)
    assert.is_true(s.total > 0, out)
    assert.is_true((s.zones.update or 0) > 0 and (s.zones.draw or 0) > 0, text)
    assert.is_true(s.game_frames > 0, text)
    -- love.run calls the game through xpcall: named without jit.vmdef.
    assert.is_true(collapsed.sum(s.rows, function(r) return collapsed.has_frame(r, "^xpcall$") end) > 0, text)
  end)

  -- The layout of a distributed game: Lua code inside a .love archive, the
  -- shared library where it can be dlopen'ed (never from inside the archive).
  local function make_archive(work, so_dir)
    assert(os.execute(table.concat({
      "rm -rf " .. sh_quote(work) .. " " .. sh_quote(save_dir("tecs-profile-example") .. "/tecs") .. " " ..
        sh_quote(save_dir("tecs-profile-example") .. "/tecs-report.txt") .. " " ..
        sh_quote(save_dir("tecs-profile-example") .. "/tecs-report.html"),
      "mkdir -p " .. sh_quote(work .. "/game") .. " " .. sh_quote(so_dir .. "/tecs/profile"),
      "cp " .. sh_quote(root) .. "/examples/love/*.lua " .. sh_quote(work .. "/game/"),
      "cp -R " .. sh_quote(root .. "/lua/tecs") .. " " .. sh_quote(work .. "/game/"),
      "cp " .. sh_quote(root .. "/build/lib/tecs/profile/native.so") .. " " .. sh_quote(so_dir .. "/tecs/profile/"),
      "(cd " .. sh_quote(work .. "/game") .. " && python3 -m zipfile -c ../game.love .)",
    }, " && ")) == 0)
    return work .. "/game.love"
  end

  local function run_archive(archive)
    -- LUA_CPATH leads nowhere: only the game's own search finds the library.
    local rc, out = love(archive, "--seconds 1.5", { LUA_PATH = false, LUA_CPATH = "/nonexistent/?.so" })
    assert.equal(0, rc, out)
    local text = assert(read(save_dir("tecs-profile-example") .. "/tecs.collapsed"), out)
    local s = summarize(text)
    assert.is_true(s.total > 0 and (s.zones.update or 0) > 0 and s.game_frames > 0, text)
    -- The sources are inside the archive, out of reach of a file path: the
    -- function view names the game's functions from what the VM recorded.
    local report = assert(read(save_dir("tecs-profile-example") .. "/tecs-report.txt"), out)
    assert.truthy(report:find("%(game%.lua:%d+%)"), report)
    assert.is_nil(report:find("game.lua: cannot read", 1, true), report)
    -- The report page's style and script are read from the archive too.
    local page = assert(read(save_dir("tecs-profile-example") .. "/tecs-report.html"), out)
    assert.truthy(page:find("rect.frame-bar", 1, true) and page:find("var tecsPage", 1, true), out)
  end

  it("runs from a .love archive, library in the save directory (LÖVE's C loader)", function()
    run_archive(make_archive(save_root .. "/archive1", save_dir("tecs-profile-example")))
  end)

  it("runs from a .love archive, library beside it (getSourceBaseDirectory)", function()
    local work = save_root .. "/archive2"
    run_archive(make_archive(work, work))
  end)

  it("a game that called listen() once polls by itself: attach samples it between start and stop", function()
    local work = save_root .. "/listen"
    assert(os.execute("mkdir -p " .. sh_quote(work)) == 0)
    local ctl, stop = work .. "/ctl", work .. "/stop"
    local game = assert(io.popen("env XDG_DATA_HOME=" .. sh_quote(save_root) .. " TECS_PROFILE_DIR=" .. sh_quote(ctl) ..
      " TECS_LISTEN_STOP=" .. sh_quote(stop) .. " timeout 120 " .. xvfb_run() .. " love " ..
      sh_quote(root .. "/platform_spec/fixtures/love_listen") .. " 2>&1"))
    -- LÖVE's audio may say things first.
    local said, first = {}, nil
    repeat
      first = game:read("*l")
      said[#said + 1] = first
    until first == nil or first:match("^listening ")
    local pid = first and tonumber(first:match("/(%d+)%.sock$"))
    local function cli(args)
      return run.run3("TECS_PROFILE_DIR=" .. sh_quote(ctl) .. " " .. run.cli .. " " .. args)
    end
    local ok, err = pcall(function()
      assert.is_number(pid, table.concat(said, "\n"))
      local rc, out, e = cli("targets")
      assert.equal(0, rc, e)
      assert.matches("\n" .. pid .. " +love +[%d-]+ [%d:]+ +tecs%-profile%-listen\n", out)
      rc, out, e = cli("attach start")
      assert.equal(0, rc, e)
      local deadline = os.time() + 60
      repeat
        rc, out, e = cli("attach status")
        assert.equal(0, rc, e)
        assert.is_true(os.time() < deadline, out)
      until (tonumber(out:match("(%d+) samples")) or 0) >= 20
      -- A client writes in the control directory (the game names no outputDir).
      local file = ctl .. "/game.collapsed"
      rc, out, e = cli("attach stop -o " .. sh_quote(file))
      assert.equal(0, rc, e)
      local rows = collapsed.parse(assert(read(file)))
      local in_work = collapsed.sum(rows, function(r) return collapsed.has_frame(r, "^main%.lua:2[0-3]$") end)
      assert.is_true(in_work > 0, read(file))
    end)
    run.write(stop, "")
    local rest = game:read("*a")
    game:close()
    assert(ok, tostring(err) .. "\n" .. rest)
    -- The stop ran inside a step, whose wrapper went on to the rest of
    -- what it runs (the session's frame mark just taken off among them).
    assert.is_nil(rest:find("stack traceback", 1, true), rest)
    assert.is_nil(read(ctl .. "/" .. pid .. ".json"), "entry left after the game quit:\n" .. rest)
  end)

  -- `tecs-profile love`: the fixture love_plain has no profiler code at all.
  local PLAIN = root .. "/platform_spec/fixtures/love_plain"
  -- Bounds a wait for the game (it only caps a hang).
  local PATIENCE_SECONDS = 120

  -- What the game printed of its surroundings, one line a fact; the
  -- package's own modules, loaded in the game's state by the channel, are
  -- the one difference `tecs-profile love` leaves (docs/control.md).
  local function surroundings(out)
    local block = assert(out:match("ENV%-BEGIN\n(.-)ENV%-END\n"), out)
    return (block:gsub("tecs%.profile[%w%._]*,", ""))
  end

  -- `love` or `tecs-profile love` on `game` under xvfb-run, stdout and
  -- stderr apart: exit code, stdout, stderr. `launcher` is the command
  -- line before the game (nil: plain love).
  local function start_game(launcher, game, args, env)
    local set = { "XDG_DATA_HOME=" .. sh_quote(save_root) }
    for k, v in pairs(env or {}) do set[#set + 1] = k .. "=" .. sh_quote(v) end
    return run.run3("env " .. table.concat(set, " ") .. " timeout 60 " .. xvfb_run() .. " " ..
      (launcher or "love") .. " " .. sh_quote(game) .. " " .. args)
  end

  local function launcher(cli) return (cli or run.cli) .. " love" end

  -- A launched game running in the background, once it listens: `{ pid,
  -- ctl, stop, finish() }`; `finish` makes it quit and returns its output.
  -- It quits by itself after `patience` seconds (default PATIENCE_SECONDS).
  local function launch(game, work, patience)
    assert(os.execute("rm -rf " .. sh_quote(work) .. " && mkdir -p " .. sh_quote(work)) == 0)
    local g = { ctl = work .. "/ctl", stop = work .. "/stop" }
    g.p = assert(io.popen("env XDG_DATA_HOME=" .. sh_quote(save_root) .. " TECS_PROFILE_DIR=" .. sh_quote(g.ctl) ..
      " timeout " .. (patience or PATIENCE_SECONDS) .. " " .. xvfb_run() .. " " .. launcher() .. " " .. sh_quote(game) .. " --stop " ..
      sh_quote(g.stop) .. " 2>&1"))
    local said, line = {}, nil
    repeat
      line = g.p:read("*l")
      said[#said + 1] = line
    until line == nil or line:match("^tecs%-profile: listening on ")
    g.said = table.concat(said, "\n")
    g.pid = line and tonumber(line:match("/(%d+)%.sock "))
    function g.finish()
      run.write(g.stop, "")
      local rest = g.p:read("*a")
      g.p:close()
      return g.said .. "\n" .. rest
    end
    return g
  end

  local function cli_in(g, args)
    return run.run3("TECS_PROFILE_DIR=" .. sh_quote(g.ctl) .. " " .. run.cli .. " " .. args)
  end

  -- Starts a session in the launched game `g` through `attach` and waits
  -- until it holds `n` samples (the wait bounded, not timed).
  local function attach_until(g, n)
    local rc, out, e = cli_in(g, "attach start")
    assert.equal(0, rc, e)
    local deadline = os.time() + PATIENCE_SECONDS
    repeat
      rc, out, e = cli_in(g, "attach status")
      assert.equal(0, rc, e)
      assert.is_true(os.time() < deadline, out)
    until (tonumber(out:match("(%d+) samples")) or 0) >= n
  end

  -- The lines of burn_cycles in the fixture, and whether `name` (a
  -- function of the profile's top) is it: by name where the source is
  -- readable from the working directory (LÖVE's is not: its files are the
  -- game's), else by its span of lines.
  local function is_burn_cycles(name)
    local first, last, n = nil, nil, 0
    for line in io.lines(PLAIN .. "/main.lua") do
      n = n + 1
      if line:match("^local function burn_cycles") then first = n end
      if first and not last and line:match("^end") then last = n end
    end
    return name == ("burn_cycles (main.lua:%d)"):format(first) or name == ("main.lua:%d-%d"):format(first, last)
  end

  -- A .love archive of the fixture.
  local function plain_archive(work)
    assert(os.execute("rm -rf " .. sh_quote(work) .. " && mkdir -p " .. sh_quote(work) .. " && (cd " .. sh_quote(PLAIN) ..
      " && python3 -m zipfile -c " .. sh_quote(work .. "/plain.love") .. " main.lua conf.lua)") == 0)
    return work .. "/plain.love"
  end

  it("love GAME: targets lists the unmodified game, attach samples it, the game quits by itself", function()
    local g = launch(PLAIN, save_root .. "/launch")
    local ok, err = pcall(function()
      assert.is_number(g.pid, g.said)
      local rc, out, e = cli_in(g, "targets")
      assert.equal(0, rc, e)
      assert.matches("\n" .. g.pid .. " +love +[%d-]+ [%d:]+ +tecs%-profile%-plain\n", out)
      attach_until(g, 100)
      -- A client writes in the control directory (a launched game names no outputDir).
      local file = g.ctl .. "/game.collapsed"
      rc, out, e = cli_in(g, "attach stop -o " .. sh_quote(file))
      assert.equal(0, rc, e)
      assert.is_string(read(file), out)
      -- The answer's heaviest function, by self samples.
      local top = assert(out:match("\n +[%d.]+%%  ([^\n]+)\n"), out)
      assert.is_true(is_burn_cycles(top), out)
    end)
    local said = g.finish()
    assert(ok, tostring(err) .. "\n" .. said)
    assert.is_nil(read(g.ctl .. "/" .. g.pid .. ".json"), "entry left after the game quit:\n" .. said)
  end)

  it("love GAME: names the methods of LÖVE's objects and the functions the game kept before replacing them", function()
    local g = launch(root .. "/platform_spec/fixtures/love_methods", save_root .. "/methods")
    local file = g.ctl .. "/methods.collapsed"
    local ok, err = pcall(function()
      assert.is_number(g.pid, g.said)
      attach_until(g, 200)
      local rc, out, e = cli_in(g, "attach stop -o " .. sh_quote(file))
      assert.equal(0, rc, out .. e)
    end)
    local said = g.finish()
    assert(ok, tostring(err) .. "\n" .. said)
    local text = assert(read(file), said)
    local by_leaf, in_c = {}, 0
    for _, r in ipairs(collapsed.parse(text)) do
      if r.state == "C" then
        in_c = in_c + r.count
        local leaf = r.frames[#r.frames]
        by_leaf[leaf] = (by_leaf[leaf] or 0) + r.count
      end
    end
    -- Both C functions take time every frame: each named, neither by address.
    local method = (by_leaf["Data:getString"] or 0) + (by_leaf["ByteData:getString"] or 0)
    assert.is_true(method > 0, text)
    assert.is_true((by_leaf["love.data.hash"] or 0) > 0, text)
    local unnamed = 0
    for leaf, n in pairs(by_leaf) do
      if leaf:match("^%[C:") then unnamed = unnamed + n end
    end
    assert.is_true(unnamed <= 0.2 * in_c, string.format("%d of %d C samples unnamed:\n%s", unnamed, in_c, text))
  end)

  it("love GAME: the game sees what it sees under plain love, and its exit status passes through", function()
    local stop = save_root .. "/already-stopped"
    run.write(stop, "")
    local args = "--stop " .. sh_quote(stop) .. " --exit 3"
    local rc, plain_out, plain_err = start_game(nil, PLAIN, args)
    assert.equal(3, rc, plain_err)
    local launched_out, launched_err
    rc, launched_out, launched_err = start_game(launcher(), PLAIN, args)
    assert.equal(3, rc, launched_err)
    assert.matches("tecs%-profile: listening on [^\n]+%.sock", launched_err)
    assert.equal(surroundings(plain_out), surroundings(launched_out))
    assert.matches("^LD_PRELOAD=nil\n", surroundings(launched_out))
    -- A user's own LD_PRELOAD is given back as it was, and still preloaded.
    local env = { LD_PRELOAD = "libc.so.6" }
    rc, plain_out, plain_err = start_game(nil, PLAIN, args, env)
    assert.equal(3, rc, plain_err)
    rc, launched_out, launched_err = start_game(launcher(), PLAIN, args, env)
    assert.equal(3, rc, launched_err)
    assert.matches("tecs%-profile: listening on ", launched_err)
    assert.equal(surroundings(plain_out), surroundings(launched_out))
    assert.matches("^LD_PRELOAD=libc%.so%.6\n", surroundings(launched_out))
  end)

  it("love GAME: a game that calls listen() itself takes the channel over", function()
    local work = save_root .. "/own-listen"
    assert(os.execute("mkdir -p " .. sh_quote(work)) == 0)
    local stop = work .. "/stop"
    run.write(stop, "")
    local rc, out, err = start_game(launcher(), root .. "/platform_spec/fixtures/love_listen", "",
      { TECS_PROFILE_DIR = work .. "/ctl", TECS_LISTEN_STOP = stop })
    assert.equal(0, rc, err)
    local launched = err:match("tecs%-profile: listening on ([^\n]+%.sock) ")
    assert.is_string(launched, err)
    assert.matches("listening " .. launched:gsub("%p", "%%%0") .. "\n", out)
    assert.is_nil(err:find("stack traceback", 1, true), err)
    assert.is_nil(err:find("did not open", 1, true), err)
  end)

  it("love GAME: a game made for LÖVE 0.10.1 waits on LÖVE's dialog: stderr says so and how to go on", function()
    local game = root .. "/platform_spec/fixtures/love_oldversion"
    local work = save_root .. "/oldversion"
    assert(os.execute("mkdir -p " .. sh_quote(work)) == 0)
    local stop = work .. "/stop"
    run.write(stop, "")
    -- LÖVE waits on its dialog for good: the game is ended once the
    -- message is read (timeout bounds the wait for it; its TERM ends the
    -- whole process group, xvfb-run's server and the game).
    local ctl = work .. "/ctl"
    local p = assert(io.popen("(env XDG_DATA_HOME=" .. sh_quote(save_root) .. " TECS_PROFILE_DIR=" .. sh_quote(ctl) ..
      " timeout -k 5 " .. PATIENCE_SECONDS ..
      " " .. xvfb_run() .. " " .. launcher() .. " " .. sh_quote(game) .. " --stop " .. sh_quote(stop) ..
      " 2>&1 & echo \"pid=$!\"; wait $!) 2>&1"))
    local pid = tonumber(p:read("*l"):match("^pid=(%d+)$"))
    local said, message = {}, nil
    repeat
      local line = p:read("*l")
      said[#said + 1] = line
      message = line and line:match("^tecs%-profile: this game declares LÖVE 0%.10%.1 .*")
    until message or not line
    local before = table.concat(said, "\n")
    -- (Its X server gone, LÖVE's dialog returns: main.lua may run then.)
    os.execute("kill -TERM " .. pid .. " 2>/dev/null")
    local rest = p:read("*a")
    p:close()
    assert.is_string(message, before .. rest)
    assert.matches("compatibility dialog", message)
    assert.matches('set t%.version = "%d+%.%d+[%.%d]*" in conf%.lua', message)
    assert.matches("tecs%-profile love %-%-skip%-version%-check", message)
    assert.is_nil(before:find("main.lua runs", 1, true), before)
    -- With the option, LÖVE shows no dialog: the channel opens, main.lua
    -- runs and the game quits by itself (its stop file is there).
    local rc, out, err = start_game(launcher() .. " --skip-version-check", game, "--stop " .. sh_quote(stop),
      { TECS_PROFILE_DIR = ctl })
    assert.equal(0, rc, err)
    assert.matches("tecs%-profile: this game declares LÖVE 0%.10%.1 [^\n]*%-%-skip%-version%-check", err)
    assert.matches("tecs%-profile: listening on ", err)
    assert.matches("main.lua runs\n", out)
  end)

  -- `launcher` (nil: plain love) on the failing fixture with `args`, in
  -- the background: its lines up to LÖVE's printed error (and, with
  -- `until_line`, up to a line matching it), then killed (LÖVE's error
  -- screen waits for its window to close; what the game printed is
  -- unbuffered, so none of it is lost).
  local FAILS = root .. "/platform_spec/fixtures/love_fails"
  local function fail(launch_cmd, args, env, until_line)
    local set = { "XDG_DATA_HOME=" .. sh_quote(save_root) }
    for k, v in pairs(env or {}) do set[#set + 1] = k .. "=" .. sh_quote(v) end
    local p = assert(io.popen("(env " .. table.concat(set, " ") .. " timeout -k 5 " .. PATIENCE_SECONDS .. " " ..
      xvfb_run() .. " " .. (launch_cmd or "love") .. " " .. sh_quote(FAILS) .. " " .. args .. " 2>&1) 2>&1"))
    local lines, pid, errored, found = {}, nil, false, until_line == nil
    local g = { p = p, lines = lines }
    function g.read_until(pattern)
      for _, line in ipairs(lines) do
        if line:match(pattern) then return line end
      end
      while true do
        local line = p:read("*l")
        if not line then return nil end
        lines[#lines + 1] = line
        pid = pid or tonumber(line:match("^pid (%d+)$"))
        if line:match(pattern) then return line end
      end
    end
    function g.finish()
      errored = g.read_until("^Error: ") ~= nil
      if not found then found = g.read_until(until_line) ~= nil end
      if pid then os.execute("kill -KILL " .. pid .. " 2>/dev/null") end
      for line in (p:read("*a") .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end
      p:close()
      g.text = table.concat(lines, "\n")
      assert.is_true(errored and found, g.text)
      -- The traceback LÖVE printed: its "Error:" line and the frames below
      -- (the shell's word on the kill may follow the last unended line).
      local trace, at = {}, nil
      for i, line in ipairs(lines) do
        if not at and line:match("^Error: ") then at = i end
        if at and (i == at or i == at + 1 or line:match("^\t")) then
          trace[#trace + 1] = (line:gsub("Killed$", ""))
        elseif at then
          break
        end
      end
      assert.equal("stack traceback:", trace[2], g.text)
      g.traceback = table.concat(trace, "\n")
      return g
    end
    return g
  end

  it("love GAME: a game that fails prints LÖVE's own traceback, and the session is written", function()
    local plain = fail(nil, "").finish()
    assert.matches("main.lua:%d+: boom on purpose 42", plain.traceback)
    assert.matches("in function 'explode'", plain.traceback, 1, true)
    assert.matches("in function 'update'", plain.traceback, 1, true)

    -- Launched, with a session a client started running in love.update's
    -- zone when the game fails.
    local work = save_root .. "/fails"
    assert(os.execute("rm -rf " .. sh_quote(work) .. " && mkdir -p " .. sh_quote(work)) == 0)
    local ctl, trigger = work .. "/ctl", work .. "/fail-now"
    local g = fail(launcher(), "--fail " .. sh_quote(trigger), { TECS_PROFILE_DIR = ctl },
      "^tecs%-profile: the running session was written to ")
    local listening = g.read_until("^tecs%-profile: listening on ")
    local ok, err = pcall(function()
      assert.is_string(listening, table.concat(g.lines, "\n"))
      local rc, out, e = run.run3("TECS_PROFILE_DIR=" .. sh_quote(ctl) .. " " .. run.cli .. " attach start")
      assert.equal(0, rc, out .. e)
      local deadline = os.time() + PATIENCE_SECONDS
      repeat
        rc, out, e = run.run3("TECS_PROFILE_DIR=" .. sh_quote(ctl) .. " " .. run.cli .. " attach status")
        assert.equal(0, rc, e)
        assert.is_true(os.time() < deadline, out)
      until (tonumber(out:match("(%d+) samples")) or 0) >= 50
    end)
    run.write(trigger, "")
    g.finish()
    assert(ok, tostring(err) .. "\n" .. g.text)
    assert.equal(plain.traceback, g.traceback)
    assert.matches("\ntecs%-profile: the game failed: main%.lua:%d+: boom on purpose 42\n", g.text)
    local path = assert(g.text:match("tecs%-profile: the running session was written to (%S+)"), g.text)
    local rows = collapsed.parse(assert(read(path)))
    assert.is_true(collapsed.sum(rows) >= 50, g.text)
    local in_update = 0
    for _, r in ipairs(rows) do
      if r.frames[1] == "love.update" then in_update = in_update + r.count end
    end
    assert.is_true(in_update > 0, read(path))
  end)

  it("love GAME: a main.lua that does not compile: the game failed, and no channel said to listen", function()
    local work = save_root .. "/syntax"
    assert(os.execute("rm -rf " .. sh_quote(work) .. " && mkdir -p " .. sh_quote(work)) == 0)
    local p = assert(io.popen("(env XDG_DATA_HOME=" .. sh_quote(save_root) .. " TECS_PROFILE_DIR=" ..
      sh_quote(work .. "/ctl") .. " timeout -k 5 " .. PATIENCE_SECONDS .. " " .. xvfb_run() .. " " .. launcher() ..
      " " .. sh_quote(root .. "/platform_spec/fixtures/love_syntax") .. " 2>&1) 2>&1"))
    local said, line = {}, nil
    repeat
      line = p:read("*l")
      said[#said + 1] = line
    until not line or line:match("^tecs%-profile: the game failed")
    -- LÖVE's error screen waits for its window to close: LÖVE is killed
    -- (xvfb-run then ends its server).
    os.execute("pkill -KILL -f " .. sh_quote("^love .*fixtures/love_syntax") .. " 2>/dev/null")
    said[#said + 1] = p:read("*a")
    p:close()
    local text = table.concat(said, "\n")
    assert.matches("tecs%-profile: the game failed: main%.lua did not load: [^\n]*main%.lua:%d+:", text)
    assert.is_nil(text:find("listening on", 1, true), text)
  end)

  it("love GAME.love: the same from an archive, launched by an installed tecs-profile", function()
    local work = save_root .. "/archive-launch"
    local archive = plain_archive(work)
    local prefix = work .. "/prefix"
    local irc, iout = run.run("make -s install PREFIX=" .. sh_quote(prefix))
    assert.equal(0, irc, iout)
    local stop = work .. "/stopped"
    run.write(stop, "")
    local args = "--stop " .. sh_quote(stop) .. " --exit 0"
    -- No search path leads to the source tree: the installed copy finds its own files.
    local env = { LUA_PATH = "/nonexistent/?.lua;;", LUA_CPATH = "/nonexistent/?.so;;" }
    local rc, plain_out, plain_err = start_game(nil, archive, args, env)
    assert.equal(0, rc, plain_err)
    local installed = run.luajit .. " " .. sh_quote(prefix .. "/bin/tecs-profile") .. " love"
    local launched_out, launched_err
    rc, launched_out, launched_err = start_game(installed, archive, args, env)
    assert.equal(0, rc, launched_err)
    assert.matches("tecs%-profile: listening on [^\n]+%.sock", launched_err)
    assert.matches("\nidentity=tecs%-profile%-plain\n", plain_out)
    assert.equal(surroundings(plain_out), surroundings(launched_out))
    -- The archive listening: targets names it.
    local g = launch(archive, work .. "/run")
    local ok, err = pcall(function()
      assert.is_number(g.pid, g.said)
      local trc, out, e = cli_in(g, "targets")
      assert.equal(0, trc, e)
      assert.matches("\n" .. g.pid .. " +love +[%d-]+ [%d:]+ +tecs%-profile%-plain\n", out)
    end)
    local said = g.finish()
    assert(ok, tostring(err) .. "\n" .. said)
  end)

  it("love GAME: the live page's data names LÖVE's C functions as the report of its session does", function()
    -- love_cfuncs spends its frames in love.data.hash and love.data.compress.
    local g = launch(root .. "/platform_spec/fixtures/love_cfuncs", save_root .. "/live-names")
    -- The control directory: where a client (live) may have the profile written.
    local written = g.ctl .. "/live.collapsed"
    local live, data
    local ok, err = pcall(function()
      assert.is_number(g.pid, g.said)
      live = { p = assert(io.popen(string.format("(TECS_PROFILE_DIR=%s %s live %d --timeout %d --output %s & " ..
        "echo \"pid=$!\"; wait $!) 2>&1", sh_quote(g.ctl), run.cli, g.pid, PATIENCE_SECONDS, sh_quote(written)))) }
      live.pid = tonumber(live.p:read("*l"):match("^pid=(%d+)$"))
      local url
      repeat
        local line = live.p:read("*l")
        url = line and line:match("^live page: (http://%S+)$")
      until url or not line
      assert.is_string(url, "live printed no address")
      -- data.json, what the page draws, until it holds enough samples.
      local deadline = os.time() + PATIENCE_SECONDS
      repeat
        local rc, body, e = run.run3("curl -s " .. sh_quote(url .. "data.json"))
        assert.equal(0, rc, e)
        data = assert(require("tecs.profile.native").jsonDecode(body), body)
        assert.is_true(os.time() < deadline, body)
      until (data.samples or 0) >= 200
    end)
    -- live stops the session it started and writes it: what the report reads.
    if live then
      os.execute("kill -TERM " .. live.pid)
      live.said = live.p:read("*a")
      live.p:close()
    end
    local said = g.finish()
    assert(ok, tostring(err) .. "\n" .. said)
    assert.matches("written to ", live.said)
    local frames = {}
    for _, r in ipairs(collapsed.parse(assert(read(written), live.said))) do
      for _, f in ipairs(r.frames) do frames[f] = true end
    end
    -- The top functions: the two C functions by their Lua paths, and every
    -- function that is not Lua code named as the written profile names it.
    local top = {}
    for name in data.functions:gmatch("\n +[%d.]+%% +%d+  ([^\n]+)") do
      top[name] = true
      if not name:find(":%d") then assert.is_true(frames[name], name .. " is not in the report:\n" .. data.functions) end
    end
    assert.is_true(top["love.data.hash"] and top["love.data.compress"], data.functions)
    assert.is_true(frames["love.data.hash"] and frames["love.data.compress"], read(written))
    -- The flamegraph and the slowest frames name them the same way.
    assert.matches("love%.data%.hash", data.flamegraph)
    for name in data.flamegraph:gmatch("%[C:[^%]]*%]") do
      assert.is_true(frames[name], name .. " is not in the report:\n" .. data.functions)
    end
    local in_hitches = false
    for _, h in ipairs(data.hitches) do
      for _, t in ipairs(h.top) do in_hitches = in_hitches or t.name:find("^love%.data%.") ~= nil end
    end
    assert.is_true(in_hitches, data.functions)
  end)

  it("love GAME: today's MCP clients profile the launched game, in both eras", function()
    local mcp = require("spec.support.mcp")
    local native = require("tecs.profile.native")
    -- Time for every client's session, however slow the machine is.
    local g = launch(PLAIN, save_root .. "/mcp", 10 * PATIENCE_SECONDS)
    local ok, err = pcall(function()
      assert.is_number(g.pid, g.said)
      -- What an agent does (list, profile with seconds and progress, stop
      -- with nothing running, report, trace, mistakes, the resources), by
      -- each client in each era it speaks; the game's own function is the
      -- heaviest of each profile.
      local seconds = 2
      for _, driver in ipairs(mcp.drivers()) do
        local r = mcp.drive(g.ctl, driver, mcp.agent_calls(g.pid, seconds))
        local profiled = mcp.assert_agent_session(r, g.pid, seconds, driver.mode)
        assert.is_true(profiled.structured.samples > 0, r.client .. ": " .. profiled.text)
        assert.is_true(is_burn_cycles(profiled.structured.top[1].name), r.client .. ": " .. profiled.text)
      end
      -- The inspector's CLI reads the last profile by zone: LÖVE's
      -- callbacks are zones with no change to the game, and love.update is
      -- where it burns.
      for _, era in ipairs({ "legacy", "modern" }) do
        local report, said = mcp.inspect(g.ctl, era, string.format("--method tools/call --tool-name report "
          .. "--tool-arg target=%d --tool-arg by=zone", g.pid))
        assert(report and report.result, said)
        assert.is_nil(report.result.isError, said)
        assert.matches("%d+%.%d%% ±[%d.]+%s+love%.update\n", report.result.content[1].text, nil, false,
          native.json(report.result))
      end
    end)
    local said = g.finish()
    assert(ok, tostring(err) .. "\n" .. said)
  end)
end)
