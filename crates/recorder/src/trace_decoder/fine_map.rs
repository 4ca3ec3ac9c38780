//! Where each bytecode's machine code lies inside a trace: the fine map the
//! tick handler uses between two snapshots.
//!
//! A trace keeps no map from machine code to bytecode: only its snapshots
//! say where the interpreter would resume, and snapshots are taken before
//! guards, not per bytecode. Guard-free code (arithmetic, a small inlined
//! function, stores into known tables) has no snapshot of its own, so "the
//! last snapshot at or before the address" charges it to the bytecode of the
//! guard before it, usually in the caller.
//!
//! This map is built from three facts, all read on the VM thread outside
//! any signal handler:
//!
//! - the recorder announces each bytecode before recording it (the VM's
//!   `record` event), when the trace's next IR reference is the first its
//!   code will get: the log of those events ([`Recorded`]) says which
//!   bytecode, in which chain of inlined frames, emitted each IR reference
//!   before the loop;
//! - the loop optimizer copies the loop body after `LOOP`, in the original
//!   order, leaving out what it hoisted or merged: each copy is matched to
//!   its original by opcode and type, in order ([`owners`]);
//! - the assembler works backwards from the last IR reference and records
//!   in each snapshot where the code of the references from its own on
//!   starts (`mcofs`), so the code of the references between two snapshots
//!   lies between their offsets, in ascending order. Inside that span each
//!   reference's code is placed by its estimated size ([`weight`]): dead,
//!   sunk and fused references have none.
//!
//! The result ([`FineMap`]) is a sorted list of machine-code offsets, each
//! starting a range whose ticks go to one chain of frames, checked here
//! against the frames of the snapshot covering the range.

use std::collections::HashMap;

pub use super::code_anchors::McIns;
use super::code_anchors::{self, Anchor};

/// One bytecode the recorder announced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The function being recorded (a GCfunc address).
    pub func: usize,
    /// The address of that function's first bytecode: its prototype.
    pub bc: usize,
    /// The address just after the bytecode (the stack dump's convention),
    /// or 0 when the recorder is in no Lua function.
    pub ins: usize,
    /// The recorder's frame depth: 0 in the trace's base frame.
    pub depth: i32,
    /// The first IR reference (biased) the bytecode's code can get.
    pub nins: u32,
}

/// One IR instruction of the committed trace, as the assembler left it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ins {
    pub op: u8,
    /// The type byte (guard flag in the top bit).
    pub t: u8,
    /// The register (`r`) and spill slot (`s`) the assembler allocated.
    pub r: u8,
    pub s: u8,
    /// The operands: references (biased), constants' references or literals.
    pub op1: u16,
    pub op2: u16,
}

/// One snapshot of the committed trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snap {
    /// Its first IR reference (biased).
    pub ir_ref: u32,
    /// Where the code of its references starts, from the trace's start.
    pub mcofs: u32,
    /// The base frame's function when the snapshot names it (a tail call
    /// replaced it), else 0.
    pub base: usize,
    /// The functions of the frames the trace inlined, outermost first (0
    /// for one that is not a constant of the trace).
    pub inlined: Vec<usize>,
    /// For each of those frames whose function is not a constant, the
    /// bytecode of the prototype the trace checks it by (a guard on the
    /// function's prototype, `rec_call_specialize` in lj_record.c), else 0.
    pub checked: Vec<usize>,
}

/// What the map is built from: the committed trace's IR (from `first`, the
/// first instruction's biased reference), its snapshots, its code size and
/// its function constants.
#[derive(Clone, Debug, Default)]
pub struct TraceShape {
    pub first: u32,
    pub ins: Vec<Ins>,
    pub snaps: Vec<Snap>,
    pub szmcode: u32,
    pub functions: Vec<usize>,
    /// The bytecode of each prototype that is a constant of the trace (the
    /// prototypes it checks functions by, which it keeps alive).
    pub protos: Vec<usize>,
    /// The trace's machine code decoded, in address order, where it could
    /// be (x86-64); empty elsewhere.
    pub code: Vec<McIns>,
    /// Whether the code between two snapshots is placed by the anchors the
    /// decoded code gives (the decoded placement) rather than by the fitted
    /// sizes alone. The calls in the code are named either way.
    pub anchored: bool,
}

