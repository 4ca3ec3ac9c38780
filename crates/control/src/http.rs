//! The live page's HTTP server (`tecs-profile live`): `std::net` on
//! 127.0.0.1 only, one request answered at a time, each on a connection of
//! its own. Connections are read as their bytes come (a browser opens some
//! ahead of time and sends nothing on them: they must not hold the
//! others up). Every address starts with a secret made per run (`/TOKEN/`, 128
//! random bits): another local user can reach the port, not the page. A
//! request without the token, with a `Host` other than this address (a
//! page elsewhere that renamed its host to this one), or with another
//! method than GET or HEAD is refused here; the others are handed to the
//! caller, which answers them.

use std::ffi::CString;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::sys::dir::Dir;
use crate::sys::process;

/// The longest request head read, in bytes.
const MAX_HEAD: usize = 16 << 10;

/// The most header lines a request head may have.
const MAX_HEADERS: usize = 64;

/// How long a connection may take to send its request (it waits beside
/// the others).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may take to read its answer.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// The connections read at once. One more closes the one waiting longest:
/// idle connections (another local user's, which need no secret) cannot
/// keep the page's own requests out.
const MAX_WAITING: usize = 64;

/// A connection whose request has not all come.
struct Waiting {
    stream: TcpStream,
    head: Vec<u8>,
    since: Instant,
}

/// A listening server and its secret.
pub struct HttpServer {
    listener: TcpListener,
    port: u16,
    token: String,
    waiting: Vec<Waiting>,
}

/// What the server reads of a request head.
struct Head {
    method: String,
    /// The request target as sent (`/TOKEN/path?query`).
    target: String,
    /// The `Host` header's value, or "".
    host: String,
}

impl Head {
    /// The head at the start of `bytes`: `Ok(None)` while it has not all
    /// come, `Err` when what came is not an HTTP/1 request head.
    fn parse(bytes: &[u8]) -> Result<Option<Head>, httparse::Error> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        if req.parse(bytes)?.is_partial() {
            return Ok(None);
        }
        let host = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("host"))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
            .unwrap_or_default();
        let text = |s: Option<&str>| s.unwrap_or("").to_string();
        Ok(Some(Head { method: text(req.method), target: text(req.path), host }))
    }
}

/// A request with the token, waiting for its answer.
pub struct HttpRequest {
    /// "GET" or "HEAD".
    pub method: String,
    /// The path after the token, from its "/" (the query left out).
    pub path: String,
    stream: TcpStream,
}

/// A new secret: 16 bytes of the kernel's random source, in hex.
fn new_token() -> Result<String, String> {
    process::random_hex(16).map_err(|e| format!("cannot read /dev/urandom for the page's secret: {}", e))
}

/// Writes a page that sends a browser on to `url` (the address with the
/// secret) as a new file of mode 0600 in `dir`, a directory only this user
/// may enter (the control directory); returns its path. A browser opened
/// on this file learns the secret from a file no other user can read,
/// where the address itself would be on the browser's command line, which
/// every local user can read (`/proc/PID/cmdline`).
pub fn redirect_page(dir: &Path, url: &str) -> Result<PathBuf, String> {
    if !url.bytes().all(|b| b.is_ascii_alphanumeric() || b":/._-".contains(&b)) {
        return Err(format!("not an address of the live page: {}", url));
    }
    let cannot = |e: io::Error| format!("cannot write the page that opens the live page in {}: {}", dir.display(), e);
    let name = format!("live-{}-{}.html", std::process::id(), process::random_hex(8).map_err(cannot)?);
    let cname = CString::new(name.clone()).expect("no NUL byte");
    let mut file = Dir::open(dir).and_then(|d| d.create_new(&cname, 0o600)).map_err(cannot)?;
    let html = format!(
        "<!doctype html>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"0; url={url}\">\n\
         <title>tecs-profile live</title>\n<p><a href=\"{url}\">the live page</a></p>\n"
    );
    file.write_all(html.as_bytes()).map_err(cannot)?;
    Ok(dir.join(name))
}

