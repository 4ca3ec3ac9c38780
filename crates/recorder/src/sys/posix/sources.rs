//! Tick sources: the task-clock and context-switch perf events, and POSIX
//! timers aimed at the profiled thread.

use std::ffi::c_int;
use std::mem::MaybeUninit;

use super::ticks::{SWITCH_COOKIE, TRAP_COOKIE};
use super::{gettid, trap_handler_installed};

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
