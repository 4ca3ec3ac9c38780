//! Every raw FFI declaration and every `unsafe` block of the crate lives here.
//!
//! Above this module the code is safe Rust: the sampler sees a [`VmStack`]
//! handle for the duration of one callback, a [`ZoneAnchor`] for raw reads of
//! the `jit.zone` stack, a [`SamplerBox`] that owns the state LuaJIT's
//! callback writes to, and a handful of POSIX helpers for the precise timer
//! and the signal mask.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use mlua::ffi;
use mlua::Lua;

/// `luaJIT_profile_callback` from `luajit.h`.
pub type ProfileCallback =
    unsafe extern "C" fn(data: *mut c_void, l: *mut ffi::lua_State, samples: c_int, vmstate: c_int);

type StartFn = unsafe extern "C" fn(*mut ffi::lua_State, *const c_char, ProfileCallback, *mut c_void);
type StopFn = unsafe extern "C" fn(*mut ffi::lua_State);
type DumpstackFn = unsafe extern "C" fn(*mut ffi::lua_State, *const c_char, c_int, *mut usize) -> *const c_char;

/// The three `luaJIT_profile_*` entry points, looked up at run time.
///
/// They are resolved with `dlsym` rather than declared as link-time imports so
/// that the module still loads into a LuaJIT 2.0 host (which has no profiler
/// API); `profile.sample()` then fails with a clear error instead of `require`
/// failing with an unresolved symbol.
#[derive(Clone, Copy)]
pub struct ProfilerApi {
    start: StartFn,
    stop: StopFn,
    dumpstack: DumpstackFn,
}

