//! Reading the stack at a tick: the trace and its snapshot, the C
//! function running, the frames below, the `jit.zone` path.

use super::*;

use super::interp::{c_calls_known, in_vm_code, is_c_call_return, read_two};
use crate::sys::posix::running_c::self_read;

pub(super) fn self_word(addr: usize) -> Option<u64> {
    let mut b = [0u8; 8];
    self_read(addr, &mut b).then(|| u64::from_le_bytes(b))
}

pub(super) fn le(buf: &[u8], at: usize, size: usize) -> u64 {
    let mut w = [0u8; 8];
    w[..size].copy_from_slice(&buf[at..at + size]);
    u64::from_le_bytes(w)
}

/// A direct read of live VM memory.
///
/// # Safety
/// `addr` must be readable for `size_of::<T>()` bytes.
#[inline]
pub(super) unsafe fn at<T: Copy>(addr: usize) -> T {
    std::ptr::read_unaligned(addr as *const T)
}

/// The function a stack slot holds, if it holds one.
pub(super) fn slot_function(v: u64) -> Option<usize> {
    (v >> 47 == ITYPE_FUNC && v & GCV_MASK != 0).then_some((v & GCV_MASK) as usize)
}

/// Whether the bytes before `ret` are a call instruction (`call rel32`,
/// `call r64`, `call [rip+disp32]`): a return address, not a stray word.
///
/// # Safety
/// `ret - 6 .. ret` must be readable.
pub(super) unsafe fn follows_call(ret: usize) -> bool {
    let b = std::slice::from_raw_parts((ret - 6) as *const u8, 6);
    b[1] == 0xE8 || (b[4] == 0xFF && b[5] & 0xF8 == 0xD0) || (b[0] == 0xFF && b[1] == 0x15)
}

/// The trace `t`'s header, read through the kernel; None when `t` is not a
/// live trace of the armed VM.
pub(super) fn trace_header(t: usize) -> Option<(usize, [u8; TRACE_HEADER])> {
    let j = J_AT.load(Ordering::Relaxed);
    let mut jt = [0u8; 16];
    if !self_read(j + J_TRACE, &mut jt) {
        return None;
    }
    let (arr, size) = (le(&jt, 0, 8) as usize, le(&jt, J_SIZETRACE - J_TRACE, 4) as usize);
    if t == 0 || t >= size || arr == 0 {
        return None;
    }
    let tr = self_word(arr + 8 * t)? as usize;
    let mut h = [0u8; TRACE_HEADER];
    (tr != 0
        && self_read(tr, &mut h)
        && h[OBJ_GCT] == GCT_TRACE
        && le(&h, TRACE_TRACENO, 2) as usize == t
        && le(&h, TRACE_MCODE, 8) != 0)
        .then_some((tr, h))
}

/// Traces seen by the handler, by number: the object and its machine code
/// (start, size), so that a tick in a trace seen before costs no system
/// call. Written only by the handler; cleared when a session is armed.
pub(super) const TRACE_CACHE: usize = 4096;
pub(super) static CACHED: [[AtomicUsize; 3]; TRACE_CACHE] = [const { [const { AtomicUsize::new(0) }; 3] }; TRACE_CACHE];

/// The trace `t` and where the thread is in its code, from the cache when
/// the interrupted address lies in the cached code and the VM's trace array
/// still holds that object with that code; else through the kernel. Only
/// the interrupted address is tried against cached code: it is being run,
/// so it is mapped, where a word on the stack could point into code freed
/// since (a flush unmaps it) and must not be read.
///
/// # Safety
/// As `read_trace_stack`.
pub(super) unsafe fn locate_trace(t: usize, rip: usize, rsp: usize) -> Result<(usize, CodeAt), Miss> {
    if let Some(c) = CACHED.get(t) {
        let (tr, mcode, size) =
            (c[0].load(Ordering::Relaxed), c[1].load(Ordering::Relaxed), c[2].load(Ordering::Relaxed));
        if tr != 0 && rip >= mcode && rip < mcode + size {
            // The thread runs code that was this trace's: a trace, so the
            // VM's trace array is not being resized, and the one running is
            // alive; it must be the same object and code.
            let arr = at::<usize>(J_AT.load(Ordering::Relaxed) + J_TRACE);
            let size_now = at::<u32>(J_AT.load(Ordering::Relaxed) + J_SIZETRACE) as usize;
            if arr != 0
                && t < size_now
                && at::<usize>(arr + 8 * t) == tr
                && at::<u8>(tr + OBJ_GCT) == GCT_TRACE
                && at::<usize>(tr + TRACE_MCODE) == mcode
                && at::<u32>(tr + TRACE_SZMCODE) as usize == size
            {
                return Ok((tr, CodeAt::Trace(rip - mcode)));
            }
        }
    }
    let (tr, h) = trace_header(t).ok_or(Miss::Trace)?;
    let (mcode, size) = (le(&h, TRACE_MCODE, 8) as usize, le(&h, TRACE_SZMCODE, 4) as usize);
    let at_code = code_offset(mcode, size, rip, rsp).ok_or(Miss::Address)?;
    if let Some(c) = CACHED.get(t) {
        c[0].store(tr, Ordering::Relaxed);
        c[1].store(mcode, Ordering::Relaxed);
        c[2].store(size, Ordering::Relaxed);
        CACHED_MAX.fetch_max(t, Ordering::Relaxed);
    }
    Ok((tr, at_code))
}

