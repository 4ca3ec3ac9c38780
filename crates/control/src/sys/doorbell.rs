//! A thread of ours that waits on the listening socket, so that a program
//! polling once per frame while nobody connects makes no system call: the
//! poll reads one flag. The thread blocks every signal (a signal meant for
//! the program is never run on it) and sleeps in `poll(2)` until a
//! connection waits, rings, and sleeps again until the program has taken
//! what waited.

use std::io;
use std::os::unix::io::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Nothing waits in the socket.
const QUIET: u8 = 0;
/// A connection waits: the program accepts at its next poll.
const RUNG: u8 = 1;
/// The thread is gone (the socket failed, or the bell is dropped): every
/// poll accepts as it would without a bell.
const GONE: u8 = 2;

/// The bell of one listening socket.
pub struct Doorbell {
    state: Arc<AtomicU8>,
    /// Written to (then closed) to end the thread's wait.
    stop: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
    /// The process the thread runs in: a child forked since has no such
    /// thread, and joining it there would wait forever.
    pid: u32,
}

impl Doorbell {
    /// Starts the thread that watches `listener`, which must stay open
    /// until the bell is dropped.
    pub fn watch(listener: RawFd) -> io::Result<Doorbell> {
        let (stop_read, stop_write) = pipe()?;
        let state = Arc::new(AtomicU8::new(QUIET));
        let thread_state = state.clone();
        let thread = without_signals(|| {
            std::thread::Builder::new()
                .name("tecs-control".into())
                .spawn(move || run(listener, stop_read, &thread_state))
        })?;
        Ok(Doorbell { state, stop: Some(stop_write), thread: Some(thread), pid: std::process::id() })
    }

    /// Whether a poll has to look at the socket: a connection waits, or
    /// the thread is gone.
    pub fn rung(&self) -> bool {
        self.state.load(Ordering::Acquire) != QUIET
    }

    /// Says the program is about to take what waits in the socket: the
    /// thread watches again, and rings at once if anything is still there
    /// after the program took it.
    pub fn answer(&self) {
        if self.state.compare_exchange(RUNG, QUIET, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            if let Some(thread) = &self.thread {
                thread.thread().unpark();
            }
        }
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        self.state.store(GONE, Ordering::Release);
        if std::process::id() != self.pid {
            // A forked child's copy: its thread is the parent's.
            std::mem::forget(self.thread.take());
            return;
        }
        if let Some(stop) = self.stop.take() {
            // SAFETY: writes one byte from a live local to a descriptor we own.
            unsafe { libc::write(stop.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        }
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// The thread: waits for a connection or the stop, rings, and waits for
/// the program's answer before it watches again.
fn run(listener: RawFd, stop: OwnedFd, state: &AtomicU8) {
    loop {
        let mut fds = [
            libc::pollfd { fd: listener, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: stop.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: `fds` is a live array of two pollfd, its length given.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if fds[1].revents != 0 || state.load(Ordering::Acquire) == GONE {
            break;
        }
        if fds[0].revents & (libc::POLLERR | libc::POLLNVAL | libc::POLLHUP) != 0 {
            break;
        }
        if fds[0].revents & libc::POLLIN == 0 {
            continue;
        }
        if state.compare_exchange(QUIET, RUNG, Ordering::AcqRel, Ordering::Acquire).is_err() {
            break;
        }
        while state.load(Ordering::Acquire) == RUNG {
            std::thread::park();
        }
        if state.load(Ordering::Acquire) == GONE {
            break;
        }
    }
    // From here every poll looks at the socket itself.
    state.store(GONE, Ordering::Release);
}

/// A pipe: its read end and its write end, both closed on exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a live array of two descriptors for pipe to fill.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    for fd in fds {
        // SAFETY: sets a flag on a descriptor pipe just made.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: pipe made both descriptors and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Runs `f` with every signal blocked on this thread: a thread it starts
/// inherits the mask, and the mask is put back before returning.
fn without_signals<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigfillset fills a zeroed local set; pthread_sigmask reads
    // it and writes the old mask to another local, then restores it.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let result = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::time::{Duration, Instant};

    fn wait_until(mut f: impl FnMut() -> bool) -> bool {
        let began = Instant::now();
        while began.elapsed() < Duration::from_secs(10) {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    /// A listening socket of its own for test `name`, and its path.
    fn listener(name: &str) -> (UnixListener, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("tecs-doorbell-{}-{}", name, std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("s");
        let _ = std::fs::remove_file(&path);
        (UnixListener::bind(&path).unwrap(), path)
    }

    #[test]
    fn rings_for_each_connection_and_is_quiet_once_it_is_taken() {
        let (listener, path) = listener("rings");
        listener.set_nonblocking(true).unwrap();
        let bell = Doorbell::watch(listener.as_raw_fd()).unwrap();
        assert!(!bell.rung(), "nothing connected");
        for _ in 0..3 {
            let _client = UnixStream::connect(&path).unwrap();
            assert!(wait_until(|| bell.rung()), "a connection rings");
            bell.answer();
            listener.accept().unwrap();
            // The thread looks again: nothing waits, so it stays quiet,
            // or it rang before the accept and a poll finds nothing.
            assert!(wait_until(|| {
                if bell.rung() {
                    bell.answer();
                }
                !bell.rung()
            }));
        }
        drop(bell);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_dropped_bell_ends_its_thread() {
        let (listener, path) = listener("drop");
        let bell = Doorbell::watch(listener.as_raw_fd()).unwrap();
        // Joins the thread: a drop that did not wake it would hang here.
        drop(bell);
        let _ = std::fs::remove_file(&path);
    }
}