fn lookup(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with RTLD_DEFAULT only reads the process's symbol tables;
    // `name` is a valid NUL-terminated string.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

/// The host's profiler API, or `None` when the host LuaJIT has none.
pub fn profiler_api() -> Option<ProfilerApi> {
    static API: OnceLock<Option<ProfilerApi>> = OnceLock::new();
    *API.get_or_init(|| {
        let start = lookup(c"luaJIT_profile_start");
        let stop = lookup(c"luaJIT_profile_stop");
        let dump = lookup(c"luaJIT_profile_dumpstack");
        if start.is_null() || stop.is_null() || dump.is_null() {
            return None;
        }
        // SAFETY: the symbols come from the LuaJIT that hosts this module and
        // have the signatures declared in luajit.h, which the types above copy.
        unsafe {
            Some(ProfilerApi {
                start: std::mem::transmute::<*mut c_void, StartFn>(start),
                stop: std::mem::transmute::<*mut c_void, StopFn>(stop),
                dumpstack: std::mem::transmute::<*mut c_void, DumpstackFn>(dump),
            })
        }
    })
}

/// The Lua thread a profiler callback runs on, valid only inside that callback.
pub struct VmStack {
    l: *mut ffi::lua_State,
    dumpstack: DumpstackFn,
}

impl VmStack {
    /// Dumps the stack with `fmt` (a NUL-terminated dumpstack format) and
    /// passes the bytes to `sink` before LuaJIT's buffer can be reused.
    #[inline]
    pub fn dump(&self, fmt: &CStr, depth: i32, sink: &mut Vec<u8>) {
        let mut len: usize = 0;
        // SAFETY: `l` is the thread LuaJIT handed to the running callback; the
        // returned buffer is valid for `len` bytes until the next dumpstack call
        // or profiler stop, and it is copied out before either can happen.
        unsafe {
            let p = (self.dumpstack)(self.l, fmt.as_ptr(), depth as c_int, &mut len);
            if !p.is_null() && len > 0 {
                sink.extend_from_slice(std::slice::from_raw_parts(p as *const u8, len));
            }
        }
    }
}

/// A state object handed to LuaJIT as the callback's `data` pointer.
pub trait SampleSink {
    fn on_sample(&mut self, vm: &VmStack, samples: u32, vmstate: u8);
}

/// Owns the sampler state that the profiler callback mutates.
///
/// The callback runs on the VM's own OS thread, between two bytecodes, and
/// never while one of our Lua-facing functions is executing Rust code (those
/// run no Lua). [`SamplerBox::with`] is therefore never re-entered.
pub struct SamplerBox<T: SampleSink> {
    ptr: *mut T,
}

/// The callback data of the running session, or null. LuaJIT can still call
/// the callback after `luaJIT_profile_stop`: when the stop happens inside a
/// `__gc` finaliser, the GC restores the hook mask it saved before the
/// finaliser, re-arming a pending profiler hook, and LuaJIT then calls the
/// last callback with the last data pointer. The trampoline ignores any call
/// whose data is not the active box, so a freed box is never touched.
static ACTIVE_DATA: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

impl<T: SampleSink> SamplerBox<T> {
    pub fn new(value: T) -> Self {
        SamplerBox { ptr: Box::into_raw(Box::new(value)) }
    }

    /// Borrow the state. `f` must not run Lua code (it could re-enter the
    /// callback); plain Rust work and allocation are fine.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: `ptr` came from Box::into_raw and is freed only in Drop; the
        // callback and this borrow both run on the VM thread and cannot nest
        // because `f` runs no Lua (see the type's documentation).
        unsafe { f(&mut *self.ptr) }
    }

    /// Installs the profiler with `mode` and this box as callback data.
    pub fn start(&self, api: &ProfilerApi, lua: &Lua, mode: &CStr) -> mlua::Result<()> {
        let data = self.ptr as *mut c_void;
        ACTIVE_DATA.store(data, Ordering::Release);
        let start = api.start;
        // SAFETY: exec_raw gives a valid state of this VM; LuaJIT copies the mode
        // string before returning; `data` stays valid until stop() is called
        // (Drop of the owning session stops the profiler before freeing it).
        unsafe {
            lua.exec_raw::<()>((), |l| {
                start(l, mode.as_ptr(), trampoline::<T>, data);
            })
        }
    }

    /// Makes the trampoline ignore any further call for this box.
    pub fn deactivate(&self) {
        let _ = ACTIVE_DATA.compare_exchange(
            self.ptr as *mut c_void,
            std::ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Stops LuaJIT's profiler (all sessions of this process).
    pub fn stop(&self, api: &ProfilerApi, lua: &Lua) -> mlua::Result<()> {
        self.deactivate();
        let stop = api.stop;
        // SAFETY: a valid state of this VM; stopping an idle profiler is a no-op.
        unsafe { lua.exec_raw::<()>((), |l| stop(l)) }
    }
}

impl<T: SampleSink> Drop for SamplerBox<T> {
    fn drop(&mut self) {
        self.deactivate();
        // SAFETY: created by Box::into_raw in new() and dropped once; owners
        // stop the profiler before dropping the box.
        unsafe { drop(Box::from_raw(self.ptr)) }
    }
}

unsafe extern "C" fn trampoline<T: SampleSink>(
    data: *mut c_void,
    l: *mut ffi::lua_State,
    samples: c_int,
    vmstate: c_int,
) {
    if data.is_null() || data != ACTIVE_DATA.load(Ordering::Acquire) {
        return; // a late call for a stopped (maybe freed) session
    }
    let Some(api) = profiler_api() else { return };
    let vm = VmStack { l, dumpstack: api.dumpstack };
    // SAFETY: `data` is the active SamplerBox pointer (checked above); boxes
    // deactivate themselves before they are freed.
    let sink = unsafe { &mut *(data as *mut T) };
    // A panic must not unwind into LuaJIT's C frames.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sink.on_sample(&vm, samples.max(0) as u32, vmstate as u8)
    }));
}