// IR opcodes (`lj_ir.h`; the same numbers in the three LuaJITs checked).
const OP_NOP: u8 = 12;
const OP_BASE: u8 = 13;
const OP_LOOP: u8 = 17;
const OP_USE: u8 = 18;
const OP_PHI: u8 = 19;
const OP_RENAME: u8 = 20;
const OP_KPRI: u8 = 22;
const OP_KSLOT: u8 = 30;
const OP_ASTORE: u8 = 74;
const OP_XSTORE: u8 = 78;
const OP_SNEW: u8 = 79;
const OP_BUFSTR: u8 = 87;
const OP_TBAR: u8 = 88;
const OP_XBAR: u8 = 90;
const OP_CALLN: u8 = 95;
const OP_CALLXS: u8 = 99;
const OP_RETF: u8 = 11;
const OP_BNOT: u8 = 31;
const OP_MULOV: u8 = 55;
const OP_AREF: u8 = 56;
const OP_HREFK: u8 = 57;
const OP_LREF: u8 = 65;
const OP_ALOAD: u8 = 66;
const OP_ULOAD: u8 = 68;
const OP_SLOAD: u8 = 71;
const OP_ALEN: u8 = 73;
const OP_MOD: u8 = 45;
const OP_POW: u8 = 46;
const OP_DIV: u8 = 44;
const OP_LDEXP: u8 = 49;
const OP_FPMATH: u8 = 52;
const OP_CNEWI: u8 = 84;
const OP_BUFHDR: u8 = 85;
const OP_BUFPUT: u8 = 86;
const OP_OBAR: u8 = 89;
const OP_TOSTR: u8 = 93;
const OP_CALLS: u8 = 98;
const OP_CONV: u8 = 91;
const OP_TOBIT: u8 = 92;
const OP_STRTO: u8 = 94;
const IRT_NUM: u8 = 14;
/// The types of GC objects and pointers (`irt_isaddr`: light userdata to
/// userdata), whose tag a GC64 build keeps in the top bits of the value.
const IRT_ADDR: std::ops::RangeInclusive<u8> = 3..=12;
const OP_GCSTEP: u8 = 15;
const OP_NEWREF: u8 = 59;
const IRT_GUARD: u8 = 0x80;
const IRT_TYPE: u8 = 0x1f;
/// `RID_NONE`: a register field with this bit set holds no register.
const RID_NONE: u8 = 0x80;
/// `RID_SINK` and `RID_SUNK` (`lj_target.h`): an allocation the sink pass
/// removed from the trace, or a store into one. Neither has code in the
/// trace: an exit that needs the object builds it from the snapshot.
const RID_SINK: u8 = 0xfe;
const RID_SUNK: u8 = 0xfd;

/// Whether the sink pass removed `i` from the trace's code.
fn sunk(i: &Ins) -> bool {
    matches!(i.r, RID_SINK | RID_SUNK)
}

/// The estimated size in bytes of an instruction's machine code: 0 for
/// markers and constants, a little for what emits nothing of its own
/// (dead, sunk, fused into its user: their neighbours' register moves),
/// more for guards (a compare and a branch to an exit) and calls. Fitted by
/// least squares to the byte lengths of 2,451 snapshot spans of the traces
/// of LuaJIT's benchmark programs (md5, nbody, ray, fannkuch, scimark...):
/// the mean span is 85 bytes, the fit's mean error 20. Guarded array,
/// hash and upvalue loads are sized from the code the assembler emits for
/// each kind of value instead ([`guarded_load`]): the fit's one size for
/// them (13) was a table's or a function's load less 8 bytes, which put
/// the end of a callee that loads its closure's upvalues one to three
/// instructions early.
pub fn weight(i: &Ins) -> u32 {
    if matches!(i.op, OP_NOP | OP_BASE | OP_LOOP | OP_USE | OP_RENAME | OP_PHI)
        || (OP_KPRI..=OP_KSLOT).contains(&i.op)
        || sunk(i)
    {
        return 0;
    }
    let guard = i.t & IRT_GUARD != 0;
    let num = i.t & IRT_TYPE == IRT_NUM;
    let effect = matches!(i.op, OP_RETF | OP_GCSTEP | OP_NEWREF)
        || (OP_ASTORE..=OP_XSTORE).contains(&i.op)
        || (OP_SNEW..=OP_BUFSTR).contains(&i.op)
        || (OP_TBAR..=OP_XBAR).contains(&i.op)
        || (OP_CALLN..=OP_CALLXS).contains(&i.op);
    let has_reg = i.r & RID_NONE == 0 || i.s != 0;
    if !(has_reg || guard || effect) {
        return 2;
    }
    match i.op {
        0..=10 => 12,
        OP_SLOAD if guard => 21,
        OP_SLOAD => 12,
        OP_HREFK..=OP_NEWREF if guard => 37,
        OP_HREFK..=OP_NEWREF => 26,
        OP_AREF..=OP_LREF => 16,
        OP_ALOAD..=OP_ULOAD if guard => guarded_load(i.t & IRT_TYPE, has_reg),
        OP_ALOAD..=OP_ALEN if guard => 13,
        OP_ALOAD..=OP_ALEN => 2,
        OP_BNOT..=OP_MULOV if guard => 14,
        OP_BNOT..=OP_MULOV if num => 6,
        OP_BNOT..=OP_MULOV => 3,
        OP_ASTORE..=OP_XSTORE => 8,
        OP_TBAR..=OP_XBAR => 35,
        OP_CONV..=OP_STRTO if guard => 22,
        // `tobit` adds a bias and moves the low word out (`addsd`, `movd`:
        // `asm_tobit` in lj_asm_x86.h); the fit, which saw few, gave it 3.
        OP_TOBIT => 8,
        OP_CONV..=OP_STRTO => 3,
        OP_RETF => 29,
        _ if (OP_CALLN..=OP_CALLXS).contains(&i.op) || (OP_SNEW..=OP_BUFSTR).contains(&i.op) => 18,
        _ => 6 + if guard { 8 } else { 0 },
    }
}

