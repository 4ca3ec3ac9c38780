//! The tick signal and its handler: ticks reach LuaJIT's SIGPROF handler
//! only while LuaJIT's profiler is still the session's.

use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::clock_ns;
use crate::sys::TickOrigin;

// -- The tick signal ----------------------------------------------------
//
// Our tick sources never send SIGPROF. They send a real-time signal of our
// own whose handler is installed once and never removed (the library is
// pinned in memory so the handler stays mapped). The handler calls
// LuaJIT's SIGPROF handler only after checking, in LuaJIT's own profiler
// state, that the profiler is still ours, and that SIGPROF's disposition is
// still LuaJIT's handler. The handler runs on the VM thread, interrupting
// it, and every stop of this VM's profiler also runs on that thread
// (jit.profile.stop, jit.p, lua_close), so the checks and the call cannot
// be separated by a stop; but a tick can land in the middle of a stop.
// Current LuaJIT clears the state's VM pointer first; Debian's 2.1.0-beta3
// and OpenResty's luajit2 clear it last, after flushing every trace and
// freeing the profiler's buffer. All of them restore SIGPROF's disposition
// first, so that is checked too: a tick passed on half way through a stop
// would set the profiler hook again, and LuaJIT would then call the
// callback with the buffer already freed.

/// What the handler compares and calls; `STATE == 0` means disarmed.
static STATE: AtomicUsize = AtomicUsize::new(0);
static EXPECT_G: AtomicUsize = AtomicUsize::new(0);
static EXPECT_CB: AtomicUsize = AtomicUsize::new(0);
static EXPECT_DATA: AtomicUsize = AtomicUsize::new(0);
static LUAJIT_HANDLER: AtomicUsize = AtomicUsize::new(0);
/// Ticks passed on to LuaJIT, and ticks refused because LuaJIT's profiler
/// was no longer ours (someone stopped it or took it over).
static TICKS_PASSED: AtomicU64 = AtomicU64::new(0);
static TICKS_REFUSED: AtomicU64 = AtomicU64::new(0);

/// Keeps the interrupted code's `errno` across a handler's system calls
/// (a failed `process_vm_readv` sets it), as a signal handler must.
struct SavedErrno(c_int);

impl SavedErrno {
    fn save() -> SavedErrno {
        // SAFETY: __errno_location returns this thread's errno slot.
        SavedErrno(unsafe { *libc::__errno_location() })
    }
}

impl Drop for SavedErrno {
    fn drop(&mut self) {
        // SAFETY: as in `save`.
        unsafe { *libc::__errno_location() = self.0 }
    }
}

/// Sets the source's next interval (`jitter`) and passes one timer tick
/// to LuaJIT if its profiler is still ours, unless the VM thread is in a
/// trace whose stack the handler reads itself (`ctx` is the interrupted
/// context).
pub fn pass_tick(ctx: *mut c_void) {
    let _errno = SavedErrno::save();
    super::jitter::next_interval();
    pass_ticks(1, TickOrigin::Timer, ctx);
}

/// Passes the `n` sample points an allocation crossed to LuaJIT, as
/// ticks, if its profiler is still ours.
pub fn pass_alloc_ticks(n: u64) {
    pass_ticks(n, TickOrigin::Allocator, std::ptr::null_mut());
}

