//! A stack as LuaJIT's stack dump writes it, and what `lua_getinfo`
//! would tell of each frame, written in the handler into fixed buffers.

use super::*;

/// One frame of a sample, leaf first.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Frame {
    /// The GCfunc, or 0 for a frame named by its prototype alone.
    pub(super) func: usize,
    /// With `func` 0, the GCproto of the Lua function the frame runs: a
    /// frame the trace holds no function for, only a check of the
    /// function's prototype (a constant of the trace, which keeps it).
    pub(super) proto: usize,
    /// The instruction after the one running (the stack dump's PC
    /// convention), or 0 when unknown.
    pub(super) ins: usize,
}

impl Frame {
    /// A frame of the function `func`.
    pub(super) fn of(func: usize, ins: usize) -> Frame {
        Frame { func, proto: 0, ins }
    }

    /// A frame named by the prototype `proto` (the function unknown).
    pub(super) fn by_proto(proto: usize, ins: usize) -> Frame {
        Frame { func: 0, proto, ins }
    }
}

/// The prototype of the Lua function frame `f` runs, or None for a C
/// function or a builtin.
///
/// # Safety
/// `f.func`, when not 0, must be a live function object; else `f.proto` a
/// live prototype.
pub(super) unsafe fn lua_proto(f: Frame) -> Option<usize> {
    if f.func == 0 {
        return (f.proto != 0).then_some(f.proto);
    }
    (at::<u8>(f.func + FN_FFID) == FF_LUA).then(|| at::<usize>(f.func + FN_PC) - PROTO_SIZE)
}

/// What a capture fills: frames leaf first.
pub struct Captured {
    pub(super) frames: [Frame; MAX_FRAMES],
    pub(super) len: usize,
    /// Whether a frame is named by its prototype alone, and whether the
    /// stack ends at an outer frame because an inlined one could not be
    /// named (`stats().compiledFrames`).
    pub(super) by_proto: bool,
    pub(super) cut: bool,
    /// Native frames below the leaf, leaf first (`nativeFrames`).
    pub(super) native: [usize; crate::native_frames::MAX_NATIVE],
    pub(super) native_len: usize,
    /// The VM's C frame of a C function's stack (state C), else 0.
    pub(super) vm_frame: usize,
}

impl Captured {
    pub(super) fn push(&mut self, f: Frame, limit: usize) -> bool {
        if self.len >= limit {
            return false;
        }
        self.by_proto |= f.func == 0;
        self.frames[self.len] = f;
        self.len += 1;
        true
    }
}

/// A byte sink over a fixed slice: never allocates.
pub(super) struct Out<'a> {
    pub(super) buf: &'a mut [u8],
    pub(super) len: usize,
}

impl Out<'_> {
    pub(super) fn bytes(&mut self, b: &[u8]) -> bool {
        let end = self.len + b.len();
        if end > self.buf.len() {
            return false;
        }
        self.buf[self.len..end].copy_from_slice(b);
        self.len = end;
        true
    }

    pub(super) fn int(&mut self, n: i64) -> bool {
        let mut d = [0u8; 20];
        let i = crate::sys::decimal_digits(n.unsigned_abs(), &mut d);
        (n >= 0 || self.bytes(b"-")) && self.bytes(&d[i..])
    }
}

