-- `make install PREFIX=...` and `luarocks make` into fresh trees, then the
-- installed library and the `tecs-profile` command used from a fresh luajit
-- that sees only that tree.
local proc = require("spec.support.run")
local unchanged = require("spec.support.unchanged")

local root, luajit = proc.root, proc.luajit
local sh_quote, run, write = proc.quote, proc.run, proc.write

-- Run `script` with this LuaJIT from / with only `tree`'s directories on the paths.
local function run_in_tree(tree, script)
  write(tree .. "/check.lua", script)
  return run(string.format("cd / && env LUA_PATH=%s LUA_CPATH=%s %s %s",
    sh_quote(tree .. "/share/lua/5.1/?.lua;;"), sh_quote(tree .. "/lib/lua/5.1/?.so;;"),
    sh_quote(luajit), sh_quote(tree .. "/check.lua")))
end

local USE_TREE = [[
  local profile = require("tecs.profile")
  assert(require("tecs.utils.profile") == profile)
  assert(package.searchpath("tecs.profile.busted", package.path), "busted helper not installed")
  local zone = profile.zone()
  local s = profile.sample()
  local t0 = os.clock()
  local x = 0
  zone("installed")
  while os.clock() - t0 < 0.3 do for i = 1, 1000 do x = (x + i) % 7 end end
  zone()
  local text = s:stop(arg[1])
  assert(text:match("^installed;[^\n]+_%[[NICGJ]%] %d+\n"), text)
  -- The report page, with its style and script read from beside its module.
  local page = s:timeline("html")
  assert(page:find("rect.frame-bar", 1, true) and page:find("var tecsPage", 1, true), "page without its assets")
  io.write("OK ", package.searchpath("tecs.profile.native", package.cpath))
]]

local has_cli = io.open(root .. "/bin/tecs-profile", "r")
if has_cli then has_cli:close() end

local function check_tree(tree)
  local rc, out = run_in_tree(tree, USE_TREE:gsub("arg%[1%]", string.format("%q", tree .. "/run.collapsed")))
  assert.equal(0, rc, out)
  assert.matches("^OK " .. tree:gsub("%p", "%%%0") .. "/lib/lua/5.1/tecs/profile/native%.so", out)
  -- The libraries are installed stripped: the build keeps its debug
  -- information (for backtraces in tests), an installed tree need not.
  for _, lib in ipairs({ "native.so", "love_preload.so" }) do
    local path = tree .. "/lib/lua/5.1/tecs/profile/" .. lib
    rc, out = run("readelf -S --wide " .. sh_quote(path))
    assert.equal(0, rc, out)
    assert.is_nil(out:find(".debug_info", 1, true), path .. " keeps its debug information")
  end
end

