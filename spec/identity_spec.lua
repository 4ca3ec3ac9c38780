-- Function identity recorded while sampling: the function views name
-- functions from what the VM knew while the samples were taken, whatever
-- the working directory, for chunks that are not files, and after a source
-- has changed; and they say so when a name or a source is not known.
local profile = require("tecs.profile")
local run = require("spec.support.run")
local sampling = require("spec.support.sampling")

-- A module whose time goes to `hot` (called by `run`), with `cold` beside it.
local SOURCE = [[
local M = {}
function M.hot(n)
  local s = 0
  for i = 1, n do s = (s + i * 3) % 65537 end
  return s
end
function M.cold(n)
  return n + 1
end
function M.run(n) return M.hot(n) + M.cold(n) end
return M
]]

-- The text of the report's row whose label contains `pattern` (plain), or nil.
local function row(report, pattern)
  for line in report:gmatch("[^\n]+") do
    if not line:find("^#") and line:find(pattern, 1, true) then return line end
  end
end

-- The self share (percent) of that row.
local function self_share(report, pattern)
  local r = row(report, pattern)
  return r and tonumber(r:match("^%s*([%d.]+)%%")) or 0
end

local function sample_run(m, opts)
  local s = profile.sample(opts)
  sampling.until_samples(s, 300, function() m.run(20000) end)
  s:stop()
  return s
end

