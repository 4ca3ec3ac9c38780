//! Which C function the VM thread is inside when a tick arrives.
//!
//! LuaJIT runs the profiler callback at the next bytecode it dispatches. A
//! tick taken inside a C function (`love.graphics.present`, `table.sort`,
//! `os.clock`) therefore reaches the callback after that function has
//! returned, and its stack dump ends at the calling Lua line: the C function
//! is gone. The tick handler runs on the VM thread at the moment of the
//! tick, so it can see the function still on the Lua stack: when the VM
//! state is "C", the running thread's `base` is the C function's frame and
//! the slot below it holds the function. The handler notes that function
//! here; the callback takes the note when LuaJIT reports state "C".
//!
//! Reading that takes four facts about the host LuaJIT's structures that
//! no API gives: the offsets of `vmstate` and `cur_L` in the global state,
//! whether it is a GC64 build, and where `base` sits in a `lua_State`.
//! They are found when a session starts (`arm`), by reading the structures
//! while a probe C function of ours runs, and every fact is checked
//! against something known (the probe's own function object, its argument
//! count, the running thread). If any check fails the feature stays off
//! and `stats()` says why. At tick time only the global state is read
//! directly; the running thread's header, its stack slot and the function
//! object are read through `process_vm_readv` on our own process, which
//! fails with an error rather than a fault on an address that is not
//! mapped, so a stale slot in the middle of a VM transition, or a stack
//! moved by another OS thread driving the VM, cannot crash the program.
//! A thread with no C frame (host code the VM returned to) names no
//! function: its slot holds the last C function that ran, not one that
//! runs now.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

use mlua::ffi;
use mlua::Lua;

use crate::sys::tick_note::{RunningC, TickNote, TickOrigin, NOTE_SLOTS};
use tecs_profile_format::profile::state_index;

/// `~LJ_VMST_C`: the VM state while a C function runs.
const VMSTATE_C: i32 = -2;
/// `~LJ_TFUNC` as stored in a GC object's `gct` byte.
const GCT_FUNC: u8 = 8;
/// `~LJ_TTHREAD` as stored in a GC object's `gct` byte.
const GCT_THREAD: u8 = 6;
/// `LJ_TFUNC` in the top 17 bits of a GC64 TValue.
const ITYPE_FUNC_GC64: u64 = 0x1FFF7;
/// Function ids: 0 is a Lua function, 1 a plain C function, more a builtin.
const FF_LUA: u8 = 0;
const FF_C: u8 = 1;
/// `CFRAME_RAWMASK`: the low two bits of a `cframe` reference are flags.
const CFRAME_RAW_MASK: usize = !3;
/// Most slots a stack has past its `maxstack` (`LJ_STACK_EXTRA` + 1 is 6
/// to 9 in LuaJIT 2.1 builds).
const STACK_EXTRA_MAX: usize = 16;
/// Bytes of the global state searched for the fields found by value.
const GLOBAL_SCAN: usize = 1024;

/// Offsets of one build's `lua_State` and function object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    gc64: bool,
    glref: usize,
    base: usize,
    maxstack: usize,
    stack: usize,
    /// The C frame the thread runs in: null while no VM call is active on it
    /// (a suspended coroutine, or a thread the host returned from).
    cframe: usize,
    stacksize: usize,
    /// `sizeof(lua_State)` in LuaJIT's own sources: the main thread sits
    /// right before the global state in LuaJIT's one allocation
    /// (`GG_State`).
    thread_size: usize,
    /// The function slot is this many bytes below a frame's base.
    func_slot: usize,
    gct: usize,
    fn_ffid: usize,
    fn_f: usize,
}

const GC64: Shape = Shape {
    gc64: true,
    glref: 16,
    base: 32,
    maxstack: 48,
    stack: 56,
    cframe: 80,
    stacksize: 88,
    thread_size: 96,
    func_slot: 16,
    gct: 9,
    fn_ffid: 10,
    fn_f: 40,
};

const GC32: Shape = Shape {
    gc64: false,
    glref: 8,
    base: 16,
    maxstack: 32,
    stack: 36,
    cframe: 48,
    stacksize: 56,
    thread_size: 64,
    func_slot: 8,
    gct: 5,
    fn_ffid: 6,
    fn_f: 24,
};

