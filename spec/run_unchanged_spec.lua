-- A run changes nothing the program can see: under `tecs-profile run` and
-- `busted` a program sees what it sees under plain luajit (or
-- `luajit $(command -v busted)`): its `arg` down to the interpreter's
-- (libraries such as Penlight run subprocesses with arg's lowest index),
-- its main chunk's `...`, `package.path` and `package.cpath` in the same
-- order, `package.loaders` and `package.preload`'s keys, the same globals;
-- it writes the same bytes to stdout (the report goes to stderr) and exits
-- with the same code. spec/fixtures/run_unchanged/probe.lua writes what it
-- sees; the views are compared whole.
--
-- What a run does change, and the probe does not look at, since the
-- profiler runs in the program's VM: `package.loaded` holds the profiler's
-- modules and the LuaJIT modules it uses (`ffi`, `jit.util`, `jit.vmdef`,
-- `jit.zone`), and `package.preload` has a metatable that finds the
-- profiler's modules (the program's paths need not reach them); under
-- `run`, `os.exit` is replaced while the program runs (the profile is
-- written before the process ends) and the main chunk runs on a coroutine
-- of its own (`coroutine.running()` is not nil), so that the profile holds
-- the program's frames only.
local run = require("spec.support.run")
local unchanged = require("spec.support.unchanged")

local quote = run.quote
local FIXTURES, PROBE, SPECS = unchanged.FIXTURES, unchanged.PROBE, unchanged.SPECS
local probe, same = unchanged.probe, unchanged.same

describe("tecs-profile run changes nothing the program sees", function()
  local cases = {
    -- Arguments that look like the command's options are the program's.
    { what = "returning", cli = "run", script_args = "a 'b c' '' -q -- --help", n = 6, rc = 0 },
    { what = "-q, os.exit(3)", cli = "run -q", script_args = "x", n = 1, ending = "3", rc = 3 },
    { what = "an error", cli = "run", script_args = "x", n = 1, ending = "error", rc = 1 },
    { what = "under luajit -joff", interpreter = "-joff", cli = "run -q", script_args = "x y", n = 2, rc = 0 },
  }
  for _, case in ipairs(cases) do
    it(case.what, function()
      local luajit = run.luajit .. (case.interpreter and (" " .. case.interpreter) or "")
      local plain = probe(string.format("%s %s %s", luajit, PROBE, case.script_args), case.ending)
      local ours = probe(string.format("%s bin/tecs-profile %s %s %s", luajit,
        case.cli, PROBE, case.script_args), case.ending)
      same(plain, ours)
      assert.equal(case.rc, ours.rc, ours.err)
      -- The views hold what is compared.
      -- The interpreter's own arguments (the suite's luajit may bring some).
      assert.matches("^arg%[%-%d+%]=", plain.view)
      if case.interpreter then
        assert.matches("\narg%[%-1%]=" .. case.interpreter:gsub("%p", "%%%0") .. "\n", plain.view)
      end
      assert.matches("\narg%[0%]=" .. PROBE:gsub("%p", "%%%0") .. "\n", plain.view)
      assert.matches("\n#%.%.%.=" .. case.n .. "\n", plain.view)
      assert.matches("\npath=[^\n]*\ncpath=[^\n]*\n#loaders=%d+\npreload=[^\n]*\nglobals=[^\n]*arg", plain.view)
      assert.equal("the program's own output\nits last line", ours.out)
      if case.cli == "run" then
        -- The report went to stderr.
        assert.matches("samples", ours.err)
      end
    end)
  end
end)

describe("tecs-profile busted changes nothing the specs see", function()
  local busted = select(2, run.run("command -v busted")):match("^(%S+)")

  -- Runs the fixture spec directory under plain busted and under the command.
  local function both(ending)
    assert.is_truthy(busted, "busted is on PATH")
    local args = "-o TAP --pattern=_test " .. SPECS
    local plain = probe(string.format("%s %s %s", run.luajit, quote(busted), args), ending)
    local ours = probe(string.format("%s bin/tecs-profile busted %s", run.luajit, args), ending)
    assert.matches("\narg%[0%]=" .. busted:gsub("%p", "%%%0") .. "\narg%[1%]=%-o\n", plain.view)
    return plain, ours
  end

  it("specs that pass", function()
    local plain, ours = both(nil)
    same(plain, ours)
    assert.equal(0, ours.rc, ours.err)
    assert.matches("^the program's own output\nits last line" ..
      "ok 1 %- a spec sees what a plain busted run gives it\n1%.%.1\n$", ours.out)
    assert.matches("tecs.profile.busted: %d+ samples written to", ours.err)
  end)

  it("a spec that raises an error", function()
    local plain, ours = both("error")
    same(plain, ours)
    assert.equal(1, ours.rc, ours.err)
    assert.matches("not ok 1 ", ours.out)
  end)

  it("a spec that calls os.exit(3)", function()
    local plain, ours = both("3")
    same(plain, ours)
    assert.equal(3, ours.rc, ours.err)
  end)

  -- busted on PATH may be a wrapper script (luarocks writes one), or absent:
  -- the runner is then called by the command, and no chunk of the command's
  -- may stand in for a script file. Such a chunk would be the root frame of
  -- every sample under a file name that does not exist, and every report
  -- of the profile would note that it cannot read it.
  it("every frame below a spec is a file that exists, where busted is a wrapper script", function()
    assert.is_truthy(busted, "busted is on PATH")
    local bin, stack = run.tmpdir(), os.tmpname()
    run.write(bin .. "/busted", string.format('#!/bin/sh\nexec %s %s "$@"\n', run.luajit, quote(busted)))
    assert.equal(0, (run.run("chmod +x " .. quote(bin .. "/busted"))))
    local rc, out, err = run.run3(string.format("PATH=%s:\"$PATH\" RUN_UNCHANGED_STACK=%s TECS_PROFILE=/dev/null"
      .. " %s bin/tecs-profile busted -o TAP --pattern=_test %s",
      quote(bin), quote(stack), run.luajit, FIXTURES .. "/stack"))
    local sources = run.read(stack)
    os.remove(stack)
    os.execute("rm -rf " .. quote(bin))
    assert.equal(0, rc, out .. err)
    assert.is_truthy(sources and sources ~= "", out .. err)
    for source in sources:gmatch("[^\n]+") do
      if source ~= "=[C]" then
        local file = source:match("^@(.*)$")
        assert.is_truthy(file, "a frame of a chunk that is no file: " .. source)
        assert.is_truthy(run.read(file), "a frame of a file that cannot be read: " .. source)
      end
    end
  end)
end)