/// Whether `rip` lies in the code of trace `t`, as the handler last found
/// it (see [`locate_trace`]).
pub(super) fn in_trace_code(t: usize, rip: usize) -> bool {
    CACHED.get(t).is_some_and(|c| {
        let (mcode, size) = (c[1].load(Ordering::Relaxed), c[2].load(Ordering::Relaxed));
        rip >= mcode && rip < mcode + size
    })
}

/// Where in its machine code a trace was interrupted.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum CodeAt {
    /// In the trace's own code.
    Trace(usize),
    /// In a function it called (a helper of LuaJIT's, or a C function
    /// through the FFI), at the call.
    Call(usize),
}

/// The offset in the trace's machine code of the instruction the thread
/// is at: the interrupted address itself, or, inside a function the trace
/// called, the call's (from the return address on the C stack).
pub(super) fn code_offset(mcode: usize, size: usize, rip: usize, rsp: usize) -> Option<CodeAt> {
    if rip >= mcode && rip < mcode + size {
        return Some(CodeAt::Trace(rip - mcode));
    }
    scan_stack(rsp, |v| {
        let inside = v > mcode + 6 && v <= mcode + size;
        // SAFETY: `v` lies inside the trace's machine code (at least six
        // bytes in), which stays mapped readable while it runs.
        (inside && unsafe { follows_call(v) }).then(|| CodeAt::Call(v - 1 - mcode))
    })
}

/// The first word on the C stack from `rsp` up (at most `STACK_SCAN`
/// bytes, read through the kernel) for which `found` gives a result.
fn scan_stack<R>(rsp: usize, mut found: impl FnMut(usize) -> Option<R>) -> Option<R> {
    let mut window = [0u8; 4096];
    let mut addr = rsp & !7;
    let end = addr + STACK_SCAN;
    while addr < end {
        // Up to the end of the page, so that a read never spans into an
        // unmapped page above the stack's top.
        let n = (4096 - (addr & 4095)).min(window.len());
        if !self_read(addr, &mut window[..n]) {
            return None;
        }
        for w in window[..n].chunks_exact(8) {
            if let Some(r) = found(u64::from_le_bytes(w.try_into().unwrap()) as usize) {
                return Some(r);
            }
        }
        addr += n;
    }
    None
}

/// The highest trace number stored in `CACHED` since the session was armed.
pub(super) static CACHED_MAX: AtomicUsize = AtomicUsize::new(0);

/// The trace that called the collector step the thread is in, and where:
/// the innermost word on the C stack that is a return address into the
/// code of a trace the handler has read a tick in, that trace still the one
/// the VM's trace array holds under its number. Innermost, not the trace
/// read last first: a return address left higher on the stack by an
/// earlier call is not the call running (a side trace that allocates runs
/// after its parent, whose ticks may be the last read).
///
/// # Safety
/// As [`read_trace_gc_step`].
unsafe fn gc_step_caller(rsp: usize) -> Result<(usize, usize, CodeAt), Miss> {
    let max_t = CACHED_MAX.load(Ordering::Relaxed).min(TRACE_CACHE - 1);
    // The span of all cached code, so that most words cost one compare.
    let (mut lo, mut hi) = (usize::MAX, 0usize);
    for c in &CACHED[1..=max_t] {
        if c[0].load(Ordering::Relaxed) != 0 {
            let (mcode, size) = (c[1].load(Ordering::Relaxed), c[2].load(Ordering::Relaxed));
            lo = lo.min(mcode);
            hi = hi.max(mcode + size);
        }
    }
    if lo >= hi {
        return Err(Miss::Trace);
    }
    let last = LAST_TRACE.load(Ordering::Relaxed);
    scan_stack(rsp, |v| {
        if v <= lo || v > hi {
            return None;
        }
        // The trace read last is the likeliest: tried first for each word.
        std::iter::once(last).chain(1..=max_t).find_map(|t| {
            let c = CACHED.get(t)?;
            let (mcode, size) = (c[1].load(Ordering::Relaxed), c[2].load(Ordering::Relaxed));
            if t == 0 || v <= mcode + 6 || v > mcode + size {
                return None;
            }
            // SAFETY: as the caller's (on the VM thread, armed, in a
            // collector step a trace called).
            let (tr, ..) = unsafe { cached_live(t) }?;
            // SAFETY: `cached_live` found the trace still the VM's, so its
            // code is mapped; `v` lies in it, six bytes in.
            unsafe { follows_call(v) }.then(|| (t, tr, CodeAt::Call(v - 1 - mcode)))
        })
    })
    .ok_or(Miss::Address)
}

