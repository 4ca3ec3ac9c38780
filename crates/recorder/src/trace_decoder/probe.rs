//! Learning the layout for a VM and proving it with a compiled loop that
//! reads its own stack.

use std::ffi::CStr;

use super::own_vm::{object_range, shared_code_words, OwnVm, SAME_BUILD_WORDS};
use super::*;

/// Whether this build's layout was learned and proved for the VM whose
/// global state is `g`, and why not.
pub(super) static LEARNED_FOR: AtomicUsize = AtomicUsize::new(0);
pub(super) static PROBE_STATE: AtomicUsize = AtomicUsize::new(0);
pub(super) static PROBE_TEXT: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());
pub(super) static PROBE_WHY: std::sync::Mutex<&'static str> = std::sync::Mutex::new("");

/// The probe's chunk, run in a VM of our own (`own_vm`): a compiled loop
/// calling, through a function it inlines, the FFI function
/// `probe_from_trace` (its address the chunk's argument). Lines 3 and 6 are
/// where the calls are; the loop's callers are at lines 10 and 12.
pub(super) const PROBE_CHUNK: &str = "local probe = require('ffi').cast('int (*)(int)', ...)\n\
local function leaf(i) return probe(i) end\n\
local function inlined(i) return leaf(i) end\n\
local function run(n)\n\
  local s = 0\n\
  for i = 1, n do s = s + inlined(i) end\n\
  return s\n\
end\n\
local function caller(n)\n\
  return (run(n))\n\
end\n\
local s = caller(4000)\n\
return s\n";
pub(super) const PROBE_NAME: &CStr = c"=tecs.profile.probe";
/// The Lua frames below the loop's, as `lua_getinfo` names them, caller
/// first.
const PROBE_CALLERS: [&str; 2] = ["tecs.profile.probe:12", "tecs.profile.probe:10"];

/// Proves, once per VM, that the tick handler can read compiled code's
/// stacks in `lua`'s VM: arms the C-function layout (which finds the VM
/// state), then runs the probe in a VM of our own of the same build. The
/// program's VM is only read: nothing is loaded, interned or registered
/// there.
pub fn prove(lua: &Lua) -> Result<(), &'static str> {
    let mut g = 0usize;
    let slot = &mut g;
    // SAFETY: exec_raw hands a live state; a GC64 thread header keeps its
    // global state's address at offset 16 (checked by `running_c::arm`).
    unsafe { lua.exec_raw::<()>((), |l| *slot = at::<usize>(l as usize + 16)) }
        .map_err(|_| "the VM's state could not be read")?;
    running_c::arm(lua, g)?;
    learn(g)
}

/// Learns and proves the layout for the VM whose global state is `g`, once
/// per VM. The C-function layout (`running_c`) must be armed for it.
fn learn(g: usize) -> Result<(), &'static str> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        return Err("compiled code is read in the handler only on x86-64 Linux");
    }
    if LEARNED_FOR.load(Ordering::Acquire) == g && g != 0 {
        return Ok(());
    }
    let Some((rg, vmstate_off, cur_l_off, gc64)) = running_c::layout() else {
        return Err("the VM state at each tick is unknown (see cFunctionLeavesNote)");
    };
    if !gc64 || rg != g {
        return Err("this LuaJIT build is not a GC64 build");
    }
    LEARNED_FOR.store(0, Ordering::Release);
    if BUFFERS.load(Ordering::Acquire).is_null() {
        // Zeroed on the heap: every field of the halves is valid as zeros,
        // and they are too large to build on a stack.
        let layout = std::alloc::Layout::new::<Buffers>();
        // SAFETY: `layout` is non-zero-sized; all-zero bytes are a valid
        // `Buffers` (integers, arrays of them, UnsafeCell around them).
        let b = unsafe { std::alloc::alloc_zeroed(layout) as *mut Buffers };
        if b.is_null() {
            return Err("out of memory");
        }
        BUFFERS.store(b, Ordering::Release);
    }
    let (lo, hi) = object_range(take_ticks as *const () as usize).ok_or("this module's code could not be located")?;
    OWN_CODE[0].store(lo, Ordering::Relaxed);
    OWN_CODE[1].store(hi, Ordering::Relaxed);
    let vm = OwnVm::new()?;
    let own = vm.global();
    if own == 0 || shared_code_words(g, own, vm.code) < SAME_BUILD_WORDS {
        return Err("the program's VM is not of the build its LuaJIT makes (no dispatch table in common)");
    }
    // The layout is the build's: the probe proves it on our VM's state,
    // and it is then moved to the program's.
    let place = |g: usize, j: usize| {
        G.store(g, Ordering::Relaxed);
        VMSTATE_AT.store(g + vmstate_off, Ordering::Relaxed);
        CUR_L_AT.store(g + cur_l_off, Ordering::Relaxed);
        JIT_BASE_AT.store(g + cur_l_off + 8, Ordering::Relaxed);
        J_AT.store(j, Ordering::Relaxed);
    };
    place(own, 0);
    let proved = run_probe(&vm);
    let j_off = J_AT.load(Ordering::Relaxed).wrapping_sub(own);
    drop(vm);
    for c in &CACHED {
        c[0].store(0, Ordering::Relaxed);
    }
    place(g, if proved.is_ok() { g + j_off } else { 0 });
    proved?;
    LEARNED_FOR.store(g, Ordering::Release);
    Ok(())
}

