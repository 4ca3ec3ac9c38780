-- Without LuaJIT's jit/*.lua (some LÖVE builds, or a LUA_PATH without `;;`)
-- the profiler keeps its zones and names builtins [builtin#N]. A fresh
-- luajit process hides jit.zone and jit.vmdef through package.preload.
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
  it("tags zones with the fallback stack and names builtins [builtin#N]", function()
    local path = os.tmpname()
    run.write(path, SCRIPT)
    local rc, out = run.run(string.format("env LUA_PATH='%s/lua/?.lua;%s' LUA_CPATH='%s/build/lib/?.so;%s' %s %s",
      root, os.getenv("LUA_PATH") or ";", root, os.getenv("LUA_CPATH") or ";", luajit, path))
    os.remove(path)
    assert.equal(0, rc, out)
    local rows = collapsed.parse(out)
    local zoned = collapsed.sum(rows, function(r) return r.frames[1] == "outer" and r.frames[2] == "inner" end)
    assert.is_true(zoned > 0, out)
    local builtin = collapsed.sum(rows, function(r) return collapsed.has_frame(r, "^%[builtin#%d+%]$") end)
    assert.is_true(builtin > 0, "no [builtin#N] frame:\n" .. out)
    assert.is_nil(out:find(";pcall;", 1, true), out)
  end)
end)
