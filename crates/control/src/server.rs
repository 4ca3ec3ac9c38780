//! The program's end of the control channel: a non-blocking listener that
//! the program's thread polls. One client is served at a time; others that
//! connect meanwhile wait their turn in arrival order, up to
//! [`MAX_WAITING`] of them for [`WAIT_LIMIT`] each, and are then answered
//! "busy" and closed. A request that arrives while the program does not poll
//! waits in the socket until it does. A request line longer than
//! [`MAX_REQUEST_LINE`] is answered with an error and its connection closed;
//! a client is closed without an answer when a line it began is not whole
//! [`LINE_LIMIT`] after its first byte was read, when it sends no complete
//! request within [`LINE_LIMIT`] of being served, or when it sends none for
//! [`IDLE_LIMIT`]: a client that sends a byte now and then holds the
//! channel for seconds, not minutes, and goes behind those waiting when it
//! connects again.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{paths_for, write_entry, Request, Response, Target, IDLE_LIMIT, MAX_REQUEST_LINE};
use crate::sys::doorbell::Doorbell;
use crate::sys::process;

/// How long a reply may take in all, for a client that reads slowly or
/// not at all: the program's frame stalls for at most this long.
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// The connections one call of [`Server::next_request`] takes at most.
const ACCEPTS_PER_CALL: usize = 16;

/// How long a client has to send a line whole, from its first byte read
/// (and its first request, from when it is served): a client writes a
/// request at once.
pub const LINE_LIMIT: Duration = Duration::from_secs(2);

/// How long a connection waits for the client before it to go: then it is
/// answered "busy" (a client that holds the channel, as `tecs-profile live`
/// does, keeps it).
pub const WAIT_LIMIT: Duration = Duration::from_secs(3);

/// How many connections wait their turn at most; past them, a new one is
/// answered "busy" at once.
pub const MAX_WAITING: usize = 16;

struct Client {
    stream: UnixStream,
    /// Bytes read and not yet taken as a line.
    pending: Vec<u8>,
    /// The client closed its end: what is pending is all it sent.
    closed: bool,
    /// When it was served or last sent a complete request.
    active: Instant,
    /// Whether it has sent a complete request.
    asked: bool,
    /// When the first byte of the line it is sending was read.
    partial_since: Option<Instant>,
    /// It sent a line too long: the connection closes once answered.
    closing: bool,
}

/// The listening socket of one process and its discovery entry; both are
/// removed when it is dropped (or the process exits).
pub struct Server {
    /// Declared before the listener: its thread ends before the socket
    /// closes. None where the thread could not start: every poll then
    /// looks at the socket.
    doorbell: Option<Doorbell>,
    listener: UnixListener,
    socket: PathBuf,
    entry: PathBuf,
    client: Option<Client>,
    /// Connections waiting for the client to go, oldest first, and when
    /// each was accepted.
    waiting: VecDeque<(UnixStream, Instant)>,
    pid: u32,
    /// [`IDLE_LIMIT`], [`LINE_LIMIT`] and [`WAIT_LIMIT`], shorter in tests.
    idle_limit: Duration,
    line_limit: Duration,
    wait_limit: Duration,
    /// How many polls looked at the listening socket.
    #[cfg(test)]
    looked: u64,
}

/// What a poll found: a request to run, or a line that is not one (to be
/// answered with the error).
pub type Incoming = Result<Request, String>;