/// This module's own code (start, end), learned at start.
pub(super) static OWN_CODE: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// States of the probe: waiting for a call from a trace, done, failed.
pub(super) const PROBE_WAITING: usize = 1;
pub(super) const PROBE_DONE: usize = 2;
pub(super) const PROBE_FAILED: usize = 3;

pub(super) fn probe_fail(why: &'static str) {
    *PROBE_WHY.lock().unwrap_or_else(|e| e.into_inner()) = why;
    PROBE_STATE.store(PROBE_FAILED, Ordering::SeqCst);
}

/// Called by the probe loop through the FFI; from a trace, once, reads its
/// own stack as the handler would.
pub(super) extern "C" fn probe_from_trace(i: c_int) -> c_int {
    if PROBE_STATE.load(Ordering::SeqCst) != PROBE_WAITING {
        return i;
    }
    // SAFETY: the VM state's address was set by `learn` for this VM.
    let vmstate = unsafe { at::<i32>(VMSTATE_AT.load(Ordering::Relaxed)) };
    if vmstate < 1 {
        return i; // still interpreted: the loop is not compiled yet
    }
    let t = vmstate as usize;
    let g = G.load(Ordering::Relaxed);
    // jit_State follows the global state; its trace array holds this trace.
    let found = J_SEARCH.step_by(8).map(|k| g + k).find(|&j| {
        J_AT.store(j, Ordering::Relaxed);
        trace_header(t).is_some()
    });
    for c in &CACHED {
        c[0].store(0, Ordering::Relaxed);
    }
    if found.is_none() {
        J_AT.store(0, Ordering::Relaxed);
        return {
            probe_fail("the trace array was not found after the global state");
            i
        };
    }
    let rsp: usize;
    // SAFETY: reads the stack pointer into a register; no memory access.
    unsafe { std::arch::asm!("mov {}, rsp", out(reg) rsp, options(nomem, nostack, preserves_flags)) };
    let rip = probe_from_trace as *const () as usize;
    let Some(b) = buffers() else {
        probe_fail("no buffer");
        return i;
    };
    // SAFETY: not armed, so no handler uses the halves; on the VM thread.
    let c = unsafe { &mut (*b.halves[0].get()).scratch };
    // SAFETY: on the VM thread, in trace `t` (its FFI call).
    match unsafe { read_trace_stack(t, rip, rsp, c, 64) } {
        Ok(()) => {
            let mut text = PROBE_TEXT.lock().unwrap_or_else(|e| e.into_inner());
            text.clear();
            text.resize(64 * 1024, 0);
            let mut out = Out { buf: &mut text[..], len: 0 };
            // SAFETY: the frames were just read from the live stack.
            let ok = unsafe { write_stack(&mut out, c) };
            let n = out.len;
            text.truncate(n);
            if ok {
                PROBE_STATE.store(PROBE_DONE, Ordering::SeqCst);
            } else {
                drop(text);
                probe_fail("the probe's stack did not fit");
            }
        }
        Err(m) => probe_fail(match m {
            Miss::Trace => "the probe's trace could not be read",
            Miss::Address => "no return address into the probe's trace was found",
            Miss::Frame => "the probe's frames did not validate",
            Miss::Function => "the probe's inlined function is not a constant",
            Miss::Full => "the probe's stack did not fit",
        }),
    }
    i
}

