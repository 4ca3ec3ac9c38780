-- `busted --helper=tecs.profile.busted` profiles a whole run of another
-- project's specs (platform_spec/fixtures/busted_project) without touching them.
local collapsed = require("spec.support.collapsed")
local run = require("spec.support.run")

local root = run.root
local project = root .. "/platform_spec/fixtures/busted_project"
local luajit = run.luajit
local sh_quote, read = run.quote, run.read

-- Run busted's runner with this LuaJIT in the fixture project.
local function busted(args, env)
  local busted_bin = io.popen("command -v busted"):read("*l")
  return run.run(string.format(
    "cd %s && env -u TECS_PROFILE -u TECS_PROFILE_INTERVAL_MS %s LUA_PATH=%s LUA_CPATH=%s %s %s -o TAP %s spec",
    sh_quote(project), env or "",
    sh_quote(root .. "/lua/?.lua;" .. (os.getenv("LUA_PATH") or ";")),
    sh_quote(root .. "/build/lib/?.so;" .. (os.getenv("LUA_CPATH") or ";")),
    sh_quote(luajit), sh_quote(busted_bin), args))
end

describe("tecs.profile.busted helper", function()
  local out_path = os.tmpname()
  after_each(function()
    for _, path in ipairs({ out_path, project .. "/busted.collapsed" }) do
      os.remove(path)
      os.remove(path .. ".functions.json")
    end
  end)

  it("writes one profile per run to $TECS_PROFILE, split by spec file", function()
    os.remove(out_path)
    local rc, out = busted("--helper=tecs.profile.busted", "TECS_PROFILE=" .. sh_quote(out_path))
    assert.equal(0, rc, out)
    assert.matches("ok 1 %- arithmetic sums squares", out)
    assert.matches("ok 2 %- strings builds long strings", out)
    assert.matches("tecs.profile.busted: %d+ samples written to " .. out_path:gsub("%p", "%%%0"), out)
    local rows = collapsed.parse(assert(read(out_path), out))
    local total = collapsed.sum(rows)
    assert.is_true(total > 0, out)
    -- The zone is the spec file's path: spec/math_spec.lua -> "spec;math_spec.lua".
    local function file_zone(name)
      return collapsed.sum(rows, function(r) return r.frames[1] == "spec" and r.frames[2] == name end)
    end
    local math_n, strings_n = file_zone("math_spec.lua"), file_zone("strings_spec.lua")
    assert.is_true(math_n > 0 and strings_n > 0, string.format("math %d, strings %d", math_n, strings_n))
    local leaf_in_spec = collapsed.sum(rows, function(r)
      return r.frames[#r.frames]:match("^spec/math_spec%.lua:%d+%-?%d*$") ~= nil
    end)
    assert.is_true(leaf_in_spec > 0, "no samples in spec/math_spec.lua's own lines")
    assert.is_nil(read(project .. "/busted.collapsed"))
  end)

  it("takes -Xhelper out=PATH,intervalMs=N, and defaults to ./busted.collapsed", function()
    os.remove(out_path)
    local rc, out = busted("--helper=tecs.profile.busted -Xhelper out=" .. sh_quote(out_path) .. ",intervalMs=20")
    assert.equal(0, rc, out)
    local rows = collapsed.parse(assert(read(out_path), out))
    local n20 = collapsed.sum(rows)
    assert.is_true(n20 > 0, out)
    rc, out = busted("--helper=tecs.profile.busted")
    assert.equal(0, rc, out)
    local n1 = collapsed.sum(collapsed.parse(assert(read(project .. "/busted.collapsed"), out)))
    -- Same work at a 20 times longer interval: clearly fewer samples, at
    -- least half as many on any clock (20 ms is 50 a second, and a clock on
    -- the kernel's tick gives 1 ms at least 100).
    assert.is_true(n1 > 1.5 * n20, string.format("1 ms: %d samples, 20 ms: %d", n1, n20))
  end)

  it("keeps the profile in a temporary file when the output cannot be written", function()
    local rc, out = busted("--helper=tecs.profile.busted", "TECS_PROFILE=/nonexistent-dir/run.collapsed")
    assert.equal(0, rc, out)
    assert.matches("cannot write '/nonexistent-dir/run.collapsed'", out, 1, true)
    local spare = out:match("the profile was saved to (%S+%.collapsed)")
    assert.is_string(spare, out)
    local text = assert(read(spare), out)
    os.remove(spare)
    assert.is_true(collapsed.sum(collapsed.parse(text)) > 0, text)
  end)

  it("fails the run with a clear message on a bad helper argument", function()
    local rc, out = busted("--helper=tecs.profile.busted -Xhelper colour=blue")
    assert.is_true(rc ~= 0, out)
    assert.matches("tecs.profile.busted: unknown helper argument string \"colour=blue\"", out, 1, true)
  end)

  it("tecs-profile busted runs the specs in LuaJIT with the helper, with luarocks' paths", function()
    os.remove(out_path)
    -- `luarocks path` sets LUA_PATH and LUA_CPATH without ";;": Lua 5.1
    -- directories only, without LuaJIT's jit/ directory (the recipe that
    -- breaks /usr/bin/busted, a Lua 5.2 script).
    local rc, out = run.run(string.format(
      "cd %s && unset LUA_PATH LUA_CPATH && eval \"$(luarocks --lua-version=5.1 path)\" && case \"$LUA_PATH\" in *';;'*) exit 9;; esac && " ..
      "%s %s busted -o TAP -Xhelper out=%s",
      sh_quote(project), sh_quote(luajit), sh_quote(root .. "/bin/tecs-profile"), sh_quote(out_path)))
    assert.equal(0, rc, out)
    assert.matches("ok 2 %- strings builds long strings", out)
    local rows = collapsed.parse(assert(read(out_path), out))
    assert.is_true(collapsed.sum(rows, function(r) return r.frames[1] == "spec" and r.frames[2] == "math_spec.lua" end) > 0)
    -- LuaJIT's builtins are named: its jit/ modules were found.
    assert.is_true(collapsed.sum(rows, function(r) return collapsed.has_frame(r, "^xpcall$") end) > 0, read(out_path))
    assert.is_true(collapsed.sum(rows, function(r) return collapsed.has_frame(r, "^%[builtin#") end) == 0)
  end)

  it("tecs-profile busted finds busted where LuaJIT looks by itself, with LUA_PATH elsewhere", function()
    local rc = run.run(string.format("env -u LUA_PATH -u LUA_CPATH %s -e \"require('busted.runner')\"", sh_quote(luajit)))
    if rc ~= 0 then
      pending("busted is not on this LuaJIT's built-in path")
      return
    end
    os.remove(out_path)
    local out
    rc, out = run.run(string.format("cd %s && env LUA_PATH=/nonexistent/?.lua LUA_CPATH=/nonexistent/?.so %s %s busted -o TAP -Xhelper out=%s",
      sh_quote(project), sh_quote(luajit), sh_quote(root .. "/bin/tecs-profile"), sh_quote(out_path)))
    assert.equal(0, rc, out)
    assert.matches("ok 1 %- arithmetic sums squares", out)
    assert.is_true(collapsed.sum(collapsed.parse(assert(read(out_path), out))) > 0)
  end)

  it("tecs-profile busted exits as busted does when a spec fails", function()
    local copy = run.tmpdir()
    finally(function() os.execute("rm -rf " .. sh_quote(copy)) end)
    assert.equal(0, (run.run(string.format("cp -r %s/spec %s/", sh_quote(project), sh_quote(copy)))))
    run.write(copy .. "/spec/fail_spec.lua", 'describe("x", function() it("fails", function() assert.equal(1, 2) end) end)\n')
    local rc, out = run.run(string.format("cd %s && %s %s busted -o TAP", sh_quote(copy), sh_quote(luajit),
      sh_quote(root .. "/bin/tecs-profile")))
    assert.equal(1, rc, out)
    assert.matches("not ok %d+ %- x fails", out)
    assert.matches("ok %d+ %- arithmetic sums squares", out)
    assert.matches("tecs.profile.busted: %d+ samples written to busted.collapsed", out)
    assert.truthy(read(copy .. "/busted.collapsed"))
  end)
end)
