//! Native frames below a C function (Linux x86-64, `nativeFrames`).
//!
//! LuaJIT's stack ends at the C function a Lua frame called
//! (`love.graphics.points`, a function called through the FFI): what that
//! function spends its time in is C code, whose frames only the machine
//! stack holds. The tick handler, which already reads the Lua stack of a
//! tick in a C function or in a trace's call, walks that machine stack
//! too, from the interrupted registers, with the unwind tables of the
//! loaded objects (`.eh_frame`: Debian's libraries keep no frame pointers),
//! up to the frame the Lua stack ends at:
//!
//! * in a C function the VM called (state C), up to the VM's C frame: the
//!   frame returning to it is the C function itself, which the Lua stack
//!   already names;
//! * in a function a trace called, up to the return into the trace's code,
//!   which belongs to no loaded object.
//!
//! The frames LuaJIT's own code adds to make such a call (the FFI's call
//! machinery below the builtin that makes it, a trace's call of one of
//! LuaJIT's helpers) are left out: the frames kept are the foreign code's,
//! and what it calls.
//!
//! The tables are copied when the session starts ([`arm`]), and again by a
//! thread of ours when objects are loaded or unloaded ([`Watcher`]).
//! The walk reads only the VM thread's stack between the interrupted stack
//! pointer and the stack's top, allocates nothing (framehop's DWARF
//! evaluation with fixed storage, its rule cache allocated here) and takes
//! no lock: a tick that finds the tables being replaced reads no native
//! frame. Frames are written as `[native@0x...]` (see
//! `tecs_profile_format::profile::native_address`) and named after the
//! session ([`symbols`]).

mod modules;
pub mod symbols;

use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind, Unwinder};

/// Native frames kept per sample, leaf first.
pub const MAX_NATIVE: usize = 32;

type Walker = UnwinderX86_64<Vec<u8>, MustNotAllocateDuringUnwind>;
type RuleCache = CacheX86_64<MustNotAllocateDuringUnwind>;

/// What the handler walks with: built outside it, replaced whole.
struct Tables {
    walker: Walker,
    /// framehop's cache of unwind rules; only the handler that holds
    /// [`BUSY`] touches it.
    cache: UnsafeCell<RuleCache>,
    /// Executable ranges of the objects, sorted by start; the flag marks
    /// LuaJIT's own object.
    texts: Vec<(Range<usize>, bool)>,
    /// The VM thread's stack.
    stack: Range<usize>,
    /// Objects loaded and unloaded when the tables were read (`dlpi_adds`,
    /// `dlpi_subs`).
    loaded: (u64, u64),
}

static TABLES: AtomicPtr<Tables> = AtomicPtr::new(std::ptr::null_mut());
/// Held by a handler while it walks; a replacement waits for it to clear.
static BUSY: AtomicBool = AtomicBool::new(false);
/// A tick found code in no object of the tables: the watcher was woken.
static STALE: AtomicBool = AtomicBool::new(false);
/// Replaces the tables one at a time.
static REPLACING: Mutex<()> = Mutex::new(());

/// Counts since the last arm (`stats().nativeFrames`).
static STACKS: AtomicU64 = AtomicU64::new(0);
static FRAMES: AtomicU64 = AtomicU64::new(0);
static UNREAD: AtomicU64 = AtomicU64::new(0);
static OBJECTS: AtomicU64 = AtomicU64::new(0);

/// Reads the loaded objects' unwind tables for the calling thread (the
/// VM thread of a session) and lets the handler walk native frames.
/// Err says why it cannot.
pub fn arm() -> Result<(), &'static str> {
    for c in [&STACKS, &FRAMES, &UNREAD, &OBJECTS] {
        c.store(0, Ordering::Relaxed);
    }
    let stack = thread_stack().ok_or("the thread's stack bounds are unknown")?;
    stop_watcher();
    replace(Some(build(stack)));
    if let Err(e) = start_watcher() {
        replace(None);
        return Err(e);
    }
    Ok(())
}

/// The handler walks no native frame from now on; the tables are freed.
pub fn disarm() {
    stop_watcher();
    replace(None);
}