/// Runs the probe loop in `vm` until it is compiled and has read its own
/// stack, and checks the stack read against the one LuaJIT would dump.
pub(super) fn run_probe(vm: &OwnVm) -> Result<(), &'static str> {
    *PROBE_WHY.lock().unwrap_or_else(|e| e.into_inner()) = "the probe loop was never compiled (is the JIT off?)";
    PROBE_STATE.store(PROBE_WAITING, Ordering::SeqCst);
    let ran = vm.run(PROBE_CHUNK, PROBE_NAME, probe_from_trace as *const () as *mut c_void);
    let state = PROBE_STATE.swap(0, Ordering::SeqCst);
    if !ran {
        return Err("the probe loop failed");
    }
    if state != PROBE_DONE {
        return Err(*PROBE_WHY.lock().unwrap_or_else(|e| e.into_inner()));
    }
    let text = PROBE_TEXT.lock().unwrap_or_else(|e| e.into_inner()).clone();
    check_probe_stack(&text, PROBE_CALLERS.join("\u{1f}").as_bytes())
}

/// The probe's stack must end in the loop's frames, and the Lua frames
/// below them must be those `lua_getinfo` gives for the probe's caller
/// (within the depth both read).
pub(super) fn check_probe_stack(read: &[u8], callers: &[u8]) -> Result<(), &'static str> {
    let frames: Vec<&[u8]> = read.split(|&b| b == SEP).collect();
    let name = &PROBE_NAME.to_bytes()[1..];
    let frame = |line: &str| [name, b":", line.as_bytes()].concat();
    let n = frames.len();
    let Some(run_at) = (0..n).rev().find(|&i| frames[i] == frame("6")) else {
        return Err("the stack read in a trace does not end at the probe loop's line");
    };
    if !frames[run_at + 1..].iter().all(|f| *f == frame("3") || *f == frame("2")) {
        return Err("the stack read in a trace does not end at the probe loop's line");
    }
    // C frames (`@0x...`, `[builtin#...]`) have no line to compare.
    let is_lua = |f: &&[u8]| !f.starts_with(b"@0x") && !f.starts_with(b"[builtin#");
    let below: Vec<&[u8]> = frames[..run_at].iter().copied().filter(is_lua).collect();
    let want: Vec<&[u8]> = if callers.is_empty() { Vec::new() } else { callers.split(|&b| b == SEP).collect() };
    let k = below.len().min(want.len());
    if (k == 0 && below.len() + want.len() > 0) || below[below.len() - k..] != want[want.len() - k..] {
        return Err("the callers read in a trace differ from the ones lua_getinfo gives");
    }
    Ok(())
}

/// Arms the handler's reads for a session: `depth` frames kept, zones read
/// from the table at `zones` (0 for none).
pub fn arm(depth: usize, zones: usize) {
    if LEARNED_FOR.load(Ordering::Acquire) == 0 {
        return;
    }
    drain(|_| {});
    drain(|_| {});
    DEPTH.store(depth.min(MAX_FRAMES - 1), Ordering::Relaxed);
    for c in &CACHED {
        c[0].store(0, Ordering::Relaxed);
    }
    LAST_TRACE.store(0, Ordering::Relaxed);
    CACHED_MAX.store(0, Ordering::Relaxed);
    ZONES.store(zones, Ordering::Relaxed);
    READ.store(0, Ordering::Relaxed);
    for m in MISSES.iter().chain(&NAMED) {
        m.store(0, Ordering::Relaxed);
    }
    ARMED.store(true, Ordering::Release);
}

/// From now on the handler reads no trace.
pub fn disarm() {
    ARMED.store(false, Ordering::Release);
}

/// Whether the handler reads traces now.
pub fn armed() -> bool {
    ARMED.load(Ordering::Acquire)
}