/// The code of an array, hash or upvalue load that checks the type of
/// what it loads (`asm_ahuvload` in lj_asm_x86.h, GC64): an object's tag
/// is loaded (rotated into the register it goes to, or shifted in a
/// scratch one), compared and shifted out; any other value's is one
/// compare of its tag word with a 32-bit constant, then a load of the
/// value into its register (or none: its user reads it from memory).
/// Each check's branch to an exit is 6 bytes.
fn guarded_load(t: u8, has_reg: bool) -> u32 {
    match (IRT_ADDR.contains(&t), has_reg) {
        (true, true) => 21,
        (true, false) => 18,
        (false, true) => 18,
        (false, false) => 14,
    }
}

/// Whether the assembler emits a call for an instruction, on x86-64
/// (`lj_asm.c`, `lj_asm_x86.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Calls {
    /// Always one: a helper of LuaJIT's (the length of a table, a new
    /// string, table or cdata, a number formatted, an integer modulo or a
    /// 64-bit division, a power, a barrier) or a C function.
    Always,
    /// One or none, by the machine or the operands: a rounding without
    /// SSE4.1 or another math function, a buffer's put, and the
    /// collector's check, which the assembler places at a GCSTEP or the
    /// LOOP (and at the trace's head) when the code after it allocates.
    Maybe,
    Never,
}

/// `IRFPM_SQRT`: the one math function always inline.
const FPM_SQRT: u16 = 3;
const IRT_I64: u8 = 21;
const IRT_U64: u8 = 22;

fn calls(i: &Ins) -> Calls {
    if sunk(i) {
        return Calls::Never;
    }
    let used = i.r & RID_NONE == 0 || i.s != 0 || matches!(i.op, OP_NEWREF | OP_OBAR | OP_CALLS | OP_CALLXS);
    let wide = matches!(i.t & IRT_TYPE, IRT_I64 | IRT_U64);
    match i.op {
        OP_LOOP | OP_GCSTEP | OP_BUFHDR | OP_BUFPUT => Calls::Maybe,
        // Unused, the assembler leaves it out.
        _ if !used => Calls::Never,
        OP_FPMATH if i.op2 == FPM_SQRT => Calls::Never,
        OP_FPMATH | OP_LDEXP => Calls::Maybe,
        OP_DIV if wide => Calls::Always,
        OP_ALEN | OP_NEWREF | OP_OBAR | OP_TOSTR | OP_STRTO | OP_MOD | OP_POW | OP_BUFSTR => Calls::Always,
        _ if (OP_SNEW..=OP_CNEWI).contains(&i.op) || (OP_CALLN..=OP_CALLXS).contains(&i.op) => Calls::Always,
        _ => Calls::Never,
    }
}

/// Whether `i` allocates an object the collector's check steps for.
fn allocates(i: &Ins) -> bool {
    !sunk(i) && ((OP_SNEW..=OP_CNEWI).contains(&i.op) || matches!(i.op, OP_BUFSTR | OP_TOSTR))
}

/// The IR instruction (its index in `ins`) whose frames each call of the
/// code between `m0` and `m1` is charged to, paired in order with the
/// instructions of `span` that make calls: calls and instructions both
/// follow the IR's order there. Paired only where the count of calls
/// leaves no doubt: it equals the instructions that always call, or those
/// and all that may (`head`: the trace's first span, where the
/// collector's check may open the code). A call is its instruction's; the
/// collector's check is the first allocation it steps for: after it, up
/// to the loop for the head's. Each pair is (the offset of the call's last
/// byte, the instruction).
fn call_sites(
    code: &[McIns],
    m0: u32,
    m1: u32,
    ins: &[Ins],
    span: std::ops::Range<usize>,
    head: bool,
) -> Vec<(u32, usize)> {
    let lo = code.partition_point(|c| c.ofs < m0);
    let hi = code.partition_point(|c| c.ofs < m1);
    let sites: Vec<u32> =
        (lo..hi).filter(|&j| code[j].call).map(|j| code.get(j + 1).map_or(m1, |c| c.ofs.min(m1)) - 1).collect();
    if sites.is_empty() {
        return Vec::new();
    }
    let always: Vec<usize> = span.clone().filter(|&r| calls(&ins[r]) == Calls::Always).collect();
    let may: Vec<Option<usize>> = span.filter(|&r| calls(&ins[r]) != Calls::Never).map(Some).collect();
    let makers: Vec<Option<usize>> = if sites.len() == always.len() {
        always.into_iter().map(Some).collect()
    } else if sites.len() == may.len() {
        may
    } else if head && sites.len() == may.len() + 1 {
        std::iter::once(None).chain(may).collect()
    } else {
        return Vec::new();
    };
    let loop_at = ins.iter().position(|i| i.op == OP_LOOP).unwrap_or(ins.len());
    let first_allocation = |from: usize, to: usize| (from..to).find(|&r| allocates(&ins[r]));
    sites
        .into_iter()
        .zip(makers)
        .filter_map(|(at, r)| {
            let named = match r {
                None => first_allocation(0, loop_at),
                Some(r) if matches!(ins[r].op, OP_LOOP | OP_GCSTEP) => first_allocation(r + 1, ins.len()),
                Some(r) => Some(r),
            };
            named.map(|r| (at, r))
        })
        .collect()
}

