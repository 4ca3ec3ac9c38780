//! The crate's side of the VM and the operating system: every FFI
//! declaration of the crate (LuaJIT's profiler API, looked up at run time),
//! the safe handles over them, the tick handler and its sources
//! (`posix`), and the signal handlers ([`signal_context`] lists what runs
//! in them).
//!
//! The sampler sees a [`VmStack`] handle for the duration of one callback,
//! a [`ZoneAnchor`] for raw reads of the `jit.zone` stack, a [`SamplerBox`]
//! that owns the state LuaJIT's callback writes to, and a handful of POSIX
//! helpers for the precise timer and the signal mask. Above this module an
//! `unsafe` block appears only beside the type that owns the pointer it
//! uses (the allocator wrapper of `record::alloc_hook`, the live table's
//! link), each with its `// SAFETY:` reason.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use mlua::ffi;
use mlua::Lua;

mod callback;
mod functions;
#[cfg(target_os = "linux")]
pub mod large_pages;
pub mod signal_context;
#[cfg(unix)]
pub mod stop_signals;
mod tick_note;
#[cfg(target_os = "linux")]
pub mod wake;
#[cfg(windows)]
pub mod windows;
mod zone_anchor;
#[cfg(target_os = "linux")]
pub use large_pages::advise_huge_pages;
pub use tick_note::{RunningC, TickNote, TickOrigin, NOTE_SLOTS};
pub use zone_anchor::ZoneAnchor;

/// What `origin`'s ticks since the last call found (see `posix::running_c`).
#[cfg(target_os = "linux")]
pub fn take_tick_note(origin: TickOrigin) -> TickNote {
    posix::running_c::take(origin)
}

/// Off Linux no tick handler notes anything.
#[cfg(not(target_os = "linux"))]
pub fn take_tick_note(_origin: TickOrigin) -> TickNote {
    TickNote::default()
}
pub use callback::{note_alloc_triggers, SampleSink, SamplerBox, SamplerWatch};
pub use functions::{FunctionAnchor, FunctionSlots};

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

#[cfg(unix)]
fn lookup(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with RTLD_DEFAULT only reads the process's symbol tables;
    // `name` is a valid NUL-terminated string.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

#[cfg(windows)]
fn lookup(name: &CStr) -> *mut c_void {
    windows::lookup(name)
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

/// How LuaJIT's stack dump writes an address (`lj_strfmt_wptr`): `@0x`
/// and eight hex digits, two more per significant byte of the high half.
/// A C function is named so, and a prototype without lines after its
/// file. Returns the text's length in `buf`.
pub fn address_text(addr: usize, buf: &mut [u8; 19]) -> usize {
    let hi = (addr as u64 >> 32) as u32;
    let digits = 8 + if hi != 0 { 2 + 2 * ((31 - hi.leading_zeros()) >> 3) as usize } else { 0 };
    buf[..3].copy_from_slice(b"@0x");
    let mut v = addr as u64;
    for d in buf[3..3 + digits].iter_mut().rev() {
        *d = b"0123456789abcdef"[(v & 15) as usize];
        v >>= 4;
    }
    3 + digits
}

/// The decimal digits of `v`, written at the end of `buf`; returns where
/// they start. No allocation: the sample callback and the tick handler
/// both write numbers with it.
pub fn decimal_digits(mut v: u64, buf: &mut [u8; 20]) -> usize {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return i;
        }
    }
}

/// Hands the stacks the tick handler read in compiled code since the last
/// call to `f` (none off Linux).
pub fn take_compiled_stacks(f: impl FnMut(TakenStack)) {
    #[cfg(target_os = "linux")]
    crate::trace_decoder::drain(f);
    #[cfg(not(target_os = "linux"))]
    let _ = f;
}

