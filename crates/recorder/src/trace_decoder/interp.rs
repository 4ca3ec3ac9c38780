//! Interpreted code, read in the tick handler.
//!
//! While LuaJIT's x86-64 interpreter runs bytecode it keeps its state in
//! fixed registers (`vm_x64.dasc`, Linux): `BASE` (the running frame's
//! base) in `rdx`, `PC` (the instruction after the one running) in `rbx`,
//! `KBASE` (the running prototype's constants) in `r15` and `DISPATCH`
//! (the VM's dispatch table) in `r14`. A tick that interrupts the
//! interpreter's own code (VM state INTERP, and the interrupted address in
//! the VM's code) finds them in the signal's context: the function in the
//! slot below `BASE`, its line at `PC`, and the frames below it, walked as
//! for a trace's base frame. No profiler hook is set for such a tick.
//!
//! The registers hold that state only while the interpreter itself runs:
//! in a C helper it called (the VM state is still INTERP inside
//! `lj_tab_*`, `lj_meta_*`, the string buffer) and in the few instructions
//! around a call or a return they hold something else. So every tick is
//! checked before anything it names is trusted: the interrupted address
//! lies in the VM's code, `r14` is this VM's dispatch table, `BASE` lies in
//! the running thread's stack (the thread and its stack are live and read
//! directly), the slot below it holds a Lua function, `r15` is that
//! function's constants and `PC` lies inside its bytecode, and the frame
//! link below `BASE` returns into the bytecode of a Lua function (or is a
//! frame of another kind, which is walked by its size). The function
//! objects and prototypes, which a stale slot could name, are read through
//! the fault-safe reader, two at a time (three system calls a tick at
//! most). Any check that fails leaves the tick to LuaJIT's hook, counted
//! by reason. A tick in a C helper is left to the
//! hook: the base and PC the interpreter saved before the call can be stale
//! (some helpers are called without saving them).
//!
//! The dispatch table and the VM's code are learned when a session proves
//! the layout: the table follows the global state and the JIT state in
//! LuaJIT's one allocation (`GG_State`), and is the first run of words
//! there that all point into LuaJIT's own code; its entries (the bytecode
//! handlers and the fast functions) span the interpreter's code.

use super::*;

use super::running_c::self_read;
use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register};

/// `~LJ_VMST_INTERP`: the VM state while the interpreter runs.
pub(super) const VMSTATE_INTERP: i32 = -1;
/// GCproto: the constants (`k`), whose address `KBASE` holds.
const PROTO_K: usize = 32;
/// Consecutive words that must point into LuaJIT's code for the dispatch
/// table to be recognised (LuaJIT 2.1 has 97 bytecodes; the table holds
/// them twice, and the fast functions).
const MIN_DISPATCH: usize = 96;
/// Where the dispatch table may start after the global state: past the
/// global state (600 bytes or more) and the JIT state (about 740).
const DISPATCH_SEARCH: std::ops::Range<usize> = 1000..4096;
/// The interpreter's code is some tens of kilobytes.
const MAX_VM_CODE: usize = 1 << 20;

/// The VM's dispatch table (`r14` in the interpreter) and its code's range,
/// learned for the VM whose global state is `LEARNED_G`.
static DISPATCH: AtomicUsize = AtomicUsize::new(0);
static VM_CODE: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static LEARNED_G: AtomicUsize = AtomicUsize::new(0);
/// Where the interpreter's calls of C functions return: the instruction
/// after each `call` that directly follows `set_vmstate C` in the VM's
/// code (`BC_FUNCC`, `BC_FUNCCW`). While a C function the VM called runs,
/// the word below the VM's C frame is one of these (the VM calls from that
/// stack pointer); any other word there is a helper's return (0 = none).
static C_CALL_RETURNS: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];
/// Why interpreted code is not read in the handler ("" when it is).
static WHY_NOT: std::sync::Mutex<&'static str> = std::sync::Mutex::new("the layout was not proved");