/// The armed layout: `G == 0` means off.
static G: AtomicUsize = AtomicUsize::new(0);
static VMSTATE_OFF: AtomicUsize = AtomicUsize::new(0);
static CUR_L_OFF: AtomicUsize = AtomicUsize::new(0);
static IS_GC64: AtomicBool = AtomicBool::new(true);
pub(crate) static PID: AtomicI32 = AtomicI32::new(0);
/// What the ticks of one source found since its last `take`: the C
/// functions, each as 0 (free) or `NOTE_SET | ffid << 48 | C address`, and
/// how many ticks found each, and the ticks by VM state. A callback can
/// stand for many ticks (compiled code in function precision reaches no
/// safe point for a while, and calls C functions meanwhile); more functions
/// than slots are counted as C ticks with no function. Each source has its
/// own set: an allocation session attached to a sampling session shares its
/// callback, and each takes the note of its own ticks.
struct NoteSet {
    notes: [AtomicUsize; NOTE_SLOTS],
    note_ticks: [AtomicUsize; NOTE_SLOTS],
    /// Ticks by the VM state they found (`state_index`).
    states: [AtomicUsize; 5],
    /// `take` is reading: a tick meanwhile notes nothing (it is then
    /// missing from the next counts, whose sum no longer matches LuaJIT's,
    /// so that the callback uses LuaJIT's state for them).
    in_take: AtomicBool,
}

impl NoteSet {
    const fn new() -> NoteSet {
        NoteSet {
            notes: [const { AtomicUsize::new(0) }; NOTE_SLOTS],
            note_ticks: [const { AtomicUsize::new(0) }; NOTE_SLOTS],
            states: [const { AtomicUsize::new(0) }; 5],
            in_take: AtomicBool::new(false),
        }
    }

    fn of(origin: TickOrigin) -> &'static NoteSet {
        static SETS: [NoteSet; 2] = [NoteSet::new(), NoteSet::new()];
        match origin {
            TickOrigin::Timer => &SETS[0],
            TickOrigin::Allocator => &SETS[1],
        }
    }
}
const NOTE_SET: usize = 1 << 63;
const ADDR_MASK: usize = (1 << 48) - 1;

/// What the probe found, read back by `arm` after the call.
static PROBE_FN: AtomicUsize = AtomicUsize::new(0);
static PROBE_G: AtomicUsize = AtomicUsize::new(0);
static PROBE_RESULT: AtomicUsize = AtomicUsize::new(0);
static PROBE_ERR: std::sync::Mutex<&'static str> = std::sync::Mutex::new("");

/// Finds the layout while a probe of ours runs on `lua`'s current thread,
/// and arms the tick handler's reads for the global state `g`. Returns why
/// not when any check fails.
pub fn arm(lua: &Lua, g: usize) -> Result<(), &'static str> {
    disarm();
    // SAFETY: `getpid` has no preconditions.
    PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    if !self_read_works() {
        return Err("process_vm_readv is not permitted here");
    }
    PROBE_G.store(g, Ordering::Relaxed);
    PROBE_RESULT.store(0, Ordering::Relaxed);
    *PROBE_ERR.lock().unwrap_or_else(|e| e.into_inner()) = "the probe did not run";
    let mut called = false;
    let flag = &mut called;
    // SAFETY: exec_raw runs the closure inside a protected C call on the
    // current thread with room for 3 more slots; the probe is pushed, its
    // two arguments after it, and `lua_pcall` pops all three (and pushes
    // one error value, dropped by exec_raw's stack guard, on failure).
    let ran = unsafe {
        lua.exec_raw::<()>((), |l| {
            ffi::lua_pushcfunction(l, probe);
            PROBE_FN.store(ffi::lua_topointer(l, -1) as usize, Ordering::Relaxed);
            ffi::lua_pushnil(l);
            ffi::lua_pushnil(l);
            *flag = ffi::lua_pcall(l, 2, 0, 0) == 0;
        })
    };
    if ran.is_err() || !called {
        return Err("the layout probe could not run");
    }
    let packed = PROBE_RESULT.load(Ordering::Relaxed);
    if packed == 0 {
        return Err(*PROBE_ERR.lock().unwrap_or_else(|e| e.into_inner()));
    }
    IS_GC64.store(packed & 1 == 1, Ordering::Relaxed);
    VMSTATE_OFF.store((packed >> 1) & 0xFFFF, Ordering::Relaxed);
    CUR_L_OFF.store((packed >> 17) & 0xFFFF, Ordering::Relaxed);
    clear();
    G.store(g, Ordering::Release);
    Ok(())
}