/// A stack the handler read, as the drain hands it on.
pub struct TakenStack<'a> {
    pub zone: &'a [u8],
    pub stack: &'a [u8],
    /// Native frames below the stack's leaf, each after a separator
    /// (`nativeFrames`; empty without them).
    pub native: &'a [u8],
    /// What `lua_getinfo` tells of each frame (see `FrameFacts`).
    pub facts: FrameFacts<'a>,
    /// The VM state letter: `N` (compiled code), `C` (a C function), `I`
    /// (interpreted code), `G` (the collector) or `J` (the JIT compiler).
    pub state: u8,
    pub thread: usize,
    pub count: u32,
    pub last_ns: u64,
}

/// The identity records of a stack's frames, root first.
#[derive(Clone, Copy)]
pub struct FrameFacts<'a>(pub(crate) &'a [u8]);

/// What `lua_getinfo` tells of one Lua frame.
pub struct FrameFact<'a> {
    pub first: i32,
    pub last: i32,
    pub line: i32,
    pub source: &'a [u8],
    pub name: Option<&'a [u8]>,
}

impl<'a> Iterator for FrameFacts<'a> {
    /// None inside for a frame that is not a Lua function.
    type Item = Option<FrameFact<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let b = self.0;
        let (&kind, rest) = b.split_first()?;
        if kind == 0 {
            self.0 = rest;
            return Some(None);
        }
        let i32_at = |at: usize| i32::from_le_bytes(rest[at..at + 4].try_into().unwrap());
        let (first, last, line) = (i32_at(0), i32_at(4), i32_at(8));
        let sn = rest[12] as usize;
        let source = &rest[13..13 + sn];
        let nn = rest[13 + sn] as usize;
        let name = &rest[14 + sn..14 + sn + nn];
        self.0 = &rest[14 + sn + nn..];
        Some(Some(FrameFact { first, last, line, source, name: (!name.is_empty()).then_some(name) }))
    }
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
    /// The address of the sampled Lua thread (what `lua_topointer` gives
    /// for it): which coroutine the sample was taken on.
    #[inline]
    pub fn thread_id(&self) -> usize {
        self.l as usize
    }

    /// The prototype of the Lua function at stack `level` when its bytecode
    /// has no lines (see [`stripped_proto`]), or None. Asked only of a
    /// frame LuaJIT's dump wrote as `file:0`.
    pub fn stripped_proto(&self, level: i32) -> Option<usize> {
        // SAFETY: `l` is the running callback's thread; lua_getinfo "f"
        // pushes the frame's function after lua_checkstack made room, and
        // it is popped before returning, the stack as it was; the function
        // is live while on the stack, where its header is read.
        unsafe {
            let mut ar = std::mem::MaybeUninit::<ffi::lua_Debug>::zeroed().assume_init();
            if ffi::lua_getstack(self.l, level, &mut ar) == 0 || ffi::lua_checkstack(self.l, 1) == 0 {
                return None;
            }
            if ffi::lua_getinfo(self.l, c"f".as_ptr(), &mut ar) == 0 {
                return None;
            }
            let pt = stripped_proto_at(ffi::lua_topointer(self.l, -1));
            ffi::lua_settop(self.l, -2);
            pt
        }
    }

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

    /// The function running at stack `level` (0 is the innermost, as in
    /// `luaJIT_profile_dumpstack`), or None past the stack's end. Reads
    /// only, and allocates nothing: the name is the VM's own string.
    pub fn frame_function(&self, level: i32) -> Option<FrameFunction<'_>> {
        // SAFETY: `l` is the running callback's thread; lua_getstack and
        // lua_getinfo with "Sln" only fill `ar` (no stack push, no
        // allocation, no Lua code). `what` and `name` point to NUL-terminated
        // strings the VM keeps alive while the callback runs (a prototype's
        // constants or the VM's static names), which the returned value
        // cannot outlive; `short_src` is copied out of `ar`.
        unsafe {
            let mut ar = std::mem::MaybeUninit::<ffi::lua_Debug>::zeroed().assume_init();
            if ffi::lua_getstack(self.l, level, &mut ar) == 0 || ffi::lua_getinfo(self.l, c"Sln".as_ptr(), &mut ar) == 0
            {
                return None;
            }
            let what = if ar.what.is_null() { 0 } else { *ar.what as u8 };
            let name = (!ar.name.is_null()).then(|| CStr::from_ptr(ar.name).to_bytes()).filter(|n| !n.is_empty());
            let mut source = [0u8; SHORT_SRC];
            let src = CStr::from_ptr(ar.short_src.as_ptr()).to_bytes();
            let n = src.len().min(SHORT_SRC);
            source[..n].copy_from_slice(&src[..n]);
            Some(FrameFunction {
                lua: what == b'L' || what == b'm',
                first: ar.linedefined,
                last: ar.lastlinedefined,
                line: ar.currentline,
                name,
                source,
                source_len: n,
            })
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
        // it to the anchored coroutine, growing that stack when it is full
        // (`capacity` bounds it); both stacks end as they started but for that.
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

/// Room for a chunk's short name (`LUA_IDSIZE`).
const SHORT_SRC: usize = 60;

/// What `lua_getinfo` tells of the function at one stack level, valid
/// while the callback that asked runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameFunction<'a> {
    /// A Lua function or main chunk (not C code or a builtin).
    pub lua: bool,
    /// First and last line of its definition (0 for a main chunk).
    pub first: i32,
    pub last: i32,
    /// The line it is running.
    pub line: i32,
    /// The name its caller used for it, when the VM can tell.
    pub name: Option<&'a [u8]>,
    source: [u8; SHORT_SRC],
    source_len: usize,
}