/// Passes `n` ticks of `origin` to LuaJIT if its profiler is still ours:
/// checked and noted once, counted `n` times.
fn pass_ticks(n: u64, origin: TickOrigin, ctx: *mut c_void) {
    let _errno = SavedErrno::save();
    let state = STATE.load(Ordering::Acquire);
    if state == 0 {
        return; // a late tick after our session ended
    }
    let words = state as *const usize;
    // SAFETY: `state` is the address of LuaJIT's static profiler state,
    // found in LuaJIT's own writable segment (`find_luajit_profiler`), so
    // its first three words are always readable.
    let (g, cb, data) = unsafe {
        (std::ptr::read_volatile(words), std::ptr::read_volatile(words.add(1)), std::ptr::read_volatile(words.add(2)))
    };
    let h = LUAJIT_HANDLER.load(Ordering::Relaxed);
    if g != 0
        && g == EXPECT_G.load(Ordering::Relaxed)
        && cb == EXPECT_CB.load(Ordering::Relaxed)
        && data == EXPECT_DATA.load(Ordering::Relaxed)
        && sigprof_disposition() == Some(h)
    {
        // While a control-channel wake waits, the tick goes to LuaJIT's
        // hook, whose setting mends a wake hook a race left unset (see
        // `sys::wake`).
        if origin == TickOrigin::Timer {
            if crate::sys::wake::tend_pending() {
                crate::trace_decoder::count_wake(n);
            } else if crate::trace_decoder::take_ticks(n, ctx) {
                return;
            }
        }
        TICKS_PASSED.fetch_add(n, Ordering::Relaxed);
        super::running_c::note_ticks(n as usize, origin);
        // Only a signal can interrupt LuaJIT's own dispatch update (an
        // allocation trigger runs between its steps).
        if origin == TickOrigin::Timer {
            super::lost_hook::rearm_if_lost(super::running_c::vmstate_now());
        }
        // SAFETY: `h` is LuaJIT's SIGPROF handler (checked to lie in
        // LuaJIT's object when armed); it only needs its profiler state to
        // be live, which the check above established on this thread.
        let f = unsafe { std::mem::transmute::<usize, extern "C" fn(c_int)>(h) };
        for _ in 0..n {
            f(libc::SIGPROF);
        }
    } else {
        TICKS_REFUSED.fetch_add(n, Ordering::Relaxed);
    }
}

/// SIGPROF's current handler address (async-signal-safe: one sigaction).
fn sigprof_disposition() -> Option<usize> {
    // SAFETY: sigaction with a null new action only reads the disposition
    // into a zeroed out-structure; it is async-signal-safe.
    unsafe {
        let mut cur = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
        (libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut cur) == 0).then_some(cur.sa_sigaction)
    }
}

extern "C" fn on_tick(_sig: c_int, _info: *mut libc::siginfo_t, ctx: *mut c_void) {
    pass_tick(ctx);
}

/// `si_code` of a SIGTRAP sent by a perf event with `sigtrap` set.
const TRAP_PERF: c_int = 6;
/// The `sig_data` our task-clock event carries, to tell its traps apart.
pub(super) const TRAP_COOKIE: u64 = 0x7ec5_7ec5_0000_0001;
/// The `sig_data` of our context-switch event (wall-clock sessions).
pub(super) const SWITCH_COOKIE: u64 = 0x7ec5_7ec5_0000_0002;

/// Wall-clock sessions: the interval, and the monotonic and thread CPU
/// times at the previous context-switch trap, and the blocked time not
/// yet turned into ticks. Only the VM thread's handler touches them
/// once armed.
static BLOCKED_INTERVAL: AtomicU64 = AtomicU64::new(0);
static BLOCKED_WALL: AtomicU64 = AtomicU64::new(0);
static BLOCKED_CPU: AtomicU64 = AtomicU64::new(0);
static BLOCKED_REST: AtomicU64 = AtomicU64::new(0);
/// Ticks charged for time the thread spent off the CPU.
static BLOCKED_TICKS: AtomicU64 = AtomicU64::new(0);
/// At most this many ticks are charged for one blocked stretch (about
/// ten seconds at 1 ms), so a thread asleep for hours stays cheap.
const MAX_BLOCKED_TICKS: u64 = 10_000;

/// Starts the blocked-time accounting of a wall-clock session (before
/// its context-switch event opens: a trap can follow at once).
pub fn arm_blocked_ticks(interval_ns: u64) {
    BLOCKED_WALL.store(clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0), Ordering::Relaxed);
    BLOCKED_CPU.store(clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0), Ordering::Relaxed);
    BLOCKED_REST.store(0, Ordering::Relaxed);
    BLOCKED_TICKS.store(0, Ordering::Relaxed);
    BLOCKED_INTERVAL.store(interval_ns.max(1), Ordering::Relaxed);
}

/// Ticks charged for blocked time since the last arm.
pub fn blocked_ticks() -> u64 {
    BLOCKED_TICKS.load(Ordering::Relaxed)
}