impl Server {
    /// Opens the socket of this process in `dir` (which [`super::directory`]
    /// made) and writes its discovery entry, `target` with the socket's path.
    pub fn open(dir: &Path, mut target: Target) -> Result<Server, String> {
        let pid = std::process::id();
        let (socket, entry) = paths_for(dir, pid);
        // No other process can have this pid: a file there is a dead
        // process's, or this process's earlier listener's.
        let _ = std::fs::remove_file(&socket);
        let listener =
            UnixListener::bind(&socket).map_err(|e| format!("cannot listen on {}: {}", socket.display(), e))?;
        let _ = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600));
        listener.set_nonblocking(true).map_err(|e| format!("cannot listen on {}: {}", socket.display(), e))?;
        target.pid = pid;
        target.socket = socket.to_string_lossy().into_owned();
        process::remove_at_exit(socket.clone());
        if let Err(e) = write_entry(&entry, &target) {
            let _ = std::fs::remove_file(&socket);
            process::forget_at_exit(&socket);
            return Err(format!("cannot write discovery entry {}: {}", entry.display(), e));
        }
        process::remove_at_exit(entry.clone());
        let doorbell = Doorbell::watch(std::os::unix::io::AsRawFd::as_raw_fd(&listener)).ok();
        Ok(Server {
            doorbell,
            listener,
            socket,
            entry,
            client: None,
            waiting: VecDeque::new(),
            pid,
            idle_limit: IDLE_LIMIT,
            line_limit: LINE_LIMIT,
            wait_limit: WAIT_LIMIT,
            #[cfg(test)]
            looked: 0,
        })
    }

    /// Closes connections idle for `limit` instead of [`IDLE_LIMIT`].
    #[cfg(test)]
    pub fn set_idle_limit(&mut self, limit: Duration) {
        self.idle_limit = limit;
    }

    /// [`LINE_LIMIT`] and [`WAIT_LIMIT`] replaced.
    #[cfg(test)]
    pub fn set_turn_limits(&mut self, line: Duration, wait: Duration) {
        self.line_limit = line;
        self.wait_limit = wait;
    }

    /// How many polls looked at the listening socket.
    #[cfg(test)]
    pub fn looked(&self) -> u64 {
        self.looked
    }

    /// The socket's path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The listening socket's descriptor.
    pub fn listener_fd(&self) -> std::os::unix::io::RawFd {
        std::os::unix::io::AsRawFd::as_raw_fd(&self.listener)
    }

    /// Ends the doorbell's thread: every poll looks at the socket from now
    /// on. For a program woken by SIGIO (`sys::wake`), whose wake-up polls
    /// as soon as the kernel says a connection waits, which may be before
    /// the doorbell rang.
    pub fn stop_doorbell(&mut self) {
        self.doorbell = None;
    }

    /// The discovery entry's path.
    pub fn entry(&self) -> &Path {
        &self.entry
    }

    /// Whether a client is connected.
    pub fn has_client(&self) -> bool {
        self.client.is_some()
    }

    /// The next request waiting, if any; never blocks. Connections that
    /// arrive while a client is served wait their turn (see the module).
    pub fn next_request(&mut self) -> Option<Incoming> {
        loop {
            if let Some(line) = self.read_client() {
                return Some(line);
            }
            if self.client.is_some() {
                break;
            }
            let Some((stream, _)) = self.waiting.pop_front() else { break };
            self.serve(stream);
        }
        if self.client.is_none() && self.waiting.is_empty() {
            // Nobody to serve and nobody waiting: the socket is looked at
            // only when a connection rang (the poll of a program that
            // nobody drives makes no system call).
            if let Some(bell) = &self.doorbell {
                if !bell.rung() {
                    return None;
                }
                bell.answer();
            }
        } else if let Some(bell) = &self.doorbell {
            bell.answer();
        }
        #[cfg(test)]
        {
            self.looked += 1;
        }
        // Connections past these wait in the socket's backlog for the next
        // poll: a flood of them does not hold the program's thread.
        for _ in 0..ACCEPTS_PER_CALL {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            if self.client.is_some() {
                if self.waiting.len() >= MAX_WAITING || stream.set_nonblocking(true).is_err() {
                    self.refuse(stream);
                } else {
                    self.waiting.push_back((stream, Instant::now()));
                }
                continue;
            }
            if !self.serve(stream) {
                continue;
            }
            if let Some(line) = self.read_client() {
                // Others waiting are answered at the next poll.
                return Some(line);
            }
        }
        let wait_limit = self.wait_limit;
        while self.waiting.front().is_some_and(|(_, since)| since.elapsed() >= wait_limit) {
            let (stream, _) = self.waiting.pop_front().expect("checked");
            self.refuse(stream);
        }
        None
    }

    /// Makes `stream` the client served; false when it cannot be.
    fn serve(&mut self, stream: UnixStream) -> bool {
        if stream.set_nonblocking(true).is_err() {
            return false;
        }
        // A program woken by SIGIO (`sys::wake`) is woken by its data too.
        #[cfg(target_os = "linux")]
        tecs_profile_recorder::sys::wake::watch(std::os::unix::io::AsRawFd::as_raw_fd(&stream));
        self.client = Some(Client {
            stream,
            pending: Vec::new(),
            closed: false,
            active: Instant::now(),
            asked: false,
            partial_since: None,
            closing: false,
        });
        true
    }

    /// Answers the request [`next_request`](Self::next_request) returned. A client that
    /// went away, or has not read it all within [`REPLY_TIMEOUT`], is dropped; the
    /// program goes on.
    pub fn reply(&mut self, response: &Response) {
        let Some(client) = &self.client else { return };
        let mut line = serde_json::to_vec(response).unwrap_or_else(|e| {
            serde_json::to_vec(&Response::error(format!("cannot encode the answer: {}", e))).expect("plain struct")
        });
        line.push(b'\n');
        if write_blocking(&client.stream, &line).is_err() || client.closing {
            self.client = None;
        }
    }

    /// Reads what the client sent; returns its next complete line, parsed.
    /// A client that closed with nothing pending is dropped, and so is one
    /// idle for [`IDLE_LIMIT`]; a line too long is an error to answer,
    /// after which the connection closes.
    fn read_client(&mut self) -> Option<Incoming> {
        let (idle_limit, line_limit) = (self.idle_limit, self.line_limit);
        let client = self.client.as_mut()?;
        if client.closing {
            return None;
        }
        loop {
            if let Some(at) = client.pending.iter().position(|&b| b == b'\n') {
                if at > MAX_REQUEST_LINE {
                    return Some(Err(too_long(client)));
                }
                let line: Vec<u8> = client.pending.drain(..=at).collect();
                client.partial_since = (!client.pending.is_empty()).then(Instant::now);
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                client.active = Instant::now();
                client.asked = true;
                return Some(parse_request(text));
            }
            if client.pending.len() > MAX_REQUEST_LINE {
                return Some(Err(too_long(client)));
            }
            if client.closed {
                // A last line without its newline still counts.
                let text = String::from_utf8_lossy(&client.pending).trim().to_string();
                self.client = None;
                return (!text.is_empty()).then(|| parse_request(&text));
            }
            let mut buf = [0u8; 8192];
            match client.stream.read(&mut buf) {
                Ok(0) => client.closed = true,
                Ok(n) => {
                    if client.pending.is_empty() {
                        client.partial_since = Some(Instant::now());
                    }
                    client.pending.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Closed without an answer: a line written now would
                    // be read as the answer to the client's next request.
                    let slow_line = client.partial_since.is_some_and(|t| t.elapsed() >= line_limit);
                    let silent = !client.asked && client.active.elapsed() >= line_limit;
                    if slow_line || silent || client.active.elapsed() >= idle_limit {
                        self.client = None;
                    }
                    return None;
                }
                Err(_) => client.closed = true,
            }
        }
    }

    fn refuse(&self, stream: UnixStream) {
        let answer = Response::error(format!(
            "busy: another client is attached to process {}; try again when it is done",
            self.pid
        ));
        let mut line = serde_json::to_vec(&answer).expect("plain struct");
        line.push(b'\n');
        let _ = write_blocking(&stream, &line);
    }
}

