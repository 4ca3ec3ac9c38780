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

impl ProfilerApi {
    /// Address of `luaJIT_profile_start`, which locates LuaJIT's object.
    pub fn start_addr(&self) -> usize {
        self.start as usize
    }
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

impl VmStack {
    /// First and last line of the Lua function running at level 0 (the main
    /// chunk starts at line 0), or None when that frame is not Lua code.
    #[inline]
    pub fn leaf_span(&self) -> Option<(i32, i32)> {
        // SAFETY: `l` is the thread of the running callback; lua_getstack and
        // lua_getinfo with "S" only fill `ar` (no stack push, no allocation).
        unsafe {
            let mut ar = std::mem::MaybeUninit::<ffi::lua_Debug>::zeroed().assume_init();
            if ffi::lua_getstack(self.l, 0, &mut ar) == 0 || ffi::lua_getinfo(self.l, c"S".as_ptr(), &mut ar) == 0 {
                return None;
            }
            let what = if ar.what.is_null() { 0 } else { *ar.what as u8 };
            (ar.linedefined >= 0 && (what == b'L' || what == b'm')).then_some((ar.linedefined, ar.lastlinedefined))
        }
    }

    /// Moves the function running at level 0 onto `anchor`'s stack, where
    /// it stays alive; returns its slot. Called once per new call site, so
    /// the rare stack growth it may cause stays off the common path.
    pub fn capture_leaf(&self, anchor: &mut FunctionAnchor) -> Option<i32> {
        if anchor.thread.is_null() || anchor.len >= anchor.capacity {
            return None;
        }
        // SAFETY: `l` is the running callback's thread; lua_getinfo "f"
        // pushes one value after lua_checkstack made room, and lua_xmove moves
        // it to the anchored coroutine, whose stack was sized for `capacity`
        // values at creation; both stacks end as they started but for that.
        unsafe {
            let mut ar = std::mem::MaybeUninit::<ffi::lua_Debug>::zeroed().assume_init();
            if ffi::lua_getstack(self.l, 0, &mut ar) == 0 || ffi::lua_checkstack(self.l, 2) == 0 {
                return None;
            }
            if ffi::lua_getinfo(self.l, c"f".as_ptr(), &mut ar) == 0 {
                return None;
            }
            ffi::lua_xmove(self.l, anchor.thread, 1);
        }
        anchor.len += 1;
        Some(anchor.len)
    }
}

/// A registry-anchored coroutine whose stack keeps captured Lua functions
/// alive until the session ends.
pub struct FunctionAnchor {
    thread: *mut ffi::lua_State,
    thread_ref: c_int,
    capacity: i32,
    len: i32,
}

impl FunctionAnchor {
    pub fn new(lua: &Lua, capacity: i32) -> mlua::Result<FunctionAnchor> {
        let mut anchor = FunctionAnchor { thread: std::ptr::null_mut(), thread_ref: 0, capacity: 0, len: 0 };
        let out = &mut anchor;
        // SAFETY: exec_raw gives a valid state; the new coroutine is popped
        // into a registry reference, which keeps it (and its stack) alive.
        unsafe {
            lua.exec_raw::<()>((), |l| {
                let t = ffi::lua_newthread(l);
                if ffi::lua_checkstack(t, capacity + 8) != 0 {
                    out.capacity = capacity;
                }
                out.thread_ref = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
                out.thread = t;
            })?;
        }
        Ok(anchor)
    }

    /// A copy of what `FunctionSlots::get` needs, to use outside the
    /// sampler's borrow (getting a value may run the GC, hence Lua code).
    pub fn slots(&self) -> FunctionSlots {
        FunctionSlots { thread: self.thread, len: self.len }
    }

    /// Releases the coroutine. Must run while the state is open.
    pub fn release(&mut self, lua: &Lua) {
        if self.thread.is_null() {
            return;
        }
        let r = self.thread_ref;
        // SAFETY: the reference was created on this VM's registry.
        unsafe {
            let _ = lua.exec_raw::<()>((), |l| ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, r));
        }
        self.thread = std::ptr::null_mut();
    }
}

/// The captured functions of a [`FunctionAnchor`], readable by slot.
#[derive(Clone, Copy)]
pub struct FunctionSlots {
    thread: *mut ffi::lua_State,
    len: i32,
}