/// The thread that reads the tables again when objects are loaded or
/// unloaded: it looks every [`WATCH_MS`], and at once when a tick found a
/// C function's code in no object of the tables ([`STALE`]; the handler
/// writes a byte to its pipe, which is async-signal-safe).
struct Watcher {
    thread: std::thread::JoinHandle<()>,
    /// The pipe's write end; its read end is the thread's.
    write: i32,
    /// The process that started the thread: a child forked since has a
    /// copy of this record but not the thread.
    pid: u32,
}

static WATCHER: Mutex<Option<Watcher>> = Mutex::new(None);
/// The watcher's pipe, for the handler (-1: none).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
static STOPPING: AtomicBool = AtomicBool::new(false);
const WATCH_MS: i32 = 250;

fn start_watcher() -> Result<(), &'static str> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err("no pipe for the thread that follows loaded objects");
    }
    let read = fds[0];
    STOPPING.store(false, Ordering::SeqCst);
    let thread = std::thread::Builder::new().name("tecs-native-objects".into()).spawn(move || watch(read));
    let Ok(thread) = thread else {
        // SAFETY: both ends are ours and used by nothing else.
        unsafe { (libc::close(fds[0]), libc::close(fds[1])) };
        return Err("no thread to follow loaded objects");
    };
    WAKE_FD.store(fds[1], Ordering::Release);
    *WATCHER.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(Watcher { thread, write: fds[1], pid: std::process::id() });
    Ok(())
}

fn stop_watcher() {
    let Some(w) = WATCHER.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
    WAKE_FD.store(-1, Ordering::SeqCst);
    if w.pid == std::process::id() {
        STOPPING.store(true, Ordering::SeqCst);
        // SAFETY: writes one byte to our own pipe.
        unsafe { libc::write(w.write, [1u8].as_ptr().cast(), 1) };
        let _ = w.thread.join();
    } else {
        // A forked child: the thread is the parent's; joining it would
        // wait forever.
        std::mem::forget(w.thread);
    }
    // No handler uses the write end once WAKE_FD is -1 and the handler
    // that may have loaded it has returned (BUSY).
    while BUSY.load(Ordering::SeqCst) {
        std::hint::spin_loop();
    }
    // SAFETY: the write end is ours, and no longer used (above).
    unsafe { libc::close(w.write) };
}

/// The watcher thread's loop, on the pipe's read end.
fn watch(read: i32) {
    // No signal meant for the program runs on this thread.
    // SAFETY: a full set, and the thread's own mask.
    unsafe {
        let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigfillset(all.as_mut_ptr());
        libc::pthread_sigmask(libc::SIG_BLOCK, all.as_ptr(), std::ptr::null_mut());
    }
    let mut pfd = libc::pollfd { fd: read, events: libc::POLLIN, revents: 0 };
    let mut sink = [0u8; 64];
    while !STOPPING.load(Ordering::SeqCst) {
        // SAFETY: one valid pollfd; reads into our own buffer.
        unsafe {
            libc::poll(&mut pfd, 1, WATCH_MS);
            while libc::read(read, sink.as_mut_ptr().cast(), sink.len()) > 0 {}
        }
        if STOPPING.load(Ordering::SeqCst) {
            break;
        }
        STALE.store(false, Ordering::Relaxed);
        let one = REPLACING.lock().unwrap_or_else(|e| e.into_inner());
        let p = TABLES.load(Ordering::Acquire);
        if p.is_null() {
            continue;
        }
        // SAFETY: only `swap_in` frees the tables, under REPLACING, held here.
        let (stack, seen) = unsafe { ((*p).stack.clone(), (*p).loaded) };
        if loaded_count() != seen {
            swap_in(Some(build(stack)));
        }
        drop(one);
    }
    // SAFETY: the read end is this thread's.
    unsafe { libc::close(read) };
}

/// Wakes the watcher (in the tick handler): a C function runs code of no
/// object of the tables.
fn ring_watcher() {
    if STALE.swap(true, Ordering::Relaxed) {
        return;
    }
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; the pipe is non-blocking
        // and a failed write only delays the look to the next period.
        unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) };
    }
}

