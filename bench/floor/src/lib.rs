//! A SIGPROF timer thread that works the way tecs-profile's precise timer
//! does: it sleeps on CLOCK_MONOTONIC with absolute deadlines and sends
//! SIGPROF with `tgkill` to one thread each time that thread has used
//! another interval of CPU time.
//!
//! The `floor` binary uses it with an empty handler to measure the cost of
//! signal delivery alone; `bench_timer_start`/`bench_timer_stop` let the
//! LuaJIT benchmarks drive `jit.profile`-based samplers (whose own timer
//! fires only on kernel ticks) at the same rate, so per-sample costs are
//! compared at equal sample counts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub fn thread_cpu_clock_of_self() -> libc::clockid_t {
    let mut id: libc::clockid_t = 0;
    // SAFETY: pthread_self is valid; `id` is a valid out-pointer.
    let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
    assert_eq!(rc, 0, "pthread_getcpuclockid");
    id
}

pub fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

pub fn gettid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

pub struct Timer {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    timer_cpu_ns: Arc<AtomicU64>,
    handle: Option<JoinHandle<()>>,
}

impl Timer {
    /// Signals the calling thread every `interval_ns` of its CPU time.
    pub fn start(interval_ns: u64) -> Timer {
        let tid = gettid();
        let cpu_clock = thread_cpu_clock_of_self();
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let timer_cpu_ns = Arc::new(AtomicU64::new(0));
        let (stop2, sent2, tcpu2) = (stop.clone(), sent.clone(), timer_cpu_ns.clone());
        let handle = std::thread::spawn(move || {
            // SAFETY: PR_SET_TIMERSLACK takes a plain integer.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
            let own = thread_cpu_clock_of_self();
            let interval = interval_ns.max(10_000);
            let mut wake = clock_ns(libc::CLOCK_MONOTONIC).unwrap();
            let mut due = clock_ns(cpu_clock).unwrap() + interval;
            while !stop2.load(Ordering::Acquire) {
                wake += interval;
                let ts = libc::timespec { tv_sec: (wake / 1_000_000_000) as _, tv_nsec: (wake % 1_000_000_000) as _ };
                // SAFETY: valid timespec; EINTR ends the sleep early.
                unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
                let now = clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(wake);
                if now > wake + 50 * interval {
                    wake = now;
                }
                if stop2.load(Ordering::Acquire) {
                    break;
                }
                let Some(cpu) = clock_ns(cpu_clock) else { break };
                if cpu >= due {
                    due = if cpu - due > 4 * interval { cpu + interval } else { due + interval };
                    // SAFETY: tgkill to a thread of our own process.
                    if unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGPROF) } != 0 {
                        break;
                    }
                    sent2.fetch_add(1, Ordering::Relaxed);
                }
            }
            tcpu2.store(clock_ns(own).unwrap_or(0), Ordering::Release);
        });
        Timer { stop, sent, timer_cpu_ns, handle: Some(handle) }
    }

    /// Stops the thread; returns (signals sent, CPU ns the timer thread used).
    pub fn stop(&mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        (self.sent.load(Ordering::Relaxed), self.timer_cpu_ns.load(Ordering::Acquire))
    }
}

static LUA_TIMER: Mutex<Option<Timer>> = Mutex::new(None);

/// Starts a timer for the calling thread (for LuaJIT's FFI). Returns 0, or
/// -1 when one is already running.
#[no_mangle]
pub extern "C" fn bench_timer_start(interval_ns: u64) -> i32 {
    let mut slot = LUA_TIMER.lock().unwrap();
    if slot.is_some() {
        return -1;
    }
    *slot = Some(Timer::start(interval_ns));
    0
}

/// Stops the timer; returns the number of signals it sent.
#[no_mangle]
pub extern "C" fn bench_timer_stop() -> u64 {
    match LUA_TIMER.lock().unwrap().take() {
        Some(mut t) => t.stop().0,
        None => 0,
    }
}

static EMPTY_DELIVERED: AtomicU64 = AtomicU64::new(0);

extern "C" fn counting_handler(_sig: libc::c_int) {
    EMPTY_DELIVERED.fetch_add(1, Ordering::Relaxed);
}

/// Installs a SIGPROF handler that only counts deliveries (the floor,
/// measured inside the benchmark's own LuaJIT process). Returns 0 on success.
#[no_mangle]
pub extern "C" fn bench_empty_handler_install() -> i32 {
    EMPTY_DELIVERED.store(0, Ordering::Relaxed);
    // SAFETY: a plain handler with an empty mask and SA_RESTART.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = counting_handler as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut())
    }
}

/// Signals the counting handler has received.
#[no_mangle]
pub extern "C" fn bench_empty_delivered() -> u64 {
    EMPTY_DELIVERED.load(Ordering::Relaxed)
}

