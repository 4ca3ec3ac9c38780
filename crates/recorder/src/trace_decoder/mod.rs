//! Stacks of compiled code, read in the tick handler.
//!
//! LuaJIT's own sample is taken at a safe point: the next bytecode the
//! interpreter dispatches, or a profiler check the JIT compiler put in a
//! trace (`f` and `l` modes, which cost the compiled code). Without those
//! checks a trace runs on until it exits, and every tick it took lands
//! where it exits. This module reads the stack at the tick itself when the
//! tick interrupts a trace (x86-64, GC64 builds of LuaJIT 2.1 whose
//! snapshots record their machine-code offset):
//!
//! - the VM state is the running trace's number (`g->vmstate`);
//! - the interrupted address (or, inside a helper the trace called, the
//!   return address into the trace found on the C stack) lies in the
//!   trace's machine code, and the last snapshot whose code starts at or
//!   before it gives the bytecode the trace is running (`SnapShot.mcofs`,
//!   the same search LuaJIT does to unwind through traces) and the frames
//!   the trace inlined, whose return addresses are constants of the trace
//!   and whose functions are constants too, or checked by their prototype
//!   (named by it, see `walk::checked_proto`);
//! - the frames below the trace's base (`g->jit_base`) are real, and are
//!   walked as LuaJIT's stack dump walks them.
//!
//! The stack is written as the stack dump writes it (`file:line` frames,
//! caller first), so both kinds of sample meet in the same stack table.
//! A C function's stack is read from the running thread's base
//! (`read_c_stack`), interpreted code's from the interpreter's registers
//! (`interp`), the collector's and the compiler's from the frame the
//! interpreter saved before calling them (`vm_states`), or, for a
//! collector step a trace called, as a tick at that call. Everything else
//! (trace exits, the compiler run from a trace, and the ticks a reader
//! cannot place) is left to LuaJIT's hook.
//!
//! The layout (offsets in LuaJIT's structures) is fixed for these builds
//! but proved at session start by a probe: a compiled loop calls a function
//! of ours through the FFI, which reads its own stack as the handler would
//! and must find the loop's frames, lines and callers; any mismatch leaves
//! this off and `stats()` says why. The probe runs in a VM of our own, made
//! by the same LuaJIT and closed after it (`own_vm`), so that nothing of it
//! (the FFI, its type names, the chunk) is left in the program's VM. Reads that could meet memory a stale
//! pointer names go through `process_vm_readv`, which fails instead of
//! faulting; once the trace is proved to be the one this thread runs, the
//! trace's own arrays and the live frames are read directly.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use mlua::Lua;

use crate::sys::posix::running_c;
use crate::sys::{address_text, FrameFacts, TakenStack};

pub mod code_anchors;
pub mod fine_map;
mod interp;
mod layout;
mod own_vm;
mod probe;
mod text;
mod vm_events;
mod vm_states;
mod walk;

use interp::{count_hook, count_miss, InterpMiss, Regs, VMSTATE_INTERP};
pub use interp::{
    count_wake, interp_counts, interp_state, learn_interp, reset_counts as reset_interp_counts, wake_ticks,
    HOOK_STATE_NAMES, INTERP_MISS_NAMES,
};
use layout::*;
use probe::*;
pub use probe::{arm, armed, disarm, prove};
use text::*;
pub use vm_events::{attach as attach_logger, detach as detach_logger, map_counts};
use vm_states::{count_state_miss, StateMiss, VMSTATE_RECORD};
pub use vm_states::{reset_state_counts, state_counts, STATE_MISS_NAMES};
use walk::*;

// -- The armed layout ------------------------------------------------------

/// Learned at start: the global state, and the addresses of its fields.
static G: AtomicUsize = AtomicUsize::new(0);
static VMSTATE_AT: AtomicUsize = AtomicUsize::new(0);
static CUR_L_AT: AtomicUsize = AtomicUsize::new(0);
static JIT_BASE_AT: AtomicUsize = AtomicUsize::new(0);
static J_AT: AtomicUsize = AtomicUsize::new(0);
/// Armed for a session: the handler reads traces only while this is set.
static ARMED: AtomicBool = AtomicBool::new(false);
static DEPTH: AtomicUsize = AtomicUsize::new(16);
/// The `jit.zone` stack table of the session, or 0.
static ZONES: AtomicUsize = AtomicUsize::new(0);