/// From now on the tick handler notes nothing.
pub fn disarm() {
    G.store(0, Ordering::Release);
    clear();
}

/// Clears the notes of every source.
fn clear() {
    take(TickOrigin::Timer);
    take(TickOrigin::Allocator);
}

/// Takes the note of `origin`'s ticks (and clears it).
pub fn take(origin: TickOrigin) -> TickNote {
    let set = NoteSet::of(origin);
    set.in_take.store(true, Ordering::SeqCst);
    let mut note = TickNote::default();
    for ((out, v), n) in note.running_c.iter_mut().zip(&set.notes).zip(&set.note_ticks) {
        let (v, n) = (v.swap(0, Ordering::SeqCst), n.swap(0, Ordering::SeqCst));
        if v & NOTE_SET != 0 && n > 0 {
            let ffid = ((v >> 48) & 0xFF) as u8;
            let c = if ffid == FF_C { RunningC::Function(v & ADDR_MASK) } else { RunningC::Builtin(ffid) };
            *out = Some((c, n.min(u32::MAX as usize) as u32));
        }
    }
    for (out, n) in note.states.iter_mut().zip(&set.states) {
        *out = n.swap(0, Ordering::SeqCst).min(u32::MAX as usize) as u32;
    }
    set.in_take.store(false, Ordering::SeqCst);
    note
}

fn fail(why: &'static str) -> c_int {
    *PROBE_ERR.lock().unwrap_or_else(|e| e.into_inner()) = why;
    0
}

unsafe extern "C-unwind" fn sentinel_panic(_l: *mut ffi::lua_State) -> c_int {
    0
}

/// Reads the word of `size` bytes (4 or 8) at `addr`.
///
/// # Safety
/// `addr` must be readable for `size` bytes.
unsafe fn word(addr: usize, size: usize) -> usize {
    if size == 8 {
        std::ptr::read_unaligned(addr as *const u64) as usize
    } else {
        std::ptr::read_unaligned(addr as *const u32) as usize
    }
}

