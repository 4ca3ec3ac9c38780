-- Installs the rock with `luarocks make` into a temporary tree and uses it
-- from a fresh luajit process that sees only that tree.
local proc = require("spec.support.run")
local run, luajit = proc.run, proc.luajit

describe("luarocks make", function()
  local tree = os.tmpname()
  os.remove(tree)

  teardown(function() os.execute("rm -rf '" .. tree .. "'") end)

  it("installs a rock that require() loads in a fresh luajit", function()
    local rc, out = run("luarocks --lua-version=5.1 make rockspec/tecs-profile-scm-1.rockspec --tree '" .. tree .. "'")
    assert.equal(0, rc, out)
    local script = [[
      local profile = require("tecs.profile")
      assert(require("tecs.utils.profile") == profile)
      local s = profile.sample()
      local t0 = os.clock()
      local x = 0
      while os.clock() - t0 < 0.3 do for i = 1, 1000 do x = (x + i) % 7 end end
      local text = s:stop()
      assert(text:match("^[^\n]+_%[[NICGJ]%] %d+\n"), text)
      io.write("OK ", package.searchpath("tecs.profile.native", package.cpath))
    ]]
    local f = assert(io.open(tree .. "/check.lua", "w"))
    f:write(script)
    f:close()
    rc, out = run(string.format(
      "cd / && LUA_PATH='%s/share/lua/5.1/?.lua;;' LUA_CPATH='%s/lib/lua/5.1/?.so' %s '%s/check.lua'",
      tree, tree, luajit, tree))
    assert.equal(0, rc, out)
    assert.matches("^OK " .. tree:gsub("%p", "%%%0") .. "/lib/lua/5.1/tecs/profile/native.so", out)
    -- Neovim's plugin file is in the rock's own directory.
    assert.is_string(proc.read(tree .. "/lib/luarocks/rocks-5.1/tecs-profile/scm-1/plugin/tecs_profile.lua"))
    -- The command line comes with the rock.
    rc, out = run(string.format("cd / && env -u LUA_PATH -u LUA_CPATH '%s/bin/tecs-profile' report '%s/spec/golden/input.collapsed'",
      tree, os.getenv("PWD")))
    assert.equal(0, rc, out)
    assert.matches("1000 samples", out)
  end)
end)