/// Samples the handler read, and ticks in a trace it left to the hook, by
/// reason (see [`Misses`]).
static READ: AtomicU64 = AtomicU64::new(0);
static MISSES: [AtomicU64; MISS_KINDS] = [const { AtomicU64::new(0) }; MISS_KINDS];

/// Why a tick in a trace was left to LuaJIT's hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Miss {
    /// The trace is not this thread's, or its header could not be read.
    Trace = 0,
    /// No address in the trace's code was found for the tick.
    Address,
    /// A frame did not validate (a VM transition, or a continuation).
    Frame,
    /// An inlined frame's function could not be read: its slot does not
    /// precede the frame link in the snapshot, or more frames than kept.
    /// (A function that is neither a constant of the trace nor checked by
    /// its prototype is no miss: the sample ends at its caller.)
    Function,
    /// The buffer between two callbacks was full.
    Full,
}
const MISS_KINDS: usize = 5;

/// Counts since the last arm: samples read in the handler, and ticks left
/// to the hook by reason (`Miss` order).
pub fn counts() -> (u64, [u64; MISS_KINDS]) {
    let mut m = [0; MISS_KINDS];
    for (o, c) in m.iter_mut().zip(&MISSES) {
        *o = c.load(Ordering::Relaxed);
    }
    (READ.load(Ordering::Relaxed), m)
}

/// The prototype of the Lua function `f` (as `lua_topointer` gives it), if
/// its bytecode was loaded without lines: what the handler writes its
/// frames by (`file:@0xADDR`, [`text::write_frame`]). None while no VM's
/// layout was learned, where the frames are LuaJIT's (`file:0`).
///
/// # Safety
/// `f` must be a live function object of a VM of this process.
pub unsafe fn stripped_proto(f: *const c_void) -> Option<usize> {
    if LEARNED_FOR.load(Ordering::Acquire) == 0 || f.is_null() {
        return None;
    }
    let pt = lua_proto(Frame::of(f as usize, 0))?;
    is_stripped(pt).then_some(pt)
}

/// Names of the `Miss` kinds, in order, for `stats()`.
pub const MISS_NAMES: [&str; MISS_KINDS] = ["trace", "address", "frame", "function", "full"];

/// Samples read in the handler with a frame named by its prototype alone
/// (a function the trace checks by its prototype), and samples whose stack
/// ends at the caller of an inlined frame that could not be named.
static NAMED: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];

