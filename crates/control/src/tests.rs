use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::client::Connection;
use super::server::{Incoming, Server};
use super::*;

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tecs-control-{}-{}", name, std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

fn target() -> Target {
    Target {
        pid: 0,
        program: "test".into(),
        kind: "luajit".into(),
        socket: String::new(),
        started: 1,
        output_dir: None,
    }
}

/// Polls `server` until a request arrives (at most a minute: a bound on a
/// hang, not a guess at speed).
fn next_request(server: &mut Server) -> Incoming {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(r) = server.next_request() {
            return r;
        }
        assert!(Instant::now() < deadline, "no request arrived");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn requests_and_responses_are_one_json_line_each() {
    let line = serde_json::to_string(&Request::Start {
        interval_ms: Some(2.0),
        zone: None,
        seconds: Some(5.0),
        allocations: None,
        bytes_per_sample: None,
    })
    .unwrap();
    assert_eq!(line, r#"{"cmd":"start","intervalMs":2.0,"seconds":5.0}"#);
    assert_eq!(serde_json::from_str::<Request>(r#"{"cmd":"status"}"#).unwrap(), Request::Status {});
    assert_eq!(serde_json::to_string(&Request::Status {}).unwrap(), r#"{"cmd":"status"}"#);
    assert_eq!(
        serde_json::from_str::<Request>(r#"{"cmd":"report","top":5}"#).unwrap(),
        Request::Report { by: None, then_by: None, top: Some(5.0), hitches: None }
    );
    assert_eq!(
        serde_json::from_str::<Request>(r#"{"cmd":"report","by":"function","then":"caller"}"#).unwrap(),
        Request::Report { by: Some("function".into()), then_by: Some("caller".into()), top: None, hitches: None }
    );
    let err = server::parse_request(r#"{"cmd":"launch"}"#).unwrap_err();
    assert!(err.contains("launch") && err.contains("status"), "{}", err);
    let r = Response { ok: true, samples: Some(3), ..Response::default() };
    assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"ok":true,"samples":3}"#);
}

#[test]
fn the_directory_is_the_users_alone() {
    let d = fresh_dir("mode");
    directory(&d).unwrap();
    assert_eq!(fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
    fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
    let err = directory(&d).unwrap_err();
    assert!(err.contains("0700 expected"), "{}", err);
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn polls_look_at_the_socket_only_after_a_connection_rang() {
    let d = directory(&fresh_dir("doorbell")).unwrap();
    let mut server = Server::open(&d, target()).unwrap();
    for _ in 0..1000 {
        assert!(server.next_request().is_none());
    }
    assert_eq!(server.looked(), 0, "nobody connected: no poll looked");
    let socket = server.socket().to_path_buf();
    for round in 0..3 {
        let client = std::thread::spawn({
            let socket = socket.clone();
            move || client::request(&socket, &Request::Status {}, Duration::from_secs(60))
        });
        assert_eq!(next_request(&mut server).unwrap(), Request::Status {}, "round {}", round);
        server.reply(&Response { ok: true, running: Some(false), ..Response::default() });
        assert_eq!(client.join().unwrap().unwrap().running, Some(false));
        // The client went: the polls look until they find it gone, then
        // at most once more (the bell may have rung before the accept).
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.has_client() {
            assert!(server.next_request().is_none());
            assert!(Instant::now() < deadline, "the client was never dropped");
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = server.next_request();
        let settled = server.looked();
        for _ in 0..1000 {
            assert!(server.next_request().is_none());
        }
        assert!(server.looked() <= settled + 1, "round {}: {} polls looked", round, server.looked() - settled);
    }
    let _ = fs::remove_dir_all(&d);
}

#[test]
fn a_client_is_answered_a_second_is_busy_and_the_entry_goes_with_the_server() {
    let d = directory(&fresh_dir("serve")).unwrap();
    let mut server = Server::open(&d, target()).unwrap();
    let entry = server.entry().to_path_buf();
    assert_eq!(fs::metadata(&entry).unwrap().mode() & 0o777, 0o600);
    let listed = targets(&d).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].pid, std::process::id());
    let socket = server.socket().to_path_buf();

    let first = std::thread::spawn({
        let socket = socket.clone();
        move || {
            let mut c = Connection::open(&socket).unwrap();
            let r = c.request(&Request::Status {}, Duration::from_secs(60)).unwrap();
            (c, r)
        }
    });
    assert_eq!(next_request(&mut server).unwrap(), Request::Status {});
    server.reply(&Response { ok: true, running: Some(false), ..Response::default() });
    let (held, answer) = first.join().unwrap();
    assert_eq!(answer.running, Some(false));

    // The first client still holds its connection: the second is refused.
    let second = std::thread::spawn({
        let socket = socket.clone();
        move || client::request(&socket, &Request::Status {}, Duration::from_secs(60))
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !second.is_finished() {
        assert!(server.next_request().is_none());
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    }
    let busy = second.join().unwrap().unwrap();
    assert!(!busy.ok);
    assert!(busy.error.unwrap().starts_with("busy"));

    // Once the first has gone, the next is served.
    drop(held);
    let third =
        std::thread::spawn(move || client::request(&socket, &Request::Stop { path: None }, Duration::from_secs(60)));
    assert_eq!(next_request(&mut server).unwrap(), Request::Stop { path: None });
    server.reply(&Response::error("no session"));
    assert_eq!(third.join().unwrap().unwrap().error.as_deref(), Some("no session"));

    drop(server);
    assert!(!entry.exists());
    assert!(targets(&d).unwrap().is_empty());
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn entries_of_dead_processes_are_skipped_and_removed() {
    let d = directory(&fresh_dir("stale")).unwrap();
    // A pid above the kernel's maximum (4194304) exists nowhere.
    let dead = Target { pid: 4_999_999, socket: d.join("4999999.sock").to_string_lossy().into(), ..target() };
    let (_, entry) = paths_for(&d, dead.pid);
    write_entry(&entry, &dead).unwrap();
    assert!(targets(&d).unwrap().is_empty());
    assert!(!entry.exists());
    // An entry naming another file as its socket, and a file that is not
    // an entry (a profile a client had written there): the one removed
    // is the dead process's own socket, nothing else.
    let elsewhere = d.join("precious.collapsed");
    fs::write(&elsewhere, "x 1\n").unwrap();
    let (socket, entry) = paths_for(&d, dead.pid);
    fs::write(&socket, "").unwrap();
    let lying = Target { socket: elsewhere.to_string_lossy().into(), ..dead.clone() };
    write_entry(&entry, &lying).unwrap();
    write_entry(&d.join("profile.trace.json"), &lying).unwrap();
    assert!(targets(&d).unwrap().is_empty());
    assert!(elsewhere.exists() && !socket.exists() && !entry.exists());
    assert!(d.join("profile.trace.json").exists());
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_unanswered_request_times_out_with_the_reason() {
    let d = directory(&fresh_dir("late")).unwrap();
    let mut server = Server::open(&d, target()).unwrap();
    let err = client::request(server.socket(), &Request::Status {}, Duration::from_millis(50)).unwrap_err();
    assert!(err.contains("has not polled"), "{}", err);
    // The request was not lost: the next poll finds it.
    assert_eq!(next_request(&mut server).unwrap(), Request::Status {});
    server.reply(&Response { ok: true, ..Response::default() });
    drop(server);
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn fields_out_of_their_bounds_and_unknown_fields_are_refused_naming_them() {
    let cases = [
        (r#"{"cmd":"start","seconds":0}"#, "bad field 'seconds'"),
        (r#"{"cmd":"start","seconds":-1}"#, "a number from 0.001 to 3600 expected, got -1"),
        (r#"{"cmd":"start","seconds":1e300}"#, "got 1e300"),
        (r#"{"cmd":"start","seconds":1e999}"#, "number out of range"),
        (r#"{"cmd":"start","seconds":"5"}"#, "invalid type"),
        (r#"{"cmd":"start","seconds":NaN}"#, "bad request"),
        (r#"{"cmd":"report","top":0}"#, "bad field 'top' (rows shown: an integer from 1 to 10000 expected, got 0)"),
        (r#"{"cmd":"report","top":2.5}"#, "got 2.5"),
        (r#"{"cmd":"report","hitches":201}"#, "bad field 'hitches'"),
        (r#"{"cmd":"report","hitches":-0.5}"#, "bad field 'hitches'"),
        (r#"{"cmd":"snapshot","frames":20001}"#, "bad field 'frames'"),
        (r#"{"cmd":"snapshot","stacks":1e10}"#, "bad field 'stacks'"),
        (r#"{"cmd":"stop","pth":"/x.svg"}"#, "unknown field `pth`"),
        (r#"{"cmd":"status","path":"/x.svg"}"#, "unknown field `path`"),
        (r#"{"cmd":"stop","path":5}"#, "invalid type"),
    ];
    for (line, want) in cases {
        let err = server::parse_request(line).unwrap_err();
        assert!(err.contains(want), "{}: {}", line, err);
    }
    let huge = format!(r#"{{"cmd":"stop","path":"/{}.svg"}}"#, "x".repeat(5000));
    let err = server::parse_request(&huge).unwrap_err();
    assert!(
        err.contains("bad field 'path'") && err.contains("at most 4096 bytes expected, got a string of 5005"),
        "{}",
        err
    );
    assert!(err.len() < 400, "the message quotes the whole request: {} bytes", err.len());
    let zone = format!(r#"{{"cmd":"start","zone":"{}"}}"#, "z".repeat(1025));
    assert!(server::parse_request(&zone).unwrap_err().contains("bad field 'zone'"));
    // Within bounds: taken as sent.
    assert_eq!(
        server::parse_request(r#"{"cmd":"start","seconds":3600,"intervalMs":0.5}"#).unwrap(),
        Request::Start {
            interval_ms: Some(0.5),
            zone: None,
            seconds: Some(3600.0),
            allocations: None,
            bytes_per_sample: None,
        }
    );
    assert!(server::parse_request(r#"{"cmd":"snapshot","frames":20000,"hitches":1,"stacks":1}"#).is_ok());
}

#[test]
fn every_bounded_field_is_a_field_of_its_command() {
    for f in FIELDS {
        let line = match f.accepts {
            Accepts::Text { .. } => format!(r#"{{"cmd":"{}","{}":"a"}}"#, f.command, f.name),
            // The least value the field takes.
            Accepts::Number { min, .. } | Accepts::Integer { min, .. } => {
                format!(r#"{{"cmd":"{}","{}":{}}}"#, f.command, f.name, min)
            }
        };
        let r = server::parse_request(&line).unwrap_or_else(|e| panic!("{}: {}", line, e));
        assert_eq!(r.command(), f.command);
        assert!(serde_json::to_value(&r).unwrap().get(f.name).is_some(), "{}", line);
    }
}

/// Checks that a client connecting now is answered.
fn serves_the_next_client(server: &mut Server) {
    let socket = server.socket().to_path_buf();
    let t = std::thread::spawn(move || client::request(&socket, &Request::Status {}, Duration::from_secs(60)));
    assert_eq!(next_request(server).unwrap(), Request::Status {});
    server.reply(&Response { ok: true, ..Response::default() });
    assert!(t.join().unwrap().unwrap().ok);
}

/// The answer a raw client gets to `bytes`, sent at once, read to the end.
fn raw_exchange(server: &mut Server, bytes: Vec<u8>) -> (Incoming, Vec<u8>) {
    use std::io::{Read, Write};
    let socket = server.socket().to_path_buf();
    let client = std::thread::spawn(move || {
        let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        let _ = s.write_all(&bytes);
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        answer
    });
    let incoming = next_request(server);
    let response = match &incoming {
        Ok(_) => Response { ok: true, ..Response::default() },
        Err(e) => Response::error(e.clone()),
    };
    server.reply(&response);
    // The connection was closed: the client's read ends.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !client.is_finished() {
        assert!(server.next_request().is_none());
        assert!(Instant::now() < deadline, "the connection stayed open");
        std::thread::sleep(Duration::from_millis(1));
    }
    (incoming, client.join().unwrap())
}

#[test]
fn a_request_line_too_long_is_answered_with_an_error_and_the_connection_closed() {
    let d = directory(&fresh_dir("long")).unwrap();
    let mut server = Server::open(&d, target()).unwrap();
    // Without a newline, and with one after it.
    for newline in [false, true] {
        let mut bytes = format!(r#"{{"cmd":"stop","path":"/{}"#, "x".repeat(MAX_REQUEST_LINE)).into_bytes();
        if newline {
            bytes.extend_from_slice(b"\"}\n{\"cmd\":\"status\"}\n");
        }
        let (incoming, answer) = raw_exchange(&mut server, bytes);
        let err = incoming.unwrap_err();
        assert!(err.contains("longer than 65536 bytes"), "{}", err);
        let answer: Response = serde_json::from_slice(answer.split(|&b| b == b'\n').next().unwrap()).unwrap();
        assert_eq!(answer.error.as_deref(), Some(err.as_str()));
    }
    serves_the_next_client(&mut server);
    drop(server);
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_client_idle_past_the_limit_is_closed_without_an_answer_and_the_next_is_served() {
    let d = directory(&fresh_dir("idle")).unwrap();
    let mut server = Server::open(&d, target()).unwrap();
    server.set_idle_limit(Duration::from_millis(100));
    let socket = server.socket().to_path_buf();
    // A client that sends half a line and waits.
    let idle = std::thread::spawn({
        let socket = socket.clone();
        move || {
            use std::io::{Read, Write};
            let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
            s.write_all(br#"{"cmd":"sta"#).unwrap();
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
            answer
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !idle.is_finished() {
        assert!(server.next_request().is_none(), "half a line is not a request");
        assert!(Instant::now() < deadline, "the idle client was not closed");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(idle.join().unwrap().is_empty(), "nothing is written to a connection closed for idling");
    serves_the_next_client(&mut server);
    drop(server);
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_client_that_reads_slowly_holds_a_reply_for_the_reply_limit_at_most() {
    let d = directory(&fresh_dir("slow")).unwrap();
    let mut server = Server::open(&d, target()).unwrap();
    let socket = server.socket().to_path_buf();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A client that sends a request, then reads a byte now and then.
    let slow = std::thread::spawn({
        let done = done.clone();
        move || {
            use std::io::{Read, Write};
            let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
            s.write_all(b"{\"cmd\":\"status\"}\n").unwrap();
            let mut byte = [0u8; 1];
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                if s.read(&mut byte).unwrap_or(0) == 0 {
                    break;
                }
            }
        }
    });
    assert_eq!(next_request(&mut server).unwrap(), Request::Status {});
    // An answer far larger than the socket's buffers.
    let big = Response { ok: true, text: Some("x".repeat(16 << 20)), ..Response::default() };
    let began = Instant::now();
    server.reply(&big);
    let took = began.elapsed();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(!server.has_client(), "a client that did not read its answer in time is dropped");
    // The bound is on the program's stall; the margin only absorbs a busy machine's scheduling.
    assert!(took < Duration::from_secs(30), "the reply held the program for {:?}", took);
    slow.join().unwrap();
    drop(server);
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_client_that_sends_a_byte_now_and_then_gives_way_to_one_waiting() {
    use std::io::{Read, Write};
    let d = directory(&fresh_dir("dribble")).unwrap();
    let mut server = Server::open(&d, target()).unwrap();
    server.set_turn_limits(Duration::from_millis(300), Duration::from_secs(60));
    let socket = server.socket().to_path_buf();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A client that sends one byte of a request every 50 ms, and connects
    // again whenever it is closed.
    let dribbler = std::thread::spawn({
        let (socket, stop) = (socket.clone(), stop.clone());
        move || {
            let mut connections = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok(mut s) = std::os::unix::net::UnixStream::connect(&socket) else { break };
                connections += 1;
                for b in br#"{"cmd":"status"}"#.iter().cycle() {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) || s.write_all(&[*b]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                    let mut byte = [0u8; 1];
                    s.set_nonblocking(true).unwrap();
                    if matches!(s.read(&mut byte), Ok(0)) {
                        break;
                    }
                    s.set_nonblocking(false).unwrap();
                }
            }
            connections
        }
    });
    // The dribbler holds the channel first.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !server.has_client() {
        assert!(server.next_request().is_none());
        assert!(Instant::now() < deadline, "the dribbler never connected");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Clients that come meanwhile are served in turn, never told "busy".
    for _ in 0..3 {
        let t = std::thread::spawn({
            let socket = socket.clone();
            move || client::request(&socket, &Request::Status {}, Duration::from_secs(60))
        });
        assert_eq!(next_request(&mut server).unwrap(), Request::Status {});
        server.reply(&Response { ok: true, ..Response::default() });
        let answer = t.join().unwrap().unwrap();
        assert!(answer.ok, "{:?}", answer.error);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    while !dribbler.is_finished() {
        let _ = server.next_request();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(dribbler.join().unwrap() >= 1);
    drop(server);
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn connections_that_wait_are_served_in_the_order_they_came() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    let d = directory(&fresh_dir("order")).unwrap();
    let mut server = Server::open(&d, target()).unwrap();
    server.set_turn_limits(Duration::from_millis(200), Duration::from_secs(60));
    let socket = server.socket().to_path_buf();
    let poll_until = |server: &mut Server, done: &dyn Fn(&Server) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done(server) {
            assert!(server.next_request().is_none());
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    // A holds the channel with half a line.
    let mut a = UnixStream::connect(&socket).unwrap();
    a.write_all(b"{\"cmd\"").unwrap();
    poll_until(&mut server, &|s| s.has_client());
    // B comes with a whole request, then A connects again (silent): in
    // the socket's queue, or waiting, B is before it.
    let mut b = UnixStream::connect(&socket).unwrap();
    b.write_all(b"{\"cmd\":\"status\"}\n").unwrap();
    let a_again = UnixStream::connect(&socket).unwrap();
    // A is closed past its line limit; B is next, before A's new connection.
    assert_eq!(next_request(&mut server).unwrap(), Request::Status {});
    server.reply(&Response { ok: true, ..Response::default() });
    let mut rest = Vec::new();
    a.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "A was closed without an answer");
    let mut line = [0u8; 1];
    b.read_exact(&mut line).unwrap();
    assert_eq!(&line, b"{");
    drop(b);
    // A's new connection is served in its turn, and closed for sending
    // nothing.
    let a_again_fd = a_again;
    poll_until(&mut server, &|s| !s.has_client());
    let mut rest = Vec::new();
    (&a_again_fd).read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    drop(server);
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_connection_that_waits_past_its_limit_is_told_busy() {
    let d = directory(&fresh_dir("wait")).unwrap();
    let mut server = Server::open(&d, target()).unwrap();
    server.set_turn_limits(server::LINE_LIMIT, Duration::from_millis(200));
    let socket = server.socket().to_path_buf();
    let mut held = Connection::open(&socket).unwrap();
    let first = std::thread::spawn(move || {
        let r = held.request(&Request::Status {}, Duration::from_secs(60));
        (held, r)
    });
    assert_eq!(next_request(&mut server).unwrap(), Request::Status {});
    server.reply(&Response { ok: true, ..Response::default() });
    let (held, answer) = first.join().unwrap();
    assert!(answer.unwrap().ok);
    // A client that keeps its turn (it sent a request) is not put out by
    // one waiting: the one waiting is told "busy" after its wait.
    let began = Instant::now();
    let second = std::thread::spawn(move || client::request(&socket, &Request::Status {}, Duration::from_secs(60)));
    while !second.is_finished() {
        assert!(server.next_request().is_none());
        assert!(began.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(5));
    }
    let busy = second.join().unwrap().unwrap();
    assert!(busy.error.unwrap().starts_with("busy"));
    assert!(began.elapsed() >= Duration::from_millis(200));
    assert!(server.has_client());
    drop(held);
    drop(server);
    fs::remove_dir_all(&d).unwrap();
}