describe("function identity", function()
  it("names the functions of a chunk whose path is relative to another directory", function()
    -- What a game started from another directory looks like: its chunk names
    -- are paths this process cannot open.
    local m = assert(load(SOURCE, "@elsewhere/game.lua"))()
    for _, precision in ipairs({ "function", "line" }) do
      local s = sample_run(m, { precision = precision })
      local text = profile.report(s)
      assert.is_true(self_share(text, "hot (elsewhere/game.lua:2)") > 50, text)
      assert.is_nil(text:find("elsewhere/game.lua: cannot read", 1, true), text)
      local callers = profile.report(s, { mode = "s" })
      assert.truthy(callers:find("<- run (elsewhere/game.lua:10)", 1, true), callers)
      local svg = profile.flamegraph(s, { frames = "function" })
      assert.truthy(svg:find("hot (elsewhere/game.lua:2)", 1, true))
      -- hotAborts ranks by the function, known from the VM.
      local sites = { { severity = "warn", count = 1, reason = "r", location = "elsewhere/game.lua:5" } }
      local hot, ranked = profile.hotAborts(s, { sites = sites })
      assert.is_true(ranked[1].functionKnown, hot)
      assert.is_true(ranked[1].functionSelf > ranked[1].lineSelf, hot)
      -- Read back from collapsed text, the file cannot be read: said so.
      local back = profile.report(s:collapsed())
      assert.truthy(back:find("# note: elsewhere/game.lua: cannot read the file", 1, true), back)
      assert.is_nil(back:find("hot (", 1, true), back)
    end
  end)

  it("names recorded functions by the path that reaches them from the loaded modules", function()
    local m = assert(load(SOURCE, "@elsewhere/module.lua"))()
    package.loaded["spec_identity_module"] = m
    local s = sample_run(m)
    package.loaded["spec_identity_module"] = nil
    local text = profile.report(s)
    assert.is_true(self_share(text, " spec_identity_module.hot (elsewhere/module.lua:2)") > 50, text)
    -- Called as `M.hot` by `run`, but `run` itself is called as `m.run`:
    -- the path, found at stop, names both the same way.
    local callers = profile.report(s, { mode = "s" })
    assert.truthy(callers:find("<- spec_identity_module.run (elsewhere/module.lua:10)", 1, true), callers)
  end)

  it("names functions in a process started from another directory", function()
    local dir = run.tmpdir()
    run.write(dir .. "/work.lua", SOURCE)
    run.write(dir .. "/main.lua", [[
      local profile = require("tecs.profile")
      local m = dofile("work.lua")
      local s = profile.sample()
      local t0 = os.clock()
      while os.clock() - t0 < 0.5 do m.run(20000) end
      s:stop("p.collapsed")
      io.write(profile.report(s))
    ]])
    local rc, out = run.run(string.format("cd %s && %s main.lua", run.quote(dir), run.luajit))
    assert.equal(0, rc, out)
    assert.is_true(self_share(out, "M.hot (work.lua:2)") > 50, out)
    -- From here, work.lua is not readable: the functions file written
    -- beside the collapsed one names its functions as the session did.
    local text = profile.report(dir .. "/p.collapsed")
    assert.is_true(self_share(text, "M.hot (work.lua:2)") > 50, text)
    assert.is_nil(text:find("cannot read", 1, true), text)
    -- Without it, the report says why it cannot name them.
    os.remove(dir .. "/p.collapsed.functions.json")
    text = profile.report(dir .. "/p.collapsed")
    assert.truthy(text:find("# note: work.lua: cannot read the file (relative paths", 1, true), text)
    assert.truthy(row(text, "work.lua:"), text)
    os.execute("rm -r " .. run.quote(dir))
  end)

  it("does not take names from a source edited after the profile", function()
    local path = os.tmpname() .. ".lua"
    run.write(path, SOURCE)
    local m = dofile(path)
    local s = sample_run(m, { precision = "line" })
    assert.is_true(self_share(profile.report(s), "M.hot (" .. path .. ":2)") > 50, "before the edit")
    -- Three lines more at the top, and a function where `hot`'s loop was.
    run.write(path, "-- edited\n\n\nlocal M = {}\nfunction M.wrong()\n  return 1\nend\nreturn M\n")
    local text = profile.report(s)
    assert.is_nil(text:find("wrong", 1, true), text)
    assert.is_true(self_share(text, "hot (" .. path .. ":2)") > 50, text)
    assert.truthy(text:find("# note: " .. path .. " has changed since it was profiled", 1, true), text)
    local annotated = profile.report(s, { annotate = "hot" })
    assert.truthy(annotated:find("# note: " .. path .. " has changed since it was profiled", 1, true), annotated)
    -- Collapsed text has no recorded functions: the file does not fit the
    -- frames, so its lines stay lines, and the note says why.
    local back = profile.report(s:collapsed())
    assert.is_nil(back:find("wrong", 1, true), back)
    assert.truthy(back:find("# note: " .. path .. " does not match the profile", 1, true), back)
    os.remove(path)
  end)

  it("identifies chunks that are not files", function()
    local named = assert(load(SOURCE, "=archive/main.lua"))()
    local s = sample_run(named)
    local text = profile.report(s)
    assert.is_true(self_share(text, "hot (archive/main.lua:2)") > 50, text)
    local anon = assert(load(SOURCE))()
    s = sample_run(anon)
    text = profile.report(s)
    assert.is_true(self_share(text, 'hot ([string "local M = {}..."]:2)') > 50, text)
  end)

  it("keeps a line apart when it ran in two versions of a chunk", function()
    -- The same chunk name loaded twice: line 2 is in `hot` (lines 1-3) in
    -- the first version, in `loop` (lines 2-4) in the second.
    local v1 = assert(load("local function hot(n)\n  local s = 0 for i = 1, n do s = (s + i) % 7 end return s\nend\n" ..
      "return hot\n", "@reloaded.lua"))()
    local v2 = assert(load("local x = 1\nlocal function loop(n) local s = 0 for i = 1, n do s = (s + i) % 7 end " ..
      "return s\n\nend\nreturn loop\n", "@reloaded.lua"))()
    local s = profile.sample({ precision = "line" })
    sampling.for_cpu(0.3, function() v1(20000) end)
    sampling.for_cpu(0.3, function() v2(20000) end)
    s:stop()
    local text = profile.report(s, { minPercent = 0 })
    -- Neither function can be told from the other by the frame: the view
    -- shows the line rather than a wrong function, and says why.
    assert.is_true(self_share(text, "reloaded.lua:2") > 50, text)
    assert.is_nil(text:find("hot (", 1, true), text)
    assert.is_nil(text:find("loop (", 1, true), text)
    assert.truthy(text:find("ran in two different functions", 1, true), text)
  end)

  -- Whether a recorded function of the frame's file spans the frame's line:
  -- a leaf moved to the line of the C call its time belongs to (line
  -- precision) is a frame the sampler never saw, in a function it did.
  local function spanned(recorded, frame)
    local file, line = frame:match("^(.*):(%d+)$")
    if not file then return false end
    line = tonumber(line)
    for text, f in pairs(recorded) do
      if text:sub(1, #file + 1) == file .. ":" and f.first <= line and line <= f.last then return true end
    end
    return false
  end

  it("records a function for every Lua frame: pcall, coroutines, callbacks from C, cut stacks", function()
    local function leaf(n) local s = 0 for i = 1, n do s = s + i % 3 end return s end
    local function via_pcall(n) local _, v = pcall(leaf, n) return v end
    local function format(n)
      local t = {}
      for i = 1, n do t[#t + 1] = string.format("%d", i) end
      return table.concat(t)
    end
    local co = coroutine.wrap(function(n) while true do n = coroutine.yield(leaf(n)) end end)
    local function sorter(n)
      local t = {}
      for i = 1, n do t[i] = (i * 7919) % 1000 end
      table.sort(t, function(a, b) return a < b end)
      return t
    end
    local function deep(d, n) if d == 0 then return leaf(n) end return deep(d - 1, n) + 0 end
    local function tail(n) return leaf(n) end
    for _, precision in ipairs({ "function", "line" }) do
      local s = profile.sample({ precision = precision, stackDepth = 8 })
      sampling.for_cpu(0.6, function()
        via_pcall(2000) format(200) co(2000) sorter(300) deep(12, 500) tail(1000)
      end)
      s:stop()
      local recorded = s._native:frameFunctions()
      local frames, missing = 0, {}
      for line in s:collapsed():gmatch("[^\n]+") do
        local stack = line:match("^(.*) %d+$"):gsub("_%[%a%]$", "")
        for frame in stack:gmatch("[^;]+") do
          if frame:find("%.lua:%d+$") or frame:find("%.lua:%d+%-%d+$") then
            frames = frames + 1
            if not recorded[frame] and not spanned(recorded, frame) then missing[#missing + 1] = frame end
          end
        end
      end
      assert.is_true(frames > 10, "Lua frames: " .. frames)
      assert.same({}, missing)
    end
  end)

  it("falls back to line shares in hotAborts when the function is not known", function()
    local collapsed = "main.lua:1;nowhere/x.lua:10 30\nmain.lua:1;nowhere/x.lua:12 70\n"
    local sites = { { severity = "warn", count = 2, reason = "r", location = "nowhere/x.lua:10" } }
    local text, ranked = profile.hotAborts(collapsed, { sites = sites })
    assert.is_false(ranked[1].functionKnown)
    assert.equal(30, ranked[1].lineSelf)
    assert.equal(ranked[1].lineSelf, ranked[1].functionSelf)
    assert.equal(ranked[1].lineTotal, ranked[1].functionTotal)
    assert.truthy(text:find("30.0%*", 1, true), text)
    assert.truthy(text:find("# note: nowhere/x.lua: cannot read the file", 1, true), text)
  end)
end)
