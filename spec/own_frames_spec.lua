-- Frames no profile shows: the profiler's own (its Lua files and its native
-- module), and the host's entry below a stack's first Lua frame (`pmain`
-- of the luajit executable).
local sessions = require("spec.support.sessions")
local profile = require("tecs.profile")
local collapsed = require("spec.support.collapsed")
local sampling = require("spec.support.sampling")
local run = require("spec.support.run")

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
end)