/// After the thread was switched out and back in (a context-switch trap
/// arrives as it returns to user mode, once the blocking call is over):
/// the time it spent off the CPU since the previous trap becomes ticks,
/// charged where it resumes, which is where it blocked.
fn pass_blocked_ticks(ctx: *mut c_void) {
    let interval = BLOCKED_INTERVAL.load(Ordering::Relaxed);
    if interval == 0 {
        return; // not armed for a wall-clock session
    }
    let (Some(wall), Some(cpu)) = (clock_ns(libc::CLOCK_MONOTONIC), clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)) else {
        return;
    };
    let dw = wall.saturating_sub(BLOCKED_WALL.swap(wall, Ordering::Relaxed));
    let dc = cpu.saturating_sub(BLOCKED_CPU.swap(cpu, Ordering::Relaxed));
    let off = dw.saturating_sub(dc).saturating_add(BLOCKED_REST.load(Ordering::Relaxed));
    BLOCKED_REST.store(off % interval, Ordering::Relaxed);
    let n = (off / interval).min(MAX_BLOCKED_TICKS);
    BLOCKED_TICKS.fetch_add(n, Ordering::Relaxed);
    if n > 0 {
        pass_ticks(n, TickOrigin::Timer, ctx);
    }
}
/// SIGTRAP's disposition before ours, for traps that are not our ticks.
static PREVIOUS_TRAP: OnceLock<Option<libc::sigaction>> = OnceLock::new();

extern "C" fn on_trap(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo (SA_SIGINFO). For
    // TRAP_PERF its union holds the event's sig_data right after si_addr
    // (offset 24 on 64-bit Linux).
    let (code, cookie) =
        unsafe { ((*info).si_code, std::ptr::read_unaligned((info as *const u8).add(24) as *const u64)) };
    if code == TRAP_PERF && cookie == TRAP_COOKIE {
        pass_tick(ctx);
        return;
    }
    if code == TRAP_PERF && cookie == SWITCH_COOKIE {
        if STATE.load(Ordering::Acquire) != 0 {
            pass_blocked_ticks(ctx);
        }
        return;
    }
    // Not ours: behave as the disposition we replaced would have.
    let Some(Some(prev)) = PREVIOUS_TRAP.get() else { return };
    let h = prev.sa_sigaction;
    if h == libc::SIG_IGN {
        return;
    }
    // SAFETY: `h` was installed as a SIGTRAP handler by someone else, with
    // the signature its SA_SIGINFO flag says; SIG_DFL is re-raised with
    // the default action restored, as if we had never been installed.
    unsafe {
        if h == libc::SIG_DFL {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
            let f = std::mem::transmute::<usize, extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void)>(h);
            f(sig, info, ctx);
        } else {
            let f = std::mem::transmute::<usize, extern "C" fn(c_int)>(h);
            f(sig);
        }
    }
}

/// Installs our SIGTRAP handler (once per process; never removed). It
/// takes the task-clock event's traps and passes every other SIGTRAP to
/// the disposition it replaced.
pub fn trap_handler_installed() -> bool {
    PREVIOUS_TRAP
        .get_or_init(|| {
            pin_this_library();
            // SAFETY: the first sigaction reads into a zeroed structure;
            // the second installs `on_trap`, whose signature matches
            // SA_SIGINFO; SIGPROF is masked so LuaJIT's handler cannot
            // nest inside ours, and SIGIO as in `tick_signal`.
            unsafe {
                let mut old = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
                let mut sa = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
                sa.sa_sigaction = on_trap as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaddset(&mut sa.sa_mask, libc::SIGPROF);
                libc::sigaddset(&mut sa.sa_mask, libc::SIGIO);
                (libc::sigaction(libc::SIGTRAP, &sa, &mut old) == 0).then_some(old)
            }
        })
        .is_some()
}