impl FunctionSlots {
    /// The function captured in `slot`, as a Lua value.
    pub fn get(&self, lua: &Lua, slot: i32) -> mlua::Result<mlua::Value> {
        if self.thread.is_null() || slot < 1 || slot > self.len {
            return Ok(mlua::Value::Nil);
        }
        let t = self.thread;
        // SAFETY: `slot` indexes a value on the anchored coroutine's stack;
        // it is copied there and moved to the calling state, which exec_raw
        // returns as the result.
        unsafe {
            lua.exec_raw::<mlua::Value>((), |l| {
                ffi::lua_pushvalue(t, slot);
                ffi::lua_xmove(t, l, 1);
            })
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

    /// The callback and data words LuaJIT stores for this box once started.
    pub fn callback_words(&self) -> (usize, usize) {
        (trampoline::<T> as *const () as usize, self.ptr as usize)
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
    /// The state's address.
    pub fn addr(&self) -> usize {
        self.0 as usize
    }

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
// POSIX: tick sources, the tick signal and its handler, the signal mask.
// ---------------------------------------------------------------------------

#[cfg(target_os = "linux")]
pub mod posix {
    use std::ffi::{c_int, c_void};
    use std::mem::MaybeUninit;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::OnceLock;

    /// Kernel id of the calling thread.
    pub fn gettid() -> i32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
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

    /// Unblocks `sig` on the calling thread; returns whether it was blocked
    /// (LÖVE starts its main thread with every signal blocked).
    pub fn unblock_signal(sig: c_int) -> bool {
        // SAFETY: sigset operations on a local, initialised set.
        unsafe {
            let mut set = MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
            let mut old = MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, &mut old);
            libc::sigismember(&old, sig) == 1
        }
    }

    /// Blocks `sig` again on the calling thread.
    pub fn block_signal(sig: c_int) {
        // SAFETY: as in unblock_signal.
        unsafe {
            let mut set = MaybeUninit::<libc::sigset_t>::zeroed().assume_init();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
    }

    // -- The tick signal ----------------------------------------------------
    //
    // Our tick sources never send SIGPROF. They send a real-time signal of our
    // own whose handler is installed once and never removed (the library is
    // pinned in memory so the handler stays mapped). The handler calls
    // LuaJIT's SIGPROF handler only after checking, in LuaJIT's own profiler
    // state, that the profiler is still ours. The handler runs on the VM
    // thread, interrupting it, and every stop of this VM's profiler also runs
    // on that thread (jit.profile.stop, jit.p, lua_close) and clears the
    // state's VM pointer first: the check and the call therefore cannot be
    // separated by a stop.

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

    /// Passes one tick to LuaJIT if its profiler is still ours.
    fn pass_tick() {
        let state = STATE.load(Ordering::Acquire);
        if state == 0 {
            return; // a late tick after our session ended
        }
        let words = state as *const usize;
        // SAFETY: `state` is the address of LuaJIT's static profiler state,
        // found in LuaJIT's own writable segment (`find_luajit_profiler`), so
        // its first three words are always readable.
        let (g, cb, data) = unsafe {
            (
                std::ptr::read_volatile(words),
                std::ptr::read_volatile(words.add(1)),
                std::ptr::read_volatile(words.add(2)),
            )
        };
        if g != 0
            && g == EXPECT_G.load(Ordering::Relaxed)
            && cb == EXPECT_CB.load(Ordering::Relaxed)
            && data == EXPECT_DATA.load(Ordering::Relaxed)
        {
            TICKS_PASSED.fetch_add(1, Ordering::Relaxed);
            let h = LUAJIT_HANDLER.load(Ordering::Relaxed);
            // SAFETY: `h` is LuaJIT's SIGPROF handler (checked to lie in
            // LuaJIT's object when armed); it only needs its profiler state to
            // be live, which the check above established on this thread.
            unsafe {
                let f = std::mem::transmute::<usize, extern "C" fn(c_int)>(h);
                f(libc::SIGPROF);
            }
        } else {
            TICKS_REFUSED.fetch_add(1, Ordering::Relaxed);
        }
    }

    extern "C" fn on_tick(_sig: c_int, _info: *mut libc::siginfo_t, _ctx: *mut c_void) {
        pass_tick();
    }

    /// `si_code` of a SIGTRAP sent by a perf event with `sigtrap` set.
    const TRAP_PERF: c_int = 6;
    /// The `sig_data` our task-clock event carries, to tell its traps apart.
    const TRAP_COOKIE: u64 = 0x7ec5_7ec5_0000_0001;
    /// The `sig_data` of our context-switch event (wall-clock sessions).
    const SWITCH_COOKIE: u64 = 0x7ec5_7ec5_0000_0002;

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
    fn pass_blocked_ticks() {
        let interval = BLOCKED_INTERVAL.load(Ordering::Relaxed);
        if interval == 0 {
            return; // not armed for a wall-clock session
        }
        let (Some(wall), Some(cpu)) = (clock_ns(libc::CLOCK_MONOTONIC), clock_ns(libc::CLOCK_THREAD_CPUTIME_ID))
        else {
            return;
        };
        let dw = wall.saturating_sub(BLOCKED_WALL.swap(wall, Ordering::Relaxed));
        let dc = cpu.saturating_sub(BLOCKED_CPU.swap(cpu, Ordering::Relaxed));
        let off = dw.saturating_sub(dc).saturating_add(BLOCKED_REST.load(Ordering::Relaxed));
        BLOCKED_REST.store(off % interval, Ordering::Relaxed);
        let n = (off / interval).min(MAX_BLOCKED_TICKS);
        BLOCKED_TICKS.fetch_add(n, Ordering::Relaxed);
        for _ in 0..n {
            pass_tick();
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
            pass_tick();
            return;
        }
        if code == TRAP_PERF && cookie == SWITCH_COOKIE {
            if STATE.load(Ordering::Acquire) != 0 {
                pass_blocked_ticks();
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
                // nest inside ours.
                unsafe {
                    let mut old = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
                    let mut sa = MaybeUninit::<libc::sigaction>::zeroed().assume_init();
                    sa.sa_sigaction = on_trap as *const () as usize;
                    sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                    libc::sigemptyset(&mut sa.sa_mask);
                    libc::sigaddset(&mut sa.sa_mask, libc::SIGPROF);
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
                // LuaJIT's handler cannot nest inside ours.
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
                    libc::sigaction(sig, &sa, std::ptr::null_mut()) == 0
                }
            })
        })
    }

    /// Keeps this shared library mapped until the process ends: the tick
    /// handler must stay valid even after `lua_close` unloads C modules.
    fn pin_this_library() {
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
        STATE.store(0, Ordering::Release);
    }

    /// Ticks passed on to LuaJIT and ticks refused since the last arm.
    pub fn tick_counts() -> (u64, u64) {
        (TICKS_PASSED.load(Ordering::Relaxed), TICKS_REFUSED.load(Ordering::Relaxed))
    }

    // -- Tick sources -------------------------------------------------------

    /// `struct perf_event_attr` up to `sig_data` (version 7, 128 bytes).
    #[repr(C)]
    #[derive(Default)]
    struct PerfEventAttr {
        kind: u32,
        size: u32,
        config: u64,
        sample_period: u64,
        sample_type: u64,
        read_format: u64,
        flags: u64,
        wakeup_events: u32,
        bp_type: u32,
        config1: u64,
        config2: u64,
        branch_sample_type: u64,
        sample_regs_user: u64,
        sample_stack_user: u32,
        clockid: i32,
        sample_regs_intr: u64,
        aux_watermark: u32,
        sample_max_stack: u16,
        reserved_2: u16,
        aux_sample_size: u32,
        reserved_3: u32,
        sig_data: u64,
    }
    const PERF_TYPE_SOFTWARE: u32 = 1;
    const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
    const PERF_COUNT_SW_CONTEXT_SWITCHES: u64 = 3;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    const ATTR_EXCLUDE_HV: u64 = 1 << 6;
    const ATTR_REMOVE_ON_EXEC: u64 = 1 << 36;
    const ATTR_SIGTRAP: u64 = 1 << 37;

    /// Opens the kernel's task-clock event for the calling thread: it counts
    /// only while the thread runs (user and kernel time), with a
    /// high-resolution timer on the thread's own CPU, and every `period_ns`
    /// of the thread's CPU time it sends the thread a SIGTRAP as the thread
    /// returns to user mode, so a system call in progress (a sleep, a wait)
    /// completes undisturbed. Needs Linux 5.13 and perf events with kernel
    /// time (root, CAP_PERFMON or perf_event_paranoid <= 1): counting user
    /// time alone would hide system calls, so it is not offered.
    pub fn open_task_clock(period_ns: u64) -> Result<c_int, i32> {
        open_trap_event(PERF_COUNT_SW_TASK_CLOCK, period_ns.max(10_000), TRAP_COOKIE)
    }

    /// Opens the context-switch event for the calling thread: a SIGTRAP on
    /// its return to user mode after every switch, for the blocked-time
    /// accounting of wall-clock sessions (see `pass_blocked_ticks`).
    pub fn open_switch_trap() -> Result<c_int, i32> {
        open_trap_event(PERF_COUNT_SW_CONTEXT_SWITCHES, 1, SWITCH_COOKIE)
    }

    fn open_trap_event(config: u64, period: u64, cookie: u64) -> Result<c_int, i32> {
        if under_valgrind() {
            return Err(libc::ENOTSUP); // valgrind dies on a perf SIGTRAP
        }
        if !trap_handler_installed() {
            return Err(libc::EINVAL);
        }
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config,
            sample_period: period,
            flags: ATTR_EXCLUDE_HV | ATTR_REMOVE_ON_EXEC | ATTR_SIGTRAP,
            sig_data: cookie,
            ..Default::default()
        };
        // SAFETY: `attr` is a valid perf_event_attr of the size it declares;
        // pid 0 / cpu -1 is the calling thread on any CPU.
        let fd = unsafe {
            libc::syscall(libc::SYS_perf_event_open, &attr as *const PerfEventAttr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC)
        } as c_int;
        if fd < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        Ok(fd)
    }

    /// Whether the process runs under valgrind, which preloads its
    /// `vgpreload_*.so` into the program and treats any SIGTRAP as its own.
    fn under_valgrind() -> bool {
        std::env::var_os("LD_PRELOAD").is_some_and(|v| v.to_string_lossy().contains("vgpreload"))
    }

    pub fn close_fd(fd: c_int) {
        // SAFETY: closes a descriptor this module opened and owns.
        unsafe {
            libc::close(fd);
        }
    }

    /// A POSIX timer on `clock` that sends `sig` to the calling thread every
    /// `period_ns`. Returned as an opaque handle for `delete_timer`.
    pub fn create_thread_timer(clock: libc::clockid_t, sig: c_int, period_ns: u64) -> Option<usize> {
        // SAFETY: a zeroed sigevent with SIGEV_THREAD_ID and our own thread id
        // is valid; timer_create writes the id into `timer`; timer_settime
        // takes a valid itimerspec.
        unsafe {
            let mut ev = MaybeUninit::<libc::sigevent>::zeroed().assume_init();
            ev.sigev_notify = libc::SIGEV_THREAD_ID;
            ev.sigev_signo = sig;
            ev.sigev_notify_thread_id = gettid();
            let mut timer: libc::timer_t = std::ptr::null_mut();
            if libc::timer_create(clock, &mut ev, &mut timer) != 0 {
                return None;
            }
            let p = period_ns.max(10_000);
            let ts = libc::timespec { tv_sec: (p / 1_000_000_000) as libc::time_t, tv_nsec: (p % 1_000_000_000) as _ };
            let spec = libc::itimerspec { it_interval: ts, it_value: ts };
            if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
                libc::timer_delete(timer);
                return None;
            }
            Some(timer as usize)
        }
    }

    pub fn delete_timer(timer: usize) {
        // SAFETY: `timer` came from create_thread_timer and is deleted once.
        unsafe {
            libc::timer_delete(timer as libc::timer_t);
        }
    }

    /// CLOCK_THREAD_CPUTIME_ID of the calling thread.
    pub const THREAD_CPU: libc::clockid_t = libc::CLOCK_THREAD_CPUTIME_ID;
    pub const MONOTONIC: libc::clockid_t = libc::CLOCK_MONOTONIC;
}
