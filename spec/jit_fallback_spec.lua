-- Without LuaJIT's jit/*.lua (some LÖVE builds, or a LUA_PATH without `;;`)
-- the profiler keeps its zones and names builtins by the Lua path that
-- reaches them. A fresh luajit process hides jit.zone and jit.vmdef
-- through package.preload.
local collapsed = require("spec.support.collapsed")
local run = require("spec.support.run")

local luajit, root = run.luajit, run.root

local SCRIPT = [[
package.preload["jit.zone"] = function() error("jit.zone hidden by the test") end
package.preload["jit.vmdef"] = function() error("jit.vmdef hidden by the test") end
local profile = require("tecs.profile")
local zone = profile.zone()
assert(zone == require("tecs.profile.zone"), "not the fallback zone stack")
assert(require("jit.zone") == zone, "require('jit.zone') does not give the shared stack")
local function work() local x = 0 for i = 1, 100000 do x = (x + i) % 7 end return x end
local s = profile.sample()
local t0 = os.clock()
while os.clock() - t0 < 0.4 do
  zone("outer") zone("inner") pcall(work) zone() zone()
end
io.write(s:stop())
]]

describe("without jit.zone and jit.vmdef", function()
  it("tags zones with the fallback stack and names builtins by their Lua path", function()
    local path = os.tmpname()
    run.write(path, SCRIPT)
    local rc, out = run.run(string.format("env LUA_PATH='%s/lua/?.lua;%s' LUA_CPATH='%s/build/lib/?.so;%s' %s %s",
      root, os.getenv("LUA_PATH") or ";", root, os.getenv("LUA_CPATH") or ";", luajit, path))
    os.remove(path)
    assert.equal(0, rc, out)
    local rows = collapsed.parse(out)
    local zoned = collapsed.sum(rows, function(r) return r.frames[1] == "outer" and r.frames[2] == "inner" end)
    assert.is_true(zoned > 0, out)
    local pcalls = collapsed.sum(rows, function(r) return collapsed.has_frame(r, "^pcall$") end)
    assert.is_true(pcalls > 0, "pcall not named:\n" .. out)
    assert.is_nil(out:find("[builtin#", 1, true), out)
  end)

  it("ignores a jit.vmdef of another LuaJIT build, whose numbers would name builtins wrongly", function()
    -- OpenResty's luajit2 numbers its builtins differently: with another
    -- build's jit/vmdef.lua first on the path, os.clock was named
    -- debug.getmetatable. Here the real one, its builtins renumbered.
    local path = os.tmpname()
    run.write(path, [[
local real = dofile(package.searchpath("jit.vmdef", package.path))
local shifted = {}
for id, name in pairs(real.ffnames) do shifted[id + 6] = name end
package.loaded["jit.vmdef"] = setmetatable({ ffnames = shifted }, { __index = real })
local jitinfo = require("tecs.profile.jitinfo")
assert(jitinfo.vmdef() == nil, "another build's jit.vmdef was taken")
assert(jitinfo.ffnames()[require("jit.util").funcinfo(os.clock).ffid] == "os.clock", "os.clock misnamed")
local profile = require("tecs.profile")
local s = profile.sample()
local t0, n = os.clock(), 0
while os.clock() - t0 < 0.3 do n = n + 1 end
io.write(s:stop())
]])
    local rc, out = run.run(string.format("env LUA_PATH='%s/lua/?.lua;%s' LUA_CPATH='%s/build/lib/?.so;%s' %s %s",
      root, os.getenv("LUA_PATH") or ";", root, os.getenv("LUA_CPATH") or ";", luajit, path))
    os.remove(path)
    assert.equal(0, rc, out)
    local rows = collapsed.parse(out)
    -- The clock calls are named by their own path, not by another build's
    -- numbers.
    local clock = collapsed.sum(rows, function(r) return r.frames[#r.frames] == "os.clock" end)
    assert.is_true(clock > 0, out)
    assert.is_nil(out:find("debug.getmetatable", 1, true), out)
  end)
end)