/// The tick signal, with our handler installed (once per process), or
/// None when no real-time signal is free.
pub fn tick_signal() -> Option<c_int> {
    static SIG: OnceLock<Option<c_int>> = OnceLock::new();
    *SIG.get_or_init(|| {
        pin_this_library();
        // From the top of the real-time range down: libraries that claim
        // one usually take the lowest free numbers.
        let (lo, hi) = (libc::SIGRTMIN() + 2, libc::SIGRTMAX());
        (lo..=hi).rev().find(|&sig| {
            // SAFETY: sigaction reads into a zeroed out-structure; the
            // second call installs our handler with SA_SIGINFO, whose
            // signature matches `on_tick`; the mask blocks SIGPROF so
            // LuaJIT's handler cannot nest inside ours, and SIGIO so the
            // wake's handler cannot write the hook mask between LuaJIT's
            // handler's read and write of it.
            unsafe {
                let mut cur = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
                if libc::sigaction(sig, std::ptr::null(), &mut cur) != 0 || cur.sa_sigaction != libc::SIG_DFL {
                    return false;
                }
                let mut sa = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
                sa.sa_sigaction = on_tick as *const () as usize;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaddset(&mut sa.sa_mask, libc::SIGPROF);
                libc::sigaddset(&mut sa.sa_mask, libc::SIGIO);
                libc::sigaction(sig, &sa, std::ptr::null_mut()) == 0
            }
        })
    })
}

/// Keeps this shared library mapped until the process ends: the tick
/// handler must stay valid even after `lua_close` unloads C modules.
pub fn pin_this_library() {
    // SAFETY: dladdr reads loader tables; dlopen with RTLD_NOLOAD only
    // takes another reference on an object that is already loaded, and
    // RTLD_NODELETE keeps it from ever being unmapped. The handle is
    // deliberately leaked.
    unsafe {
        let mut info = MaybeUninit::<libc::Dl_info>::zeroed().assume_init();
        if libc::dladdr(on_tick as *const c_void, &mut info) != 0 && !info.dli_fname.is_null() {
            libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE);
        }
    }
}

/// What the tick handler needs to pass ticks on to LuaJIT safely.
#[derive(Clone, Copy, Debug)]
pub struct LuaJitProfiler {
    /// Address of LuaJIT's static profiler state.
    pub state: usize,
    /// LuaJIT's SIGPROF handler.
    pub handler: usize,
    pub g: usize,
    pub cb: usize,
    pub data: usize,
}

/// Finds LuaJIT's profiler state right after `luaJIT_profile_start` was
/// called with callback `cb` and data `data`: its first words are the VM's
/// global state, the callback and the data (every LuaJIT 2.1 lays it out
/// so). Searched in the writable segments of the object that defines
/// `luaJIT_profile_start`; exactly one match is required. Also reads
/// LuaJIT's SIGPROF handler, which that start just installed.
///
/// A candidate's first word must be the VM's global state, which the
/// `lua_State` header points to (`glref`: a 32-bit reference at offset 8,
/// or a pointer at offset 16 in GC64 builds); this rules out stale copies
/// of the same words elsewhere.
pub fn find_luajit_profiler(start_fn: usize, l: usize, cb: usize, data: usize) -> Option<LuaJitProfiler> {
    static CACHED: AtomicUsize = AtomicUsize::new(0);
    let handler = sigprof_handler_in_object_of(start_fn)?;
    // SAFETY: `l` is a live lua_State; its header is at least 24 bytes.
    let (glref32, glref64) =
        unsafe { (*((l + 8) as *const u32) as usize, std::ptr::read_unaligned((l + 16) as *const usize)) };
    let is_global = |g: usize| g != 0 && (g == glref32 || g == glref64);
    let check = |addr: usize| -> Option<usize> {
        let w = addr as *const usize;
        // SAFETY: `addr` is the cached result of an earlier search, an
        // address inside LuaJIT's writable segment, readable for 3 words.
        let (g, c, d) = unsafe { (std::ptr::read_volatile(w), *w.add(1), *w.add(2)) };
        (is_global(g) && c == cb && d == data).then_some(g)
    };
    let cached = CACHED.load(Ordering::Relaxed);
    if cached != 0 {
        if let Some(g) = check(cached) {
            return Some(LuaJitProfiler { state: cached, handler, g, cb, data });
        }
    }
    let mut found: Vec<usize> = Vec::new();
    for (lo, hi) in writable_segments_of(start_fn) {
        let first = (lo + 7) & !7;
        let mut a = first;
        while a + 3 * 8 <= hi {
            // SAFETY: [lo, hi) is a mapped, readable PT_LOAD segment of a
            // loaded object (reported by dl_iterate_phdr); reads are aligned.
            let w1 = unsafe { *((a + 8) as *const usize) };
            if w1 == cb {
                // SAFETY: as above, both words lie inside the segment.
                let (w0, w2) = unsafe { (*(a as *const usize), *((a + 16) as *const usize)) };
                if is_global(w0) && w2 == data {
                    found.push(a);
                }
            }
            a += 8;
        }
    }
    if found.len() != 1 {
        return None;
    }
    CACHED.store(found[0], Ordering::Relaxed);
    let g = check(found[0])?;
    Some(LuaJitProfiler { state: found[0], handler, g, cb, data })
}

