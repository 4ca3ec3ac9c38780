//! The garbage collector and the JIT compiler, read in the tick handler.
//!
//! A tick in the collector (VM state GC) or the compiler (RECORD, OPT,
//! ASM) interrupts C code that the interpreter called. Before such a call
//! the interpreter saves its frame: `BASE` in the running thread's `base`,
//! and `PC` (the instruction after the running one) in the C frame of the
//! VM call (`SAVE_PC`, `CFRAME_OFS_PC` in `lj_frame.h`). The collector
//! steps from the instructions that allocate (`TNEW`, `CAT`, ...:
//! `lj_gc_step_fixtop` after saving both), the compiler from the hot
//! counters (`lj_trace_hot`) and the recording dispatch (`lj_dispatch_ins`,
//! which stores the PC itself), inside a protected call whose own C frame
//! holds the thread instead of a PC (the frame before it holds the PC). So
//! the frame at `base` is the function that allocated or is being
//! compiled, at its line. LuaJIT's hook would take the same frame at the
//! next instruction.
//!
//! A collector step a trace called (`g->jit_base` set: the trace's own
//! frames are in its registers and snapshots, not in the thread's stack)
//! is read as a tick at that call where the trace is proved
//! (`walk::read_trace_gc_step`).
//!
//! Left to the hook, counted by reason ([`StateMiss`]): a compile run from
//! a trace, a collector step from one not proved, a trace
//! exit being handled (state EXIT: the stack is being rebuilt from a
//! snapshot), a C function at `base` (a library function that allocated:
//! its caller's PC is not the one saved), and a frame that does not
//! validate: the C frame must lie on this thread's stack above the
//! interrupted stack pointer, `base` inside the thread's stack, the slot
//! below it a Lua function and the saved PC inside its bytecode, all read
//! through the fault-safe reader before anything is trusted.

use super::*;

use super::interp::{in_bytecode, read_two};
use super::running_c::self_read;

/// `~LJ_VMST_GC`, `~LJ_VMST_EXIT`, and the compiler's `~LJ_VMST_RECORD`
/// to `~LJ_VMST_ASM`.
pub(super) const VMSTATE_GC: i32 = -3;
const VMSTATE_EXIT: i32 = -4;
const VMSTATE_JIT: std::ops::RangeInclusive<i32> = -7..=-5;
/// `~LJ_VMST_RECORD`: the trace recorder's state.
pub(super) const VMSTATE_RECORD: i32 = -5;
/// `~LJ_VMST_ASM`: the assembler's state.
pub(super) const VMSTATE_ASM: i32 = -7;
/// `CFRAME_OFS_PC` of x86-64 GC64 builds off Windows: the interpreter's
/// saved PC in the C frame of a VM call.
const CFRAME_OFS_PC: usize = 24;
/// `CFRAME_OFS_PREV` follows it: the C frame of the VM call before.
/// `CFRAME_RAWMASK`: the low bits of `L->cframe` are flags.
const CFRAME_FLAGS: usize = 3;

/// Why a tick in the collector or the compiler was left to the hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum StateMiss {
    /// Run from a trace (`g->jit_base` set): a compile run, or a collector
    /// step whose trace was not proved.
    Trace = 0,
    /// A trace exit being handled (state EXIT).
    Exit,
    /// The frame at the thread's base is a C function's.
    CFunction,
    /// The saved frame did not validate, or a frame below did not.
    Frame,
    /// The buffer between two callbacks was full.
    Full,
}
const STATE_MISS_KINDS: usize = 5;
/// Names of the [`StateMiss`] kinds, in order, for `stats()`.
pub const STATE_MISS_NAMES: [&str; STATE_MISS_KINDS] = ["trace", "exit", "cFunction", "frame", "full"];
static STATE_MISSES: [AtomicU64; STATE_MISS_KINDS] = [const { AtomicU64::new(0) }; STATE_MISS_KINDS];

/// Whether `vmstate` is the collector's or the compiler's (a trace exit
/// included): a state this module reads or counts.
pub(super) fn is_vm_state(vmstate: i32) -> bool {
    vmstate == VMSTATE_GC || vmstate == VMSTATE_EXIT || VMSTATE_JIT.contains(&vmstate)
}

/// The state letter LuaJIT gives a sample of `vmstate` (one of ours).
pub(super) fn letter(vmstate: i32) -> u8 {
    if vmstate == VMSTATE_GC {
        b'G'
    } else {
        b'J'
    }
}

