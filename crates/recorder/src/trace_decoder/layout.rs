//! The offsets and constants of LuaJIT 2.1 (x86-64, GC64) that the
//! handler reads by, checked by the probe (`probe.rs`) before use.

/// `~LJ_TTRACE`, `~LJ_TFUNC` as stored in a GC object's `gct` byte.
pub(super) const GCT_TRACE: u8 = 9;
pub(super) const GCT_FUNC: u8 = 8;
pub(super) const OBJ_GCT: usize = 9;
/// GCtrace fields.
pub(super) const TRACE_NSNAP: usize = 10;
pub(super) const TRACE_IR: usize = 32;
pub(super) const TRACE_SNAP: usize = 48;
pub(super) const TRACE_SNAPMAP: usize = 56;
pub(super) const TRACE_SZMCODE: usize = 84;
pub(super) const TRACE_MCODE: usize = 88;
pub(super) const TRACE_TRACENO: usize = 104;
pub(super) const TRACE_HEADER: usize = 112;
/// SnapShot: 12 bytes, `mapofs` u32, `mcofs` u16, `nent` u8.
pub(super) const SNAP_SIZE: usize = 12;
pub(super) const SNAP_MAPOFS: usize = 0;
pub(super) const SNAP_REF: usize = 4;
pub(super) const SNAP_MCOFS: usize = 6;
pub(super) const SNAP_NENT: usize = 10;
pub(super) const SNAP_FRAME: u32 = 0x01_0000;
pub(super) const SNAP_CONT: u32 = 0x02_0000;
/// GCtrace: the lowest constant's reference.
pub(super) const TRACE_NK: usize = 40;
/// IR instructions are 8 bytes (`op1` u16, `op2` u16, type, opcode); a
/// 64-bit constant's value is in the next. References are biased: those
/// below the bias are constants.
pub(super) const IR_SIZE: usize = 8;
pub(super) const IR_OP1: usize = 0;
pub(super) const IR_OP2: usize = 2;
pub(super) const IR_TYPE: usize = 4;
pub(super) const IR_OP: usize = 5;
pub(super) const REF_BIAS: usize = 0x8000;
pub(super) const IR_EQ: u8 = 8;
pub(super) const IR_FLOAD: u8 = 69;
pub(super) const IR_KGC: u8 = 24;
pub(super) const IR_KPTR: u8 = 25;
pub(super) const IR_KKPTR: u8 = 26;
pub(super) const IR_KNUM: u8 = 28;
pub(super) const IR_KINT64: u8 = 29;
/// The guard flag of an instruction's type, and the type of a prototype.
pub(super) const IRT_GUARD: u8 = 0x80;
pub(super) const IRT_PROTO: u8 = 7;
/// `~LJ_TPROTO` as stored in a GC object's `gct` byte.
pub(super) const GCT_PROTO: u8 = 7;
/// A call through the FFI (`IR_CALLXS`).
pub(super) const IR_CALLXS: u8 = 99;
/// IR instructions looked at between two snapshots at most.
pub(super) const MAX_IR_SCAN: usize = 4096;
/// GCproto: the bytecode follows the 104-byte header.
pub(super) const PROTO_SIZE: usize = 104;
pub(super) const PROTO_SIZEBC: usize = 12;
pub(super) const PROTO_CHUNKNAME: usize = 64;
pub(super) const PROTO_FIRSTLINE: usize = 72;
pub(super) const PROTO_NUMLINE: usize = 76;
pub(super) const PROTO_LINEINFO: usize = 80;
/// GCfunc: `ffid`, the Lua function's bytecode, the C function's address.
pub(super) const FN_FFID: usize = 10;
pub(super) const FN_PC: usize = 32;
pub(super) const FN_CF: usize = 40;
/// GCstr: length, then the bytes after the 24-byte header.
pub(super) const STR_LEN: usize = 20;
pub(super) const STR_DATA: usize = 24;
/// GCtab: the array part and its size.
pub(super) const TAB_ARRAY: usize = 16;
pub(super) const TAB_ASIZE: usize = 48;
/// lua_State: its stack and stack size in slots.
pub(super) const L_STACK: usize = 56;
pub(super) const L_STACKSIZE: usize = 88;
/// jit_State: the trace array and its size.
pub(super) const J_TRACE: usize = 384;
pub(super) const J_SIZETRACE: usize = 396;
/// Where jit_State may start after the global state (its size differs
/// between builds: 728 to 744 bytes in the three known ones).
pub(super) const J_SEARCH: std::ops::RangeInclusive<usize> = 600..=1200;
/// Type tags in the top 17 bits of a GC64 TValue.
pub(super) const ITYPE_FUNC: u64 = 0x1FFF7;
pub(super) const ITYPE_STR: u64 = 0x1FFFB;
pub(super) const GCV_MASK: u64 = (1 << 47) - 1;
/// Frame link types (`FRAME_TYPE`, `FRAME_TYPEP` masks).
pub(super) const FRAME_LUA: u64 = 0;
pub(super) const FRAME_CONT: u64 = 2;
pub(super) const FRAME_VARG: u64 = 3;
pub(super) const FRAME_TYPE: u64 = 3;
pub(super) const FRAME_TYPEP: u64 = 7;
/// Function ids: 0 a Lua function, 1 a C function, more a builtin.
pub(super) const FF_LUA: u8 = 0;
pub(super) const FF_C: u8 = 1;

/// Frames one sample keeps at most (the session's depth plus the one that
/// tells the stack was cut is never more than this).
pub const MAX_FRAMES: usize = 1001;
/// Frame separator in the written stack (as the sampler's).
pub(super) const SEP: u8 = 0x1f;
/// Bytes of the C stack searched for the return address into a trace.
pub(super) const STACK_SCAN: usize = 8192;
/// Zone entries read per sample at most.
pub(super) const MAX_ZONES: usize = 64;