-- `launcher` runs the command: this LuaJIT on the installed script, or the
-- script itself (luarocks installs a shell wrapper that names its own luajit).
local function check_cli(tree, launcher)
  local cli = tree .. "/bin/tecs-profile"
  assert.is_truthy(io.open(cli, "r"), "no " .. cli)
  local command = (launcher and (sh_quote(launcher) .. " ") or "") .. sh_quote(cli)
  -- Run from / with no LUA_PATH/LUA_CPATH: the command finds its own tree.
  local rc, out = run(string.format("cd / && env -u LUA_PATH -u LUA_CPATH %s --help", command))
  assert.equal(0, rc, out)
  assert.matches("tecs%-profile", out)
  -- Ranked by total time: the script's own frame is under every sample,
  -- whatever C function the samples' leaves are.
  rc, out = run(string.format("cd / && env -u LUA_PATH -u LUA_CPATH %s report --sort total %s", command,
    sh_quote(tree .. "/run.collapsed")))
  assert.equal(0, rc, out)
  assert.matches("check%.lua", out)
  -- `run` profiles the program alone: no frame of the installed command,
  -- of the tree or of a luarocks staging directory.
  write(tree .. "/prog.lua", "local function spin() local x = 0 for i = 1, 1e5 do x = (x + i) % 7 end return x end\n" ..
    "local t0 = os.clock() while os.clock() - t0 < 0.2 do pcall(spin) end\n")
  rc, out = run(string.format("cd %s && env -u LUA_PATH -u LUA_CPATH %s run -q -o run-prog.collapsed prog.lua",
    sh_quote(tree), command))
  assert.equal(0, rc, out)
  local text = assert(proc.read(tree .. "/run-prog.collapsed"))
  assert.matches("^prog%.lua:2;pcall;prog%.lua:1", text)
  for line in text:gmatch("[^\n]+") do
    local stack = line:match("^(.-)_%[%u%] %d+$") or line
    local frames = {}
    for frame in stack:gmatch("[^;]+") do frames[#frames + 1] = frame end
    for i, frame in ipairs(frames) do
      -- The leaf may be the builtin the program was in (os.clock).
      local builtin_leaf = i == #frames and i > 1 and not frame:find(":", 1, true)
      assert.is_truthy(frame:match("^prog%.lua:") or frame == "pcall" or builtin_leaf, "not the program's frame: " .. line)
    end
  end
  -- `love` finds the installed boot chunk and LD_PRELOAD library: it gets
  -- as far as starting love (here a path that does not exist).
  rc, out = run(string.format("cd / && env -u LUA_PATH -u LUA_CPATH %s love --love /nonexistent/love %s", command,
    sh_quote(tree)))
  assert.equal(1, rc, out)
  assert.matches("tecs%-profile love: cannot run /nonexistent/love: No such file or directory\n", out)
  -- Every directory the command put on the paths exists (luarocks builds
  -- through a staging directory that is gone once the rock is installed).
  write(tree .. "/paths.lua", "io.write(package.path, ';', package.cpath)")
  rc, out = run(string.format("cd %s && env -u LUA_PATH -u LUA_CPATH %s run -q paths.lua", sh_quote(tree), command))
  assert.equal(0, rc, out)
  for dir in out:gmatch("([^;]*)/%?[^;]*") do
    if dir:find(tree, 1, true) == 1 then
      assert.is_true(os.execute("test -d " .. sh_quote(dir)) == 0, "missing directory on the paths: " .. dir)
    end
  end
end

-- `tecs-profile busted` from an installed command, in the paths `luarocks
-- path` gives for `tree` (`;;`-less, Lua 5.1 only): Debian's busted runs in
-- LuaJIT with the installed helper.
local function check_busted(tree, launcher)
  local project = root .. "/platform_spec/fixtures/busted_project"
  local out_file = tree .. "/busted-run.collapsed"
  local command = (launcher and (sh_quote(launcher) .. " ") or "") .. sh_quote(tree .. "/bin/tecs-profile")
  local rc, out = run(string.format("cd %s && unset LUA_PATH LUA_CPATH && eval \"$(luarocks --lua-version=5.1 --tree %s path)\" && " ..
    "%s busted -o TAP -Xhelper out=%s", sh_quote(project), sh_quote(tree), command, sh_quote(out_file)))
  assert.equal(0, rc, out)
  assert.matches("ok 1 %- arithmetic sums squares", out)
  local text = assert(proc.read(out_file), out)
  assert.matches("\nspec;strings_spec%.lua;", "\n" .. text)
  assert.is_nil(text:find("[builtin#", 1, true), "LuaJIT's jit/ modules not found")
end

-- `tecs-profile busted` from an installed command changes nothing the
-- specs see: the probe's specs see what they see under plain busted (run
-- by the interpreter the command runs on), in the paths `luarocks path`
-- gives for `tree`. Under luarocks' wrapper script, which runs the
-- interpreter with `-e '<path setup>'` before the command, `arg[-1]` is
-- still the interpreter.
local function check_unchanged(tree, launcher)
  local command = (launcher and (sh_quote(launcher) .. " ") or "") .. sh_quote(tree .. "/bin/tecs-profile")
  local interpreter = launcher
  if not interpreter then
    -- The interpreter luarocks' wrapper script runs.
    interpreter = assert(proc.read(tree .. "/bin/tecs-profile")):match("exec '([^']+)' %-e ")
    assert.is_truthy(interpreter, "not a luarocks wrapper script: " .. tree .. "/bin/tecs-profile")
  end
  local busted = select(2, proc.run("command -v busted")):match("^(%S+)")
  assert.is_truthy(busted, "busted is on PATH")
  local setup = string.format("cd %s && unset LUA_PATH LUA_CPATH && eval \"$(luarocks --lua-version=5.1 --tree %s path)\" && ",
    sh_quote(root), sh_quote(tree))
  local args = "-o TAP --pattern=_test " .. unchanged.SPECS
  local plain = unchanged.probe(setup .. sh_quote(interpreter) .. " " .. sh_quote(busted) .. " " .. args)
  local ours = unchanged.probe(setup .. command .. " busted " .. args)
  unchanged.same(plain, ours)
  assert.equal(0, ours.rc, ours.err)
  -- Nothing of the wrapper's chunk (a launcher of the suite's own, such as
  -- scripts/luajit2.sh's, brings its arguments to both runs).
  assert.is_nil(ours.view:find("luarocks.loader", 1, true), ours.view)
  if not launcher then
    assert.matches("\narg%[%-1%]=" .. interpreter:gsub("%p", "%%%0") .. "\narg%[0%]=", "\n" .. ours.view)
  end
  assert.matches("tecs.profile.busted: %d+ samples written to", ours.err)
end

describe("installed trees", function()
  local make_tree, rocks_tree = os.tmpname(), os.tmpname()
  os.remove(make_tree)
  os.remove(rocks_tree)
  teardown(function() os.execute("rm -rf " .. sh_quote(make_tree) .. " " .. sh_quote(rocks_tree)) end)

  it("make install PREFIX=... gives a tree a fresh luajit can use", function()
    local rc, out = run(string.format("make -s -C %s install PREFIX=%s", sh_quote(root), sh_quote(make_tree)))
    assert.equal(0, rc, out)
    check_tree(make_tree)
  end)

  it("luarocks make gives a tree a fresh luajit can use, with no rocks server", function()
    local rc, out = run(string.format(
      "cd %s && luarocks --lua-version=5.1 --only-server=%s make rockspec/tecs-profile-scm-1.rockspec --tree %s",
      sh_quote(root), sh_quote("file:///nonexistent"), sh_quote(rocks_tree)))
    assert.equal(0, rc, out)
    check_tree(rocks_tree)
  end)

  it("the tecs-profile command works from both trees", function()
    if not has_cli then
      pending("bin/tecs-profile is not part of this source tree: nothing to install or run")
      return
    end
    check_cli(make_tree, luajit)
    check_cli(rocks_tree)
  end)

  it("tecs-profile busted runs Debian's busted from both trees", function()
    if not has_cli then
      pending("bin/tecs-profile is not part of this source tree: nothing to install or run")
      return
    end
    check_busted(make_tree, luajit)
    check_busted(rocks_tree)
  end)

  it("tecs-profile busted changes nothing the specs see, from both trees", function()
    if not has_cli then
      pending("bin/tecs-profile is not part of this source tree: nothing to install or run")
      return
    end
    check_unchanged(make_tree, luajit)
    check_unchanged(rocks_tree)
  end)
end)