/// What the code of `i` ends with: a write to the register the assembler
/// gave it, a guard's jump to its exit, a store (see `code_anchors`).
fn anchor(i: &Ins) -> Anchor {
    if sunk(i) {
        Anchor::None
    } else if i.r & RID_NONE == 0 && i.r < 32 {
        if i.t & IRT_GUARD != 0 {
            Anchor::GuardedReg(i.r)
        } else {
            Anchor::Reg(i.r)
        }
    } else if i.t & IRT_GUARD != 0 {
        Anchor::Exit
    } else if (OP_ASTORE..=OP_XSTORE).contains(&i.op) {
        Anchor::Store
    } else {
        Anchor::None
    }
}

/// Bytes of a trace's entry (before its first instruction's code), and of
/// the end of a trace that does not loop (the stores of its last
/// snapshot's slots, the jump to the next trace), from the same fit.
const HEAD: u32 = 42;
const TAIL: u32 = 83;

/// A chain of frames a range's ticks go to, outermost first: (function,
/// prototype's first bytecode, address after the running bytecode). In a
/// published map, an inlined frame whose function is not a constant of the
/// trace (it checks that function by its prototype only) has function 0:
/// it is named by its prototype.
pub type Chain = Vec<(usize, usize, usize)>;

/// The chain of frames (an index into `chains`) that emitted each IR
/// instruction of `shape` (None where unknown), from the recorder's log.
pub fn owners(log: &[Recorded], shape: &TraceShape, chains: &mut Vec<Chain>) -> Vec<Option<u32>> {
    let n = shape.ins.len();
    let mut own = vec![None; n];
    let mut ids: HashMap<Chain, u32> = HashMap::new();
    let mut stack: Chain = Vec::new();
    let loop_at = shape.ins.iter().position(|i| i.op == OP_LOOP).unwrap_or(n);
    let idx = |r: u32| (r as usize).checked_sub(shape.first as usize);
    let mut last: Option<u32> = None;
    for (k, e) in log.iter().enumerate() {
        // The chain of frames this bytecode runs in.
        let chain = if e.depth < 0 || e.ins == 0 {
            if e.depth < 0 {
                stack.clear();
                None
            } else {
                last // no Lua function: the code is its caller's
            }
        } else {
            let d = e.depth as usize;
            stack.truncate(d + 1);
            if stack.len() == d + 1 {
                stack[d] = (e.func, e.bc, e.ins);
                Some(())
            } else if stack.len() == d {
                stack.push((e.func, e.bc, e.ins));
                Some(())
            } else {
                None // a depth the log never saw entered
            }
            .map(|_| {
                let next = ids.len() as u32;
                *ids.entry(stack.clone()).or_insert_with(|| {
                    chains.push(stack.clone());
                    next
                })
            })
        };
        last = chain;
        let from = idx(e.nins).unwrap_or(0).min(loop_at);
        let to = log.get(k + 1).and_then(|x| idx(x.nins)).unwrap_or(loop_at).min(loop_at);
        // A later bytecode whose range starts lower (the recorder rolled
        // back) takes over the references it emits again.
        for o in own.iter_mut().take(to).skip(from) {
            *o = chain;
        }
    }
    // The loop's copy: each copied instruction is matched, in order, to the
    // next original of the same opcode and type whose operands it copies:
    // an operand that is itself a copy must be the copy of the original's
    // operand; one before the loop (a value the loop carries, or hoisted)
    // may stand for any reference before the loop; constants and literals
    // are the same (in either order). A copied instruction with no original (a conversion the
    // copy needed) is its predecessor's.
    let mut orig = vec![u32::MAX; n];
    let loop_ref = shape.first + loop_at as u32;
    let operand_ok = |c: u16, o: u16, orig: &[u32]| -> bool {
        let (c, o) = (c as u32, o as u32);
        if c > loop_ref {
            // A copy whose own original is unknown stands for anything.
            orig.get((c - shape.first) as usize).map_or(true, |&x| x == o || x == u32::MAX)
        } else if c >= shape.first && o >= shape.first {
            true
        } else {
            c == o
        }
    };
    let mut cursor = 0usize;
    let mut prev = None;
    for c in loop_at + 1..n {
        let ci = shape.ins[c];
        if ci.op == OP_PHI {
            continue;
        }
        let found = (cursor..loop_at).find(|&o| {
            let oi = shape.ins[o];
            oi.op == ci.op
                && oi.t & IRT_TYPE == ci.t & IRT_TYPE
                && ((operand_ok(ci.op1, oi.op1, &orig) && operand_ok(ci.op2, oi.op2, &orig))
                    // Folding orders a commutative operation's operands.
                    || (operand_ok(ci.op1, oi.op2, &orig) && operand_ok(ci.op2, oi.op1, &orig)))
        });
        if let Some(o) = found {
            own[c] = own[o];
            orig[c] = shape.first + o as u32;
            cursor = o + 1;
        } else {
            own[c] = prev;
        }
        prev = own[c];
    }
    // A PHI's moves sit at the loop's end and carry the value its second
    // operand computed.
    for c in loop_at + 1..n {
        if shape.ins[c].op == OP_PHI {
            own[c] = idx(shape.ins[c].op2 as u32).and_then(|o| own.get(o).copied().flatten());
        }
    }
    own
}