/// The current SIGPROF handler, if it is a function inside the object
/// that contains `addr` (LuaJIT's own handler).
fn sigprof_handler_in_object_of(addr: usize) -> Option<usize> {
    // SAFETY: sigaction with a null new action only reads; dladdr only
    // reads loader tables.
    unsafe {
        let mut cur = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
        if libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut cur) != 0 {
            return None;
        }
        let h = cur.sa_sigaction;
        if h == libc::SIG_DFL || h == libc::SIG_IGN || cur.sa_flags & libc::SA_SIGINFO != 0 {
            return None;
        }
        let mut a = MaybeUninit::<libc::Dl_info>::zeroed().assume_init();
        let mut b = MaybeUninit::<libc::Dl_info>::zeroed().assume_init();
        if libc::dladdr(h as *const c_void, &mut a) == 0 || libc::dladdr(addr as *const c_void, &mut b) == 0 {
            return None;
        }
        (a.dli_fbase == b.dli_fbase).then_some(h)
    }
}

/// Address ranges of the writable PT_LOAD segments of the loaded object
/// that contains `addr`.
fn writable_segments_of(addr: usize) -> Vec<(usize, usize)> {
    struct Search {
        addr: usize,
        out: Vec<(usize, usize)>,
    }
    unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info record and the
        // `data` pointer we gave it (a live `Search`).
        let (info, s) = unsafe { (&*info, &mut *(data as *mut Search)) };
        let base = info.dlpi_addr as usize;
        // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
        let phdrs = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
        let contains = phdrs.iter().any(|p| {
            p.p_type == libc::PT_LOAD && {
                let lo = base + p.p_vaddr as usize;
                (lo..lo + p.p_memsz as usize).contains(&s.addr)
            }
        });
        if !contains {
            return 0;
        }
        for p in phdrs {
            if p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_W != 0 {
                let lo = base + p.p_vaddr as usize;
                s.out.push((lo, lo + p.p_memsz as usize));
            }
        }
        1
    }
    let mut s = Search { addr, out: Vec::new() };
    // SAFETY: `visit` matches the callback type and only touches `s`.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut s as *mut Search as *mut c_void) };
    s.out
}

/// Lets the tick handler pass ticks to `p` (LuaJIT's profiler, ours).
/// Blocked-time accounting stays off until `arm_blocked_ticks`.
pub fn arm_ticks(p: &LuaJitProfiler) {
    BLOCKED_INTERVAL.store(0, Ordering::Relaxed);
    EXPECT_G.store(p.g, Ordering::Relaxed);
    EXPECT_CB.store(p.cb, Ordering::Relaxed);
    EXPECT_DATA.store(p.data, Ordering::Relaxed);
    LUAJIT_HANDLER.store(p.handler, Ordering::Relaxed);
    TICKS_PASSED.store(0, Ordering::Relaxed);
    TICKS_REFUSED.store(0, Ordering::Relaxed);
    STATE.store(p.state, Ordering::Release);
}

/// From now on the handler ignores every tick.
pub fn disarm_ticks() {
    crate::trace_decoder::disarm();
    STATE.store(0, Ordering::Release);
    super::lost_hook::disarm();
    super::running_c::disarm();
}

/// Ticks passed on to LuaJIT and ticks refused since the last arm.
pub fn tick_counts() -> (u64, u64) {
    (TICKS_PASSED.load(Ordering::Relaxed), TICKS_REFUSED.load(Ordering::Relaxed))
}
