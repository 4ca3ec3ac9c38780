-- Runs a fixture under a trace session in a fresh LuaJIT process and writes
-- the report: the CSV to <out>.csv, the summary fields to <out>.summary
-- (`name=value` lines), and for fixtures that return a function, whether
-- that function still holds a FORL (or already the blacklisted IFORL).
--
--   luajit [-jv=<file>] spec/support/trace_runner.lua <fixture> <out> [benign]
local fixture, out, benign = arg[1], arg[2], arg[3] == "benign"
local profile = require("tecs.profile")
local session = profile.trace({ includeBenign = benign })
local chunk = assert(loadfile(fixture))
local result = chunk()
local report = session:stop(out .. ".csv")
local f = assert(io.open(out .. ".summary", "w"))
for _, k in ipairs({ "durationSec", "totalAborts", "blacklisted", "tracesStarted", "tracesCompleted",
                     "tracesAborted", "benignAborts", "blacklistings" }) do
  f:write(k, "=", tostring(report[k]), "\n")
end
if type(result) == "function" then
  local jutil, vmdef, band = require("jit.util"), require("jit.vmdef"), require("bit").band
  local ops = {}
  for pc = 0, 10000 do
    local ins = jutil.funcbc(result, pc)
    if not ins then break end
    local op = band(ins, 0xff)
    ops[#ops + 1] = (vmdef.bcnames:sub(op * 6 + 1, op * 6 + 6):gsub("%s+$", ""))
  end
  f:write("opcodes=", table.concat(ops, " "), "\n")
end
f:close()
