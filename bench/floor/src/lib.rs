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
