-- Runs a program, plain or under the command line, with the probe of
-- spec/fixtures/run_unchanged (it writes what it sees of how it was
-- started: `arg`, `...`, the paths, the searchers, the preload keys, the
-- globals), and compares what two runs saw, wrote and returned.
-- spec/run_unchanged_spec.lua and spec/install_spec.lua use it.
local luassert = require("luassert")
local run = require("spec.support.run")

local M = {}

M.FIXTURES = "spec/fixtures/run_unchanged"
M.PROBE = M.FIXTURES .. "/probe.lua"
M.SPECS = M.FIXTURES .. "/specs"

--- Runs the shell command `cmd` with the probe's environment (its ending,
-- when given).
-- @treturn table `{ view, rc, out, err }`: what the probe saw, the exit
--   code, stdout and stderr
function M.probe(cmd, ending)
  local view_file, profile_file = os.tmpname(), os.tmpname()
  local env = string.format("env -u RUN_UNCHANGED_END RUN_UNCHANGED_VIEW=%s TECS_PROFILE=%s %s",
    run.quote(view_file), run.quote(profile_file), ending and ("RUN_UNCHANGED_END=" .. run.quote(ending)) or "")
  local rc, out, err = run.run3(env .. " sh -c " .. run.quote(cmd))
  local seen = { view = run.read(view_file), rc = rc, out = out, err = err }
  os.remove(view_file)
  os.remove(profile_file)
  return seen
end

--- Checks (busted's assert) that `ours` saw, wrote and returned what
-- `plain` did.
function M.same(plain, ours)
  luassert.is_truthy(plain.view and plain.view ~= "", "the plain run wrote no view:\n" .. plain.err)
  luassert.is_truthy(ours.view and ours.view ~= "", "the profiled run wrote no view:\n" .. ours.err)
  luassert.equal(plain.view, ours.view)
  luassert.equal(plain.out, ours.out)
  luassert.equal(plain.rc, ours.rc, ours.err)
end

return M