/// The trace `t` of the handler's cache, its code's start and size, when
/// the VM's trace array still holds that object with that code.
///
/// # Safety
/// Must run on the VM thread, armed, in a collector step a trace called
/// or in compiled code: only the recorder resizes the trace array, and it
/// does not run there; a trace the array holds is alive, its code mapped.
unsafe fn cached_live(t: usize) -> Option<(usize, usize, usize)> {
    let c = CACHED.get(t)?;
    let (tr, mcode, size) = (c[0].load(Ordering::Relaxed), c[1].load(Ordering::Relaxed), c[2].load(Ordering::Relaxed));
    let j = J_AT.load(Ordering::Relaxed);
    let arr = at::<usize>(j + J_TRACE);
    let size_now = at::<u32>(j + J_SIZETRACE) as usize;
    (tr != 0
        && arr != 0
        && t < size_now
        && at::<usize>(arr + 8 * t) == tr
        && at::<u8>(tr + OBJ_GCT) == GCT_TRACE
        && at::<usize>(tr + TRACE_MCODE) == mcode
        && at::<u32>(tr + TRACE_SZMCODE) as usize == size)
        .then_some((tr, mcode, size))
}

/// The prototype a trace checks the function of IR reference `r` by, when
/// it checks that function by its prototype only: LuaJIT does so for a
/// prototype that has made several closures (`rec_call_specialize` in
/// lj_record.c), loading the function's bytecode pointer (`FLOAD`) and
/// comparing it in a guard (`EQ`) with a pointer constant, the bytecode of
/// the prototype, which it also holds as a constant of the trace so that
/// it is not collected. Searched from `r` up to `until` (the snapshot that
/// holds the frame, which the check precedes); the prototype must be that
/// constant.
///
/// # Safety
/// `ir` must be the IR of a committed trace that stays as it is while this
/// runs (one this thread runs, or read on the VM thread), whose constants
/// start at `nk`.
pub(super) unsafe fn checked_proto(ir: usize, nk: usize, r: usize, until: usize) -> Option<usize> {
    if r < REF_BIAS {
        return None;
    }
    // The loads of the function's fields (the check's is one of the first).
    let mut loads = [0usize; 4];
    let mut nloads = 0;
    for k in r + 1..=until.min(r + MAX_IR_SCAN) {
        let ins = ir + k * IR_SIZE;
        let (op, op1) = (at::<u8>(ins + IR_OP), at::<u16>(ins + IR_OP1) as usize);
        if op == IR_FLOAD && op1 == r && nloads < loads.len() {
            loads[nloads] = k;
            nloads += 1;
        } else if op == IR_EQ && at::<u8>(ins + IR_TYPE) & IRT_GUARD != 0 && loads[..nloads].contains(&op1) {
            let kref = at::<u16>(ins + IR_OP2) as usize;
            if kref >= REF_BIAS || at::<u8>(ir + kref * IR_SIZE + IR_OP) != IR_KPTR {
                continue;
            }
            let pt = (at::<u64>(ir + (kref + 1) * IR_SIZE) as usize).checked_sub(PROTO_SIZE)?;
            return proto_constant(ir, nk, pt).then_some(pt);
        }
    }
    None
}

/// Whether the prototype `pt` is a constant of the trace whose IR is `ir`,
/// its constants from `nk`.
///
/// # Safety
/// As [`checked_proto`].
pub(super) unsafe fn proto_constant(ir: usize, nk: usize, pt: usize) -> bool {
    let mut r = nk;
    while r < REF_BIAS {
        let ins = ir + r * IR_SIZE;
        let op = at::<u8>(ins + IR_OP);
        if op == IR_KGC && at::<u8>(ins + IR_TYPE) & 0x1f == IRT_PROTO && at::<u64>(ins + IR_SIZE) as usize == pt {
            return at::<u8>(pt + OBJ_GCT) == GCT_PROTO;
        }
        r += if matches!(op, IR_KGC | IR_KPTR | IR_KKPTR | IR_KNUM | IR_KINT64) { 2 } else { 1 };
    }
    false
}

