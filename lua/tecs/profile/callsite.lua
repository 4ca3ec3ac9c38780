--- Which line a sample's time belongs to, at line precision.
-- LuaJIT runs the profiler callback at the next bytecode it dispatches, so a
-- sample taken inside a C function (`os.clock`, `table.sort`, a LÖVE draw
-- call) arrives after the call has returned and is charged to the
-- instruction after the call: often the next line. (Compiled code needs no
-- such help at line precision: a trace leaves at its line check by going
-- back to the start of the line it was in.) The native sampler keeps the
-- Lua function of every such line it sees; this module reads that
-- function's bytecode to find the call the samples came from.
-- @module tecs.profile.callsite

local jitinfo = require("tecs.profile.jitinfo")

local M = {}

-- Bytecodes after which execution resumes in the same frame when a called
-- function returns.
local RETURNS_HERE = { CALL = true, CALLM = true, ITERC = true, ITERN = true }

--- A resolver for the native session's `call_site` option, or nil when this
-- VM lacks `jit.util` or `jit.vmdef` (then lines stay as LuaJIT reports them).
-- The resolver takes a function, the line C-state samples were charged to
-- and the state ("C"), and returns the line of the call that returned just
-- before, or nil when the line stands or the bytecode leaves it ambiguous.
-- @treturn function|nil
function M.resolver()
  local vmdef = jitinfo.vmdef()
  local ok, util = pcall(require, "jit.util")
  if not ok or not vmdef or type(vmdef.bcnames) ~= "string" then return nil end
  local bcnames, band = vmdef.bcnames, bit.band
  local function opname(ins)
    local op = band(ins, 0xff)
    return (bcnames:sub(op * 6 + 1, op * 6 + 6):gsub(" +$", ""))
  end
  return function(fn, line, state)
    if type(fn) ~= "function" or state ~= "C" then return nil end
    local info = util.funcinfo(fn)
    if not info or not info.bytecodes then return nil end
    local lines = {}
    for pc = 0, info.bytecodes - 1 do
      lines[pc] = util.funcinfo(fn, pc).currentline
    end
    -- The instruction before each place the callback can have run at.
    local found
    for pc = 1, info.bytecodes - 1 do
      if lines[pc] == line then
        local prev = util.funcbc(fn, pc - 1)
        local before = prev and RETURNS_HERE[opname(prev)] and lines[pc - 1]
        if before then
          if found and found ~= before then return nil end
          found = before
        end
      end
    end
    if found and found ~= line then return found end
    return nil
  end
end

local resolver -- the resolver, once built; false where this VM has none

--- The resolver's answer for one site (see `resolver`), built on the first
-- call: sessions pass this function, which only line precision calls, at
-- the stop, so that this module loads only then.
-- @return the line of the call, or nil
function M.resolve(fn, line, state)
  if resolver == nil then resolver = M.resolver() or false end
  if resolver then return resolver(fn, line, state) end
  return nil
end

return M
