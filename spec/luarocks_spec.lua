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

  it("make dist: a binary rock that installs and profiles with no cargo on PATH, and a source rock", function()
    local rc, out = run("DIST_TARGETS=host bash scripts/dist.sh")
    assert.equal(0, rc, out)
    local src = out:match("(dist/tecs%-profile%-[%d.]+%-%d+%.src%.rock)")
    local bin = out:match("(dist/tecs%-profile%-[%d.]+%-%d+%.linux%-x86_64%.rock)")
    assert.is_string(src, out)
    assert.is_string(bin, out)
    local root = os.getenv("PWD")
    local btree = tree .. "-binary"
    -- The system's commands without cargo, rustc or rustup.
    local path = tree .. "-path"
    assert.equal(0, os.execute(string.format("mkdir -p '%s' && for p in /usr/bin/* /bin/*; do case ${p##*/} in "
      .. "cargo|rustc|rustup) ;; *) ln -sf \"$p\" '%s/' 2>/dev/null ;; esac; done; true", path, path)))
    rc, out = run(string.format("cd / && env -u LUA_PATH -u LUA_CPATH PATH='%s' luarocks --lua-version=5.1 install "
      .. "--tree '%s' '%s/%s' && PATH='%s' command -v cargo || true", path, btree, root, bin, path))
    assert.equal(0, rc, out)
    assert.matches("is now installed in", out, 1, true)
    assert.is_nil(out:find("/cargo", 1, true), out)
    local script = tree .. "-check.lua"
    proc.write(script, [[
      local profile = require("tecs.profile")
      local s = profile.sample()
      local t0, x = os.clock(), 0
      while os.clock() - t0 < 0.3 do for i = 1, 1000 do x = (x + i) % 7 end end
      local text = s:stop()
      assert(text:match("^[^\n]+_%[[NICGJ]%] %d+\n"), text)
      io.write("OK ", package.searchpath("tecs.profile.native", package.cpath))
    ]])
    rc, out = run(string.format("cd / && env -u LUA_PATH -u LUA_CPATH LUA_PATH='%s/share/lua/5.1/?.lua;;' "
      .. "LUA_CPATH='%s/lib/lua/5.1/?.so' %s '%s'", btree, btree, luajit, script))
    assert.equal(0, rc, out)
    assert.matches("^OK " .. btree:gsub("%p", "%%%0") .. "/lib/lua/5.1/tecs/profile/native.so", out)
    rc, out = run(string.format("cd / && env -u LUA_PATH -u LUA_CPATH PATH='%s' '%s/bin/tecs-profile' report "
      .. "'%s/spec/golden/input.collapsed'", path, btree, root))
    assert.equal(0, rc, out)
    assert.matches("1000 samples", out)
    assert.is_string(proc.read(btree .. "/lib/luarocks/rocks-5.1/tecs-profile/0.1.0-1/plugin/tecs_profile.lua"))
    -- The source rock unpacks to the rockspec and the tree it builds from.
    local unpacked = tree .. "-src"
    rc, out = run(string.format("mkdir -p '%s' && cd '%s' && luarocks --lua-version=5.1 unpack '%s/%s'", unpacked,
      unpacked, root, src))
    assert.equal(0, rc, out)
    local dir = unpacked .. "/" .. src:match("([^/]+)%.src%.rock$")
    assert.is_string(proc.read(dir .. "/" .. src:match("([^/]+)%.src%.rock$") .. ".rockspec"))
    assert.is_string(proc.read(dir .. "/tecs-profile-0.1.0/Cargo.toml"))
    assert.is_string(proc.read(dir .. "/tecs-profile-0.1.0/src/lib.rs"))
    os.execute(string.format("rm -rf '%s' '%s' '%s' '%s'", btree, path, script, unpacked))
  end)
end)