/// The line `ins` (the instruction after the running one) is on in the
/// prototype `pt`, as `lj_debug_line` gives it; the first line when the
/// position is not inside the prototype.
///
/// # Safety
/// `pt` must be a live prototype.
pub(super) unsafe fn line_of(pt: usize, ins: usize) -> i64 {
    let first = at::<i32>(pt + PROTO_FIRSTLINE) as i64;
    if ins == 0 {
        return first;
    }
    let bc = pt + PROTO_SIZE;
    let sizebc = at::<u32>(pt + PROTO_SIZEBC) as usize;
    if ins < bc + 4 || (ins - bc) % 4 != 0 {
        return first;
    }
    let pos = (ins - bc) / 4 - 1;
    let lineinfo = at::<usize>(pt + PROTO_LINEINFO);
    if pos > sizebc || lineinfo == 0 {
        return first;
    }
    let numline = at::<i32>(pt + PROTO_NUMLINE) as i64;
    if pos == sizebc {
        return first + numline;
    }
    if pos == 0 {
        return first;
    }
    let i = pos - 1;
    first
        + if numline < 256 {
            at::<u8>(lineinfo + i) as i64
        } else if numline < 65536 {
            at::<u16>(lineinfo + 2 * i) as i64
        } else {
            at::<u32>(lineinfo + 4 * i) as i64
        }
}

/// Whether the prototype `pt` was loaded from bytecode without its debug
/// information: no line of any instruction, its definition at line 0.
///
/// # Safety
/// `pt` must be a live prototype.
pub(super) unsafe fn is_stripped(pt: usize) -> bool {
    at::<usize>(pt + PROTO_LINEINFO) == 0 && at::<i32>(pt + PROTO_FIRSTLINE) == 0
}

/// Writes one frame as LuaJIT's stack dump does with the `pl` format, but
/// for a prototype without lines (see [`is_stripped`]): `file:@0xADDR`.
///
/// # Safety
/// As [`lua_proto`].
pub(super) unsafe fn write_frame(out: &mut Out, f: Frame) -> bool {
    if let Some(pt) = lua_proto(f) {
        let name = at::<u64>(pt + PROTO_CHUNKNAME) & GCV_MASK;
        let len = at::<u32>(name as usize + STR_LEN) as usize;
        let text = std::slice::from_raw_parts((name as usize + STR_DATA) as *const u8, len);
        if at::<i32>(pt + PROTO_FIRSTLINE) == -1 {
            return out.bytes(b"[builtin:") && out.bytes(text) && out.bytes(b"]");
        }
        let ok = match text.first() {
            Some(b'=') | Some(b'@') => out.bytes(&text[1..]),
            _ => out.bytes(b"[string]"),
        };
        if is_stripped(pt) {
            // Bytecode without its lines (`string.dump(f, true)`, Neovim
            // 0.12's runtime): every function of the chunk would be
            // `file:0`, so the frame names the prototype.
            let mut d = [0u8; 19];
            let n = address_text(pt, &mut d);
            return ok && out.bytes(b":") && out.bytes(&d[..n]);
        }
        ok && out.bytes(b":") && out.int(line_of(pt, f.ins))
    } else if at::<u8>(f.func + FN_FFID) == FF_C {
        let mut d = [0u8; 19];
        let n = address_text(at::<usize>(f.func + FN_CF), &mut d);
        out.bytes(&d[..n])
    } else {
        out.bytes(b"[builtin#") && out.int(at::<u8>(f.func + FN_FFID) as i64) && out.bytes(b"]")
    }
}

/// Writes frames `c.frames[..c.len]` root first, separated as the
/// sampler's stacks are. Returns false when `out` is too small.
///
/// # Safety
/// Every frame's function (or prototype) must be live.
pub(super) unsafe fn write_stack(out: &mut Out, c: &Captured) -> bool {
    for i in (0..c.len).rev() {
        if i + 1 < c.len && !out.bytes(&[SEP]) {
            return false;
        }
        if !write_frame(out, c.frames[i]) {
            return false;
        }
    }
    true
}

/// Writes the native frames of `c`, root first, each after a separator,
/// as `[native@0x...]`. Returns false when `out` is too small.
pub(super) fn write_native(out: &mut Out, c: &Captured) -> bool {
    c.native[..c.native_len].iter().rev().all(|&a| {
        let mut d = [0u8; 19];
        let n = address_text(a, &mut d);
        out.bytes(&[SEP]) && out.bytes(b"[native") && out.bytes(&d[..n]) && out.bytes(b"]")
    })
}