/// Who runs in a frame of a snapshot: a function that is a constant of the
/// trace, a prototype the trace checks the function by, or neither (0, 0).
///
/// # Safety
/// As [`checked_proto`].
unsafe fn snapshot_callee(ir: usize, nk: usize, r: usize, until: usize) -> (usize, usize) {
    let ins = ir + r * IR_SIZE;
    if r != 0 && r < REF_BIAS && at::<u8>(ins + IR_OP) == IR_KGC {
        return (at::<u64>(ins + IR_SIZE) as usize, 0);
    }
    (0, checked_proto(ir, nk, r, until).unwrap_or(0))
}

/// Reads the stack of the trace the VM thread runs: frames leaf first into
/// `c`, at most `limit`.
///
/// # Safety
/// Must run on the VM thread, with the layout armed, while the VM state is
/// the trace number `t`.
pub(super) unsafe fn read_trace_stack(
    t: usize,
    rip: usize,
    rsp: usize,
    c: &mut Captured,
    limit: usize,
) -> Result<(), Miss> {
    c.len = 0;
    c.by_proto = false;
    c.cut = false;
    let (t, tr, at_code) = match locate_trace(t, rip, rsp) {
        Ok((tr, at_code)) => (t, tr, at_code),
        Err(Miss::Address) => entered_trace(rip).ok_or(Miss::Address)?,
        Err(e) => return Err(e),
    };
    read_trace_at(t, tr, at_code, None, c, limit)
}

/// Bytes at the start of a trace's code before it stores its own number
/// as the VM state (its first instruction, with room to spare).
const ENTRY_BYTES: usize = 16;

/// The trace whose first bytes the thread is at, when the VM state still
/// names the trace that jumped there (a trace linked to another, or an
/// exit patched to a side trace: the target stores its number first): a
/// trace the handler has read a tick in, still the one the VM's trace
/// array holds under its number.
///
/// # Safety
/// As [`read_trace_stack`]: the VM state names a trace, so the recorder,
/// which alone resizes the trace array, is not running.
unsafe fn entered_trace(rip: usize) -> Option<(usize, usize, CodeAt)> {
    let max_t = CACHED_MAX.load(Ordering::Relaxed).min(TRACE_CACHE - 1);
    (1..=max_t).find_map(|t| {
        let mcode = CACHED.get(t)?[1].load(Ordering::Relaxed);
        if mcode == 0 || rip < mcode || rip >= mcode + ENTRY_BYTES {
            return None;
        }
        // SAFETY: as this function's (on the VM thread, armed, a trace
        // running, so the trace array is not being resized).
        let (tr, mcode, size) = unsafe { cached_live(t) }?;
        (rip >= mcode && rip < mcode + size).then_some((t, tr, CodeAt::Trace(rip - mcode)))
    })
}

/// The trace the handler last read a tick in (0: none since the session
/// was armed): the one a collector step from compiled code tries first.
pub(super) static LAST_TRACE: AtomicUsize = AtomicUsize::new(0);

/// Reads the stack of a collector step that compiled code called
/// (`lj_gc_step_jit`: the VM state is GC, `g->jit_base` set), as a tick in
/// the trace at that call: frames leaf first into `c`, at most `limit`.
///
/// The VM state no longer names the trace, so it is proved: a trace the
/// handler has read a tick in must have a return address on the C stack
/// above the tick (after a call; see [`gc_step_caller`]), and the trace's
/// fine map must have its base frame run the prototype whose function is
/// in the thread's stack at `g->jit_base`. Anything else is left to the
/// hook, as before.
///
/// # Safety
/// Must run on the VM thread, with the layout armed, while the VM state is
/// GC and `g->jit_base` is set.
pub(super) unsafe fn read_trace_gc_step(rsp: usize, c: &mut Captured, limit: usize) -> Result<(), Miss> {
    c.len = 0;
    c.by_proto = false;
    c.cut = false;
    let (t, tr, at_code) = gc_step_caller(rsp)?;
    // The function in the thread's stack at the trace's base, read through
    // the kernel: the collector may be moving this stack.
    let l = at::<usize>(CUR_L_AT.load(Ordering::Relaxed));
    let mut h = [0u8; L_STACKSIZE + 4];
    if l == 0 || !self_read(l, &mut h) {
        return Err(Miss::Frame);
    }
    let (stack, size) = (le(&h, L_STACK, 8) as usize, le(&h, L_STACKSIZE, 4) as usize);
    let base = at::<usize>(JIT_BASE_AT.load(Ordering::Relaxed));
    if base < stack + 16 || base >= stack + 8 * size || base % 8 != 0 {
        return Err(Miss::Frame);
    }
    let (mut first, mut slot) = ([0u8; 8], [0u8; 8]);
    if !super::interp::read_two(stack, &mut first, base - 16, &mut slot) {
        return Err(Miss::Frame);
    }
    let func = slot_function(u64::from_le_bytes(slot)).ok_or(Miss::Frame)?;
    let mut o = [0u8; FN_PC + 8];
    if !self_read(func, &mut o) || o[OBJ_GCT] != GCT_FUNC || o[FN_FFID] != FF_LUA {
        return Err(Miss::Frame);
    }
    read_trace_at(t, tr, at_code, Some(le(&o, FN_PC, 8) as usize), c, limit)
}

