//! Where each IR instruction's machine code really is, read from the
//! trace's own code: the measured side of the fine map (`super::fine_map`).
//!
//! Between two snapshots the assembler lays out the code of the IR
//! instructions in their order (it works backwards from the last one), so
//! the code of an instruction that computes a value into a register ends
//! with the machine instruction that writes that register (the register is
//! the one the assembler allocated, `IRIns.r`, kept in the committed
//! trace); a guard's code ends with its conditional jump to an exit stub,
//! which lies outside the trace; a store's with its write to memory. These
//! are the anchors: each found in order, from the span's first machine
//! instruction on, ends its IR instruction's code there. The IR
//! instructions with no anchor (no register, fused into a user, found
//! nowhere) share the code between the anchors around them by their fitted
//! sizes, as the whole span did before.
//!
//! The code is decoded once per trace, when it is committed, on the VM
//! thread (never in a signal handler), by `iced-x86`.

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind, Register,
};

/// One machine instruction of a trace, as decoded: where it starts (from
/// the trace's start) and what it writes, the facts that tie it to the IR
/// instruction it implements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct McIns {
    pub ofs: u32,
    /// The registers it writes, by LuaJIT's x86-64 register numbers (bits
    /// 0-15 the general registers in x86 order, 16-31 `xmm0`-`xmm15`).
    pub writes: u32,
    /// A conditional branch out of the trace: a guard's jump to its exit.
    pub exit: bool,
    /// A store to memory not on the C stack (spill slots are on it).
    pub store: bool,
    /// A move from register to register, or a register zeroed (`xorps x,
    /// x`): what an operation into that register may start with.
    pub setup: bool,
    /// A call (direct or through a register): a helper of LuaJIT's, a C
    /// function, or the collector's step.
    pub call: bool,
}

/// LuaJIT's number of an x86 register (`RID_*` in `lj_target_x86.h`).
fn rid(r: Register) -> Option<u32> {
    if r.is_gpr() {
        let full = r.full_register();
        (full.is_gpr64()).then(|| full as u32 - Register::RAX as u32)
    } else if r.is_xmm() || r.is_ymm() || r.is_zmm() {
        let n = r.number() as u32;
        (n < 16).then_some(16 + n)
    } else {
        None
    }
}

/// Decodes the machine code of a trace (`bytes`, at address `base`) into
/// its instructions. Decoding stops at the first byte that is no valid
/// instruction (there is none in a committed trace).
pub fn decode(bytes: &[u8], base: u64) -> Vec<McIns> {
    let mut out = Vec::with_capacity(bytes.len() / 4);
    let mut dec = Decoder::with_ip(64, bytes, base, DecoderOptions::NONE);
    let mut info = InstructionInfoFactory::new();
    let mut ins = Instruction::default();
    let end = base + bytes.len() as u64;
    while dec.can_decode() {
        dec.decode_out(&mut ins);
        if ins.is_invalid() {
            break;
        }
        let mut m = McIns { ofs: (ins.ip() - base) as u32, ..McIns::default() };
        let i = info.info(&ins);
        for u in i.used_registers() {
            if matches!(
                u.access(),
                OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
            ) {
                if let Some(r) = rid(u.register()) {
                    m.writes |= 1 << r;
                }
            }
        }
        m.store = i.used_memory().iter().any(|u| {
            matches!(u.access(), OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite)
                && u.base() != Register::RSP
                && u.base() != Register::None
        });
        m.call = matches!(ins.flow_control(), FlowControl::Call | FlowControl::IndirectCall);
        if ins.flow_control() == FlowControl::ConditionalBranch {
            let t = ins.near_branch_target();
            m.exit = t < base || t >= end;
        }
        let regs = ins.op_count() == 2 && ins.op0_kind() == OpKind::Register && ins.op1_kind() == OpKind::Register;
        m.setup = regs
            && (matches!(ins.mnemonic(), Mnemonic::Mov | Mnemonic::Movaps | Mnemonic::Movapd | Mnemonic::Movsd)
                || (matches!(ins.mnemonic(), Mnemonic::Xorps | Mnemonic::Xorpd | Mnemonic::Pxor | Mnemonic::Xor)
                    && ins.op0_register() == ins.op1_register()));
        // A stack push or a call writes RSP: not a value's register.
        m.writes &= !(1 << 4);
        out.push(m);
    }
    out
}

/// What an IR instruction's code ends with, if anything can be told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// A write to this register (LuaJIT's number).
    Reg(u8),
    /// A write to this register, then the guard's jump to its exit (and
    /// at most one more write to the register just after it: a loaded
    /// value unboxed once its type is checked).
    GuardedReg(u8),
    /// A conditional jump to an exit.
    Exit,
    /// A store to memory.
    Store,
    /// Nothing found in the code says where it ends.
    None,
}