/// Why a tick in interpreted code (or in another state) was left to the
/// hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum InterpMiss {
    /// The interrupted address is outside the interpreter's code (a C
    /// helper the interpreter called).
    Helper = 0,
    /// The registers do not hold a running frame of a Lua function (around
    /// a call or a return, or in a VM subroutine).
    Registers,
    /// The running frame is a fast function's (`math.floor`, `string.byte`
    /// run in the interpreter's own code).
    Builtin,
    /// A frame below did not validate, or the zone table could not be read.
    Frame,
    /// The buffer between two callbacks was full.
    Full,
}
const INTERP_MISS_KINDS: usize = 5;
/// Names of the [`InterpMiss`] kinds, in order, for `stats()`.
pub const INTERP_MISS_NAMES: [&str; INTERP_MISS_KINDS] = ["helper", "registers", "builtin", "frame", "full"];
static INTERP_MISSES: [AtomicU64; INTERP_MISS_KINDS] = [const { AtomicU64::new(0) }; INTERP_MISS_KINDS];

/// Ticks the handler gave to LuaJIT's hook while armed, by the VM state
/// they found (`state_index` order: compiled, interpreted, C, GC, JIT).
static HOOK_TICKS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];
/// Names of the VM states of [`HOOK_TICKS`], for `stats()`.
pub const HOOK_STATE_NAMES: [&str; 5] = ["compiled", "interpreted", "c", "gc", "jit"];

/// Ticks left to LuaJIT's hook because a control-channel wake waited
/// (`sys::wake::tend_pending`).
static WAKE_TICKS: AtomicU64 = AtomicU64::new(0);

/// Counts `n` ticks left to the hook while a wake waited.
pub fn count_wake(n: u64) {
    WAKE_TICKS.fetch_add(n, Ordering::Relaxed);
}

/// Ticks left to the hook while a wake waited, since the last arm.
pub fn wake_ticks() -> u64 {
    WAKE_TICKS.load(Ordering::Relaxed)
}

pub(super) fn count_miss(m: InterpMiss, n: u64) {
    INTERP_MISSES[m as usize].fetch_add(n, Ordering::Relaxed);
}

/// Counts `n` ticks given to the hook in VM state `vmstate` (LuaJIT's
/// mapping: a trace number, or ~INTERP, ~C, ~GC, else the JIT compiler).
pub(super) fn count_hook(vmstate: i32, n: u64) {
    let i = match vmstate {
        0.. => 0,
        VMSTATE_INTERP => 1,
        VMSTATE_C => 2,
        -3 => 3,
        _ => 4,
    };
    HOOK_TICKS[i].fetch_add(n, Ordering::Relaxed);
}

/// Counts since the last arm: ticks in interpreted code left to the hook
/// by reason ([`InterpMiss`] order), and ticks given to the hook by VM
/// state ([`HOOK_STATE_NAMES`] order).
pub fn interp_counts() -> ([u64; INTERP_MISS_KINDS], [u64; 5]) {
    let mut m = [0; INTERP_MISS_KINDS];
    for (o, c) in m.iter_mut().zip(&INTERP_MISSES) {
        *o = c.load(Ordering::Relaxed);
    }
    let mut h = [0; 5];
    for (o, c) in h.iter_mut().zip(&HOOK_TICKS) {
        *o = c.load(Ordering::Relaxed);
    }
    (m, h)
}

/// Clears the counts (a session's arm).
pub fn reset_counts() {
    for c in INTERP_MISSES.iter().chain(&HOOK_TICKS) {
        c.store(0, Ordering::Relaxed);
    }
    WAKE_TICKS.store(0, Ordering::Relaxed);
}

/// Whether the handler reads interpreted code in the armed VM.
pub(super) fn ready() -> bool {
    DISPATCH.load(Ordering::Acquire) != 0 && LEARNED_G.load(Ordering::Relaxed) == G.load(Ordering::Relaxed)
}

/// Whether interpreted code is read in the handler, and why not.
pub fn interp_state() -> Result<(), &'static str> {
    if ready() {
        return Ok(());
    }
    Err(*WHY_NOT.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Learns the dispatch table and the interpreter's code for the VM the
/// layout was proved for (`prove` succeeded), once per VM.
pub fn learn_interp() -> Result<(), &'static str> {
    let r = learn_dispatch();
    *WHY_NOT.lock().unwrap_or_else(|e| e.into_inner()) = r.err().unwrap_or("");
    r
}