/// Parses one request line and checks its fields' bounds; the error names
/// what is wrong.
pub fn parse_request(text: &str) -> Incoming {
    // serde's message may quote the request (an unknown field's name): cut.
    let bad = |e: String| format!("bad request {}: {}", abbreviate(text), abbreviate_to(&e, 300));
    let request = serde_json::from_str::<Request>(text).map_err(|e| bad(e.to_string()))?;
    request.check().map_err(bad)?;
    Ok(request)
}

/// The error a line too long is answered with; the connection closes then.
fn too_long(client: &mut Client) -> String {
    client.closing = true;
    client.pending.clear();
    format!("request line longer than {} bytes: not read; the connection is closed", MAX_REQUEST_LINE)
}

fn abbreviate(text: &str) -> String {
    abbreviate_to(text, 80)
}

/// `text` cut to at most `n` characters.
fn abbreviate_to(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_string();
    }
    text.chars().take(n - 3).collect::<String>() + "..."
}

/// Writes all of `bytes` within [`REPLY_TIMEOUT`] in all (a client that
/// reads a byte now and then does not hold the program's thread longer).
fn write_blocking(stream: &UnixStream, mut bytes: &[u8]) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    let deadline = Instant::now() + REPLY_TIMEOUT;
    let mut result = Ok(());
    while !bytes.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            result = Err(io::ErrorKind::TimedOut.into());
            break;
        }
        if let Err(e) = stream.set_write_timeout(Some(left)) {
            result = Err(e);
            break;
        }
        match process::send_no_signal(stream, bytes) {
            Ok(0) => {
                result = Err(io::ErrorKind::WriteZero.into());
                break;
            }
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let _ = stream.set_nonblocking(true);
    result
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.entry);
        let _ = std::fs::remove_file(&self.socket);
        process::forget_at_exit(&self.entry);
        process::forget_at_exit(&self.socket);
    }
}