impl<'a> FrameFunction<'a> {
    pub fn new(first: i32, last: i32, line: i32, name: Option<&'a [u8]>, source: &[u8]) -> Self {
        let mut buf = [0u8; SHORT_SRC];
        let n = source.len().min(SHORT_SRC);
        buf[..n].copy_from_slice(&source[..n]);
        FrameFunction { lua: true, first, last, line, name, source: buf, source_len: n }
    }

    /// A frame that is not a Lua function (C code, a builtin).
    pub fn not_lua() -> Self {
        FrameFunction { lua: false, first: 0, last: 0, line: 0, name: None, source: [0; SHORT_SRC], source_len: 0 }
    }

    /// The chunk's short name as the VM prints it in messages.
    pub fn source(&self) -> &[u8] {
        &self.source[..self.source_len]
    }
}

/// Stops LuaJIT's profiler if this VM runs it (a no-op otherwise).
pub fn stop_profiler(api: &ProfilerApi, lua: &Lua) -> mlua::Result<()> {
    let stop = api.stop;
    // SAFETY: a valid state of this VM; LuaJIT only stops a profiler that
    // belongs to the calling VM.
    unsafe { lua.exec_raw::<()>((), |l| stop(l)) }
}

/// Off Linux the kernel is not asked for huge pages.
#[cfg(not(target_os = "linux"))]
pub fn advise_huge_pages<T>(_buf: &mut Vec<T>) {}

/// Off Linux the kernel is not asked for huge pages.
#[cfg(not(target_os = "linux"))]
fn advise_huge_pages_at(_start: usize, _bytes: usize) {}

/// Gives finished profiles (the format crate) what they ask of the process:
/// huge pages for their large buffers, and C function names.
pub fn install_profile_host() {
    #[cfg(target_os = "linux")]
    use large_pages::advise_huge_pages_at;
    tecs_profile_format::profile::host::install(tecs_profile_format::profile::host::Host {
        advise_huge_pages: advise_huge_pages_at,
        is_own_code,
        c_symbol_name,
        native_symbol_name: crate::native_frames::symbols::name,
    });
}

/// The CPU time the calling thread has used, in nanoseconds (None where
/// the system has no per-thread CPU clock): what a frame did not wait.
pub fn thread_cpu_ns() -> Option<u64> {
    #[cfg(target_os = "linux")]
    return posix::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    #[cfg(windows)]
    return windows::cpu_ns(windows::current_thread_id());
    #[cfg(not(any(target_os = "linux", windows)))]
    None
}

