--- LuaJIT's trace error messages and opcode names, built in for VMs
-- without `jit/vmdef.lua` (some LÖVE builds): `tecs.profile.trace.reasons`
-- loads this module only there, since the running VM's own tables are used
-- wherever `jit.vmdef` loads.
-- @module tecs.profile.trace.builtin_tables

local M = {}

-- Trace error messages of LuaJIT 2.1, by error code.
M.MESSAGES_21 = {
  [0] = "error thrown or hook called during recording",
  "trace too short",
  "trace too long",
  "trace too deep",
  "too many snapshots",
  "blacklisted",
  "retry recording",
  "NYI: bytecode %s",
  "leaving loop in root trace",
  "inner loop in root trace",
  "loop unroll limit reached",
  "bad argument type",
  "JIT compilation disabled for function",
  "call unroll limit reached",
  "down-recursion, restarting",
  "NYI: unsupported variant of FastFunc %s",
  "NYI: return to lower frame",
  "store with nil or NaN key",
  "missing metamethod",
  "looping index lookup",
  "NYI: mixed sparse/dense table",
  "symbol not in cache",
  "NYI: unsupported C type conversion",
  "NYI: unsupported C function type",
  "guard would always fail",
  "too many PHIs",
  "persistent type instability",
  "failed to allocate mcode memory",
  "machine code too long",
  "hit mcode limit (retrying)",
  "too many spill slots",
  "inconsistent register allocation",
  "NYI: cannot assemble IR instruction %d",
  "NYI: PHI shuffling too complex",
  "NYI: register coalescing too complex",
}

-- Trace error messages of LuaJIT 2.0, by error code.
M.MESSAGES_20 = {
  [0] = "error thrown or hook called during recording",
  "trace too long",
  "trace too deep",
  "too many snapshots",
  "blacklisted",
  "NYI: bytecode %d",
  "leaving loop in root trace",
  "inner loop in root trace",
  "loop unroll limit reached",
  "bad argument type",
  "call to JIT-disabled function",
  "call unroll limit reached",
  "down-recursion, restarting",
  "NYI: C function %p",
  "NYI: FastFunc %s",
  "NYI: unsupported variant of FastFunc %s",
  "NYI: return to lower frame",
  "store with nil or NaN key",
  "missing metamethod",
  "looping index lookup",
  "NYI: mixed sparse/dense table",
  "symbol not in cache",
  "NYI: unsupported C type conversion",
  "NYI: unsupported C function type",
  "guard would always fail",
  "too many PHIs",
  "persistent type instability",
  "failed to allocate mcode memory",
  "machine code too long",
  "hit mcode limit (retrying)",
  "too many spill slots",
  "inconsistent register allocation",
  "NYI: cannot assemble IR instruction %d",
  "NYI: PHI shuffling too complex",
  "NYI: register coalescing too complex",
}

-- Bytecode opcode names, in opcode order (opcode 0 first), of the LuaJIT
-- 2.1 builds in use: the opcode numbering changed along the 2.1 branch, so
-- the list that matches the running VM is picked by looking at real bytecode
-- (see `opcodes_match_vm` in `tecs.profile.trace.reasons`).
M.OPCODE_LISTS = {
  {
    -- LuaJIT 2.1.0-beta3 up to the 2023 snapshots (Debian's luajit,
    -- OpenResty's luajit2).
    name = "LuaJIT 2.1.0-beta3",
    names = [[
ISLT ISGE ISLE ISGT ISEQV ISNEV ISEQS ISNES ISEQN ISNEN ISEQP ISNEP ISTC ISFC IST ISF
ISTYPE ISNUM MOV NOT UNM LEN ADDVN SUBVN MULVN DIVVN MODVN ADDNV SUBNV MULNV DIVNV MODNV
ADDVV SUBVV MULVV DIVVV MODVV POW CAT KSTR KCDATA KSHORT KNUM KPRI KNIL UGET USETV USETS
USETN USETP UCLO FNEW TNEW TDUP GGET GSET TGETV TGETS TGETB TGETR TSETV TSETS TSETB TSETM
TSETR CALLM CALL CALLMT CALLT ITERC ITERN VARG ISNEXT RETM RET RET0 RET1 FORI JFORI FORL
IFORL JFORL ITERL IITERL JITERL LOOP ILOOP JLOOP JMP FUNCF IFUNCF JFUNCF FUNCV IFUNCV
JFUNCV FUNCC FUNCCW]],
  },
  {
    -- Current LuaJIT 2.1 (rolling releases, version_num 20199): bitwise
    -- operator opcodes between JMP and the function headers.
    name = "LuaJIT 2.1 (rolling release)",
    names = [[
ISLT ISGE ISLE ISGT ISEQV ISNEV ISEQS ISNES ISEQN ISNEN ISEQP ISNEP ISTC ISFC IST ISF
ISTYPE ISNUM MOV NOT UNM LEN ADDVN SUBVN MULVN DIVVN MODVN ADDNV SUBNV MULNV DIVNV MODNV
ADDVV SUBVV MULVV DIVVV MODVV POW CAT KSTR KCDATA KSHORT KNUM KPRI KNIL UGET USETV USETS
USETN USETP UCLO FNEW TNEW TDUP GGET GSET TGETV TGETS TGETB TGETR TSETV TSETS TSETB TSETM
TSETR CALLM CALL CALLMT CALLT ITERC ITERN VARG ISNEXT RETM RET RET0 RET1 FORI JFORI FORL
IFORL JFORL ITERL IITERL JITERL LOOP ILOOP JLOOP JMP BNOT BAND BOR BXOR BSHL BSHR BSAR
FUNCF IFUNCF JFUNCF FUNCV IFUNCV JFUNCV FUNCC FUNCCW]],
  },
}

return M