/// The start offset of each of `irs` (its anchor and its fitted size, in
/// order) in the span `[m0, m1)` of the trace's `code`: anchored
/// instructions end after the machine instruction that anchors them, the
/// others share what lies between anchors by size. None when the code
/// anchors fewer than half of the instructions that have an anchor (the
/// code is not laid out as the IR says: the fitted sizes stand).
pub fn starts(code: &[McIns], m0: u32, m1: u32, irs: &[(Anchor, u64)]) -> Option<Vec<u32>> {
    let lo = code.partition_point(|c| c.ofs < m0);
    let hi = code.partition_point(|c| c.ofs < m1);
    let span = &code[lo..hi];
    let end_of = |j: usize| span.get(j + 1).map_or(m1, |c| c.ofs);
    let mut ends: Vec<Option<u32>> = vec![None; irs.len()];
    let (mut cursor, mut wanted, mut found) = (0usize, 0usize, 0usize);
    for (k, &(anchor, w)) in irs.iter().enumerate() {
        if w == 0 || anchor == Anchor::None {
            continue;
        }
        wanted += 1;
        let hit = |c: &McIns| match anchor {
            Anchor::Reg(r) | Anchor::GuardedReg(r) => c.writes & (1 << r) != 0,
            Anchor::Exit => c.exit,
            Anchor::Store => c.store,
            Anchor::None => false,
        };
        let Some(mut j) = (cursor..span.len()).find(|&j| hit(&span[j])) else { continue };
        // An operation into a register often starts with a move into it
        // (or zeroes it first): its code ends with the write after that.
        if let Anchor::Reg(_) | Anchor::GuardedReg(_) = anchor {
            if span[j].setup && j + 1 < span.len() && hit(&span[j + 1]) {
                j += 1;
            }
        }
        if let Anchor::GuardedReg(_) = anchor {
            if let Some(e) = (j + 1..span.len().min(j + 4)).find(|&e| span[e].exit) {
                j = if e + 1 < span.len() && hit(&span[e + 1]) { e + 1 } else { e };
            }
        }
        ends[k] = Some(end_of(j));
        cursor = j + 1;
        found += 1;
    }
    if wanted == 0 || found * 2 < wanted {
        return None;
    }
    // Each run of instructions up to an anchored one (or the span's end)
    // shares its stretch of code by the fitted sizes.
    let mut out = vec![m0; irs.len()];
    let (mut from, mut at) = (0usize, m0);
    // The stretches close at each anchored instruction, and at the end.
    let closing = ends.iter().enumerate().filter_map(|(k, e)| e.map(|e| (k + 1, e))).chain([(irs.len(), m1)]);
    for (last, end) in closing {
        let total: u64 = irs[from..last].iter().map(|x| x.1).sum();
        let mut cum = 0u64;
        for (q, x) in irs.iter().enumerate().take(last).skip(from) {
            out[q] = at + ((end.saturating_sub(at)) as u64 * cum).checked_div(total).unwrap_or(0) as u32;
            cum += x.1;
        }
        from = last;
        at = end.max(at);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_registers_written_exits_and_stores() {
        // movaps xmm3, xmm1; addsd xmm3, xmm2; mov [rdx+8], rax;
        // jne (out of the code); mov [rsp+8], rcx
        let code = [
            0x0f, 0x28, 0xd9, 0xf2, 0x0f, 0x58, 0xda, 0x48, 0x89, 0x42, 0x08, 0x0f, 0x85, 0x00, 0x10, 0x00, 0x00, 0x48,
            0x89, 0x4c, 0x24, 0x08,
        ];
        let d = decode(&code, 0x1000);
        assert_eq!(d.iter().map(|m| m.ofs).collect::<Vec<_>>(), vec![0, 3, 7, 11, 17]);
        assert_eq!(d[0].writes, 1 << 19);
        assert_eq!(d[1].writes, 1 << 19);
        assert!(d[2].store && d[2].writes == 0);
        assert!(d[3].exit);
        assert!(!d[4].store, "a spill slot is not a store of the program's");
    }

    #[test]
    fn anchored_code_ends_where_its_register_is_written() {
        let m = |ofs, writes| McIns { ofs, writes, ..McIns::default() };
        // Two IR instructions into xmm3 (16 + 3) then xmm4, one with no
        // anchor between them.
        let mut code = [m(0, 1 << 19), m(4, 1 << 19), m(8, 0), m(12, 1 << 20), m(16, 0)];
        code[0].setup = true;
        let irs = [(Anchor::Reg(19), 6), (Anchor::None, 6), (Anchor::Reg(20), 6), (Anchor::None, 6)];
        let s = starts(&code, 0, 20, &irs).unwrap();
        assert_eq!(s, vec![0, 8, 12, 16]);
        // A guarded load: the write, the type check's jump, the unboxing.
        let ex = McIns { exit: true, ..m(8, 0) };
        let guarded = [m(0, 1 << 15), m(4, 0), ex, m(12, 1 << 15), m(16, 1 << 15)];
        let s = starts(&guarded, 0, 20, &[(Anchor::GuardedReg(15), 13), (Anchor::Reg(15), 6)]).unwrap();
        assert_eq!(s, vec![0, 16]);
        // Anchors the code does not hold: the sizes stand.
        assert_eq!(starts(&code, 0, 20, &[(Anchor::Exit, 6), (Anchor::Store, 6)]), None);
    }
}