/// GCproto: constants (GC constants below `k`), upvalue and variable names.
pub(super) const PROTO_K: usize = 32;
pub(super) const PROTO_UVINFO: usize = 88;
pub(super) const PROTO_VARINFO: usize = 96;
/// Bytecode operands and the opcodes the name search looks at (the same
/// numbers in every LuaJIT 2.1 up to `JMP`; later opcodes differ).
pub(super) const BC_MOV: u32 = 18;
pub(super) const BC_KNIL: u32 = 44;
pub(super) const BC_UGET: u32 = 45;
pub(super) const BC_GGET: u32 = 54;
pub(super) const BC_TGETS: u32 = 57;
pub(super) const BC_CALLM: u32 = 65;
pub(super) const BC_CALLT: u32 = 68;
pub(super) const BC_ITERC: u32 = 69;
pub(super) const BC_JMP: u32 = 88;
/// How each opcode up to `JMP` uses its A operand: 1 writes slot A, 2
/// writes slots from A on (`base`), 0 neither.
pub(super) const BC_A_MODE: [u8; 89] = {
    let mut m = [0u8; 89];
    let mut op = 12;
    while op <= 13 {
        m[op] = 1; // ISTC, ISFC
        op += 1;
    }
    op = 18;
    while op <= 43 {
        m[op] = 1; // MOV .. KPRI
        op += 1;
    }
    m[44] = 2; // KNIL
    m[45] = 1; // UGET
    m[51] = 1; // FNEW
    m[52] = 1; // TNEW
    m[53] = 1; // TDUP
    m[54] = 1; // GGET
    op = 56;
    while op <= 59 {
        m[op] = 1; // TGETV .. TGETR
        op += 1;
    }
    m[63] = 2; // TSETM
    op = 65;
    while op <= 72 {
        m[op] = 2; // CALLM .. ISNEXT
        op += 1;
    }
    m[73] = 2; // RETM
    op = 77;
    while op <= 84 {
        m[op] = 2; // FORI .. JITERL
        op += 1;
    }
    m
};
/// Special variable names in `varinfo` (VARNAME_*), and the end mark.
pub(super) const VARNAMES: [&[u8]; 7] =
    [b"", b"(for index)", b"(for limit)", b"(for step)", b"(for generator)", b"(for state)", b"(for control)"];

/// Reads an unsigned LEB128 number at `*p`, advancing it.
///
/// # Safety
/// `*p` must point into a live prototype's debug info.
pub(super) unsafe fn uleb128(p: &mut usize) -> usize {
    let mut v = at::<u8>(*p) as usize;
    *p += 1;
    if v >= 0x80 {
        let mut shift = 0;
        v &= 0x7f;
        loop {
            let b = at::<u8>(*p) as usize;
            *p += 1;
            shift += 7;
            v |= (b & 0x7f) << shift;
            if b < 0x80 || shift > 28 {
                break;
            }
        }
    }
    v
}

/// A NUL-terminated string at `p` (at most 255 bytes shown).
///
/// # Safety
/// `p` must point to a NUL-terminated string in live VM memory.
pub(super) unsafe fn cstr<'a>(p: usize) -> &'a [u8] {
    let mut n = 0;
    while n < 255 && at::<u8>(p + n) != 0 {
        n += 1;
    }
    std::slice::from_raw_parts(p as *const u8, n)
}