/// Stops LuaJIT's profiler if this VM runs it (a no-op otherwise).
pub fn stop_profiler(api: &ProfilerApi, lua: &Lua) -> mlua::Result<()> {
    let stop = api.stop;
    // SAFETY: a valid state of this VM; LuaJIT only stops a profiler that
    // belongs to the calling VM.
    unsafe { lua.exec_raw::<()>((), |l| stop(l)) }
}

/// Asks the kernel to back the spare capacity of `buf` with huge pages when
/// it is first touched: a large output buffer then takes hundreds of times
/// fewer page faults. Only a hint; nothing changes if it is refused.
pub fn advise_huge_pages(buf: &mut Vec<u8>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = buf.as_mut_ptr() as usize;
        let end = start + buf.capacity();
        let aligned = (start + HUGE - 1) & !(HUGE - 1);
        if end > aligned + HUGE {
            let len = (end - aligned) & !(HUGE - 1);
            // SAFETY: the range lies inside the buffer's own allocation and
            // MADV_HUGEPAGE does not change its contents or mapping rights.
            unsafe {
                libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = buf;
}

/// A state pointer of this VM, kept for finalisers that have no `Lua` handle.
/// mlua keeps the state it hands out alive for the VM's lifetime.
#[derive(Clone, Copy)]
pub struct VmHandle(*mut ffi::lua_State);

impl VmHandle {
    pub fn of(lua: &Lua) -> mlua::Result<VmHandle> {
        let mut out = std::ptr::null_mut();
        let slot = &mut out;
        // SAFETY: exec_raw hands a valid state; we only copy the pointer.
        unsafe { lua.exec_raw::<()>((), |l| *slot = l)? };
        Ok(VmHandle(out))
    }

    /// Stops LuaJIT's profiler. Only called from finalisers, which run
    /// before the VM's memory is released (lua_close runs them first).
    pub fn stop_profiler(&self, api: &ProfilerApi) {
        if self.0.is_null() {
            return;
        }
        // SAFETY: the pointer came from a live Lua in VmHandle::of and the VM
        // is still open (see above); stopping an idle profiler is a no-op.
        unsafe { (api.stop)(self.0) }
    }
}

/// A registry-anchored private coroutine and the `jit.zone` table, read with
/// raw API calls only: no metamethods, no allocation, no Lua code.
pub struct ZoneAnchor {
    thread: *mut ffi::lua_State,
    thread_ref: c_int,
    table_ref: c_int,
    main: *mut ffi::lua_State,
}

impl ZoneAnchor {
    /// Anchors `zones` (the zone stack table) and a fresh coroutine.
    pub fn new(lua: &Lua, zones: &mlua::Table) -> mlua::Result<ZoneAnchor> {
        let mut anchor =
            ZoneAnchor { thread: std::ptr::null_mut(), thread_ref: 0, table_ref: 0, main: std::ptr::null_mut() };
        let out = &mut anchor;
        // SAFETY: exec_raw pushes `zones` at index 1 of a valid state; we pop
        // what we push and keep only registry references and the thread pointer,
        // which stays valid while its registry reference exists.
        unsafe {
            lua.exec_raw::<()>(zones, |l| {
                out.table_ref = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
                let t = ffi::lua_newthread(l);
                ffi::lua_checkstack(t, 8);
                out.thread_ref = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
                out.thread = t;
                out.main = l;
            })?;
        }
        Ok(anchor)
    }

    /// Appends the zone path (entries joined by `/`) to `out`; returns the
    /// number of entries. Non-string entries are written as `?`.
    #[inline]
    pub fn read_path(&self, out: &mut Vec<u8>, max_entries: usize) -> usize {
        let t = self.thread;
        // SAFETY: `t` is anchored in the registry; the raw reads push at most
        // two values (room was reserved with lua_checkstack) and the stack is
        // reset before returning. lua_tolstring is only called on strings, so
        // it never converts (and never allocates).
        unsafe {
            ffi::lua_rawgeti(t, ffi::LUA_REGISTRYINDEX, self.table_ref as ffi::lua_Integer);
            if ffi::lua_type(t, -1) != ffi::LUA_TTABLE {
                ffi::lua_settop(t, 0);
                return 0;
            }
            let n = ffi::lua_objlen(t, -1).min(max_entries);
            for i in 1..=n {
                if i > 1 {
                    out.push(b'/');
                }
                ffi::lua_rawgeti(t, -1, i as ffi::lua_Integer);
                if ffi::lua_type(t, -1) == ffi::LUA_TSTRING {
                    let mut len = 0usize;
                    let p = ffi::lua_tolstring(t, -1, &mut len);
                    out.extend_from_slice(std::slice::from_raw_parts(p as *const u8, len));
                } else {
                    out.push(b'?');
                }
                ffi::lua_settop(t, -2);
            }
            ffi::lua_settop(t, 0);
            n
        }
    }

    /// Releases the registry references. Must run while the state is open.
    pub fn release(&mut self, lua: &Lua) {
        if self.main.is_null() {
            return;
        }
        let (a, b) = (self.table_ref, self.thread_ref);
        // SAFETY: the references were created on this VM's registry.
        unsafe {
            let _ = lua.exec_raw::<()>((), |l| {
                ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, a);
                ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, b);
            });
        }
        self.main = std::ptr::null_mut();
    }
}