/// The fine map of one trace: ranges of machine code, each going to a
/// chain of frames or left to the snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FineMap {
    /// Offsets where a range starts, ascending.
    pub starts: Vec<u32>,
    /// Each range's chain (an index into `chains`), or `u32::MAX` where the
    /// snapshot's frames stand.
    pub chain_of: Vec<u32>,
    /// The chains, outermost first.
    pub chains: Vec<Chain>,
    /// The calls the trace makes for an instruction that always calls,
    /// by the offset of the call's last byte, ascending: the chain of the
    /// instruction that made it (or `SNAPSHOT`). A tick inside the called
    /// function is that instruction's, wherever the ranges put the call.
    pub calls: Vec<(u32, u32)>,
}

/// No chain: the snapshot's frames stand.
pub const SNAPSHOT: u32 = u32::MAX;

impl FineMap {
    /// The chain the code at `ofs` belongs to, if the map names one.
    pub fn at(&self, ofs: u32) -> Option<&Chain> {
        let i = self.starts.partition_point(|&s| s <= ofs).checked_sub(1)?;
        let c = self.chain_of[i];
        (c != SNAPSHOT).then(|| &self.chains[c as usize])
    }

    /// For a tick inside a function the trace called, the return address
    /// less one being `ofs`: the chain of the instruction that made the
    /// call (None: the snapshot's frames), or None where the call is not
    /// known.
    pub fn at_call(&self, ofs: u32) -> Option<Option<&Chain>> {
        let i = self.calls.binary_search_by_key(&ofs, |c| c.0).ok()?;
        let c = self.calls[i].1;
        Some((c != SNAPSHOT).then(|| &self.chains[c as usize]))
    }

    /// How many ranges name a chain, of all ranges.
    pub fn named(&self) -> (usize, usize) {
        (self.chain_of.iter().filter(|&&c| c != SNAPSHOT).count(), self.chain_of.len())
    }
}

/// Whether `chain` can stand for the frames of `snap`: the same base
/// function, and at every inlined level the snapshot's function (or the
/// prototype the snapshot checks it by), or else a function the trace
/// knows: a constant of the trace or of a prototype that is one (kept
/// alive by it). The code after a snapshot may have returned from the
/// snapshot's innermost frames and called others before the next guard
/// (a call of a method the trace already checked, a tail call): those
/// frames are the recorder's, not the snapshot's.
fn agrees(chain: &Chain, snap: &Snap, shape: &TraceShape) -> bool {
    if snap.base != 0 && chain[0].0 != snap.base {
        return false;
    }
    for (level, &(func, bc, _)) in chain.iter().enumerate().skip(1) {
        let same = match snap.inlined.get(level - 1) {
            Some(&f) if f != 0 => f == func,
            Some(_) => bc != 0 && snap.checked.get(level - 1) == Some(&bc),
            None => false,
        };
        let ok = same || shape.functions.contains(&func) || (bc != 0 && shape.protos.contains(&bc));
        if !ok {
            return false;
        }
    }
    true
}

