//! POSIX helpers of the sys layer: thread ids, clocks, ITIMER_PROF and the
//! signal mask. The tick handler is in `ticks`, the tick sources in
//! `sources`, their intervals drawn at random in `jitter`, the guard
//! against LuaJIT losing its profiler hook in `lost_hook`.

use std::ffi::c_int;
use std::mem::MaybeUninit;

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

/// Arms ITIMER_PROF at `ms` milliseconds, as LuaJIT's own start does:
/// for a session that started LuaJIT's profiler with a quiet timer and
/// falls back to LuaJIT's timer.
pub fn arm_itimer_prof(ms: u64) {
    let tv = libc::timeval { tv_sec: (ms / 1000) as libc::time_t, tv_usec: ((ms % 1000) * 1000) as libc::suseconds_t };
    let t = libc::itimerval { it_interval: tv, it_value: tv };
    // SAFETY: valid itimerval; a null old-value pointer is allowed.
    unsafe {
        libc::setitimer(libc::ITIMER_PROF, &t, std::ptr::null_mut());
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
        let armed =
            libc::getitimer(libc::ITIMER_PROF, &mut it) == 0 && (it.it_value.tv_sec != 0 || it.it_value.tv_usec != 0);
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

pub mod jitter;
pub mod lost_hook;
pub mod running_c;
mod sources;
mod ticks;
pub use sources::*;
pub use ticks::*;
