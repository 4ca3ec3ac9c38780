-- Shell and file helpers shared by the specs: run a command, quote a word
-- for the shell, read and write whole files, make a temporary directory.
local M = {}

-- The LuaJIT under test, and the source tree the specs run from.
M.luajit = os.getenv("LUAJIT_BIN") or "luajit"
M.root = os.getenv("PWD")

-- `s` as one single-quoted shell word.
function M.quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- A child command that runs longer than this is killed and its test fails
-- (a hung profiler must fail the suite, not stall it).
M.TIMEOUT_SECONDS = 600

-- `cmd` under the time limit, as one shell command.
local function limited(cmd)
  return string.format("timeout -k 10 %d sh -c %s", M.TIMEOUT_SECONDS, M.quote(cmd))
end

-- The output of a command, with a note when the time limit killed it.
local function noted(rc, out)
  if rc == 124 or rc == 137 then
    out = out .. string.format("\n(killed: still running after %d s)\n", M.TIMEOUT_SECONDS)
  end
  return out
end

-- Runs a shell command; returns its exit code and its combined output.
function M.run(cmd)
  local p = assert(io.popen(limited(cmd) .. " 2>&1; echo \"rc=$?\""))
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, noted(rc, (out:gsub("rc=%d+%s*$", "")))
end

-- Runs a command with stdout and stderr kept apart.
function M.run3(cmd)
  local err = os.tmpname()
  local p = assert(io.popen(limited(cmd) .. " 2>'" .. err .. "'; echo \"rc=$?\""))
  local out = p:read("*a")
  p:close()
  local f = io.open(err, "rb")
  local errtext = f and f:read("*a") or ""
  if f then f:close() end
  os.remove(err)
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return rc, (out:gsub("rc=%d+%s*$", "")), noted(rc, errtext)
end

-- The whole file, or nil when it cannot be opened.
function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- Writes `text` to `path`, raising on failure.
function M.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- A fresh temporary directory.
function M.tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p '" .. d .. "'") == 0)
  return d
end

M.cli = M.luajit .. " bin/tecs-profile"

--- Runs `script` in `times` fresh LuaJIT processes, the argument of the
-- i-th being `modes[i % #modes + 1]`, and checks (busted's assert) that
-- every run exits 0 and prints `want` as its one line.
function M.runs_alike(script, modes, times, want)
  local assert = require("luassert")
  local dir = M.tmpdir()
  M.write(dir .. "/script.lua", script)
  local cmd = {}
  for i = 1, times do
    cmd[#cmd + 1] = string.format("%s %s %s; echo \"rc $?\"", M.luajit, M.quote(dir .. "/script.lua"),
      modes[i % #modes + 1])
  end
  local rc, out = M.run(table.concat(cmd, "; "))
  os.execute("rm -rf " .. M.quote(dir))
  assert.equal(0, rc, out)
  local n = 0
  for line in out:gmatch("[^\n]+") do
    if line:match("^rc ") then
      n = n + 1
      assert.equal("rc 0", line, out)
    else
      assert.equal(want, line, out)
    end
  end
  assert.equal(times, n, out)
end

return M
