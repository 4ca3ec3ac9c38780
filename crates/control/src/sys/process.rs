//! What the control channel asks of the system beyond `std`: the user's
//! id, whether a process still exists, writes to a socket that raise no
//! SIGPIPE, waiting for a socket with a time limit, files removed when
//! the process exits, and names no other process can guess.

use std::io;
use std::os::unix::io::AsRawFd;
use std::os::unix::io::RawFd;
use std::path::PathBuf;
use std::sync::{Mutex, Once};
use std::time::Duration;

/// The real user id of this process.
pub fn user_id() -> u32 {
    // SAFETY: getuid takes no argument, cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

/// `n` bytes of the kernel's random source, in hex: names and secrets no
/// other process can guess.
pub fn random_hex(n: usize) -> io::Result<String> {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{:02x}", b)).collect())
}

/// Whether process `pid` exists (one of another user's counts: it exists).
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be
    // signalled; nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Writes `buf` to `stream` as `write` would, except that a peer that has
/// gone gives an error (EPIPE) instead of SIGPIPE, whose default action
/// would end the program being profiled.
pub fn send_no_signal(stream: &impl AsRawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` bytes for the duration of the
    // call and the descriptor belongs to `stream`, alive while borrowed.
    let n = unsafe { libc::send(stream.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Writes all of `buf` with [`send_no_signal`].
pub fn send_all(stream: &impl AsRawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match send_no_signal(stream, buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Waits up to `timeout` for one of the descriptors `fds` to become
/// readable (for a listening socket: a connection to accept). False when
/// the time passed or a signal came first (its handler has run; the caller
/// looks at what it set).
pub fn wait_readable(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    let mut entries: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `entries` holds `entries.len()` valid pollfd structs for the
    // duration of the call.
    let rc = unsafe { libc::poll(entries.as_mut_ptr(), entries.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
    }
    Ok(rc > 0)
}

/// Files removed when the process exits without closing what made them
/// (`os.exit` in LuaJIT skips `lua_close`).
static REMOVE_AT_EXIT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

extern "C" fn remove_files_at_exit() {
    // A lock held by a thread that exit() interrupted is left alone: a
    // stale entry is cleaned by the next client, a hang is not.
    if let Ok(mut paths) = REMOVE_AT_EXIT.try_lock() {
        for p in paths.drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Removes `path` when the process exits, unless [`forget_at_exit`] was
/// called for it first.
pub fn remove_at_exit(path: PathBuf) {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: the handler is a plain `extern "C" fn()`. glibc registers
        // it with this library's DSO handle, so it also runs (and is
        // dropped) if the library is unloaded before the process exits.
        unsafe { libc::atexit(remove_files_at_exit) };
    });
    REMOVE_AT_EXIT.lock().unwrap_or_else(|e| e.into_inner()).push(path);
}

/// Takes `path` off the list of [`remove_at_exit`].
pub fn forget_at_exit(path: &std::path::Path) {
    REMOVE_AT_EXIT.lock().unwrap_or_else(|e| e.into_inner()).retain(|p| p != path);
}
