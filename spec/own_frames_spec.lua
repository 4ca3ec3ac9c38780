-- Frames no profile shows: the profiler's own (its Lua files and its native
-- module), and the host's entry below a stack's first Lua frame (`pmain`
-- of the luajit executable); and the trace aborts in the profiler's own
-- files, which no trace report shows.
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local collapsed = require("spec.support.collapsed")
local sampling = require("spec.support.sampling")
local run = require("spec.support.run")
local t = require("spec.support.trace")

-- A frame of this package: a line of its Lua files, or its native module.
local function own(frame)
  return frame:match("tecs/profile[/.][^:]*:%d") ~= nil or frame:match("^%[C:tecs%.profile%.native%]") ~= nil
    or frame:match("native%.so") ~= nil
end

describe("frames no profile shows", function()
  after_each(sessions.stop_all)

  it("a sample taken in the profiler's own calls goes to the line that called it", function()
    local s = profile.sample({ intervalMs = 0.2 })
    local this = debug.getinfo(1, "S").short_src
    local call_line
    sampling.until_samples(s, 300, function()
      call_line = debug.getinfo(1, "l").currentline + 1
      for _ = 1, 20 do s:stats() end
    end)
    local text = s:stop()
    local rows = collapsed.parse(text)
    assert.is_true(collapsed.sum(rows) >= 300, text)
    for _, r in ipairs(rows) do
      for _, f in ipairs(r.frames) do
        assert.is_false(own(f), "the profiler's own frame " .. f .. " in:\n" .. text)
      end
    end
    -- The leaf is the calling line, or the calling function's span where
    -- the sample was taken outside interpreted code (a C function's tick
    -- placed at the next safe point).
    local at_call = collapsed.sum(rows, function(r)
      local file, first, last = r.frames[#r.frames]:match("^(.*):(%d+)%-?(%d*)$")
      if not file or file:sub(-#this) ~= this then return false end
      first, last = tonumber(first), tonumber(last) or tonumber(first)
      return first <= call_line and call_line <= last
    end)
    assert.is_true(at_call > 0, "no sample on the line calling stats():\n" .. text)
  end)

  it("drops the luajit executable's entry frame below the main chunk", function()
    local dir = run.tmpdir()
    run.write(dir .. "/main.lua", [[
      local out = ...
      local profile = require("tecs.profile")
      local s = profile.sample({ intervalMs = 0.2 })
      local function work() local x = 0 for i = 1, 1e5 do x = (x + i) % 13 end return x end
      while s:stats().recordedSamples < 200 do work() end
      local f = assert(io.open(out, "w"))
      f:write(s:stop())
      f:close()
    ]])
    local rc, out = run.run(run.luajit .. " " .. run.quote(dir .. "/main.lua") .. " " .. run.quote(dir .. "/out.collapsed"))
    assert.equal(0, rc, out)
    local text = assert(run.read(dir .. "/out.collapsed"))
    os.execute("rm -rf " .. run.quote(dir))
    local rows = collapsed.parse(text)
    assert.is_true(collapsed.sum(rows) >= 200, text)
    for _, r in ipairs(rows) do
      assert.is_nil(r.frames[1]:match("^%[C:"), "a C frame at the root:\n" .. text)
      assert.matches("main%.lua:%d", r.frames[1])
    end
  end)

  it("leaves the aborts in the profiler's own files out of a trace report and the timeline, by the samples' rule",
    function()
      local native = require("tecs.profile.native")
      -- The rule, as the profiles apply it to frames.
      assert.is_true(native.isOwnFrame("/usr/share/lua/5.1/tecs/profile/host/love_zones.lua:45"))
      assert.is_true(native.isOwnFrame("tecs/profile.lua:12"))
      assert.is_false(native.isOwnFrame("/game/mytecs/profile/x.lua:3"))
      assert.is_false(native.isOwnFrame("main.lua:3"))
      -- The same loop, one aborting copy in a file of the package's (as
      -- its wrappers of a game's callbacks are), one in the program's, with
      -- a sampling session beside, whose timeline notes the aborts.
      local own_chunk = "@" .. run.root .. "/lua/tecs/profile/host/own_abort_fixture.lua"
      local samples = profile.sample({ intervalMs = 1 })
      local s = profile.trace()
      t.fresh_nyi_loop(own_chunk)()
      t.fresh_nyi_loop("@/game/main_abort.lua")()
      local r = s:stop()
      samples:stop()
      local program = t.own_sites(r.sites, "/game/main_abort.lua")
      assert.equal(1, #program, tostring(r))
      assert.is_true(program[1].count >= 2, tostring(r))
      for _, site in ipairs(r.sites) do
        assert.is_false(native.isOwnFrame(site.location), "an abort in the profiler's own file: " .. site.location)
      end
      -- Counted among the VM's aborts all the same.
      assert.is_true(r.tracesAborted >= r.totalAborts + 2, tostring(r.tracesAborted) .. " vs " .. r.totalAborts)
      assert.equal(r.tracesStarted, r.tracesCompleted + r.tracesAborted)
      local noted = 0
      for _, e in ipairs(samples._native:events()) do
        if e.name == "trace abort" then
          assert.is_false(native.isOwnFrame(e.details.location), e.details.location)
          if e.details.location:match("^/game/main_abort%.lua:") then noted = noted + 1 end
        end
      end
      assert.equal(program[1].count, noted)
    end)
end)
