-- A program run by the command line sees what it sees under plain luajit:
-- its `arg` (down to the interpreter, which libraries such as Penlight run
-- subprocesses with), `package.path` and `package.cpath` in the same order,
-- the same globals; and it writes the same output and exits with the same
-- code. spec/fixtures/program_view.lua writes what it sees.
local run = require("spec.support.run")

local VIEW = "spec/fixtures/program_view.lua"

-- Runs `cmd` with PROGRAM_VIEW set; returns the view, the exit code and
-- what the command wrote to stdout.
local function view_of(cmd)
  local file = os.tmpname()
  local rc, out = run.run3("export PROGRAM_VIEW=" .. run.quote(file) .. "; " .. cmd)
  local view = run.read(file)
  os.remove(file)
  return view, rc, out
end

describe("a program run by tecs-profile", function()
  for _, case in ipairs({ { "run", "returns" }, { "run -q", "7" } }) do
    local command, last = case[1], case[2]
    it(command .. ": the same arg, paths, globals, output and exit code (" .. last .. ")", function()
      local plain, plain_rc, plain_out = view_of(string.format("%s %s a 'b c' %s", run.luajit, VIEW, last))
      local ours, rc, out = view_of(string.format("%s %s %s a 'b c' %s", run.cli, command, VIEW, last))
      assert.is_truthy(plain, "the plain run wrote no view")
      assert.matches("arg%[%-1%]=", plain)
      assert.equal(plain, ours)
      assert.equal(plain_rc, rc)
      assert.equal(plain_out, out)
    end)
  end

  it("busted: the specs see the arguments and paths of a plain busted run", function()
    local dir = run.tmpdir()
    assert.equal(0, (run.run("mkdir -p " .. run.quote(dir .. "/spec"))))
    run.write(dir .. "/spec/view_spec.lua", string.format([[
      describe("view", function() it("is written", function() dofile(%q) end) end)
    ]], run.root .. "/" .. VIEW))
    local _, where = run.run("command -v busted")
    local busted = where:match("^(%S+)")
    assert.is_truthy(busted, "busted is on PATH")
    local cd = "cd " .. run.quote(dir) .. " && "
    local plain = view_of(cd .. run.luajit .. " " .. run.quote(busted) .. " -o TAP spec")
    local ours = view_of(cd .. run.luajit .. " " .. run.quote(run.root .. "/bin/tecs-profile") .. " busted -o TAP spec")
    os.execute("rm -rf " .. run.quote(dir))
    assert.is_truthy(plain, "the plain run wrote no view")
    assert.matches("arg%[0%]=" .. busted:gsub("%p", "%%%0") .. "\n", plain)
    assert.equal(plain, ours)
  end)
end)