/// The counts of `stats().nativeFrames`: samples given native frames,
/// frames given, ticks whose native frames could not be read, objects.
pub fn counts() -> [(&'static str, u64); 4] {
    [
        ("stacks", STACKS.load(Ordering::Relaxed)),
        ("frames", FRAMES.load(Ordering::Relaxed)),
        ("unread", UNREAD.load(Ordering::Relaxed)),
        ("objects", OBJECTS.load(Ordering::Relaxed)),
    ]
}

/// Whether the handler walks native frames now.
pub fn armed() -> bool {
    !TABLES.load(Ordering::Relaxed).is_null()
}

fn replace(new: Option<Box<Tables>>) {
    let _one = REPLACING.lock().unwrap_or_else(|e| e.into_inner());
    swap_in(new);
}

/// Publishes `new` and frees the tables it replaces; under REPLACING.
fn swap_in(new: Option<Box<Tables>>) {
    if let Some(t) = &new {
        OBJECTS.store(t.texts.len() as u64, Ordering::Relaxed);
    }
    // Sequentially consistent with the handler's BUSY and TABLES: either it
    // sees the new tables, or this sees it busy and waits.
    let old = TABLES.swap(new.map_or(std::ptr::null_mut(), Box::into_raw), Ordering::SeqCst);
    // A handler that loaded the old pointer holds BUSY until it is done.
    while BUSY.load(Ordering::SeqCst) {
        std::hint::spin_loop();
    }
    if !old.is_null() {
        // SAFETY: `old` came from Box::into_raw in an earlier `replace`,
        // is no longer published, and no handler is walking it.
        drop(unsafe { Box::from_raw(old) });
    }
}

fn build(stack: Range<usize>) -> Box<Tables> {
    let loaded = loaded_count();
    let luajit = luajit_object_address();
    let mut walker = Walker::new();
    let mut texts = Vec::new();
    for o in modules::loaded_objects() {
        let is_luajit = luajit.is_some_and(|a| o.text.contains(&a));
        symbols::remember(&o.path, o.bias, o.text.clone());
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: Some((o.text.start - o.bias) as u64..(o.text.end - o.bias) as u64),
            eh_frame_svma: o.eh_frame.as_ref().map(|(r, _)| r.start as u64..r.end as u64),
            eh_frame: o.eh_frame.map(|(_, b)| b),
            eh_frame_hdr_svma: o.eh_frame_hdr.as_ref().map(|(r, _)| r.start as u64..r.end as u64),
            eh_frame_hdr: o.eh_frame_hdr.map(|(_, b)| b),
            ..Default::default()
        };
        walker.add_module(Module::new(o.path, o.text.start as u64..o.text.end as u64, o.bias as u64, info));
        texts.push((o.text, is_luajit));
    }
    texts.sort_by_key(|(r, _)| r.start);
    Box::new(Tables { walker, cache: UnsafeCell::new(RuleCache::new_in()), texts, stack, loaded })
}

/// An address in LuaJIT's own object (its `lua_pcall`).
fn luajit_object_address() -> Option<usize> {
    // SAFETY: dlsym with the default handle and a C string only reads the
    // loader's tables.
    let a = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"lua_pcall".as_ptr()) } as usize;
    (a != 0).then_some(a)
}

/// Objects the loader has loaded and unloaded since the process started.
fn loaded_count() -> (u64, u64) {
    unsafe extern "C" fn first(info: *mut libc::dl_phdr_info, _size: usize, data: *mut libc::c_void) -> i32 {
        // SAFETY: `data` is the pair `loaded_count` passed; `info` the
        // loader's record, valid during the call.
        unsafe { *(data as *mut (u64, u64)) = ((*info).dlpi_adds, (*info).dlpi_subs) };
        1
    }
    let mut n = (0u64, 0u64);
    // SAFETY: the callback writes only the pair passed as its data.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut n as *mut (u64, u64) as *mut libc::c_void) };
    n
}

/// The calling thread's stack.
fn thread_stack() -> Option<Range<usize>> {
    let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: pthread_getattr_np fills `attr` for the calling thread; it is
    // destroyed after the stack is read from it.
    unsafe {
        if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
            return None;
        }
        let (mut lo, mut size) = (std::ptr::null_mut(), 0usize);
        let rc = libc::pthread_attr_getstack(attr.as_ptr(), &mut lo, &mut size);
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        (rc == 0 && size > 0).then(|| lo as usize..lo as usize + size)
    }
}

/// Where the walk ends (see the module's text).
#[derive(Clone, Copy)]
pub enum Until {
    /// At the frame whose caller's stack pointer reaches the VM's C frame.
    VmFrame(usize),
    /// At the first return into code of no loaded object (a trace's);
    /// `in_call` when the interrupted code is not the trace's own.
    Unmapped { in_call: bool },
}