/// The probe: runs as a C function called with two arguments, so the VM
/// state is "C", the running thread is `l`, its `base` is this call's
/// frame and the slot below holds this very function.
unsafe extern "C-unwind" fn probe(l: *mut ffi::lua_State) -> c_int {
    let g = PROBE_G.load(Ordering::Relaxed);
    let la = l as usize;
    // SAFETY (whole body): `l` is the live running thread, whose header
    // is at least 64 bytes (96 in GC64 builds); `g` is its live global
    // state, embedded with the main thread in LuaJIT's GG_State, which is
    // far larger than `GLOBAL_SCAN` bytes past `g`. Reads of the stack and
    // of the function object happen only after the pointers to them have
    // been checked against the thread's own stack and argument count.
    let shape = if word(la + GC64.glref, 8) == g {
        GC64
    } else if word(la + GC32.glref, 4) == g {
        GC32
    } else {
        return fail("the thread header does not point to the global state");
    };
    let ptr = if shape.gc64 { 8 } else { 4 };
    let base = word(la + shape.base, 8);
    let top = word(la + shape.base + 8, 8);
    let nargs = ffi::lua_gettop(l) as usize;
    if top < base || top - base != nargs * 8 {
        return fail("the thread's base and top do not frame the probe's arguments");
    }
    let stack = word(la + shape.stack, ptr);
    let stacksize = word(la + shape.stacksize, 4);
    // `maxstack` sits a few extra slots (`LJ_STACK_EXTRA`, which differs
    // between versions) before the end of the stack's `stacksize` slots.
    let (end, maxstack) = (stack + stacksize * 8, word(la + shape.maxstack, ptr));
    if maxstack >= end || end - maxstack > STACK_EXTRA_MAX * 8 || top > end {
        return fail("the thread's stack size does not match its stack");
    }
    if base < stack + shape.func_slot {
        return fail("the probe's frame is not on the thread's stack");
    }
    // Inside a protected call the thread's C frame is a frame of the C
    // stack this probe runs on, close above its own locals.
    let here = &stack as *const usize as usize;
    let cframe = word(la + shape.cframe, 8) & CFRAME_RAW_MASK;
    if cframe <= here || cframe - here > 1 << 20 {
        return fail("the thread's C frame is not on this C stack");
    }
    let Some(func) = function_in_slot(shape, word(base - shape.func_slot, 8) as u64) else {
        return fail("the probe's function slot holds no function");
    };
    if func != PROBE_FN.load(Ordering::Relaxed) {
        return fail("the probe's function slot holds another object");
    }
    let probe_addr = probe as *const c_void as usize;
    if *((func + shape.gct) as *const u8) != GCT_FUNC
        || *((func + shape.fn_ffid) as *const u8) != FF_C
        || word(func + shape.fn_f, 8) != probe_addr
    {
        return fail("the function object's layout is not the expected one");
    }
    // cur_L follows the panic function and two bytecode words in every
    // LuaJIT 2.1: find the panic function by setting a unique one.
    let old = ffi::lua_atpanic(l, sentinel_panic);
    let sentinel = sentinel_panic as *const c_void as usize;
    let panic_at: Vec<usize> = (0..GLOBAL_SCAN).step_by(8).filter(|&o| word(g + o, 8) == sentinel).collect();
    ffi::lua_atpanic(l, old);
    let [panic_off] = panic_at[..] else {
        return fail("the panic function was not found once in the global state");
    };
    let cur_l_off = panic_off + 16;
    if word(g + cur_l_off, ptr) != la {
        return fail("the global state's current thread is not the running thread");
    }
    // vmstate comes right before the main thread's reference (LuaJIT 2.1
    // since 2020), or before the temporary buffer whose last word is that
    // reference (2.1.0-beta3 of 2017). The main thread precedes the global
    // state in GG_State.
    // Some builds (OpenResty's) add fields to the thread, so its size is
    // found: the main thread's header points back to the global state.
    let Some(main) = (shape.thread_size..=shape.thread_size + 64)
        .step_by(8)
        .map(|size| g - size)
        .find(|&m| word(m + shape.glref, ptr) == g && *((m + shape.gct) as *const u8) == GCT_THREAD)
    else {
        return fail("the main thread is not where GG_State puts it");
    };
    let back: &[usize] = if shape.gc64 { &[4, 8, 32] } else { &[4, 16] };
    let mut found: Vec<usize> = Vec::new();
    for o in (0..panic_off).step_by(ptr).filter(|&o| word(g + o, ptr) == main) {
        for &b in back {
            if o >= b && *((g + o - b) as *const i32) == VMSTATE_C && !found.contains(&(o - b)) {
                found.push(o - b);
            }
        }
    }
    let [vmstate_off] = found[..] else {
        return fail("the VM state field was not found once in the global state");
    };
    if vmstate_off > 0xFFFF || cur_l_off > 0xFFFF {
        return fail("the global state is larger than expected");
    }
    PROBE_RESULT.store((shape.gc64 as usize) | vmstate_off << 1 | cur_l_off << 17, Ordering::Relaxed);
    0
}

/// Copies `out.len()` bytes at `addr` of this process, or returns false
/// (never faults: the kernel checks the address). Async-signal-safe.
pub(crate) fn self_read(addr: usize, out: &mut [u8]) -> bool {
    let local = libc::iovec { iov_base: out.as_mut_ptr() as *mut c_void, iov_len: out.len() };
    let remote = libc::iovec { iov_base: addr as *mut c_void, iov_len: out.len() };
    // SAFETY: `local` describes `out`, writable for its length; the remote
    // range is only read, and by the kernel, which reports unmapped
    // addresses as an error.
    let n = unsafe { libc::process_vm_readv(PID.load(Ordering::Relaxed), &local, 1, &remote, 1, 0) };
    n == out.len() as isize
}

