//! The client's end of the control channel: one request, one answer,
//! blocking with a time limit.

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{Request, Response, MAX_ANSWER_LINE};
use crate::sys::process;

/// A connection to one program.
pub struct Connection {
    stream: UnixStream,
    pending: Vec<u8>,
}

impl Connection {
    /// Connects to the socket at `socket`.
    pub fn open(socket: &Path) -> Result<Connection, String> {
        let stream = UnixStream::connect(socket).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                format!("cannot connect to {}: {} (the program has stopped listening)", socket.display(), e)
            }
            _ => format!("cannot connect to {}: {}", socket.display(), e),
        })?;
        Ok(Connection { stream, pending: Vec::new() })
    }

    /// Sends `request` and waits up to `timeout` for its answer. The
    /// program answers when it next polls; a request not answered in time
    /// stays queued and runs at its next poll all the same.
    pub fn request(&mut self, request: &Request, timeout: Duration) -> Result<Response, String> {
        let deadline = Instant::now() + timeout;
        let mut line = serde_json::to_vec(request).map_err(|e| e.to_string())?;
        line.push(b'\n');
        self.stream.set_write_timeout(Some(timeout.max(Duration::from_millis(1)))).map_err(|e| e.to_string())?;
        if let Err(e) = process::send_all(&self.stream, &line) {
            // A program that refused this client (busy) may have answered
            // and closed before the request went out: its answer says why.
            return match self.read_line(deadline, timeout) {
                Ok(answer) => {
                    serde_json::from_str::<Response>(&answer).map_err(|_| format!("cannot send the request: {}", e))
                }
                Err(_) => Err(format!("cannot send the request: {}", e)),
            };
        }
        let answer = self.read_line(deadline, timeout)?;
        serde_json::from_str::<Response>(&answer).map_err(|e| format!("bad answer from the program: {}", e))
    }

    fn read_line(&mut self, deadline: Instant, timeout: Duration) -> Result<String, String> {
        loop {
            if let Some(at) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=at).collect();
                return Ok(String::from_utf8_lossy(&line).trim().to_string());
            }
            if self.pending.len() > MAX_ANSWER_LINE {
                return Err("the program's answer is too long".into());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(no_answer(timeout));
            }
            self.stream.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
            let mut buf = [0u8; 8192];
            match self.stream.read(&mut buf) {
                Ok(0) => return Err("the program closed the connection without answering".into()),
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(no_answer(timeout))
                }
                Err(e) => return Err(format!("cannot read the answer: {}", e)),
            }
        }
    }
}

fn no_answer(timeout: Duration) -> String {
    format!(
        "no answer within {} s: the program has not polled (profile.poll(); a LÖVE game polls once per frame); \
         the command stays queued and runs when it does",
        timeout.as_secs_f64()
    )
}

/// One request on a connection of its own.
pub fn request(socket: &Path, request: &Request, timeout: Duration) -> Result<Response, String> {
    Connection::open(socket)?.request(request, timeout)
}