/// Whether `a` and `b` are equal, in a time that does not depend on where
/// they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl HttpServer {
    /// Listens on 127.0.0.1:`port` (0: a free port the system chooses).
    pub fn bind(port: u16) -> Result<HttpServer, String> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {}", port, e))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        Ok(HttpServer { listener, port, token: new_token()?, waiting: Vec::new() })
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The page's address, secret included.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/{}/", self.port, self.token)
    }

    /// Waits up to `timeout` for a request. A request with the token is
    /// returned for the caller to answer; others are answered here (and
    /// `None` returned), as is a wait that ended with nothing, or with a
    /// signal.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<HttpRequest>, String> {
        let mut fds = vec![self.listener.as_raw_fd()];
        fds.extend(self.waiting.iter().map(|w| w.stream.as_raw_fd()));
        let wait = self
            .waiting
            .iter()
            .map(|w| (w.since + HEAD_TIMEOUT).saturating_duration_since(Instant::now()))
            .fold(timeout, Duration::min);
        if !process::wait_readable(&fds, wait).map_err(|e| e.to_string())? {
            self.drop_stale();
            return Ok(None);
        }
        self.accept_all()?;
        let mut i = 0;
        while i < self.waiting.len() {
            match read_more(&mut self.waiting[i]) {
                Progress::Partial => i += 1,
                Progress::Gone => drop(self.waiting.swap_remove(i)),
                Progress::Head(head) => {
                    let w = self.waiting.swap_remove(i);
                    if let Some(request) = self.check(w.stream, head) {
                        return Ok(Some(request));
                    }
                }
            }
        }
        self.drop_stale();
        Ok(None)
    }

    /// Takes every connection waiting to be accepted.
    fn accept_all(&mut self) -> Result<(), String> {
        loop {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(format!("cannot accept a connection: {}", e)),
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            if self.waiting.len() >= MAX_WAITING {
                if let Some(oldest) = (0..self.waiting.len()).min_by_key(|&i| self.waiting[i].since) {
                    drop(self.waiting.swap_remove(oldest));
                }
            }
            self.waiting.push(Waiting { stream, head: Vec::new(), since: Instant::now() });
        }
    }

    /// Closes the connections that took too long to send their request.
    fn drop_stale(&mut self) {
        let now = Instant::now();
        self.waiting.retain(|w| now.duration_since(w.since) < HEAD_TIMEOUT);
    }

    /// The request on `stream` if it may be served; else it is answered
    /// with the refusal.
    fn check(&self, stream: TcpStream, head: Option<Head>) -> Option<HttpRequest> {
        if stream.set_nonblocking(false).is_err() || stream.set_write_timeout(Some(IO_TIMEOUT)).is_err() {
            return None;
        }
        let Some(Head { method, target, host }) = head else {
            answer(&stream, false, 400, "text/plain", b"bad request\n", &[]);
            return None;
        };
        let method = method.as_str();
        let head_only = method == "HEAD";
        let allowed = [format!("127.0.0.1:{}", self.port), format!("localhost:{}", self.port)];
        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(&host)) {
            let text = format!("forbidden: this page is served as http://127.0.0.1:{}/ only\n", self.port);
            answer(&stream, head_only, 403, "text/plain", text.as_bytes(), &[]);
            return None;
        }
        let path = target.split(['?', '#']).next().unwrap_or("");
        let rest = path
            .strip_prefix('/')
            .and_then(|p| {
                let (secret, rest) = p.split_at(p.find('/').unwrap_or(p.len()));
                same_secret(secret.as_bytes(), self.token.as_bytes()).then_some(rest)
            })
            .map(str::to_string);
        let Some(rest) = rest else {
            let text = "forbidden: open the address tecs-profile live printed (it holds the page's secret)\n";
            answer(&stream, head_only, 403, "text/plain", text.as_bytes(), &[]);
            return None;
        };
        if method != "GET" && !head_only {
            answer(&stream, false, 405, "text/plain", b"only GET and HEAD\n", &[("Allow", "GET, HEAD")]);
            return None;
        }
        if rest.is_empty() {
            // Relative addresses in the page resolve under the secret.
            let location = format!("/{}/", self.token);
            answer(&stream, head_only, 308, "text/plain", b"", &[("Location", &location)]);
            return None;
        }
        Some(HttpRequest { method: method.to_string(), path: rest, stream })
    }
}

impl HttpRequest {
    /// Sends the answer and closes the connection. A client that went
    /// away meanwhile is no error.
    pub fn reply(self, status: u16, content_type: &str, body: &[u8]) {
        answer(&self.stream, self.method == "HEAD", status, content_type, body, &[]);
    }
}

/// What reading a waiting connection gave.
enum Progress {
    /// Its request head is not all there yet.
    Partial,
    /// It closed or failed before sending one.
    Gone,
    /// The head, or `None` when what came is not one.
    Head(Option<Head>),
}