fn self_read_works() -> bool {
    let probe_value: u64 = 0x7ec5_0000_0000_7ec5;
    let mut out = [0u8; 8];
    self_read(&probe_value as *const u64 as usize, &mut out) && u64::from_ne_bytes(out) == probe_value
}

fn field(buf: &[u8], at: usize, size: usize) -> usize {
    let mut w = [0u8; 8];
    w[..size].copy_from_slice(&buf[at..at + size]);
    u64::from_le_bytes(w) as usize
}

/// Notes `n` ticks of `origin` at once (one, the ticks a blocked thread
/// missed, or the sample points one allocation crossed) and the C function
/// the VM thread is in, if it is in one. Called on the VM thread by the
/// tick handler or the allocator wrapper, before LuaJIT's handler.
pub fn note_ticks(n: usize, origin: TickOrigin) {
    let g = G.load(Ordering::Acquire);
    if g == 0 {
        return;
    }
    let set = NoteSet::of(origin);
    if set.in_take.load(Ordering::SeqCst) {
        return;
    }
    // SAFETY: `g` is the live global state of the session's VM (armed only
    // while its profiler runs); the offset was found inside it by `arm`.
    let vmstate = unsafe { std::ptr::read_volatile((g + VMSTATE_OFF.load(Ordering::Relaxed)) as *const i32) };
    // LuaJIT's own mapping: a trace number, or ~INTERP, ~C, ~GC, else JIT.
    let state = state_index(match vmstate {
        0.. => b'N',
        -1 => b'I',
        VMSTATE_C => b'C',
        -3 => b'G',
        _ => b'J',
    });
    set.states[state].fetch_add(n, Ordering::SeqCst);
    if vmstate != VMSTATE_C {
        return;
    }
    let Some(v) = running_now(g) else { return };
    for (slot, count) in set.notes.iter().zip(&set.note_ticks) {
        let cur = slot.load(Ordering::SeqCst);
        if cur == 0 {
            slot.store(v, Ordering::SeqCst);
        } else if cur != v {
            continue;
        }
        count.fetch_add(n, Ordering::SeqCst);
        return;
    }
}

/// The VM state now, if the layout is armed (on the VM thread, as
/// `note_ticks`).
pub fn vmstate_now() -> Option<i32> {
    let g = G.load(Ordering::Acquire);
    if g == 0 {
        return None;
    }
    // SAFETY: as in `note_ticks`.
    Some(unsafe { std::ptr::read_volatile((g + VMSTATE_OFF.load(Ordering::Relaxed)) as *const i32) })
}

/// The armed layout: the global state, the offsets of its VM state and
/// current thread, and whether the build is GC64; None when not armed.
pub fn layout() -> Option<(usize, usize, usize, bool)> {
    let g = G.load(Ordering::Acquire);
    (g != 0).then(|| {
        (g, VMSTATE_OFF.load(Ordering::Relaxed), CUR_L_OFF.load(Ordering::Relaxed), IS_GC64.load(Ordering::Relaxed))
    })
}

/// Whether the armed build is a GC64 build (meaningful once `arm` succeeded).
pub fn is_gc64() -> bool {
    IS_GC64.load(Ordering::Relaxed)
}

/// The function object a stack slot holds, if it holds a function.
fn function_in_slot(shape: Shape, slot: u64) -> Option<usize> {
    if shape.gc64 {
        (slot >> 47 == ITYPE_FUNC_GC64).then_some((slot & ((1 << 47) - 1)) as usize)
    } else {
        Some((slot & 0xFFFF_FFFF) as usize)
    }
}