pub(super) fn count_state_miss(m: StateMiss, n: u64) {
    STATE_MISSES[m as usize].fetch_add(n, Ordering::Relaxed);
}

/// Ticks in the collector or the compiler left to the hook since the last
/// arm, by reason ([`StateMiss`] order).
pub fn state_counts() -> [u64; STATE_MISS_KINDS] {
    let mut m = [0; STATE_MISS_KINDS];
    for (o, c) in m.iter_mut().zip(&STATE_MISSES) {
        *o = c.load(Ordering::Relaxed);
    }
    m
}

/// Clears the counts (a session's arm).
pub fn reset_state_counts() {
    for c in &STATE_MISSES {
        c.store(0, Ordering::Relaxed);
    }
}

/// Reads the stack the collector or the compiler runs for: the Lua
/// function at the running thread's base at its saved PC, then the frames
/// below it, leaf first into `c`.
///
/// # Safety
/// Must run on the VM thread, with the layout armed, while the VM state is
/// `vmstate`, one of [`is_vm_state`].
pub(super) unsafe fn read_state_stack(
    vmstate: i32,
    rsp: usize,
    c: &mut Captured,
    limit: usize,
) -> Result<(), StateMiss> {
    c.len = 0;
    c.by_proto = false;
    c.cut = false;
    if vmstate == VMSTATE_EXIT {
        return Err(StateMiss::Exit);
    }
    if at::<usize>(JIT_BASE_AT.load(Ordering::Relaxed)) != 0 {
        // A collector step compiled code called: read as a tick at that
        // call, where the trace can be proved (`walk::read_trace_gc_step`).
        if vmstate == VMSTATE_GC && super::walk::read_trace_gc_step(rsp, c, limit).is_ok() {
            return Ok(());
        }
        return Err(StateMiss::Trace);
    }
    let (l, h, cframe) = vm_call(rsp).ok_or(StateMiss::Frame)?;
    let (base, stack, size) =
        (le(&h, L_BASE, 8) as usize, le(&h, L_STACK, 8) as usize, le(&h, L_STACKSIZE, 4) as usize);
    if base < stack + 16 || base >= stack + 8 * size || base % 8 != 0 {
        return Err(StateMiss::Frame);
    }
    // The collector can be resizing this very stack (it shrinks the
    // stacks it traverses): the stack's first slot and the function's
    // slot are read together through the kernel, so a block moved or
    // unmapped under the header is refused before any direct read. An
    // allocation is one mapping: its two ends readable, what lies between
    // is too.
    let (mut first, mut slot) = ([0u8; 8], [0u8; 8]);
    if !read_two(stack, &mut first, base - 16, &mut slot) {
        return Err(StateMiss::Frame);
    }
    let func = slot_function(u64::from_le_bytes(slot)).ok_or(StateMiss::Frame)?;
    let mut o = [0u8; FN_PC + 8];
    if !self_read(func, &mut o) || o[OBJ_GCT] != GCT_FUNC {
        return Err(StateMiss::Frame);
    }
    if o[FN_FFID] != FF_LUA {
        return Err(StateMiss::CFunction);
    }
    let bc = le(&o, FN_PC, 8) as usize;
    let mut pt = [0u8; PROTO_SIZEBC + 4];
    if bc < PROTO_SIZE || !self_read(bc - PROTO_SIZE, &mut pt) {
        return Err(StateMiss::Frame);
    }
    let sizebc = le(&pt, PROTO_SIZEBC, 4) as usize;
    let mut saved = [0u8; 16];
    if !self_read(cframe + CFRAME_OFS_PC, &mut saved) {
        return Err(StateMiss::Frame);
    }
    let mut pc = le(&saved, 0, 8) as usize;
    if !in_bytecode(pc, bc, sizebc) {
        // The compiler runs in a protected C call (`lj_vm_cpcall`), whose
        // C frame has no Lua frame of its own and holds the thread as its
        // PC: the interpreter's PC is in the C frame before it.
        let prev = le(&saved, 8, 8) as usize & !CFRAME_FLAGS;
        if pc != l || prev <= cframe || prev - rsp > CFRAME_REACH {
            return Err(StateMiss::Frame);
        }
        pc = self_word(prev + CFRAME_OFS_PC).ok_or(StateMiss::Frame)? as usize;
        if !in_bytecode(pc, bc, sizebc) {
            return Err(StateMiss::Frame);
        }
    }
    // The frame is the saved one of a live thread whose stack does not
    // move while C code it called runs: the frames below are read as below
    // an interpreted frame.
    if !c.push(Frame::of(func, pc), limit) {
        return Ok(());
    }
    walk_frames(l, stack, base - 8, c, limit).map_err(|_| StateMiss::Frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::alloc_probe::{InSample, ALLOCATIONS};
    use std::sync::atomic::AtomicBool;

    static SENT: AtomicUsize = AtomicUsize::new(0);
    static ALLOCATED: AtomicU64 = AtomicU64::new(0);
    static STOP: AtomicBool = AtomicBool::new(false);

    /// A signal handler that takes a tick as the session's does.
    extern "C" fn on_signal(_sig: c_int, _info: *mut libc::siginfo_t, ctx: *mut c_void) {
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        {
            let _in = InSample::enter();
            take_ticks(1, ctx);
        }
        ALLOCATED.fetch_add(ALLOCATIONS.load(Ordering::SeqCst) - before, Ordering::SeqCst);
    }

    /// Runs `chunk` (given `done`) while another thread sends ticks to this
    /// one, until `state` stacks were read `want` times or too many ticks
    /// were sent in vain; returns the stacks read in that state.
    fn read_in_state(lua: &Lua, chunk: &str, name: &str, state: u8, want: u32) -> Vec<(String, u32)> {
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
        SENT.store(0, Ordering::SeqCst);
        let sender = std::thread::spawn(move || {
            while !STOP.load(Ordering::SeqCst) {
                // SAFETY: `me` is a live thread of this process until joined.
                unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGUSR2) };
                SENT.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_micros(300));
            }
        });
        let found = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let seen = found.clone();
        // Drains on the VM thread, outside the handler, as the callback does.
        let done = lua
            .create_function(move |_, ()| {
                let mut f = seen.borrow_mut();
                drain(|t| {
                    if t.state == state {
                        f.push((String::from_utf8_lossy(t.stack).into_owned(), t.count));
                    }
                });
                Ok(f.iter().map(|s| s.1).sum::<u32>() >= want || SENT.load(Ordering::SeqCst) > 100_000)
            })
            .unwrap();
        let _: () = lua.load(chunk).set_name(name).call(done).unwrap();
        STOP.store(true, Ordering::SeqCst);
        sender.join().unwrap();
        // SAFETY: puts back the disposition read above.
        unsafe { libc::sigaction(libc::SIGUSR2, &old, std::ptr::null_mut()) };
        let v = found.borrow().clone();
        v
    }

    #[test]
    fn ticks_in_the_collector_and_the_compiler_are_read_at_their_frame_without_allocating() {
        let _turn = crate::sys::one_session_at_a_time();
        // SAFETY: the FFI is needed for the probe; nothing else is loaded.
        let lua = unsafe { Lua::unsafe_new() };
        assert_eq!(prove(&lua), Ok(()));
        arm(16, 0);
        reset_state_counts();
        ALLOCATED.store(0, Ordering::SeqCst);
        // The collector steps only at the table constructor of line 2 (the
        // loop's other instructions allocate nothing): every tick in it is
        // that line's, below the driver's call on line 4.
        let chunk = "local done = ...\n\
                     local function alloc() local t for i = 1, 200 do t = { i } end return t end\n\
                     jit.off(alloc, true)\n\
                     while not done() do alloc() end\n";
        let gc = read_in_state(&lua, chunk, "=test.gc", b'G', 30);
        assert!(gc.iter().map(|s| s.1).sum::<u32>() >= 30, "{gc:?} {:?}", state_counts());
        for (stack, _) in &gc {
            assert!(stack.ends_with("test.gc:4\u{1f}test.gc:2"), "not the allocating frame: {stack:?}");
        }
        // The compiler runs for the loops of chunks made anew each round
        // (the driver is never compiled): every tick in it is a new chunk's
        // loop, below the driver's call on line 3.
        let chunk = "local done = ...\n\
                     local function drive() local n = 0 while not done() do n = n + 1\n\
                     load('local s = 0 for i = 1, 300 do s = s + i * ' .. n .. ' end return s', '=test.new')() end end\n\
                     jit.off(drive, true)\n\
                     drive()\n";
        let jit = read_in_state(&lua, chunk, "=test.jit", b'J', 30);
        assert!(jit.iter().map(|s| s.1).sum::<u32>() >= 30, "{jit:?} {:?}", state_counts());
        for (stack, _) in &jit {
            assert!(stack.ends_with("test.jit:3\u{1f}test.new:1"), "not the compiled chunk's frame: {stack:?}");
        }
        disarm();
        assert_eq!(ALLOCATED.load(Ordering::SeqCst), 0, "the handler allocated");
    }
}