/// The name of local `slot` live at bytecode position `pc` in `pt`
/// (`debug_varname`).
///
/// # Safety
/// `pt` must be a live prototype.
pub(super) unsafe fn local_name<'a>(pt: usize, pc: usize, mut slot: usize) -> Option<&'a [u8]> {
    let mut p = at::<usize>(pt + PROTO_VARINFO);
    if p == 0 {
        return None;
    }
    let mut last = 0usize;
    for _ in 0..65536 {
        let name_at = p;
        let vn = at::<u8>(p) as usize;
        if vn < VARNAMES.len() {
            if vn == 0 {
                return None;
            }
        } else {
            while at::<u8>(p) != 0 {
                p += 1;
            }
        }
        p += 1;
        let start = last + uleb128(&mut p);
        last = start;
        if start > pc {
            return None;
        }
        let end = start + uleb128(&mut p);
        if pc < end {
            if slot == 0 {
                return Some(if vn < VARNAMES.len() { VARNAMES[vn] } else { cstr(name_at) });
            }
            slot -= 1;
        }
    }
    None
}

/// The name of upvalue `idx` of `pt` (`lj_debug_uvname`).
///
/// # Safety
/// `pt` must be a live prototype.
pub(super) unsafe fn upvalue_name<'a>(pt: usize, idx: usize) -> Option<&'a [u8]> {
    let mut p = at::<usize>(pt + PROTO_UVINFO);
    if p == 0 {
        return None;
    }
    for _ in 0..idx {
        while at::<u8>(p) != 0 {
            p += 1;
        }
        p += 1;
    }
    Some(cstr(p))
}

/// A string constant of `pt` (`proto_kgc(pt, ~idx)`).
///
/// # Safety
/// `pt` must be a live prototype and `idx` one of its string constants.
pub(super) unsafe fn string_constant<'a>(pt: usize, idx: usize) -> Option<&'a [u8]> {
    let k = at::<usize>(pt + PROTO_K);
    let s = (at::<u64>(k - 8 * (idx + 1)) & GCV_MASK) as usize;
    if s == 0 || at::<u8>(s + OBJ_GCT) != 4 {
        return None; // ~LJ_TSTR
    }
    Some(std::slice::from_raw_parts((s + STR_DATA) as *const u8, at::<u32>(s + STR_LEN) as usize))
}

/// The name the call at `ip` in `pt` used for the function it called, as
/// `lj_debug_funcname` finds it: a local, a global, a field, a method or
/// an upvalue (metamethods and other callers: none).
///
/// # Safety
/// `pt` must be a live prototype and `ip` an instruction inside it.
pub(super) unsafe fn call_name<'a>(pt: usize, ip: usize) -> Option<&'a [u8]> {
    let bc = pt + PROTO_SIZE;
    let ins = at::<u32>(ip);
    let op = ins & 0xff;
    if !(BC_CALLM..=BC_ITERC).contains(&op) {
        return None;
    }
    let mut slot = ((ins >> 8) & 0xff) as usize;
    if op == BC_ITERC {
        slot = slot.checked_sub(3)?;
    }
    let _ = BC_CALLT;
    let mut ip = ip;
    let mut restarts = 0;
    'restart: loop {
        if let Some(name) = local_name(pt, (ip - bc) / 4, slot) {
            return Some(name);
        }
        let mut at_ip = ip;
        while at_ip > bc + 4 {
            at_ip -= 4;
            let i = at::<u32>(at_ip);
            let (op, ra) = (i & 0xff, ((i >> 8) & 0xff) as usize);
            let mode = if op <= BC_JMP { BC_A_MODE[op as usize] } else { 1 };
            if mode == 2 {
                if slot >= ra && (op != BC_KNIL || slot <= (i >> 16) as usize) {
                    return None;
                }
            } else if mode == 1 && ra == slot {
                return match op {
                    BC_MOV => {
                        restarts += 1;
                        if restarts > 64 {
                            return None;
                        }
                        slot = (i >> 16) as usize;
                        ip = at_ip;
                        continue 'restart;
                    }
                    BC_GGET => string_constant(pt, (i >> 16) as usize),
                    BC_TGETS => string_constant(pt, ((i >> 16) & 0xff) as usize),
                    BC_UGET => upvalue_name(pt, (i >> 16) as usize),
                    _ => None,
                };
            }
        }
        return None;
    }
}

