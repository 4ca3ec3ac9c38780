//! Catching the signals that ask a command-line client to end (SIGINT,
//! SIGTERM, SIGHUP), so that `tecs-profile live` ends cleanly: it stops
//! the session it started and leaves the program it watched running. The
//! handler only records the signal; the client's loop, woken from its wait
//! (the handlers are installed without `SA_RESTART`), reads it. Releasing
//! puts the handlers found back (luajit's own for SIGINT).

use std::ffi::c_int;
use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

/// The signals caught.
const STOP_SIGNALS: [c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The last signal caught, or 0.
static CAUGHT: AtomicI32 = AtomicI32::new(0);

/// The handlers found when catching started, put back by [`release`].
static SAVED: Mutex<Vec<(c_int, libc::sigaction)>> = Mutex::new(Vec::new());

extern "C" fn on_stop(signal: c_int) {
    CAUGHT.store(signal, Ordering::Release);
}

/// Catches the stop signals until [`release`]. Catching twice is once.
pub fn catch() -> io::Result<()> {
    let mut saved = SAVED.lock().unwrap_or_else(|e| e.into_inner());
    if !saved.is_empty() {
        return Ok(());
    }
    CAUGHT.store(0, Ordering::Release);
    for signal in STOP_SIGNALS {
        // SAFETY: `action` and `old` are plain C structs, zeroed and then
        // filled; the handler is an `extern "C" fn(c_int)` that only stores
        // to an atomic, which is async-signal-safe.
        let old = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop as extern "C" fn(c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = 0;
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, &action, &mut old) != 0 {
                return Err(io::Error::last_os_error());
            }
            old
        };
        saved.push((signal, old));
    }
    Ok(())
}

/// The stop signal caught since [`catch`], if any: "SIGINT", "SIGTERM" or
/// "SIGHUP".
pub fn caught() -> Option<&'static str> {
    match CAUGHT.load(Ordering::Acquire) {
        libc::SIGINT => Some("SIGINT"),
        libc::SIGTERM => Some("SIGTERM"),
        libc::SIGHUP => Some("SIGHUP"),
        _ => None,
    }
}

/// Puts back the handlers [`catch`] found.
pub fn release() {
    let mut saved = SAVED.lock().unwrap_or_else(|e| e.into_inner());
    for (signal, old) in saved.drain(..) {
        // SAFETY: `old` is the action sigaction returned for `signal`.
        unsafe { libc::sigaction(signal, &old, std::ptr::null_mut()) };
    }
}