/// Builds the fine map of a committed trace from its recorder's log.
pub fn build(log: &[Recorded], shape: &TraceShape) -> FineMap {
    let mut chains = Vec::new();
    let own = owners(log, shape, &mut chains);
    let mut map = FineMap { chains, ..FineMap::default() };
    let push = |map: &mut FineMap, at: u32, chain: u32| {
        if map.starts.last() == Some(&at) {
            *map.chain_of.last_mut().unwrap() = chain;
        } else if map.chain_of.last() != Some(&chain) {
            map.starts.push(at);
            map.chain_of.push(chain);
        }
        if map.chain_of.len() >= 2 && map.chain_of[map.chain_of.len() - 2] == chain {
            map.starts.pop();
            map.chain_of.pop();
        }
    };
    let n = shape.ins.len() as u32;
    let mut weights: Vec<u64> = shape.ins.iter().map(|i| weight(i) as u64).collect();
    // The entry's code goes with the first instruction that has code, the
    // end of a trace that does not loop with the last.
    if let Some(w) = weights.iter_mut().find(|w| **w > 0) {
        *w += HEAD as u64;
    }
    if !shape.ins.iter().any(|i| i.op == OP_LOOP) {
        if let Some(w) = weights.iter_mut().rev().find(|w| **w > 0) {
            *w += TAIL as u64;
        }
    }
    for (k, snap) in shape.snaps.iter().enumerate() {
        let from = snap.ir_ref.saturating_sub(shape.first).min(n);
        let to = shape.snaps.get(k + 1).map_or(n, |s| s.ir_ref.saturating_sub(shape.first).min(n));
        let m0 = snap.mcofs;
        let m1 = shape.snaps.get(k + 1).map_or(shape.szmcode, |s| s.mcofs).max(m0);
        let total: u64 = weights[from as usize..to as usize].iter().sum();
        if total == 0 || m1 == m0 {
            push(&mut map, m0, SNAPSHOT);
            continue;
        }
        // Measured where the code was decoded and anchors it, else by the
        // fitted sizes alone.
        let span = from as usize..to as usize;
        let irs: Vec<(Anchor, u64)> = span.clone().map(|r| (anchor(&shape.ins[r]), weights[r])).collect();
        let measured = if shape.anchored && !shape.code.is_empty() {
            code_anchors::starts(&shape.code, m0, m1, &irs)
        } else {
            None
        };
        let chain_of = |r: usize, map: &FineMap| match own[r] {
            Some(c) if agrees(&map.chains[c as usize], snap, shape) => c,
            _ => SNAPSHOT,
        };
        for (at, r) in call_sites(&shape.code, m0, m1, &shape.ins, span.clone(), k == 0) {
            let chain = chain_of(r, &map);
            map.calls.push((at, chain));
        }
        let mut cum = 0u64;
        for r in from..to {
            let w = weights[r as usize];
            if w == 0 {
                continue;
            }
            let at = match &measured {
                Some(starts) => starts[(r - from) as usize],
                None => m0 + ((m1 - m0) as u64 * cum / total) as u32,
            };
            cum += w;
            let chain = chain_of(r as usize, &map);
            push(&mut map, at, chain);
        }
    }
    map.calls.sort_unstable_by_key(|c| c.0);
    map.calls.dedup_by_key(|c| c.0);
    // The function the log saw in a frame the trace checks by prototype
    // may be another object's closure, which the trace does not keep: such
    // a frame is named by its prototype.
    for chain in &mut map.chains {
        for level in chain.iter_mut().skip(1) {
            if !shape.functions.contains(&level.0) {
                level.0 = 0;
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: usize = 0x1000;
    const G: usize = 0x2000;

    fn ins(op: u8) -> Ins {
        Ins { op, t: 14, r: 1, s: 0, op1: 0, op2: 0 }
    }

    fn rec(func: usize, pos: usize, depth: i32, nins: u32) -> Recorded {
        Recorded { func, bc: func + 8, ins: func + 8 + 4 * (pos + 1), depth, nins }
    }

    #[test]
    fn markers_weigh_nothing_and_guards_and_calls_most() {
        let at = |op, t, r| weight(&Ins { op, t, r, s: 0, op1: 0, op2: 0 });
        assert_eq!(at(41, 14, 0xff), 2, "a dead ADD: its neighbours' moves only");
        assert_eq!(at(41, 14, 3), 6, "an ADD of numbers");
        assert_eq!(at(41, 19, 3), 3, "an ADD of integers");
        assert_eq!(at(0, 0x80 | 14, 0xff), 12, "a guard");
        assert_eq!(at(OP_LOOP, 0x80, 0xff), 0);
        assert_eq!(at(OP_KPRI, 0, 0xff), 0);
        assert_eq!(at(OP_CALLXS, 0, 0xff), 18);
        assert_eq!(at(OP_TOBIT, 19, 3), 8);
        // Guarded loads by what they check: an object's tag into the
        // register it goes to, a number's compared where its user reads it.
        assert_eq!(at(OP_ULOAD, 0x80 | 11, 3), 21, "a table checked and loaded");
        assert_eq!(at(OP_ALOAD, 0x80 | 8, 0xff), 18, "a function checked, its value unused");
        assert_eq!(at(OP_ALOAD + 1, 0x80 | 14, 20), 18, "a number checked and loaded");
        assert_eq!(at(OP_ULOAD, 0x80 | 14, 0xff), 14, "a number checked, read by its user");
        assert_eq!(at(OP_ALOAD, 14, 3), 2, "an unguarded load");
        // A sunk allocation (TDUP) and a store into it: no code in the trace.
        assert_eq!(at(OP_SNEW + 3, 11, RID_SUNK), 0);
        assert_eq!(weight(&Ins { op: OP_ASTORE, t: 14, r: RID_SINK, s: 4, op1: 0, op2: 0 }), 0);
        assert_eq!(anchor(&Ins { op: OP_ASTORE, t: 14, r: RID_SINK, s: 4, op1: 0, op2: 0 }), Anchor::None);
    }

    #[test]
    fn guard_free_inlined_code_between_two_snapshots_gets_its_own_frames() {
        // Refs 0x8001.. : a guard of the caller's call (depth 0), then three
        // instructions of the callee (depth 1), then the caller's add.
        let shape = TraceShape {
            first: 0x8001,
            ins: vec![ins(8), ins(41), ins(43), ins(41), ins(41)],
            snaps: vec![Snap { ir_ref: 0x8001, mcofs: 0, base: 0, inlined: vec![], checked: vec![] }],
            szmcode: 100,
            functions: vec![G],
            protos: vec![],
            code: vec![],
            anchored: false,
        };
        let log = [rec(F, 3, 0, 0x8001), rec(G, 0, 1, 0x8002), rec(F, 4, 0, 0x8005)];
        let map = build(&log, &shape);
        let caller = map.at(0).unwrap();
        assert_eq!(caller.len(), 1);
        let callee = map.at(40).unwrap();
        assert_eq!(callee.iter().map(|c| c.0).collect::<Vec<_>>(), vec![F, G]);
        assert_eq!(callee[0].2, F + 8 + 16, "the caller's frame is at its call");
        assert_eq!(map.at(99).unwrap().len(), 1, "the last add is the caller's");
    }

    #[test]
    fn a_chain_that_disagrees_with_its_snapshot_is_left_to_the_snapshot() {
        let shape = TraceShape {
            first: 0x8001,
            ins: vec![ins(41), ins(41)],
            snaps: vec![Snap { ir_ref: 0x8001, mcofs: 0, base: 0, inlined: vec![F], checked: vec![] }],
            szmcode: 10,
            functions: vec![G],
            protos: vec![],
            code: vec![],
            anchored: false,
        };
        // The snapshot's inlined frame runs F; the log says a function the
        // trace does not know (0x3000) emitted the code: not named.
        let log = [rec(F, 1, 0, 0x8001), rec(0x3000, 0, 1, 0x8001)];
        assert_eq!(build(&log, &shape).at(5), None);
        // A callee no constant keeps alive is not named either.
        let shape = TraceShape { functions: vec![], ..shape };
        let log = [rec(F, 1, 0, 0x8001), rec(0x3000, 0, 1, 0x8002)];
        assert_eq!(build(&log, &shape).at(9), None);
    }

    #[test]
    fn a_callee_checked_by_its_prototype_is_named_by_it() {
        // The log saw one object's closure (0x3000, bytecode 0x3008); the
        // trace holds no function for that frame, only a check of its
        // prototype.
        const H: usize = 0x3000;
        let shape = TraceShape {
            first: 0x8001,
            ins: vec![ins(41), ins(41)],
            snaps: vec![Snap { ir_ref: 0x8001, mcofs: 0, base: 0, inlined: vec![0], checked: vec![H + 8] }],
            szmcode: 10,
            functions: vec![],
            protos: vec![H + 8],
            code: vec![],
            anchored: false,
        };
        let log = [rec(F, 1, 0, 0x8001), rec(H, 0, 1, 0x8001)];
        let chain = build(&log, &shape).at(5).cloned().unwrap();
        assert_eq!(chain.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>(), vec![(F, F + 8), (0, H + 8)]);
        // Checked against another prototype, and H's not kept by the
        // trace: the snapshot's frames stand. Kept, H may have been called
        // since the snapshot (after G returned): named by it.
        let other = TraceShape {
            snaps: vec![Snap { ir_ref: 0x8001, mcofs: 0, base: 0, inlined: vec![0], checked: vec![G + 8] }],
            protos: vec![G + 8],
            ..shape.clone()
        };
        assert_eq!(build(&log, &other).at(5), None);
        let both = TraceShape { protos: vec![G + 8, H + 8], ..other };
        assert_eq!(build(&log, &both).at(5).map(|c| c[1].1), Some(H + 8));
        // Deeper than the snapshot: a prototype the trace holds names it.
        let deeper = TraceShape { snaps: vec![Snap { ir_ref: 0x8001, mcofs: 0, ..Snap::default() }], ..shape.clone() };
        assert_eq!(build(&log, &deeper).at(5).map(|c| c[1].0), Some(0));
        let unkept = TraceShape { protos: vec![], ..deeper };
        assert_eq!(build(&log, &unkept).at(5), None);
    }

    #[test]
    fn the_loop_copy_follows_its_originals_by_opcode() {
        // Pre-roll: SLOAD (F), ADD (G), MUL (F); LOOP; the copy dropped the
        // SLOAD (hoisted) and keeps ADD, MUL.
        let shape = TraceShape {
            first: 0x8001,
            ins: vec![ins(71), ins(41), ins(43), Ins { op: OP_LOOP, ..ins(0) }, ins(41), ins(43)],
            snaps: vec![
                Snap { ir_ref: 0x8001, mcofs: 0, base: 0, inlined: vec![], checked: vec![] },
                Snap { ir_ref: 0x8005, mcofs: 30, base: 0, inlined: vec![], checked: vec![] },
            ],
            szmcode: 50,
            functions: vec![G],
            protos: vec![],
            code: vec![],
            anchored: false,
        };
        let log = [rec(F, 1, 0, 0x8001), rec(G, 0, 1, 0x8002), rec(F, 2, 0, 0x8003)];
        let map = build(&log, &shape);
        assert_eq!(map.at(31).unwrap().len(), 2, "the copied ADD is the callee's");
        assert_eq!(map.at(49).unwrap().len(), 1, "the copied MUL is the caller's");
    }

    #[test]
    fn code_after_a_return_and_a_call_is_the_callee_s_not_the_snapshot_s() {
        // The snapshot was taken inside E (a guard of its store); E
        // returned and the trace called S, a constant of the trace, with
        // no guard between: S's code is S's, not E's.
        const E: usize = 0x3000;
        const S: usize = 0x4000;
        let shape = TraceShape {
            first: 0x8001,
            ins: vec![ins(41), ins(41), ins(41)],
            snaps: vec![Snap { ir_ref: 0x8001, mcofs: 0, base: 0, inlined: vec![E], checked: vec![] }],
            szmcode: 30,
            functions: vec![E, S],
            protos: vec![],
            code: vec![],
            anchored: false,
        };
        let log = [rec(F, 1, 0, 0x8001), rec(E, 0, 1, 0x8001), rec(F, 2, 0, 0x8002), rec(S, 0, 1, 0x8002)];
        assert_eq!(build(&log, &shape).at(0).unwrap()[1].0, E);
        assert_eq!(build(&log, &shape).at(25).unwrap()[1].0, S);
    }

    #[test]
    fn a_call_is_named_by_the_instruction_that_made_it() {
        // A guard of the caller's (F), then the callee's (G) length of a
        // table, a call of 5 bytes the fitted sizes place in the guard's
        // range, then a conversion.
        let guard = Ins { op: 0, t: 0x80 | IRT_NUM, r: RID_NONE, s: 0, op1: 0, op2: 0 };
        let alen = Ins { op: OP_ALEN, t: 19, r: 1, s: 0, op1: 0, op2: 0 };
        let conv = Ins { op: OP_CONV, t: IRT_NUM, r: 17, s: 0, op1: 0, op2: 0 };
        let m = |ofs, call| McIns { ofs, call, ..McIns::default() };
        let shape = TraceShape {
            first: 0x8001,
            ins: vec![guard, alen, conv],
            snaps: vec![Snap { ir_ref: 0x8001, mcofs: 0, base: 0, inlined: vec![], checked: vec![] }],
            szmcode: 30,
            functions: vec![G],
            protos: vec![],
            code: vec![m(0, false), m(4, true), m(9, false), m(13, false), m(18, false)],
            anchored: false,
        };
        let log = [rec(F, 1, 0, 0x8001), rec(G, 0, 1, 0x8002)];
        let map = build(&log, &shape);
        assert_eq!(map.at(8).unwrap().len(), 1, "the fitted sizes put the call in the guard's range");
        assert_eq!(map.at_call(8).unwrap().unwrap().len(), 2, "the call is the callee's");
        assert_eq!(map.at_call(7), None, "no call ends there");
        // More calls than the instructions that make them: none is named.
        let twice = TraceShape { code: vec![m(0, true), m(4, true), m(9, true), m(13, false)], ..shape.clone() };
        assert!(build(&log, &twice).calls.is_empty());
        // A call that may be the collector's check at the trace's head.
        let head = TraceShape { code: vec![m(0, true), m(2, false), m(4, true), m(9, false)], ..shape };
        assert_eq!(build(&log, &head).calls.iter().map(|c| c.0).collect::<Vec<_>>(), vec![8]);
    }

    #[test]
    fn the_collector_s_check_is_charged_to_the_allocation_it_steps_for() {
        // F's add, G's allocation; LOOP (where the assembler puts the
        // collector's check for the loop's allocations); the copies.
        let tnew = Ins { op: OP_SNEW + 2, t: 11, r: 0, s: 0, op1: 0, op2: 0 };
        let lp = Ins { op: OP_LOOP, t: 0x80, r: RID_NONE, s: 0, op1: 0, op2: 0 };
        let m = |ofs, call| McIns { ofs, call, ..McIns::default() };
        let shape = TraceShape {
            first: 0x8001,
            ins: vec![ins(41), tnew, lp, ins(41), tnew],
            snaps: vec![Snap { ir_ref: 0x8001, mcofs: 0, base: 0, inlined: vec![], checked: vec![] }],
            szmcode: 60,
            functions: vec![G],
            protos: vec![],
            code: vec![m(0, false), m(4, true), m(9, false), m(20, true), m(25, false), m(30, true), m(35, false)],
            anchored: false,
        };
        let log = [rec(F, 1, 0, 0x8001), rec(G, 0, 1, 0x8002), rec(F, 2, 0, 0x8003)];
        let map = build(&log, &shape);
        let named: Vec<(u32, usize)> = map.calls.iter().map(|&(at, c)| (at, map.chains[c as usize].len())).collect();
        assert_eq!(named, vec![(8, 2), (24, 2), (34, 2)], "the check at the loop is the allocating callee's");
        // With the check at the trace's head too.
        let head = TraceShape {
            code: vec![
                m(0, true),
                m(3, false),
                m(4, true),
                m(9, false),
                m(20, true),
                m(25, false),
                m(30, true),
                m(35, false),
            ],
            ..shape
        };
        assert_eq!(build(&log, &head).calls.len(), 4);
    }
}