// -- The floor of tecs-profile's own tick source --------------------------
//
// The kernel's task-clock perf event, opened on the calling thread with
// `sigtrap`, sends SIGTRAP each `interval_ns` of the thread's CPU time as it
// returns to user mode: the mechanism a default session's ticks use. With a
// handler that only counts, what it costs is the floor of that source (the
// timer interrupt on the thread's own CPU and the signal's delivery), as the
// timer thread above gives the floor of a signal sent from another CPU.

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

static TRAP_FD: AtomicU64 = AtomicU64::new(0);
static TRAPS_DELIVERED: AtomicU64 = AtomicU64::new(0);

extern "C" fn counting_trap_handler(_sig: libc::c_int) {
    TRAPS_DELIVERED.fetch_add(1, Ordering::Relaxed);
}

/// Opens the task-clock event on the calling thread with a counting SIGTRAP
/// handler. Returns 0, or the error number.
#[no_mangle]
pub extern "C" fn bench_trap_start(interval_ns: u64) -> i32 {
    const PERF_TYPE_SOFTWARE: u32 = 1;
    const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
    const EXCLUDE_HV: u64 = 1 << 6;
    const REMOVE_ON_EXEC: u64 = 1 << 36;
    const SIGTRAP: u64 = 1 << 37;
    const FD_CLOEXEC: libc::c_ulong = 8;
    TRAPS_DELIVERED.store(0, Ordering::Relaxed);
    let attr = PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_TASK_CLOCK,
        sample_period: interval_ns.max(10_000),
        flags: EXCLUDE_HV | REMOVE_ON_EXEC | SIGTRAP,
        sig_data: 1,
        ..Default::default()
    };
    // SAFETY: a plain handler with an empty mask and SA_RESTART; `attr` is a
    // valid perf_event_attr of the size it declares, for this thread.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = counting_trap_handler as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGTRAP, &sa, std::ptr::null_mut()) != 0 {
            return std::io::Error::last_os_error().raw_os_error().unwrap_or(-1);
        }
        let fd = libc::syscall(libc::SYS_perf_event_open, &attr as *const PerfEventAttr, 0, -1, -1, FD_CLOEXEC);
        if fd < 0 {
            return std::io::Error::last_os_error().raw_os_error().unwrap_or(-1);
        }
        TRAP_FD.store(fd as u64 + 1, Ordering::Relaxed);
    }
    0
}

/// Closes the event; returns the traps the handler received.
#[no_mangle]
pub extern "C" fn bench_trap_stop() -> u64 {
    let fd = TRAP_FD.swap(0, Ordering::Relaxed);
    if fd != 0 {
        // SAFETY: closes the descriptor bench_trap_start opened.
        unsafe { libc::close((fd - 1) as libc::c_int) };
    }
    TRAPS_DELIVERED.load(Ordering::Relaxed)
}

/// `lua_tonumber` and `lua_pushnumber` of the LuaJIT this library is loaded
/// into, found at run time (the `floor` binary links no LuaJIT).
type ToNumber = unsafe extern "C" fn(*mut libc::c_void, libc::c_int) -> f64;
type PushNumber = unsafe extern "C" fn(*mut libc::c_void, f64);

fn lua_api() -> Option<(ToNumber, PushNumber)> {
    // SAFETY: the names are NUL-terminated; the addresses found are the
    // Lua API's functions, whose signatures these are.
    unsafe {
        let to = libc::dlsym(libc::RTLD_DEFAULT, c"lua_tonumber".as_ptr());
        let push = libc::dlsym(libc::RTLD_DEFAULT, c"lua_pushnumber".as_ptr());
        (!to.is_null() && !push.is_null()).then(|| {
            (
                std::mem::transmute::<*mut libc::c_void, ToNumber>(to),
                std::mem::transmute::<*mut libc::c_void, PushNumber>(push),
            )
        })
    }
}

/// `bench_trap_start(interval_ns)` as a Lua C function, for
/// `package.loadlib`: the trap floor then starts without LuaJIT's FFI,
/// whose type names would stay in the program's string table (a session
/// leaves none there). Returns the error number, 0 on success.
///
/// # Safety
/// Called by LuaJIT as a C function, with its state.
#[no_mangle]
pub unsafe extern "C" fn bench_trap_start_lua(l: *mut libc::c_void) -> libc::c_int {
    let Some((to, push)) = lua_api() else { return 0 };
    // SAFETY: `l` is the state LuaJIT called this with; one result fits
    // in the stack space every C function gets.
    unsafe { push(l, bench_trap_start(to(l, 1) as u64) as f64) };
    1
}

/// `bench_trap_stop()` as a Lua C function; returns the traps received.
///
/// # Safety
/// As `bench_trap_start_lua`.
#[no_mangle]
pub unsafe extern "C" fn bench_trap_stop_lua(l: *mut libc::c_void) -> libc::c_int {
    let Some((_, push)) = lua_api() else { return 0 };
    // SAFETY: as in `bench_trap_start_lua`.
    unsafe { push(l, bench_trap_stop() as f64) };
    1
}