/// Counts since the last arm, for `stats().compiledFrames`, with their
/// names: samples with a frame named by its prototype, and samples named
/// at the caller of a frame that could not be named.
pub fn frame_counts() -> [(&'static str, u64); 2] {
    [("byPrototype", NAMED[0].load(Ordering::Relaxed)), ("atCaller", NAMED[1].load(Ordering::Relaxed))]
}

// -- The buffer between the handler and the callback ------------------------

/// Distinct stacks kept between two callbacks, and their bytes.
const ENTRIES: usize = 2048;
const BYTES: usize = 512 * 1024;
const INDEX: usize = 4096;

/// One stack read in the handler, and how many ticks found it.
#[derive(Clone, Copy, Default)]
struct Entry {
    hash: u64,
    thread: usize,
    off: u32,
    zone_len: u32,
    stack_len: u32,
    native_len: u32,
    ident_len: u32,
    state: u8,
    count: u32,
    last_ns: u64,
}

struct Half {
    entries: [Entry; ENTRIES],
    len: usize,
    bytes: [u8; BYTES],
    used: usize,
    /// Open-addressed index of `entries` by hash (entry + 1; 0 is free).
    index: [u32; INDEX],
    scratch: Captured,
}

struct Buffers {
    halves: [UnsafeCell<Half>; 2],
}

// SAFETY: the handler (on the VM thread) touches the active half only; the
// drain the other, after switching and after any write the handler began
// before the switch is done (`WRITING`); drains run one at a time.
unsafe impl Sync for Buffers {}

static BUFFERS: AtomicPtr<Buffers> = AtomicPtr::new(std::ptr::null_mut());
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Set while the handler writes a half: a drain on another thread (a
/// session's autosave) waits for it before it reads the half it switched
/// from. On the VM thread the handler is never half done when a drain runs.
static WRITING: AtomicBool = AtomicBool::new(false);

/// Clears [`WRITING`] on every way out of the handler's write.
struct Writing;

impl Drop for Writing {
    fn drop(&mut self) {
        WRITING.store(false, Ordering::SeqCst);
    }
}

fn buffers() -> Option<&'static Buffers> {
    let p = BUFFERS.load(Ordering::Acquire);
    // SAFETY: set once from a leaked Box and never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

fn hash(bytes: &[u8], thread: usize) -> u64 {
    // FNV-1a: no state, no allocation, fine for a few thousand keys.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ thread as u64;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The handler's entry point: when the VM thread is in a trace, a C
/// function or the interpreter, reads its stack and counts `n` ticks for
/// it. False leaves the ticks to LuaJIT's hook (another state, not armed,
/// or a miss), counted by the state they found.
pub fn take_ticks(n: u64, ctx: *mut c_void) -> bool {
    if !ARMED.load(Ordering::Acquire) || ctx.is_null() {
        return false;
    }
    // SAFETY: armed means `VMSTATE_AT` is the VM state's address in the
    // live global state of the session's VM.
    let mut vmstate = unsafe { at::<i32>(VMSTATE_AT.load(Ordering::Relaxed)) };
    if vmstate == VMSTATE_C && vm_events::record_event_sent() {
        vmstate = record_state_back(ctx);
    }
    let readable = vmstate >= 1
        || vmstate == VMSTATE_C
        || (vmstate == VMSTATE_INTERP && interp::ready())
        || vm_states::is_vm_state(vmstate);
    if !readable {
        count_hook(vmstate, n);
        return false;
    }
    let taken = take_read_ticks(n, ctx, vmstate);
    if !taken {
        count_hook(vmstate, n);
    }
    taken
}

/// The VM state at a tick in state C while a trace is recorded after a
/// `record` event: RECORD, put back, where no C function the VM called
/// runs (the state the event left; LuaJIT's own was RECORD, as the VM
/// thread, which this handler interrupted, would have kept it); else C.
fn record_state_back(ctx: *mut c_void) -> i32 {
    // SAFETY: the kernel hands a valid ucontext to an SA_SIGINFO handler.
    let regs = unsafe { Regs::of(ctx) };
    // SAFETY: on the VM thread, armed (the caller read the state).
    if unsafe { in_c_call(regs.rip, regs.rsp) } != Some(false) {
        return VMSTATE_C;
    }
    // SAFETY: armed, so this is the live VM state's address; the VM writes
    // it only at transitions, on this thread, which is interrupted here.
    unsafe { std::ptr::write_volatile(VMSTATE_AT.load(Ordering::Relaxed) as *mut i32, VMSTATE_RECORD) };
    VMSTATE_RECORD
}

/// Counts `n` ticks left to the hook for `m`, as a tick in interpreted
/// code or in a trace (a C state outside a VM call is the host's own code,
/// and no miss).
fn count_missed(vmstate: i32, m: Miss, n: u64) {
    if vm_states::is_vm_state(vmstate) {
        count_state_miss(if m == Miss::Full { StateMiss::Full } else { StateMiss::Frame }, n);
    } else if vmstate == VMSTATE_INTERP {
        count_miss(if m == Miss::Full { InterpMiss::Full } else { InterpMiss::Frame }, n);
    } else if vmstate != VMSTATE_C {
        MISSES[m as usize].fetch_add(n, Ordering::Relaxed);
    }
}

/// `take_ticks` in a state whose stack the handler reads.
fn take_read_ticks(n: u64, ctx: *mut c_void, vmstate: i32) -> bool {
    let Some(b) = buffers() else { return false };
    // SAFETY: the kernel hands a valid ucontext to an SA_SIGINFO handler.
    let regs = unsafe { Regs::of(ctx) };
    let rsp = regs.rsp;
    // Set before the half is chosen: a drain that switches after this
    // waits until the write is done (see `drain`).
    WRITING.store(true, Ordering::SeqCst);
    let _writing = Writing;
    // SAFETY: see `Buffers`: the active half is the handler's.
    let half = unsafe { &mut *b.halves[ACTIVE.load(Ordering::SeqCst) & 1].get() };
    let limit = DEPTH.load(Ordering::Relaxed) + 1;
    half.scratch.native_len = 0;
    half.scratch.vm_frame = 0;
    if vmstate == VMSTATE_INTERP {
        // SAFETY: on the VM thread, armed, in state INTERP.
        if let Err(m) = unsafe { interp::read_interp_stack(&regs, &mut half.scratch, limit) } {
            count_miss(m, n);
            return false;
        }
    } else if vm_states::is_vm_state(vmstate) {
        // SAFETY: on the VM thread, armed, in the collector's or the
        // compiler's state.
        if let Err(m) = unsafe { vm_states::read_state_stack(vmstate, rsp, &mut half.scratch, limit) } {
            count_state_miss(m, n);
            return false;
        }
    } else {
        // SAFETY: on the VM thread, armed, in the VM state each reader needs.
        let read = unsafe {
            if vmstate == VMSTATE_C {
                read_c_stack(regs.rip, rsp, &mut half.scratch, limit)
            } else {
                read_trace_stack(vmstate as usize, regs.rip, rsp, &mut half.scratch, limit)
            }
        };
        if let Err(m) = read {
            count_missed(vmstate, m, n);
            return false;
        }
        if vmstate >= 0 {
            walk::LAST_TRACE.store(vmstate as usize, Ordering::Relaxed);
        }
        if crate::native_frames::armed() {
            let until = if vmstate == VMSTATE_C {
                crate::native_frames::Until::VmFrame(half.scratch.vm_frame)
            } else {
                crate::native_frames::Until::Unmapped { in_call: !walk::in_trace_code(vmstate as usize, regs.rip) }
            };
            let c = &mut half.scratch;
            // SAFETY: in the tick handler on the VM thread, whose registers
            // these are.
            c.native_len = unsafe { crate::native_frames::walk(regs.rip, rsp, regs.rbp, until, &mut c.native) };
        }
    }
    let state = match vmstate {
        VMSTATE_C => b'C',
        VMSTATE_INTERP => b'I',
        _ if vm_states::is_vm_state(vmstate) => vm_states::letter(vmstate),
        _ => b'N',
    };
    // SAFETY: the frames were read from the live stack and trace just now.
    let thread = unsafe { at::<usize>(CUR_L_AT.load(Ordering::Relaxed)) };
    let start = half.used;
    let (zone_len, stack_len, native_len) = {
        let mut out = Out { buf: &mut half.bytes[start..], len: 0 };
        let zones = ZONES.load(Ordering::Relaxed);
        if zones != 0 && !read_zones(zones, &mut out) {
            count_missed(vmstate, Miss::Frame, n);
            return false;
        }
        let z = out.len;
        // SAFETY: as above.
        if !unsafe { write_stack(&mut out, &half.scratch) } {
            count_missed(vmstate, Miss::Full, n);
            return false;
        }
        let s = out.len - z;
        if !write_native(&mut out, &half.scratch) {
            count_missed(vmstate, Miss::Full, n);
            return false;
        }
        (z, s, out.len - z - s)
    };
    let key_len = zone_len + stack_len + native_len;
    let h = hash(&half.bytes[start..start + key_len], thread ^ state as usize);
    let now = crate::sys::posix::clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0);
    let mut slot = (h as usize) & (INDEX - 1);
    loop {
        let e = half.index[slot] as usize;
        if e == 0 {
            break;
        }
        let entry = &mut half.entries[e - 1];
        let o = entry.off as usize;
        if entry.hash == h
            && entry.thread == thread
            && entry.zone_len as usize == zone_len
            && entry.stack_len as usize == stack_len
            && entry.native_len as usize == native_len
            && entry.state == state
            && half.bytes[o..o + key_len] == half.bytes[start..start + key_len]
        {
            entry.count = entry.count.saturating_add(n as u32);
            entry.last_ns = now;
            READ.fetch_add(n, Ordering::Relaxed);
            count_naming(&half.scratch, n);
            return true;
        }
        slot = (slot + 1) & (INDEX - 1);
    }
    if half.len == ENTRIES || half.len * 2 >= INDEX {
        count_missed(vmstate, Miss::Full, n);
        return false;
    }
    // A stack new to this buffer: what the views need to name its frames.
    let ident_len = {
        let mut out = Out { buf: &mut half.bytes[start + key_len..], len: 0 };
        // SAFETY: as above.
        if !unsafe { write_identities(&mut out, &half.scratch) } {
            count_missed(vmstate, Miss::Full, n);
            return false;
        }
        out.len
    };
    half.entries[half.len] = Entry {
        hash: h,
        thread,
        off: start as u32,
        zone_len: zone_len as u32,
        stack_len: stack_len as u32,
        native_len: native_len as u32,
        ident_len: ident_len as u32,
        state,
        count: n as u32,
        last_ns: now,
    };
    half.len += 1;
    half.index[slot] = half.len as u32;
    half.used += key_len + ident_len;
    READ.fetch_add(n, Ordering::Relaxed);
    count_naming(&half.scratch, n);
    true
}

/// Counts `n` ticks read as `c` in [`NAMED`].
fn count_naming(c: &Captured, n: u64) {
    if c.by_proto {
        NAMED[0].fetch_add(n, Ordering::Relaxed);
    }
    if c.cut {
        NAMED[1].fetch_add(n, Ordering::Relaxed);
    }
}

/// Hands every stack read since the last drain to `f`, in the order first
/// read, and empties the buffer. Runs outside the handler, one drain at a
/// time (under the session state's lock): on the VM thread, or on a thread
/// of ours, which waits for a write the handler began in the old half.
pub fn drain(mut f: impl FnMut(TakenStack)) {
    let Some(b) = buffers() else { return };
    let old = ACTIVE.load(Ordering::SeqCst) & 1;
    ACTIVE.store(old ^ 1, Ordering::SeqCst);
    while WRITING.load(Ordering::SeqCst) {
        std::hint::spin_loop();
    }
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
    // SAFETY: the handler writes only the active half, which is now the
    // other one; this thread is the only other user.
    let half = unsafe { &mut *b.halves[old].get() };
    for e in &half.entries[..half.len] {
        let o = e.off as usize;
        let (z, s, v, i) = (e.zone_len as usize, e.stack_len as usize, e.native_len as usize, e.ident_len as usize);
        let n = o + z + s + v;
        f(TakenStack {
            zone: &half.bytes[o..o + z],
            stack: &half.bytes[o + z..o + z + s],
            native: &half.bytes[o + z + s..n],
            facts: FrameFacts(&half.bytes[n..n + i]),
            state: e.state,
            thread: e.thread,
            count: e.count,
            last_ns: e.last_ns,
        });
    }
    half.len = 0;
    half.used = 0;
    half.index.fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::alloc_probe::{InSample, ALLOCATIONS};

    static TAKEN: AtomicUsize = AtomicUsize::new(0);
    static ALLOCATED: AtomicU64 = AtomicU64::new(0);

    /// This test's turn, and a VM with the FFI whose traces the handler
    /// reads, the counts of [`tick_at`] cleared.
    fn armed_vm() -> (std::sync::MutexGuard<'static, ()>, Lua) {
        let turn = crate::sys::one_session_at_a_time();
        TAKEN.store(0, Ordering::SeqCst);
        ALLOCATED.store(0, Ordering::SeqCst);
        // SAFETY: the FFI is needed for the test's loop; nothing else is loaded.
        let lua = unsafe { Lua::unsafe_new() };
        assert_eq!(prove(&lua), Ok(()));
        arm(16, 0);
        (turn, lua)
    }

    /// Takes a tick as the handler does, with an interrupted context of
    /// these registers, counting it in TAKEN and what it allocated.
    fn tick_at(rip: usize, rsp: usize, rbp: usize) {
        // SAFETY: a zeroed ucontext is a valid value; only the registers
        // the handler reads are set.
        let mut uc: libc::ucontext_t = unsafe { std::mem::zeroed() };
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] = rip as i64;
        uc.uc_mcontext.gregs[libc::REG_RSP as usize] = rsp as i64;
        uc.uc_mcontext.gregs[libc::REG_RBP as usize] = rbp as i64;
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        {
            let _in = InSample::enter();
            if take_ticks(1, &mut uc as *mut libc::ucontext_t as *mut c_void) {
                TAKEN.fetch_add(1, Ordering::SeqCst);
            }
        }
        ALLOCATED.fetch_add(ALLOCATIONS.load(Ordering::SeqCst) - before, Ordering::SeqCst);
    }

    /// Called from a compiled loop through the FFI: takes a tick with an
    /// interrupted context inside this function.
    extern "C" fn tick_from_trace(i: c_int) -> c_int {
        let rsp: usize;
        // SAFETY: reads the stack pointer; no memory access.
        unsafe { std::arch::asm!("mov {}, rsp", out(reg) rsp, options(nomem, nostack, preserves_flags)) };
        tick_at(tick_from_trace as *const () as usize, rsp, 0);
        i
    }

    #[test]
    fn a_tick_in_a_trace_is_read_in_place_without_allocating() {
        let (_turn, lua) = armed_vm();
        // The loop's trace is recorded with the logger on: ticks in it are
        // placed by its fine map, which is looked up without allocating.
        assert_eq!(attach_logger(&lua, true), Ok(()));
        let chunk = "local f = require('ffi').cast('int (*)(int)', ...)\n\
                     local function loop(n) local s = 0 for i = 1, n do s = s + f(i) end return s end\n\
                     return loop(3000)";
        let addr = mlua::LightUserData(tick_from_trace as *const () as *mut c_void);
        let _: mlua::Value = lua.load(chunk).set_name("=test.loop").call(addr).unwrap();
        disarm();
        let [mapped, _, placed, ..] = map_counts();
        detach_logger(&lua);
        assert!(mapped > 0 && placed > 0, "no tick was placed by a fine map: {mapped} {placed}");
        let mut stacks = Vec::new();
        drain(|t| stacks.push((String::from_utf8_lossy(t.stack).into_owned(), t.count, t.state, t.facts.count())));
        let taken = TAKEN.load(Ordering::SeqCst);
        assert!(taken > 0, "no tick was taken in the trace");
        assert_eq!(ALLOCATED.load(Ordering::SeqCst), 0, "the handler allocated");
        assert_eq!(stacks.iter().map(|s| s.1 as usize).sum::<usize>(), taken, "{stacks:?}");
        // Interpreted calls run the FFI's C function (state C); compiled
        // ones are the trace's (state N), at the loop's line.
        assert!(stacks.iter().any(|s| s.2 == b'N'), "{stacks:?}");
        for (stack, _, state, facts) in &stacks {
            if *state == b'N' {
                assert!(stack.ends_with("test.loop:2"), "{stack}");
            } else {
                assert_eq!(*state, b'C');
                assert!(stack.contains("test.loop:2\u{1f}[builtin#"), "{stack}");
            }
            assert_eq!(*facts, stack.split('\u{1f}').count(), "one identity record per frame: {stack:?}");
        }
    }

    /// A C function a trace calls, which calls [`native_leaf`].
    #[inline(never)]
    extern "C" fn native_outer(i: c_int) -> c_int {
        // Work after the call: no tail call, so this frame stays.
        std::hint::black_box(native_leaf(std::hint::black_box(i))) + 1
    }

    /// Takes a tick as the handler does, with the context of this very
    /// instruction: the native frames below the trace are this function and
    /// [`native_outer`].
    #[inline(never)]
    extern "C" fn native_leaf(i: c_int) -> c_int {
        let (rip, rsp, rbp): (usize, usize, usize);
        // SAFETY: reads the instruction pointer and two registers; no
        // memory access, the stack untouched.
        unsafe {
            std::arch::asm!("lea {0}, [rip]", "mov {1}, rsp", "mov {2}, rbp", out(reg) rip, out(reg) rsp,
                out(reg) rbp, options(nomem, nostack, preserves_flags))
        };
        tick_at(rip, rsp, rbp);
        i
    }

    #[test]
    fn native_frames_below_a_trace_are_walked_without_allocating() {
        let (_turn, lua) = armed_vm();
        assert_eq!(crate::native_frames::arm(), Ok(()));
        let chunk = "local f = require('ffi').cast('int (*)(int)', ...)\n\
                     local function loop(n) local s = 0 for i = 1, n do s = s + f(i) end return s end\n\
                     return loop(3000)";
        let addr = mlua::LightUserData(native_outer as *const () as *mut c_void);
        let _: mlua::Value = lua.load(chunk).set_name("=test.native").call(addr).unwrap();
        disarm();
        let counts = crate::native_frames::counts();
        crate::native_frames::disarm();
        let mut stacks = Vec::new();
        drain(|t| {
            let native: Vec<usize> = t
                .native
                .split(|&b| b == SEP)
                .filter(|f| !f.is_empty())
                .map(|f| tecs_profile_format::profile::native_address(f).expect("a native frame"))
                .collect();
            stacks.push((String::from_utf8_lossy(t.stack).into_owned(), t.state, native, t.count));
        });
        assert!(TAKEN.load(Ordering::SeqCst) > 0, "no tick was taken");
        assert_eq!(ALLOCATED.load(Ordering::SeqCst), 0, "the handler allocated");
        let compiled: Vec<_> = stacks.iter().filter(|s| s.1 == b'N').collect();
        assert!(!compiled.is_empty(), "{stacks:?}");
        for (stack, _, native, _) in &compiled {
            assert!(stack.ends_with("test.native:2"), "{stack}");
            let names: Vec<String> =
                native.iter().map(|&a| crate::native_frames::symbols::name(a).unwrap_or_default()).collect();
            assert_eq!(names.len(), 2, "{names:?}");
            assert!(names[0].ends_with("native_outer"), "root first: {names:?}");
            assert!(names[1].ends_with("native_leaf"), "{names:?}");
        }
        assert!(counts[0].1 >= compiled.iter().map(|s| s.3 as u64).sum::<u64>(), "{counts:?}");
    }

    #[test]
    fn a_method_made_per_object_is_named_by_its_prototype() {
        let _turn = crate::sys::one_session_at_a_time();
        TAKEN.store(0, Ordering::SeqCst);
        ALLOCATED.store(0, Ordering::SeqCst);
        // SAFETY: the FFI is needed for the probe; nothing else is loaded.
        let lua = unsafe { Lua::unsafe_new() };
        assert_eq!(prove(&lua), Ok(()));
        arm(16, 0);
        assert_eq!(attach_logger(&lua, true), Ok(()));
        // Four closures of one prototype: the loop's trace checks `step` by
        // its prototype only, and holds no function for its frame.
        let chunk = "local f = require('ffi').cast('int (*)(int)', ...)\n\
                     local function new() local o = {} function o.step(i) return f(i) + 1 end return o end\n\
                     local objs, band = { new(), new(), new(), new() }, require('bit').band\n\
                     local function loop(n) local s = 0 for i = 1, n do s = s + objs[band(i, 3) + 1].step(i) end return s end\n\
                     return loop(3000)";
        let addr = mlua::LightUserData(tick_from_trace as *const () as *mut c_void);
        let _: mlua::Value = lua.load(chunk).set_name("=test.loop").call(addr).unwrap();
        disarm();
        detach_logger(&lua);
        let [(_, by_proto), (_, at_caller)] = frame_counts();
        let mut stacks = Vec::new();
        drain(|t| stacks.push((String::from_utf8_lossy(t.stack).into_owned(), t.state, t.facts.count())));
        assert_eq!(ALLOCATED.load(Ordering::SeqCst), 0, "the handler allocated");
        let compiled: Vec<_> = stacks.iter().filter(|s| s.1 == b'N').collect();
        assert!(!compiled.is_empty(), "no tick was read in the trace: {stacks:?}");
        for (stack, _, facts) in &compiled {
            assert!(stack.ends_with("test.loop:4\u{1f}test.loop:2"), "{stack}");
            assert_eq!(*facts, stack.split('\u{1f}').count(), "one identity record per frame: {stack:?}");
        }
        assert!(by_proto > 0 && at_caller == 0, "{by_proto} {at_caller}");
    }

    #[test]
    fn short_sources_are_the_vm_s_own() {
        let short = |src: &[u8]| {
            let mut out = [0u8; 64];
            let n = short_source(src, false, &mut out);
            String::from_utf8_lossy(&out[..n]).into_owned()
        };
        assert_eq!(short(b"=stdin"), "stdin");
        assert_eq!(short(b"@a/b.lua"), "a/b.lua");
        let long = format!("@{}", "d/".repeat(40) + "x.lua");
        assert_eq!(short(long.as_bytes()), format!("...{}", &long[long.len() - 56..]));
        assert_eq!(short(b"return 1"), "[string \"return 1\"]");
        assert_eq!(short(b"local M = {}\nreturn M"), "[string \"local M = {}...\"]");
    }
}