/// Name of the C function at `addr` (from `@0x...` frames), via dladdr.
pub fn c_symbol_name(addr: usize) -> Option<String> {
    let mut info: libc::Dl_info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads loader tables; the strings it returns belong to
    // loaded objects and are copied before returning.
    unsafe {
        if libc::dladdr(addr as *const c_void, &mut info) == 0 {
            return None;
        }
        if !info.dli_sname.is_null() && info.dli_saddr as usize == addr {
            return Some(CStr::from_ptr(info.dli_sname).to_string_lossy().into_owned());
        }
        if !info.dli_fname.is_null() {
            let file = CStr::from_ptr(info.dli_fname).to_string_lossy();
            let base = file.rsplit('/').next().unwrap_or(&file).to_string();
            return Some(format!("{}+0x{:x}", base, addr - info.dli_fbase as usize));
        }
    }
    None
}

pub fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "")).expect("NUL bytes removed")
}

// ---------------------------------------------------------------------------
// POSIX: the precise timer thread and the signal mask.
// ---------------------------------------------------------------------------

#[cfg(target_os = "linux")]
pub mod posix {
    use std::mem::MaybeUninit;

    /// Kernel id of the calling thread.
    pub fn gettid() -> i32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }

    /// Sends SIGPROF to one thread of this process.
    pub fn send_sigprof(tid: i32) -> bool {
        // SAFETY: tgkill with our own pid; a vanished thread yields ESRCH.
        unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGPROF) == 0 }
    }

    /// CPU clock of the calling thread, usable from other threads.
    pub fn thread_cpu_clock() -> Option<libc::clockid_t> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self is always valid; `id` is a valid out-pointer.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (rc == 0).then_some(id)
    }

    /// Reads `clock` in nanoseconds.
    pub fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
        let mut ts = MaybeUninit::<libc::timespec>::uninit();
        // SAFETY: `ts` is a valid out-pointer; an invalid clock returns -1.
        unsafe {
            if libc::clock_gettime(clock, ts.as_mut_ptr()) != 0 {
                return None;
            }
            let ts = ts.assume_init();
            Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
        }
    }

    /// Sleeps until `deadline_ns` on CLOCK_MONOTONIC.
    pub fn sleep_until(deadline_ns: u64) {
        let ts = libc::timespec {
            tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: valid timespec; EINTR just ends the sleep early.
        unsafe {
            libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut());
        }
    }

    /// Asks the kernel for 1 µs timer slack on the calling thread, so that
    /// sub-millisecond sleeps wake on time.
    pub fn tight_timer_slack() {
        // SAFETY: PR_SET_TIMERSLACK takes a plain integer.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0);
        }
    }

    /// Turns off ITIMER_PROF (LuaJIT's own timer) after it has been armed.
    pub fn disarm_itimer_prof() {
        let zero = libc::itimerval {
            it_interval: libc::timeval { tv_sec: 0, tv_usec: 0 },
            it_value: libc::timeval { tv_sec: 0, tv_usec: 0 },
        };
        // SAFETY: valid itimerval; a null old-value pointer is allowed.
        unsafe {
            libc::setitimer(libc::ITIMER_PROF, &zero, std::ptr::null_mut());
        }
    }

    /// If SIGPROF has the default disposition (terminate), set it to ignore.
    /// LuaJIT saves the disposition it finds at start and restores it at stop,
    /// so a signal from our timer thread that races a stop (for example the
    /// stop inside `lua_close`) is ignored instead of killing the process.
    /// Returns true when it changed the disposition.
    pub fn ignore_sigprof_if_default() -> bool {
        // SAFETY: sigaction with a null new action only reads; the second call
        // installs SIG_IGN with an empty mask.
        unsafe {
            let mut old = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
            if libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut old) != 0 {
                return false;
            }
            if old.sa_sigaction != libc::SIG_DFL {
                return false;
            }
            let mut ign = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
            ign.sa_sigaction = libc::SIG_IGN;
            libc::sigemptyset(&mut ign.sa_mask);
            libc::sigaction(libc::SIGPROF, &ign, std::ptr::null_mut()) == 0
        }
    }

    /// Whether SIGPROF would terminate the process now (default disposition).
    pub fn sigprof_is_default() -> bool {
        // SAFETY: sigaction with a null new action only reads.
        unsafe {
            let mut cur = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
            libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut cur) == 0 && cur.sa_sigaction == libc::SIG_DFL
        }
    }

    /// Restores the default SIGPROF disposition if it is still "ignore".
    pub fn restore_sigprof_default() {
        // SAFETY: as in ignore_sigprof_if_default.
        unsafe {
            let mut cur = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
            if libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut cur) == 0 && cur.sa_sigaction == libc::SIG_IGN {
                let mut dfl = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigemptyset(&mut dfl.sa_mask);
                libc::sigaction(libc::SIGPROF, &dfl, std::ptr::null_mut());
            }
        }
    }

    /// Whether another sampler seems to be running in this process right now:
    /// ITIMER_PROF is armed or SIGPROF has a handler function installed (LuaJIT
    /// installs both while `jit.p` or `jit.profile` is running). Called before
    /// our own start, so neither can be ours.
    pub fn foreign_sampler_active() -> bool {
        // SAFETY: getitimer and sigaction with a null new action only read into
        // valid, zero-initialised out-structures.
        unsafe {
            let mut it = MaybeUninit::<libc::itimerval>::zeroed().assume_init();
            let armed = libc::getitimer(libc::ITIMER_PROF, &mut it) == 0
                && (it.it_value.tv_sec != 0 || it.it_value.tv_usec != 0);
            let mut cur = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
            let handled = libc::sigaction(libc::SIGPROF, std::ptr::null(), &mut cur) == 0
                && cur.sa_sigaction != libc::SIG_DFL
                && cur.sa_sigaction != libc::SIG_IGN;
            armed || handled
        }
    }

    /// Unblocks SIGPROF on the calling thread; returns whether it was blocked
    /// (LÖVE starts its main thread with every signal blocked).
    pub fn unblock_sigprof() -> bool {
        // SAFETY: sigset operations on a local, initialised set.
        unsafe {
            let mut set = MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
            let mut old = MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPROF);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, &mut old);
            libc::sigismember(&old, libc::SIGPROF) == 1
        }
    }

    /// Blocks SIGPROF again on the calling thread.
    pub fn block_sigprof() {
        // SAFETY: as in unblock_sigprof.
        unsafe {
            let mut set = MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPROF);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
    }
}