/// Reads the stack of the trace `tr` (number `t`), where the thread is at `at_code`.
/// With `real_base` (the bytecode of the prototype whose function the
/// thread's stack holds at the trace's base), the frames are taken only
/// when the trace's fine map has its base frame run that prototype.
///
/// # Safety
/// As [`read_trace_stack`]; `tr` is the trace the thread runs.
unsafe fn read_trace_at(
    t: usize,
    tr: usize,
    at_code: CodeAt,
    real_base: Option<usize>,
    c: &mut Captured,
    limit: usize,
) -> Result<(), Miss> {
    let (CodeAt::Trace(ofs) | CodeAt::Call(ofs)) = at_code;
    // From here the trace is the one this thread runs: it stays alive and
    // unchanged until the thread leaves it, and is read directly.
    let nsnap = at::<u16>(tr + TRACE_NSNAP) as usize;
    let (snaps, snapmap, ir) =
        (at::<usize>(tr + TRACE_SNAP), at::<usize>(tr + TRACE_SNAPMAP), at::<usize>(tr + TRACE_IR));
    if nsnap == 0 || snaps == 0 {
        return Err(Miss::Frame);
    }
    // The last snapshot whose code starts at or before the offset.
    let (mut lo, mut hi) = (0usize, nsnap);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if ofs < at::<u16>(snaps + mid * SNAP_SIZE + SNAP_MCOFS) as usize {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    // In an FFI call, the snapshot after it: an FFI call is a bytecode of
    // its own, and the recorder takes a snapshot right after every one, so
    // that snapshot's frames are the call's and its resume point follows
    // the call. Elsewhere the snapshot covering the address, as LuaJIT
    // unwinds through traces.
    let after_call = matches!(at_code, CodeAt::Call(_)) && lo > 0 && lo < nsnap && {
        let from = at::<u16>(snaps + (lo - 1) * SNAP_SIZE + SNAP_REF) as usize;
        let to = at::<u16>(snaps + lo * SNAP_SIZE + SNAP_REF) as usize;
        (from..to.min(from + MAX_IR_SCAN)).any(|r| at::<u8>(ir + r * IR_SIZE + IR_OP) == IR_CALLXS)
    };
    let snap = snaps + if after_call { lo } else { lo.saturating_sub(1) } * SNAP_SIZE;
    let map = snapmap + 4 * at::<u32>(snap + SNAP_MAPOFS) as usize;
    let nent = at::<u8>(snap + SNAP_NENT) as usize;
    let pcbase = at::<u64>(map + 4 * nent);
    let (pc, base_slots) = ((pcbase >> 8) as usize, (pcbase & 0xFF) as usize);
    // A 64-bit constant of the trace, checked to be of its kind.
    let constant = |r: usize, op: u8| -> Option<u64> {
        let ins = ir + r * IR_SIZE;
        (r != 0 && at::<u8>(ins + IR_OP) == op).then(|| at::<u64>(ins + IR_SIZE))
    };
    let nk = at::<u32>(tr + TRACE_NK) as usize;
    let snap_ref = at::<u16>(snap + SNAP_REF) as usize;
    // The inlined frames: a frame link at slot s (s >= 2), the function at
    // s - 1; the base function only when the trace replaced it (a tail
    // call). Each is (function, prototype): a constant of the trace, the
    // prototype it checks the function by, or neither (0, 0), a frame that
    // cannot be named.
    let mut links: [((usize, usize), usize); 64] = [((0, 0), 0); 64];
    let mut nlinks = 0;
    let mut last_link_slot = 0;
    let mut base_given: Option<(usize, usize)> = None;
    let mut prev: (usize, usize) = (usize::MAX, 0);
    for i in 0..nent {
        let e = at::<u32>(map + 4 * i);
        let slot = (e >> 24) as usize;
        let r = (e & 0xFFFF) as usize;
        if e & SNAP_CONT != 0 {
            return Err(Miss::Frame);
        }
        if slot == 0 {
            base_given = Some(snapshot_callee(ir, nk, r, snap_ref));
        } else if e & SNAP_FRAME != 0 && slot >= 2 {
            if prev.0 != slot - 1 || nlinks == links.len() {
                return Err(Miss::Function);
            }
            let who = snapshot_callee(ir, nk, prev.1, snap_ref);
            let link = constant(r, IR_KNUM).ok_or(Miss::Frame)?;
            if link & FRAME_TYPE != FRAME_LUA {
                return Err(Miss::Frame);
            }
            links[nlinks] = (who, link as usize);
            nlinks += 1;
            last_link_slot = slot;
        }
        prev = (slot, r);
    }
    // The snapshot's own record of the innermost frame must agree.
    let innermost = if nlinks == 0 { 0 } else { last_link_slot - 1 };
    if base_slots != innermost {
        return Err(Miss::Frame);
    }
    // The trace's base frame: its function, and the real frames below it.
    let l = at::<usize>(CUR_L_AT.load(Ordering::Relaxed));
    let stack = at::<usize>(l + L_STACK);
    let stack_end = stack + 8 * at::<u32>(l + L_STACKSIZE) as usize;
    let base = at::<usize>(JIT_BASE_AT.load(Ordering::Relaxed));
    if base < stack + 16 || base >= stack_end || base % 8 != 0 {
        return Err(Miss::Frame);
    }
    let base_who = match base_given {
        Some(who) => who,
        None => (slot_function(at::<u64>(base - 16)).ok_or(Miss::Frame)?, 0),
    };
    if base_who.0 != 0 && at::<u8>(base_who.0 + OBJ_GCT) != GCT_FUNC {
        return Err(Miss::Frame);
    }
    let frame = |(func, proto): (usize, usize), ins: usize| {
        if func != 0 {
            Frame::of(func, ins)
        } else {
            Frame::by_proto(proto, ins)
        }
    };
    // The base frame's prototype (None: a builtin, or a function that cannot
    // be named).
    let base_bc = if base_who == (0, 0) { None } else { lua_proto(frame(base_who, 0)).map(|pt| pt + PROTO_SIZE) };
    // Between two snapshots, the frames and bytecode whose code the offset
    // lies in, when the trace's fine map names them (see `fine_map`): the
    // base frame must run the prototype the map's base frame ran. A tick
    // interrupts the thread after the instruction it was waiting on has
    // completed, at the next one: the byte before the interrupted address
    // is that instruction's (a call's return address already names the
    // call).
    let blamed = if matches!(at_code, CodeAt::Trace(_)) { ofs.saturating_sub(1) } else { ofs };
    if let Ok(chain) = super::vm_events::chain_at(t, tr, blamed, matches!(at_code, CodeAt::Call(_))) {
        if base_bc.is_some() && base_bc == Some(chain[0].1) && real_base.map_or(true, |b| base_bc == Some(b)) {
            super::vm_events::PLACED.fetch_add(1, Ordering::Relaxed);
            for &(f, bc, ins) in chain[1..].iter().rev() {
                // A function the trace checks by prototype: named by it.
                let who = if f == 0 { (0, bc.wrapping_sub(PROTO_SIZE)) } else { (f, 0) };
                if (f == 0 && bc < PROTO_SIZE) || (f != 0 && at::<u8>(f + OBJ_GCT) != GCT_FUNC) {
                    return Err(Miss::Function);
                }
                if !c.push(frame(who, ins), limit) {
                    return Ok(());
                }
            }
            if !c.push(frame(base_who, chain[0].2), limit) {
                return Ok(());
            }
            return walk_frames(l, stack, base - 8, c, limit);
        }
        super::vm_events::AT_SNAPSHOT.fetch_add(1, Ordering::Relaxed);
    }
    // Where the map leaves the call to the snapshot, the snapshot's frames
    // are taken when the map says the trace's base frame runs the same
    // prototype as the thread's stack holds there.
    if let Some(b) = real_base {
        if base_bc != Some(b) || super::vm_events::base_proto(t, tr) != Some(b) {
            return Err(Miss::Frame);
        }
    }
    // The frames the trace inlined, innermost first: each runs the
    // instruction its callee's link returns to. A frame that cannot be
    // named ends the stack at its caller, at the call (the finest frame
    // named truthfully), and so do the frames it called.
    let named = links[..nlinks].iter().position(|l| l.0 == (0, 0)).unwrap_or(nlinks);
    let base_named = base_who != (0, 0);
    c.cut = named < nlinks || !base_named;
    let mut ins = if after_call { pc } else { pc + 4 };
    for (k, &(who, link)) in links[..nlinks].iter().enumerate().rev() {
        if k < named && base_named {
            if who.0 != 0 && at::<u8>(who.0 + OBJ_GCT) != GCT_FUNC {
                return Err(Miss::Function);
            }
            if !c.push(frame(who, ins), limit) {
                return Ok(());
            }
        }
        ins = link;
    }
    if base_named && !c.push(frame(base_who, ins), limit) {
        return Ok(());
    }
    walk_frames(l, stack, base - 8, c, limit)
}

/// `~LJ_VMST_C`: the VM state while a C function runs.
pub(super) const VMSTATE_C: i32 = -2;
/// lua_State: the current base and the C frame of the active VM call.
pub(super) const L_BASE: usize = 32;
pub(super) const L_CFRAME: usize = 80;
/// A C frame of this thread's VM call lies above the interrupted stack
/// pointer, within this many bytes.
pub(super) const CFRAME_REACH: usize = 64 << 20;

/// The current thread of the armed VM, its header (to its stack size) and
/// the C frame of the VM call it is in, read through the kernel; None when
/// no VM call of this thread is active (the host's own code runs).
///
/// # Safety
/// Must run on the VM thread, with the layout armed.
pub(super) unsafe fn vm_call(rsp: usize) -> Option<(usize, [u8; L_STACKSIZE + 4], usize)> {
    let l = at::<usize>(CUR_L_AT.load(Ordering::Relaxed));
    let mut h = [0u8; L_STACKSIZE + 4];
    if l == 0 || !self_read(l, &mut h) {
        return None;
    }
    let cframe = le(&h, L_CFRAME, 8) as usize & !3;
    (cframe >= rsp && cframe - rsp <= CFRAME_REACH).then_some((l, h, cframe))
}

/// Whether the VM thread, in a VM call, is in a call of a C function the
/// VM made, with the interrupted `rip` and `rsp`.
///
/// The VM state C alone does not prove it: LuaJIT leaves that state after
/// a VM event's handler returns (the `record` event, while the interpreter
/// runs on). The VM calls a C function from the stack pointer it keeps in
/// its C frame, so while one runs the word below that frame is the return
/// of such a call; the interpreter's own code, and the helpers it calls,
/// leave another word there. None when no VM call is active, or those
/// calls were not learned for this VM.
///
/// # Safety
/// Must run on the VM thread, with the layout armed.
pub(super) unsafe fn in_c_call(rip: usize, rsp: usize) -> Option<bool> {
    if !c_calls_known() {
        return None;
    }
    let (_, _, cframe) = vm_call(rsp)?;
    let ret = self_word(cframe - 8).unwrap_or(0) as usize;
    Some(!in_vm_code(rip) && is_c_call_return(ret))
}

/// Reads the stack of the C function the VM thread runs (state C): the
/// function in the current frame, then the frames below it.
///
/// # Safety
/// Must run on the VM thread, with the layout armed, while the VM state is
/// C. The thread's header and the function slot are read through the
/// kernel first: right around a call the base can name a frame being
/// built or left, and a VM driven from another OS thread can move its
/// stack. Once the thread's C frame is proved to be on this thread's stack,
/// the VM proved to be in a call of a C function from it, and the slot
/// holds a live C function, the frames below are real.
pub(super) unsafe fn read_c_stack(rip: usize, rsp: usize, c: &mut Captured, limit: usize) -> Result<(), Miss> {
    c.len = 0;
    c.by_proto = false;
    c.cut = false;
    let (l, h, cframe) = vm_call(rsp).ok_or(Miss::Trace)?;
    c.vm_frame = cframe;
    let (base, stack, size) =
        (le(&h, L_BASE, 8) as usize, le(&h, L_STACK, 8) as usize, le(&h, L_STACKSIZE, 4) as usize);
    if base < stack + 16 || base >= stack + 8 * size || base % 8 != 0 {
        return Err(Miss::Frame);
    }
    let (mut ret, mut slot) = ([0u8; 8], [0u8; 8]);
    if in_vm_code(rip)
        || !read_two(cframe - 8, &mut ret, base - 16, &mut slot)
        || !is_c_call_return(u64::from_le_bytes(ret) as usize)
    {
        return Err(Miss::Frame);
    }
    let func = slot_function(u64::from_le_bytes(slot)).ok_or(Miss::Frame)?;
    let mut o = [0u8; FN_CF + 8];
    if !self_read(func, &mut o) || o[OBJ_GCT] != GCT_FUNC || o[FN_FFID] == FF_LUA {
        return Err(Miss::Frame);
    }
    // A function of this module (the session's own API running) is left
    // to the hook, as before the handler read C functions.
    let f = le(&o, FN_CF, 8) as usize;
    if o[FN_FFID] == FF_C && f >= OWN_CODE[0].load(Ordering::Relaxed) && f < OWN_CODE[1].load(Ordering::Relaxed) {
        return Err(Miss::Trace);
    }
    if !c.push(Frame::of(func, 0), limit) {
        return Ok(());
    }
    walk_frames(l, stack, base - 8, c, limit)
}

/// Walks the real frames below `frame` (a frame link slot), as
/// `lj_debug_frame` does, pushing each caller.
///
/// # Safety
/// `frame` must be a live frame of the thread `l`, whose stack starts at
/// `stack`.
pub(super) unsafe fn walk_frames(
    l: usize,
    stack: usize,
    mut frame: usize,
    c: &mut Captured,
    limit: usize,
) -> Result<(), Miss> {
    let bottom = stack + 8;
    loop {
        let link = at::<u64>(frame);
        let after = frame;
        frame = if link & FRAME_TYPE == FRAME_LUA {
            if link >> 47 != 0 || link < 4096 {
                return Err(Miss::Frame); // no return address: not a frame link
            }
            let call = at::<u32>(link as usize - 4);
            frame.wrapping_sub(8 * (2 + ((call >> 8) & 0xFF) as usize))
        } else {
            frame.wrapping_sub((link & !FRAME_TYPEP) as usize)
        };
        if frame >= after {
            return Err(Miss::Frame);
        }
        if frame <= bottom {
            return Ok(());
        }
        if link & FRAME_TYPEP == FRAME_VARG {
            // A vararg function's frame sits above a copy of its call
            // frame, which is not a level of its own.
            continue;
        }
        let v = at::<u64>(frame - 8);
        if v & GCV_MASK == l as u64 {
            return Err(Miss::Frame); // a dummy frame of an error path
        }
        let func = slot_function(v).ok_or(Miss::Frame)?;
        if at::<u8>(func + OBJ_GCT) != GCT_FUNC {
            return Err(Miss::Frame);
        }
        let ins = if at::<u8>(func + FN_FFID) != FF_LUA {
            0
        } else {
            let link = at::<u64>(after);
            match link & FRAME_TYPEP {
                t if t & FRAME_TYPE == FRAME_LUA => link as usize,
                FRAME_CONT => at::<u64>(after - 16) as usize,
                _ => return Err(Miss::Frame),
            }
        };
        if !c.push(Frame::of(func, ins), limit) {
            return Ok(());
        }
    }
}

/// Appends the zone path (entries joined by `/`) read from the `jit.zone`
/// table at `tab`, through the kernel: a trace may be resizing it.
pub(super) fn read_zones(tab: usize, out: &mut Out) -> bool {
    // SAFETY: the table is anchored in the registry for the session, so
    // its header stays where it is; only its array part can move.
    let (array, asize) = unsafe { (at::<usize>(tab + TAB_ARRAY), at::<u32>(tab + TAB_ASIZE) as usize) };
    let n = asize.min(MAX_ZONES + 1);
    if n <= 1 {
        return true;
    }
    let mut slots = [0u8; 8 * (MAX_ZONES + 1)];
    if !self_read(array, &mut slots[..8 * n]) {
        return false;
    }
    for i in 1..n {
        let v = le(&slots, 8 * i, 8);
        if v >> 47 == 0x1FFFF {
            break; // nil: the end of the stack
        }
        if i > 1 && !out.bytes(b"/") {
            return false;
        }
        if v >> 47 != ITYPE_STR {
            if !out.bytes(b"?") {
                return false;
            }
            continue;
        }
        let s = (v & GCV_MASK) as usize;
        let mut sh = [0u8; STR_DATA];
        if !self_read(s, &mut sh) {
            return false;
        }
        let len = le(&sh, STR_LEN, 4) as usize;
        let end = out.len + len;
        if end > out.buf.len() || !self_read(s + STR_DATA, &mut out.buf[out.len..end]) {
            return false;
        }
        out.len = end;
    }
    true
}