/// The note for the C function running now (the VM is in state C).
///
/// Everything past the global state is read through the kernel: the
/// thread's header, its stack slot and the function object. On the VM
/// thread they are alive while a C function runs, but in the few
/// instructions where the VM has set state C before storing the new base
/// the slot can hold a function since freed, and a VM driven from another
/// OS thread can move its stack at any time: such reads fail instead of
/// faulting.
fn running_now(g: usize) -> Option<usize> {
    let shape = if IS_GC64.load(Ordering::Relaxed) { GC64 } else { GC32 };
    let ptr = if shape.gc64 { 8 } else { 4 };
    // SAFETY: `g` is live (see `note_ticks`); the current-thread reference
    // at the offset found by `arm` is `ptr` bytes.
    let cur = unsafe { word(g + CUR_L_OFF.load(Ordering::Relaxed), ptr) };
    if cur == 0 {
        return None;
    }
    let mut header = [0u8; 96];
    if !self_read(cur, &mut header[..shape.stacksize + 4]) {
        return None;
    }
    // State C with no C frame on the thread: host code the VM returned to
    // (a coroutine that yielded, a finished `lua_pcall`). The slot then
    // holds whatever C function ran last, which is not running now.
    if field(&header, shape.cframe, 8) & CFRAME_RAW_MASK == 0 {
        return None;
    }
    let (base, stack, size) =
        (field(&header, shape.base, 8), field(&header, shape.stack, ptr), field(&header, shape.stacksize, 4));
    if base < stack + shape.func_slot || base > stack + size * 8 {
        return None;
    }
    let mut slot = [0u8; 8];
    if !self_read(base - shape.func_slot, &mut slot) {
        return None;
    }
    let func = function_in_slot(shape, u64::from_le_bytes(slot))?;
    let mut object = [0u8; 48];
    if func == 0 || !self_read(func, &mut object[..shape.fn_f + 8]) {
        return None;
    }
    let ffid = object[shape.fn_ffid];
    if object[shape.gct] != GCT_FUNC || ffid == FF_LUA {
        return None;
    }
    let addr = if ffid == FF_C { field(&object, shape.fn_f, 8) } else { 0 };
    if addr & !ADDR_MASK != 0 {
        return None;
    }
    Some(NOTE_SET | (ffid as usize) << 48 | addr)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Arms the layout for `lua` and returns its global state.
    pub(crate) fn arm_for_test(lua: &Lua) -> usize {
        let g = global_candidates(lua).into_iter().find(|&g| arm(lua, g).is_ok()).expect("this build's layout");
        assert_eq!(arm(lua, g), Ok(()));
        g
    }

    /// The two words a thread header may point to its global state with
    /// (GC64 and 32-bit builds); `arm` must accept exactly one.
    fn global_candidates(lua: &Lua) -> [usize; 2] {
        let mut out = [0; 2];
        let slot = &mut out;
        // SAFETY: the state is live; its header is at least 24 bytes.
        unsafe {
            lua.exec_raw::<()>((), |l| {
                let la = l as usize;
                *slot = [word(la + GC64.glref, 8), word(la + GC32.glref, 4)];
            })
            .unwrap();
        }
        out
    }

    #[test]
    fn the_layout_is_found_and_checked_on_this_luajit() {
        // Arming is process-wide, as a session's is.
        let _turn = crate::sys::one_session_at_a_time();
        let lua = Lua::new();
        let armed: Vec<usize> = global_candidates(&lua).into_iter().filter(|&g| arm(&lua, g).is_ok()).collect();
        assert_eq!(armed.len(), 1, "exactly one reading of the header is this build's");
        assert_eq!(arm(&lua, armed[0]), Ok(()));
        // Armed, and no tick came: nothing is noted.
        assert_eq!(take(TickOrigin::Timer), TickNote::default());
        assert_eq!(take(TickOrigin::Allocator), TickNote::default());
        disarm();
        // A wrong global state is refused, not trusted.
        assert!(arm(&lua, armed[0] + 8).is_err());
        disarm();
    }

    #[test]
    fn each_origin_takes_only_its_own_ticks() {
        let _turn = crate::sys::one_session_at_a_time();
        let lua = Lua::new();
        arm_for_test(&lua);
        note_ticks(2, TickOrigin::Timer);
        note_ticks(3, TickOrigin::Allocator);
        note_ticks(1, TickOrigin::Timer);
        let ticks = |n: TickNote| n.states.iter().sum::<u32>();
        assert_eq!(ticks(take(TickOrigin::Allocator)), 3);
        assert_eq!(ticks(take(TickOrigin::Timer)), 3);
        assert_eq!(take(TickOrigin::Timer), TickNote::default());
        // Disarmed, nothing is noted.
        disarm();
        note_ticks(5, TickOrigin::Allocator);
        assert_eq!(take(TickOrigin::Allocator), TickNote::default());
    }
}