/// Reads what `w`'s client has sent so far.
fn read_more(w: &mut Waiting) -> Progress {
    let mut buf = [0u8; 4096];
    loop {
        match Head::parse(&w.head) {
            Ok(Some(head)) => return Progress::Head(Some(head)),
            Ok(None) if w.head.len() <= MAX_HEAD => {}
            _ => return Progress::Head(None),
        }
        match w.stream.read(&mut buf) {
            Ok(0) => return Progress::Gone,
            Ok(n) => w.head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Progress::Partial,
            Err(_) => return Progress::Gone,
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Writes one answer. Nothing is cached or sent on to another site: the
/// addresses hold the secret.
fn answer(stream: &TcpStream, head_only: bool, status: u16, content_type: &str, body: &[u8], extra: &[(&str, &str)]) {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         Referrer-Policy: no-referrer\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n",
        status,
        reason(status),
        content_type,
        body.len()
    );
    for (name, value) in extra {
        out.push_str(&format!("{}: {}\r\n", name, value));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    if !head_only {
        bytes.extend_from_slice(body);
    }
    let _ = process::send_all(stream, &bytes);
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// What `server` answers a GET of `path` with `host`; a request it
    /// hands out is answered with its path.
    fn get(server: &mut HttpServer, path: &str, host: &str) -> String {
        send(server, &[format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", path, host).as_bytes()])
    }

    /// What `server` answers `pieces`, sent one by one, the server asked
    /// for a request between two; a request it hands out is answered with
    /// its path.
    fn send(server: &mut HttpServer, pieces: &[&[u8]]) -> String {
        let mut client = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        for (i, piece) in pieces.iter().enumerate() {
            if i > 0 {
                assert!(server.next(Duration::from_millis(10)).unwrap().is_none(), "a request before its end");
            }
            client.write_all(piece).unwrap();
        }
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            client.read_to_string(&mut text).unwrap();
            text
        });
        // Requests are taken as their bytes come: ask until this one is
        // answered (a minute bounds a hang, not the speed).
        let deadline = Instant::now() + Duration::from_secs(60);
        while !reader.is_finished() {
            assert!(Instant::now() < deadline, "no answer");
            if let Some(r) = server.next(Duration::from_millis(50)).unwrap() {
                let path = r.path.clone();
                r.reply(200, "text/plain", path.as_bytes());
            }
        }
        reader.join().unwrap()
    }

    #[test]
    fn only_requests_with_the_secret_and_this_host_are_served() {
        let mut server = HttpServer::bind(0).unwrap();
        // A connection that sends nothing holds no other up.
        let _idle = TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        let url = server.url();
        assert!(url.starts_with("http://127.0.0.1:"), "{}", url);
        let host = format!("127.0.0.1:{}", server.port());
        let secret = format!("/{}", server.token);
        let ok = get(&mut server, &format!("{}/data.json?x=1", secret), &host);
        assert!(ok.starts_with("HTTP/1.1 200 ") && ok.ends_with("\r\n\r\n/data.json"), "{}", ok);
        let none = get(&mut server, "/data.json", &host);
        assert!(none.starts_with("HTTP/1.1 403 "), "{}", none);
        // The secret with its last digit changed (to another digit).
        let last = if server.token.ends_with('0') { '1' } else { '0' };
        let wrong = format!("/{}{}/", &server.token[..31], last);
        let bad = get(&mut server, &wrong, &host);
        assert!(bad.starts_with("HTTP/1.1 403 "), "{}", bad);
        let elsewhere = get(&mut server, &format!("{}/", secret), "attacker.example:80");
        assert!(elsewhere.starts_with("HTTP/1.1 403 "), "{}", elsewhere);
        let moved = get(&mut server, &secret, &host);
        assert!(
            moved.starts_with("HTTP/1.1 308 ") && moved.contains(&format!("Location: {}/\r\n", secret)),
            "{}",
            moved
        );
        assert_eq!(server.next(Duration::from_millis(1)).unwrap().map(|r| r.path), None);
    }

    #[test]
    fn a_head_is_read_as_its_pieces_come_and_what_is_no_head_is_a_bad_request() {
        let mut server = HttpServer::bind(0).unwrap();
        let host = format!("127.0.0.1:{}", server.port());
        let first = format!("GET /{}/page.html HTTP/1.1\r\nHo", server.token);
        let rest = format!("st: {}\r\nAccept: */*\r\n\r\n", host);
        let ok = send(&mut server, &[first.as_bytes(), rest.as_bytes()]);
        assert!(ok.starts_with("HTTP/1.1 200 ") && ok.ends_with("\r\n\r\n/page.html"), "{}", ok);
        let bad = send(&mut server, &[b"GET\0/ HTTP/1.1\r\n\r\n"]);
        assert!(bad.starts_with("HTTP/1.1 400 "), "{}", bad);
        let headers: String = (0..MAX_HEADERS + 1).map(|i| format!("X-{}: 1\r\n", i)).collect();
        let many = send(&mut server, &[format!("GET / HTTP/1.1\r\n{}\r\n", headers).as_bytes()]);
        assert!(many.starts_with("HTTP/1.1 400 "), "{}", many);
    }

    #[test]
    fn idle_connections_past_the_bound_do_not_keep_a_request_out() {
        let mut server = HttpServer::bind(0).unwrap();
        let host = format!("127.0.0.1:{}", server.port());
        let secret = format!("/{}", server.token);
        // Another local user's connections, more than are read at once,
        // taken in before the page's request comes.
        let idle: Vec<TcpStream> =
            (0..MAX_WAITING + 8).map(|_| TcpStream::connect(("127.0.0.1", server.port())).unwrap()).collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.waiting.len() < MAX_WAITING {
            assert!(Instant::now() < deadline, "the idle connections were not taken in");
            server.next(Duration::from_millis(10)).unwrap();
        }
        let ok = get(&mut server, &format!("{}/data.json", secret), &host);
        assert!(ok.starts_with("HTTP/1.1 200 "), "{}", ok);
        assert!(server.waiting.len() <= MAX_WAITING);
        drop(idle);
    }
}
