//! The control channel's decoder on arbitrary lines, and its rules for the
//! files a client names on arbitrary paths.
//!
//! The first byte picks the half. Decoder: every line is a request whose
//! fields are within their bounds (and that encodes and decodes to
//! itself), or an error that says "bad request" in a bounded message;
//! never a panic. Paths: in a tree made once (a control directory, an
//! output directory holding a link out and a file the channel did not
//! write, a directory outside with a file in it), a path is refused, or
//! placed in one of the two directories under a name without a slash, and
//! then written there; the files outside and the file already there never
//! change.
#![no_main]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tecs_profile::control::files::{Confined, Kind};
use tecs_profile::control::server::parse_request;

struct Tree {
    ctl: PathBuf,
    out: PathBuf,
    outside: PathBuf,
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("tecs-fuzz-control-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let t = Tree { ctl: root.join("ctl"), out: root.join("out"), outside: root.join("outside") };
        for d in [&t.ctl, &t.out, &t.outside] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(t.outside.join("victim.svg"), b"precious").unwrap();
        fs::write(t.out.join("theirs.svg"), b"theirs").unwrap();
        std::os::unix::fs::symlink(t.outside.join("victim.svg"), t.out.join("link.svg")).unwrap();
        std::os::unix::fs::symlink(&t.outside, t.out.join("sub")).unwrap();
        t
    })
}

fn decode(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match parse_request(&text) {
        Ok(request) => {
            request.check().expect("a request decoded is within its bounds");
            let line = serde_json::to_string(&request).unwrap();
            assert_eq!(parse_request(&line).unwrap(), request, "{}", line);
        }
        Err(message) => {
            assert!(message.starts_with("bad request "), "{}", message);
            assert!(message.chars().count() <= 400, "a message of {} characters", message.chars().count());
        }
    }
}

fn place(data: &[u8]) {
    let t = tree();
    let kind = match data.first().map(|b| b % 3) {
        Some(0) => Kind::Profile,
        Some(1) => Kind::TraceReport,
        _ => Kind::Functions,
    };
    let path = data.get(1..).unwrap_or(&[]);
    let mut c = Confined::new(&t.ctl, Some(&t.out)).unwrap();
    if let Ok(place) = c.place(path, kind) {
        let parent = place.path.parent().map(Path::to_path_buf).unwrap_or_default();
        assert!(parent == t.ctl || parent == t.out, "placed in {}", parent.display());
        if let Ok(written) = c.write(&place, b"profile", kind) {
            assert_eq!(written, place.path);
            assert_eq!(fs::read(&written).unwrap(), b"profile");
            fs::remove_file(&written).unwrap();
        }
    }
    assert_eq!(fs::read(t.outside.join("victim.svg")).unwrap(), b"precious");
    assert_eq!(fs::read(t.out.join("theirs.svg")).unwrap(), b"theirs");
    assert_eq!(fs::read_dir(&t.outside).unwrap().count(), 1, "a file appeared outside");
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((b, rest)) if b & 1 == 0 => decode(rest),
        Some((_, rest)) => place(rest),
        None => {}
    }
});