fn learn_dispatch() -> Result<(), &'static str> {
    let g = G.load(Ordering::Relaxed);
    if g == 0 || LEARNED_FOR.load(Ordering::Acquire) != g {
        return Err("the layout was not proved");
    }
    if LEARNED_G.load(Ordering::Relaxed) == g && DISPATCH.load(Ordering::Acquire) != 0 {
        return Ok(());
    }
    DISPATCH.store(0, Ordering::Release);
    let start = crate::sys::profiler_api().ok_or("LuaJIT's profiler API is missing")?.start_addr();
    let (lo, hi) = super::own_vm::object_range(start).ok_or("LuaJIT's object could not be located")?;
    let code = |w: u64| (w as usize) >= lo && (w as usize) < hi;
    // Read through the kernel: the search may run past LuaJIT's allocation.
    let mut buf = [0u8; 8 * 1024];
    let mut run = 0usize;
    let mut found: Option<usize> = None;
    let mut off = DISPATCH_SEARCH.start;
    'search: while off < DISPATCH_SEARCH.end + 8 * 512 {
        let n = buf.len().min(4096 - ((g + off) & 4095));
        if !self_read(g + off, &mut buf[..n]) {
            break;
        }
        for (i, w) in buf[..n].chunks_exact(8).enumerate() {
            let w = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            if code(w) {
                run += 1;
            } else if run >= MIN_DISPATCH {
                found = Some(off + 8 * i - 8 * run);
                break 'search;
            } else {
                run = 0;
                if off + 8 * i >= DISPATCH_SEARCH.end {
                    break 'search;
                }
            }
        }
        off += n;
    }
    let Some(d_off) = found else {
        return Err("the dispatch table was not found after the global state");
    };
    let d = g + d_off;
    let (mut min, mut max) = (usize::MAX, 0usize);
    let mut i = 0;
    while let Some(w) = self_word(d + 8 * i).filter(|&w| code(w)) {
        min = min.min(w as usize);
        max = max.max(w as usize);
        i += 1;
    }
    if max <= min || max - min > MAX_VM_CODE {
        return Err("the dispatch table does not point into one block of code");
    }
    let returns = c_call_returns(min, max, d)?;
    for (slot, r) in C_CALL_RETURNS.iter().zip(returns) {
        slot.store(r, Ordering::Relaxed);
    }
    VM_CODE[0].store(min, Ordering::Relaxed);
    VM_CODE[1].store(max, Ordering::Relaxed);
    LEARNED_G.store(g, Ordering::Relaxed);
    DISPATCH.store(d, Ordering::Release);
    Ok(())
}

/// The return addresses of the VM's calls of C functions, found by
/// decoding its code (`lo..hi` and the page after, the span of the
/// dispatch table `d`): each `call` right after the store of `~LJ_VMST_C`
/// into the VM state (`mov dword [r14 + state], -2`, r14 being DISPATCH).
fn c_call_returns(lo: usize, hi: usize, d: usize) -> Result<[usize; 4], &'static str> {
    let state_disp = VMSTATE_AT.load(Ordering::Relaxed) as i64 - d as i64;
    let len = hi - lo + 4096;
    let mut code = vec![0u8; len];
    let mut n = 0;
    while n < len {
        let k = (len - n).min(4096 - ((lo + n) & 4095));
        if !self_read(lo + n, &mut code[n..n + k]) {
            break;
        }
        n += k;
    }
    code.truncate(n);
    let mut dec = Decoder::with_ip(64, &code, lo as u64, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    let (mut found, mut k) = ([0usize; 4], 0);
    let mut after_set_c = false;
    while dec.can_decode() && k < found.len() {
        dec.decode_out(&mut ins);
        if after_set_c && matches!(ins.flow_control(), FlowControl::Call | FlowControl::IndirectCall) {
            found[k] = ins.next_ip() as usize;
            k += 1;
        }
        after_set_c = ins.mnemonic() == Mnemonic::Mov
            && ins.op0_kind() == OpKind::Memory
            && ins.memory_base() == Register::R14
            && ins.memory_index() == Register::None
            && ins.memory_displacement64() as i64 == state_disp
            && ins.op1_kind() == OpKind::Immediate32
            && ins.immediate32() as i32 == VMSTATE_C;
    }
    if k == 0 {
        return Err("the interpreter's calls of C functions were not found in its code");
    }
    Ok(found)
}