/// Walks the native frames of the interrupted code into `out`, leaf first:
/// the interrupted address, then each caller's call (its return address
/// less one). Returns how many; 0 when the interrupted code is in no
/// loaded object (a trace's own code) or the walk fails.
///
/// # Safety
/// Must run in the tick handler, on the VM thread whose registers these
/// are, while the thread's stack from `rsp` up is its live stack.
pub unsafe fn walk(rip: usize, rsp: usize, rbp: usize, until: Until, out: &mut [usize; MAX_NATIVE]) -> usize {
    if BUSY.swap(true, Ordering::SeqCst) {
        return 0;
    }
    let p = TABLES.load(Ordering::SeqCst);
    let n = if p.is_null() {
        0
    } else {
        // SAFETY: published tables stay alive while BUSY is held (see
        // `replace`); the cache is only touched under BUSY.
        let t = unsafe { &*p };
        // SAFETY: the rule cache is touched only by the handler holding BUSY.
        let cache = unsafe { &mut *t.cache.get() };
        walk_with(t, cache, rip, rsp, rbp, until, out)
    };
    BUSY.store(false, Ordering::Release);
    if n > 0 {
        STACKS.fetch_add(1, Ordering::Relaxed);
        FRAMES.fetch_add(n as u64, Ordering::Relaxed);
    }
    n
}

/// Which object's code `addr` is in: None for no object's, else whether it
/// is LuaJIT's.
fn object_of(t: &Tables, addr: usize) -> Option<bool> {
    let i = t.texts.partition_point(|(r, _)| r.start <= addr);
    let (r, luajit) = t.texts.get(i.checked_sub(1)?)?;
    r.contains(&addr).then_some(*luajit)
}

fn walk_with(
    t: &Tables,
    cache: &mut RuleCache,
    rip: usize,
    rsp: usize,
    rbp: usize,
    until: Until,
    out: &mut [usize; MAX_NATIVE],
) -> usize {
    if !t.stack.contains(&rsp) {
        UNREAD.fetch_add(1, Ordering::Relaxed);
        return 0;
    }
    let Some(mut in_luajit) = object_of(t, rip) else {
        if !matches!(until, Until::Unmapped { in_call: false }) {
            // A C function runs code of no object the tables know: one
            // loaded since they were read.
            ring_watcher();
            UNREAD.fetch_add(1, Ordering::Relaxed);
        }
        return 0;
    };
    let (lo, hi) = (rsp as u64, t.stack.end as u64);
    let mut read = |a: u64| match a.checked_add(8) {
        // SAFETY: `[rsp, top)` is the live part of this thread's stack,
        // which the interrupted code owns and the handler runs below.
        Some(end) if a >= lo && end <= hi => Ok(unsafe { std::ptr::read_unaligned(a as *const u64) }),
        _ => Err(()),
    };
    let mut regs = UnwindRegsX86_64::new(rip as u64, rsp as u64, rbp as u64);
    let mut frame = FrameAddress::from_instruction_pointer(rip as u64);
    let mut len = 0;
    // Whether the outermost frame, the one the Lua stack names (or a trace
    // called), is LuaJIT's: then its run of LuaJIT frames is left out.
    let outer_luajit = loop {
        let ret = match t.walker.unwind_frame(frame, &mut regs, cache, &mut read) {
            Ok(Some(r)) => r as usize,
            _ => {
                UNREAD.fetch_add(1, Ordering::Relaxed);
                return 0;
            }
        };
        if let Until::VmFrame(cframe) = until {
            if regs.sp() as usize >= cframe {
                break in_luajit; // this frame is the C function itself
            }
        }
        if len == MAX_NATIVE {
            break false;
        }
        out[len] = frame.address_for_lookup() as usize;
        len += 1;
        match object_of(t, ret) {
            Some(l) => in_luajit = l,
            None if matches!(until, Until::Unmapped { .. }) => break in_luajit,
            None => {
                UNREAD.fetch_add(1, Ordering::Relaxed);
                return 0;
            }
        }
        let Some(next) = FrameAddress::from_return_address(ret as u64) else {
            UNREAD.fetch_add(1, Ordering::Relaxed);
            return 0;
        };
        frame = next;
    };
    if outer_luajit {
        while len > 0 && object_of(t, out[len - 1]) == Some(true) {
            len -= 1;
        }
    }
    len
}