/// Writes what `lua_getinfo` tells of a Lua frame, for the views' names:
/// first and last line, current line, the chunk's short name, and the name
/// its caller used. The record: `1`, three little-endian i32, a length
/// byte and the short name, a length byte and the name.
///
/// # Safety
/// `pt` must be the live prototype of frame `f`; `caller`, when given, the
/// live frame that called it, at `caller.ins`.
pub(super) unsafe fn write_identity(out: &mut Out, pt: usize, f: Frame, caller: Option<Frame>) -> bool {
    let first = at::<i32>(pt + PROTO_FIRSTLINE);
    let last = first.wrapping_add(at::<i32>(pt + PROTO_NUMLINE));
    let line = line_of(pt, f.ins) as i32;
    let name = caller
        .filter(|c| c.ins != 0)
        .and_then(|c| {
            let cpt = lua_proto(c)?;
            let bc = cpt + PROTO_SIZE;
            let ip = c.ins.checked_sub(4)?;
            let sizebc = at::<u32>(cpt + PROTO_SIZEBC) as usize;
            (ip > bc && ip < bc + 4 * sizebc).then(|| call_name(cpt, ip)).flatten()
        })
        .unwrap_or(b"");
    let chunk = at::<u64>(pt + PROTO_CHUNKNAME) & GCV_MASK;
    let text = std::slice::from_raw_parts(
        (chunk as usize + STR_DATA) as *const u8,
        at::<u32>(chunk as usize + STR_LEN) as usize,
    );
    let mut short = [0u8; 64];
    let n = short_source(text, first == -1, &mut short);
    let name = &name[..name.len().min(255)];
    out.bytes(&[1])
        && out.bytes(&first.to_le_bytes())
        && out.bytes(&last.to_le_bytes())
        && out.bytes(&line.to_le_bytes())
        && out.bytes(&[n as u8])
        && out.bytes(&short[..n])
        && out.bytes(&[name.len() as u8])
        && out.bytes(name)
}

/// The chunk's short name as `lj_debug_shortname` writes it (at most 59
/// bytes): `=name` as `name`, `@path` as the path or `...` and its end,
/// other chunks as `[string "first line..."]`.
pub(super) fn short_source(src: &[u8], builtin: bool, out: &mut [u8; 64]) -> usize {
    const IDSIZE: usize = 60;
    let mut o = Out { buf: &mut out[..], len: 0 };
    match src.first() {
        Some(b'=') => {
            o.bytes(&src[1..src.len().min(IDSIZE)]);
        }
        Some(b'@') => {
            let path = &src[1..];
            if path.len() >= IDSIZE {
                o.bytes(b"...");
                o.bytes(&path[path.len() - (IDSIZE - 4)..]);
            } else {
                o.bytes(path);
            }
        }
        _ => {
            let mut len = 0;
            while len < IDSIZE - 12 && len < src.len() && src[len] >= b' ' {
                len += 1;
            }
            o.bytes(if builtin { b"[builtin:" } else { b"[string \"" });
            if len < src.len() {
                o.bytes(&src[..len.min(IDSIZE - 15)]);
                o.bytes(b"...");
            } else {
                o.bytes(src);
            }
            o.bytes(if builtin { b"]" } else { b"\"]" });
        }
    }
    o.len
}

/// Writes the identity record of each frame, root first as the stack: a
/// `0` byte for a frame that is not a Lua function.
///
/// # Safety
/// Every frame's function (or prototype) must be live.
pub(super) unsafe fn write_identities(out: &mut Out, c: &Captured) -> bool {
    for i in (0..c.len).rev() {
        let f = c.frames[i];
        let ok = match lua_proto(f) {
            Some(pt) => write_identity(out, pt, f, (i + 1 < c.len).then(|| c.frames[i + 1])),
            None => out.bytes(&[0]),
        };
        if !ok {
            return false;
        }
    }
    true
}