/// Nanoseconds on the monotonic clock: the time base of timeline samples
/// and frame marks (one vDSO call on Linux, no system call, no allocation).
#[inline]
pub fn monotonic_ns() -> u64 {
    #[cfg(target_os = "linux")]
    return posix::clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0);
    #[cfg(not(target_os = "linux"))]
    {
        static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
        EPOCH.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
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

    /// The state itself, for the code that owns a pointer into this VM
    /// (the allocator wrapper); using it is `unsafe` there.
    pub fn state(&self) -> *mut ffi::lua_State {
        self.0
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

/// The address of the C code behind a Lua C function: what LuaJIT's stack
/// dump prints as `@0x...` for it. None for Lua functions and builtins.
pub fn c_function_address(lua: &Lua, f: &mlua::Function) -> mlua::Result<Option<usize>> {
    let mut out: usize = 0;
    let slot = &mut out;
    // SAFETY: exec_raw pushes `f` at index 1 of a valid state;
    // lua_tocfunction only reads the function object (NULL unless it is a
    // C function) and we copy the pointer out.
    unsafe {
        lua.exec_raw::<()>(f, |l| {
            if let Some(cf) = ffi::lua_tocfunction(l, 1) {
                *slot = cf as usize;
            }
            ffi::lua_settop(l, 0);
        })?;
    }
    Ok((out != 0).then_some(out))
}

/// The prototype of the Lua function `f` when its bytecode has no lines:
/// the address its frames are written by (`file:@0xADDR`). None for other
/// functions, and where the tick handler does not read the VM's stack.
pub fn stripped_proto(f: &mlua::Function) -> Option<usize> {
    // SAFETY: `f` is a live function of this state, which its reference
    // keeps alive for the call.
    unsafe { stripped_proto_at(f.to_pointer()) }
}

/// [`stripped_proto`] of the function object at `f`: the decoder reads its
/// header and its prototype's only once it learned this build's layout;
/// there is no decoder off Linux.
///
/// # Safety
/// `f` must be a live function object of a VM of this process.
unsafe fn stripped_proto_at(f: *const c_void) -> Option<usize> {
    #[cfg(target_os = "linux")]
    return crate::trace_decoder::stripped_proto(f);
    #[cfg(not(target_os = "linux"))]
    return {
        let _ = f;
        None
    };
}

/// Whether `addr` lies in this library (the profiler's own C functions).
#[cfg(windows)]
pub fn is_own_code(addr: usize) -> bool {
    let own = windows::module_of(is_own_code as *const () as usize);
    own.is_some() && windows::module_of(addr) == own
}

/// Name of the C function at `addr`: its module and offset on Windows.
#[cfg(windows)]
pub fn c_symbol_name(addr: usize) -> Option<String> {
    windows::module_offset_name(addr)
}

/// Whether `addr` lies in this library (the profiler's own C functions).
#[cfg(unix)]
pub fn is_own_code(addr: usize) -> bool {
    let base = |a: usize| {
        let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
        // SAFETY: dladdr only reads loader tables and fills `info`.
        let found = unsafe { libc::dladdr(a as *const c_void, info.as_mut_ptr()) } != 0;
        // SAFETY: zeroed and, when found, filled by dladdr.
        found.then(|| unsafe { info.assume_init() }.dli_fbase as usize)
    };
    let own = base(is_own_code as *const () as usize);
    own.is_some() && base(addr) == own
}

/// Name of the C function at `addr` (from `@0x...` frames), via dladdr.
#[cfg(unix)]
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
        // A static function (a Lua C function a module registers by
        // address) is in the symbol table only.
        if let Some(name) = crate::native_frames::symbols::function_at(addr) {
            return Some(name);
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

#[cfg(any(test, feature = "test-support"))]
pub mod alloc_probe;

/// Sessions are process-wide (one profiler, one allocator, one tick
/// handler): the tests of every layer that start one take turns.
#[cfg(any(test, feature = "test-support"))]
pub fn one_session_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// POSIX: clocks, the signal mask, the tick signal and its handler, and
/// the tick sources.
#[cfg(target_os = "linux")]
pub mod posix;