/// Whether the VM's calls of C functions were learned for the armed VM.
pub(super) fn c_calls_known() -> bool {
    ready() && C_CALL_RETURNS[0].load(Ordering::Relaxed) != 0
}

/// Whether `ret` is where a call of a C function by the VM returns.
pub(super) fn is_c_call_return(ret: usize) -> bool {
    ret != 0 && C_CALL_RETURNS.iter().any(|r| r.load(Ordering::Relaxed) == ret)
}

/// Whether `a` lies in the interpreter's code (from its first handler to
/// the start of its last).
pub(super) fn in_vm_code(a: usize) -> bool {
    a >= VM_CODE[0].load(Ordering::Relaxed) && a <= VM_CODE[1].load(Ordering::Relaxed)
}

/// The interrupted registers the interpreter keeps its state in.
pub(super) struct Regs {
    pub(super) rip: usize,
    pub(super) rsp: usize,
    pub(super) rbp: usize,
    base: usize,
    pc: usize,
    kbase: usize,
    dispatch: usize,
}

impl Regs {
    /// # Safety
    /// `ctx` must be the ucontext the kernel passed to an SA_SIGINFO handler.
    pub(super) unsafe fn of(ctx: *mut c_void) -> Regs {
        let r = &(*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs;
        let at = |i: c_int| r[i as usize] as usize;
        Regs {
            rip: at(libc::REG_RIP),
            rsp: at(libc::REG_RSP),
            rbp: at(libc::REG_RBP),
            base: at(libc::REG_RDX),
            pc: at(libc::REG_RBX),
            kbase: at(libc::REG_R15),
            dispatch: at(libc::REG_R14),
        }
    }
}

/// Copies the bytes at `a` into `out_a` and at `b` into `out_b` in one
/// system call, or returns false (never faults: the kernel checks the
/// addresses). Async-signal-safe.
pub(super) fn read_two(a: usize, out_a: &mut [u8], b: usize, out_b: &mut [u8]) -> bool {
    let local = [
        libc::iovec { iov_base: out_a.as_mut_ptr() as *mut c_void, iov_len: out_a.len() },
        libc::iovec { iov_base: out_b.as_mut_ptr() as *mut c_void, iov_len: out_b.len() },
    ];
    let remote = [
        libc::iovec { iov_base: a as *mut c_void, iov_len: out_a.len() },
        libc::iovec { iov_base: b as *mut c_void, iov_len: out_b.len() },
    ];
    // This process's id, as `self_read` uses it (set when the layout is armed).
    let pid = super::running_c::PID.load(Ordering::Relaxed);
    // SAFETY: `local` describes the two output slices, writable for their
    // lengths; the remote ranges are only read, by the kernel, which
    // reports unmapped addresses as an error (a short count).
    let n = unsafe { libc::process_vm_readv(pid, local.as_ptr(), 2, remote.as_ptr(), 2, 0) };
    n == (out_a.len() + out_b.len()) as isize
}

/// A function object's bytes, as read: its bytecode if it is a Lua
/// function.
fn lua_bytecode(o: &[u8; FN_PC + 8]) -> Result<usize, InterpMiss> {
    if o[OBJ_GCT] != GCT_FUNC {
        return Err(InterpMiss::Registers);
    }
    if o[FN_FFID] != FF_LUA {
        return Err(InterpMiss::Builtin);
    }
    let bc = le(o, FN_PC, 8) as usize;
    if bc < PROTO_SIZE {
        return Err(InterpMiss::Registers);
    }
    Ok(bc)
}

/// Whether `pc` (an instruction after the one running, or a return
/// address) lies in the bytecode at `bc` of `sizebc` instructions.
pub(super) fn in_bytecode(pc: usize, bc: usize, sizebc: usize) -> bool {
    pc >= bc + 4 && pc <= bc + 4 * sizebc && (pc - bc) % 4 == 0
}

/// Reads the stack of the interpreted code the VM thread runs: the running
/// function at its PC, then the frames below, leaf first into `c`.
///
/// # Safety
/// Must run on the VM thread, with the layout armed, while the VM state is
/// INTERP.
pub(super) unsafe fn read_interp_stack(r: &Regs, c: &mut Captured, limit: usize) -> Result<(), InterpMiss> {
    c.len = 0;
    let d = DISPATCH.load(Ordering::Acquire);
    let in_vm = |a: usize| in_vm_code(a);
    // In the interpreter's code, or in a leaf routine an instruction
    // called (`vm_mod`, `vm_floor`: the return address into the
    // interpreter is still on top of the stack, and they keep its
    // registers).
    let called_from_vm = || {
        self_word(r.rsp).is_some_and(|ret| {
            let ret = ret as usize;
            // SAFETY: `ret` lies in the VM's code, at least six bytes in,
            // which stays mapped for the VM's life.
            in_vm(ret) && ret >= VM_CODE[0].load(Ordering::Relaxed) + 6 && unsafe { follows_call(ret) }
        })
    };
    if !in_vm(r.rip) && !called_from_vm() {
        return Err(InterpMiss::Helper);
    }
    if r.dispatch != d {
        return Err(InterpMiss::Registers);
    }
    // The running thread is live while the interpreter runs it, and its
    // stack does not move while the interpreter's own code runs (only C
    // code grows it): its header and slots inside its stack are read
    // directly.
    let l = at::<usize>(CUR_L_AT.load(Ordering::Relaxed));
    if l == 0 {
        return Err(InterpMiss::Registers);
    }
    let (stack, size) = (at::<usize>(l + L_STACK), at::<u32>(l + L_STACKSIZE) as usize);
    let base = r.base;
    if base < stack + 32 || base >= stack + 8 * size || base % 8 != 0 {
        return Err(InterpMiss::Registers);
    }
    let (slot, link) = (at::<u64>(base - 16), at::<u64>(base - 8));
    // The function below BASE, and (for a Lua caller) the call instruction
    // its frame link returns after; both can be stale around a call, so
    // they are read through the kernel.
    let func = slot_function(slot).ok_or(InterpMiss::Registers)?;
    let lua_caller = link & FRAME_TYPE == FRAME_LUA;
    let mut o = [0u8; FN_PC + 8];
    let mut call = [0u8; 4];
    let read = if lua_caller {
        link >= 4 && read_two(func, &mut o, link as usize - 4, &mut call)
    } else {
        self_read(func, &mut o)
    };
    if !read {
        return Err(InterpMiss::Registers);
    }
    let bc = lua_bytecode(&o)?;
    // A Lua caller's frame lies below, inside the stack; its function is
    // read with this one's prototype.
    let mut pt = [0u8; PROTO_K + 8];
    let mut co = [0u8; FN_PC + 8];
    if lua_caller {
        let caller = (base - 8).wrapping_sub(8 * (2 + call[1] as usize));
        if caller <= stack + 8 || caller >= base - 8 {
            return Err(InterpMiss::Registers);
        }
        let cfunc = slot_function(at::<u64>(caller - 8)).ok_or(InterpMiss::Registers)?;
        if !read_two(bc - PROTO_SIZE, &mut pt, cfunc, &mut co) {
            return Err(InterpMiss::Registers);
        }
    } else if !self_read(bc - PROTO_SIZE, &mut pt) {
        return Err(InterpMiss::Registers);
    }
    // KBASE is the running prototype's constants, and PC, the instruction
    // after the running one, lies inside its bytecode.
    let (sizebc, k) = (le(&pt, PROTO_SIZEBC, 4) as usize, le(&pt, PROTO_K, 8) as usize);
    if r.kbase != k || !in_bytecode(r.pc, bc, sizebc) {
        return Err(InterpMiss::Registers);
    }
    // The frame link below: a Lua caller's return address must lie in the
    // bytecode of the function its call frame holds. Frames of other kinds
    // are found by their size, inside the stack.
    if lua_caller {
        let cbc = lua_bytecode(&co).map_err(|_| InterpMiss::Registers)?;
        let mut cpt = [0u8; PROTO_SIZEBC + 4];
        if !self_read(cbc - PROTO_SIZE, &mut cpt)
            || !in_bytecode(link as usize, cbc, le(&cpt, PROTO_SIZEBC, 4) as usize)
        {
            return Err(InterpMiss::Registers);
        }
    }
    // From here the frame is the running one: the frames below it are
    // live and read directly, as below a trace's base.
    if !c.push(Frame::of(func, r.pc), limit) {
        return Ok(());
    }
    walk_frames(l, stack, base - 8, c, limit).map_err(|_| InterpMiss::Frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::alloc_probe::{InSample, ALLOCATIONS};
    use std::sync::atomic::AtomicBool;

    static TAKEN: AtomicUsize = AtomicUsize::new(0);
    static SENT: AtomicUsize = AtomicUsize::new(0);
    static ALLOCATED: AtomicU64 = AtomicU64::new(0);
    static STOP: AtomicBool = AtomicBool::new(false);

    /// A signal handler that takes a tick as the session's does.
    extern "C" fn on_signal(_sig: c_int, _info: *mut libc::siginfo_t, ctx: *mut c_void) {
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        {
            let _in = InSample::enter();
            if take_ticks(1, ctx) {
                TAKEN.fetch_add(1, Ordering::SeqCst);
            }
        }
        ALLOCATED.fetch_add(ALLOCATIONS.load(Ordering::SeqCst) - before, Ordering::SeqCst);
    }

    #[test]
    fn a_tick_in_interpreted_code_is_read_in_place_without_allocating() {
        let _turn = crate::sys::one_session_at_a_time();
        // SAFETY: the FFI is needed for the probe; nothing else is loaded.
        let lua = unsafe { Lua::unsafe_new() };
        assert_eq!(prove(&lua), Ok(()));
        assert_eq!(learn_interp(), Ok(()));
        assert_eq!(interp_state(), Ok(()));
        arm(16, 0);
        reset_counts();
        // SAFETY: installs a handler whose signature matches SA_SIGINFO for
        // SIGUSR2, which nothing else in the crate uses; the old
        // disposition is put back below.
        let old = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            let mut old: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, &mut old), 0);
            old
        };
        // SAFETY: the id of this thread, which outlives the sender (joined).
        let me = unsafe { libc::pthread_self() } as usize;
        STOP.store(false, Ordering::SeqCst);
        let sender = std::thread::spawn(move || {
            while !STOP.load(Ordering::SeqCst) {
                // SAFETY: `me` is a live thread of this process until joined.
                unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGUSR2) };
                SENT.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_micros(300));
            }
        });
        // Runs until enough ticks were read, or too many were sent in vain.
        let done = lua
            .create_function(|_, ()| Ok(TAKEN.load(Ordering::SeqCst) >= 50 || SENT.load(Ordering::SeqCst) > 50_000))
            .unwrap();
        let chunk = "local done = ...\n\
                     local function spin() local s = 0 for i = 1, 2000 do s = (s + i * 3) % 7 end return s end\n\
                     jit.off(spin, true)\n\
                     while not done() do spin() end\n";
        let _: () = lua.load(chunk).set_name("=test.interp").call(done).unwrap();
        STOP.store(true, Ordering::SeqCst);
        sender.join().unwrap();
        // SAFETY: puts back the disposition read above.
        unsafe { libc::sigaction(libc::SIGUSR2, &old, std::ptr::null_mut()) };
        disarm();
        let mut stacks = Vec::new();
        drain(|t| stacks.push((String::from_utf8_lossy(t.stack).into_owned(), t.count, t.state)));
        assert!(
            TAKEN.load(Ordering::SeqCst) >= 50,
            "{} ticks read of {} sent",
            TAKEN.load(Ordering::SeqCst),
            SENT.load(Ordering::SeqCst)
        );
        assert_eq!(ALLOCATED.load(Ordering::SeqCst), 0, "the handler allocated");
        let interpreted: Vec<_> = stacks.iter().filter(|s| s.2 == b'I').collect();
        assert!(interpreted.iter().any(|s| s.0.ends_with("test.interp:4\u{1f}test.interp:2")), "{stacks:?}");
        for (stack, _, _) in interpreted {
            let chain = stack.rsplit("test.interp:4").next().unwrap_or("");
            assert!(
                stack.contains("test.interp:4") && (chain.is_empty() || chain == "\u{1f}test.interp:2"),
                "not the chunk's stack: {stack:?}"
            );
        }
    }
}
