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
    Target { pid: 0, program: "test".into(), kind: "luajit".into(), socket: String::new(), started: 1 }
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
    let line =
        serde_json::to_string(&Request::Start { interval_ms: Some(2.0), zone: None, seconds: Some(5.0) }).unwrap();
    assert_eq!(line, r#"{"cmd":"start","intervalMs":2.0,"seconds":5.0}"#);
    assert_eq!(serde_json::from_str::<Request>(r#"{"cmd":"status"}"#).unwrap(), Request::Status);
    assert_eq!(
        serde_json::from_str::<Request>(r#"{"cmd":"report","top":5}"#).unwrap(),
        Request::Report { by: None, then_by: None, top: Some(5), hitches: None }
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
            let r = c.request(&Request::Status, Duration::from_secs(60)).unwrap();
            (c, r)
        }
    });
    assert_eq!(next_request(&mut server).unwrap(), Request::Status);
    server.reply(&Response { ok: true, running: Some(false), ..Response::default() });
    let (held, answer) = first.join().unwrap();
    assert_eq!(answer.running, Some(false));

    // The first client still holds its connection: the second is refused.
    let second = std::thread::spawn({
        let socket = socket.clone();
        move || client::request(&socket, &Request::Status, Duration::from_secs(60))
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
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_unanswered_request_times_out_with_the_reason() {
    let d = directory(&fresh_dir("late")).unwrap();
    let mut server = Server::open(&d, target()).unwrap();
    let err = client::request(server.socket(), &Request::Status, Duration::from_millis(50)).unwrap_err();
    assert!(err.contains("has not polled"), "{}", err);
    // The request was not lost: the next poll finds it.
    assert_eq!(next_request(&mut server).unwrap(), Request::Status);
    server.reply(&Response { ok: true, ..Response::default() });
    drop(server);
    fs::remove_dir_all(&d).unwrap();
}
