//! The control channel's decoder on arbitrary lines, its rules for the
//! files a client names on arbitrary paths, and for the files a client has
//! read on arbitrary names, and the bounded line reader of `tecs-profile
//! mcp` on arbitrary input.
//!
//! The first byte picks the part. Decoder: every line is a request whose
//! fields are within their bounds (and that encodes and decodes to
//! itself), or an error that says "bad request" in a bounded message;
//! never a panic. Paths: in a tree made once (a control directory, an
//! output directory holding a link out and a file the channel did not
//! write, a directory outside with a file in it), a path is refused, or
//! placed in one of the two directories under a name without a slash, and
//! then written there; the files outside and the file already there never
//! change. Reads: in the same tree (holding also a FIFO, a hard link and a
//! link out), a name is refused, or is a regular file with one name right
//! in the directory, whose bytes are read without waiting. Lines: every
//! line given is within the bound and holds no newline.
#![no_main]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

use libfuzzer_sys::fuzz_target;
use tecs_profile::control::files::{Confined, Kind};
use tecs_profile::control::lines::{BoundedLines, Line};
use tecs_profile::control::reads;
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
        fs::write(t.out.join("mine.collapsed"), b"main 1\n").unwrap();
        fs::hard_link(t.outside.join("victim.svg"), t.out.join("hard.svg")).unwrap();
        let fifo = std::ffi::CString::new(t.out.join("hang.svg").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
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

fn read(name: &[u8]) {
    let t = tree();
    if let Ok(checked) = reads::open(&t.out, name) {
        assert!(!name.contains(&b'/') && !name.contains(&0), "{:?}", name);
        let meta = fs::symlink_metadata(t.out.join(std::ffi::OsStr::from_bytes(name))).unwrap();
        assert!(meta.file_type().is_file() && meta.nlink() == 1, "{:?}", name);
        let bytes = checked.read(1 << 20).unwrap();
        assert_eq!(bytes, fs::read(t.out.join(std::ffi::OsStr::from_bytes(name))).unwrap());
    }
}

fn lines(data: &[u8]) {
    let max = 1 + data.first().copied().unwrap_or(0) as usize;
    let mut r = BoundedLines::new(data.get(1..).unwrap_or(&[]), max);
    let mut count = 0;
    while let Some(line) = r.next_line().unwrap() {
        count += 1;
        match line {
            Line::Whole(l) => assert!(l.len() <= max && !l.contains(&b'\n')),
            Line::TooLong(n) => assert!(n > max),
        }
    }
    assert!(count <= data.len() + 1);
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((b, rest)) if b % 4 == 1 => place(rest),
        Some((b, rest)) if b % 4 == 3 => match rest.split_first() {
            Some((c, name)) if c & 1 == 0 => read(name),
            Some((_, input)) => lines(input),
            None => {}
        },
        Some((_, rest)) => decode(rest),
        None => {}
    }
});
