use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::*;

/// A fresh tree: `ctl` (the control directory), `out` (outputDir) and
/// `outside`, holding `victim` (a file no client may touch).
struct Tree {
    root: PathBuf,
}

impl Tree {
    fn new(name: &str) -> Tree {
        let root = std::env::temp_dir().join(format!("tecs-files-{}-{}", name, std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for d in ["ctl", "out", "outside"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("outside/victim"), b"precious\n").unwrap();
        Tree { root }
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
    fn s(&self, rel: &str) -> String {
        self.p(rel).to_string_lossy().into_owned()
    }
    fn confined(&self) -> Confined {
        Confined::new(&self.p("ctl"), Some(&self.p("out"))).unwrap()
    }
    /// Every file under the tree and its bytes (links as their target).
    fn snapshot(&self) -> Vec<(PathBuf, String)> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
            let mut entries: Vec<_> = fs::read_dir(dir).unwrap().flatten().collect();
            entries.sort_by_key(|e| e.path());
            for e in entries {
                let p = e.path();
                let ft = fs::symlink_metadata(&p).unwrap().file_type();
                if ft.is_symlink() {
                    out.push((p.clone(), format!("-> {}", fs::read_link(&p).unwrap().display())));
                } else if ft.is_dir() {
                    walk(&p, out);
                } else {
                    out.push((p.clone(), String::from_utf8_lossy(&fs::read(&p).unwrap()).into_owned()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn write(c: &mut Confined, path: &str, kind: Kind, text: &str) -> Result<PathBuf, String> {
    let place = c.place(path.as_bytes(), kind)?;
    c.write(&place, text.as_bytes(), kind)
}

#[test]
fn a_bare_name_goes_to_the_output_directory_and_an_absolute_path_to_either() {
    let t = Tree::new("places");
    let mut c = t.confined();
    assert_eq!(write(&mut c, "a.svg", Kind::Profile, "svg").unwrap(), t.p("out/a.svg"));
    assert_eq!(fs::read_to_string(t.p("out/a.svg")).unwrap(), "svg");
    assert_eq!(write(&mut c, &t.s("ctl/b.collapsed"), Kind::Profile, "x 1\n").unwrap(), t.p("ctl/b.collapsed"));
    assert_eq!(write(&mut c, &t.s("out/c.PB.GZ"), Kind::Profile, "gz").unwrap(), t.p("out/c.PB.GZ"));
    // Spelled with empty and `.` components, or with links resolved.
    assert_eq!(write(&mut c, &format!("{}//./d.folded", t.s("out")), Kind::Profile, "d").unwrap(), t.p("out/d.folded"));
    let resolved = fs::canonicalize(t.p("out")).unwrap().join("e.html");
    assert_eq!(write(&mut c, &resolved.to_string_lossy(), Kind::Profile, "e").unwrap(), t.p("out/e.html"));
    // A path through a link to an allowed directory is not looked up.
    symlink(t.p("out"), t.p("outside/to-out")).unwrap();
    assert!(write(&mut c, &t.s("outside/to-out/f.svg"), Kind::Profile, "f").is_err());
    assert!(write(&mut c, &t.s("ctl/../out/f.svg"), Kind::Profile, "f").unwrap_err().contains("a path with .. in it"));
    assert_eq!(write(&mut c, "t.csv", Kind::TraceReport, "csv").unwrap(), t.p("out/t.csv"));
    assert_eq!(
        write(&mut c, &t.s("out/a.collapsed.functions.json"), Kind::Functions, "{}").unwrap(),
        t.p("out/a.collapsed.functions.json")
    );
    // Without outputDir, a bare name goes to the control directory.
    let mut only = Confined::new(&t.p("ctl"), None).unwrap();
    assert_eq!(write(&mut only, "f.svg", Kind::Profile, "f").unwrap(), t.p("ctl/f.svg"));
    assert_eq!(only.directories(), vec![t.p("ctl").as_path()]);
    assert_eq!(c.directories(), vec![t.p("out").as_path(), t.p("ctl").as_path()]);
    // No temporary file is left behind.
    for d in ["ctl", "out"] {
        for e in fs::read_dir(t.p(d)).unwrap().flatten() {
            assert!(!e.file_name().to_string_lossy().ends_with(".tmp"), "{:?}", e.path());
        }
    }
}

#[test]
fn hostile_paths_are_refused_and_nothing_outside_changes() {
    let t = Tree::new("hostile");
    let mut c = t.confined();
    symlink(t.p("outside/victim"), t.p("out/link.svg")).unwrap();
    symlink(t.p("outside/absent"), t.p("out/dangling.svg")).unwrap();
    symlink(t.p("outside"), t.p("out/sub")).unwrap();
    fs::write(t.p("out/theirs.svg"), b"the user's\n").unwrap();
    fs::create_dir(t.p("out/dir.svg")).unwrap();
    let before = t.snapshot();
    let long = "x".repeat(MAX_PATH_BYTES) + ".svg";
    let name_too_long = "y".repeat(300) + ".svg";
    let cases: Vec<(String, &str)> = vec![
        (t.s("outside/victim.svg"), "not in a directory a client may write in"),
        (t.s("outside/victim"), "not in a directory"),
        ("/etc/passwd".into(), "not in a directory"),
        ("/dev/null".into(), "not in a directory"),
        ("/proc/self/fd/1".into(), "not in a directory"),
        (t.s("out/../outside/v.svg"), "a path with .. in it"),
        (t.s("out/../out/v.svg"), "a path with .. in it"),
        (t.s("out/sub/v.svg"), "not in a directory"),
        (t.s("out/link.svg"), "exists and is not a regular file"),
        (t.s("out/dangling.svg"), "exists and is not a regular file"),
        (t.s("out/theirs.svg"), "exists and is not a file this channel wrote"),
        (t.s("out/dir.svg"), "exists and is not a regular file"),
        (t.s("out/victim"), "not a name with a format's ending"),
        (t.s("out/.svg"), "not a name with a format's ending"),
        (t.s("out/x.svg.sh"), "not a name with a format's ending"),
        (t.s("out/x.functions.json"), "not a name with a format's ending"),
        (t.s("out/x.csv"), "not a name with a format's ending"),
        (t.s("out/"), "not a file name"),
        (t.s("out/.."), "not a file name"),
        (t.s("out/."), "not a file name"),
        ("out/rel.svg".into(), "a relative path"),
        ("../rel.svg".into(), "a relative path"),
        ("".into(), "an empty path"),
        ("a\0b.svg".into(), "a NUL byte"),
        ("new\n.svg".into(), "a control character"),
        ("new\x1b[2J.svg".into(), "a control character"),
        (long, "bytes (at most 4096)"),
        (t.s("missing/x.svg"), "not in a directory"),
        ("/net/host/x.svg".into(), "not in a directory"),
    ];
    for (path, why) in &cases {
        let err = write(&mut c, path, Kind::Profile, "EVIL\n").unwrap_err();
        assert!(err.contains(why), "{}: {}", path.chars().take(100).collect::<String>(), err);
        assert!(err.contains("a client may write only in"), "{}", err);
        assert!(err.contains(&t.s("out")) && err.contains(&t.s("ctl")), "{}", err);
    }
    let err = write(&mut c, &name_too_long, Kind::Profile, "EVIL\n").unwrap_err();
    assert!(err.contains("cannot"), "{}", err);
    assert!(write(&mut c, "x.svg", Kind::TraceReport, "EVIL").unwrap_err().contains("ending in .csv"));
    assert!(write(&mut c, "x.svg.functions.json", Kind::Functions, "EVIL").is_err());
    assert_eq!(before, t.snapshot(), "a refused write changed something");
}

#[test]
fn the_channel_writes_over_its_own_file_only_as_it_left_it() {
    let t = Tree::new("own");
    let mut c = t.confined();
    write(&mut c, "p.svg", Kind::Profile, "first").unwrap();
    write(&mut c, "p.svg", Kind::Profile, "second").unwrap();
    assert_eq!(fs::read_to_string(t.p("out/p.svg")).unwrap(), "second");
    // Replaced by someone else (a new file there): refused, theirs kept.
    fs::remove_file(t.p("out/p.svg")).unwrap();
    fs::write(t.p("out/p.svg"), b"theirs").unwrap();
    assert!(write(&mut c, "p.svg", Kind::Profile, "third").unwrap_err().contains("not a file this channel wrote"));
    assert_eq!(fs::read_to_string(t.p("out/p.svg")).unwrap(), "theirs");
    // Swapped for a link to a file outside: refused, the file untouched.
    write(&mut c, "q.svg", Kind::Profile, "q").unwrap();
    fs::remove_file(t.p("out/q.svg")).unwrap();
    symlink(t.p("outside/victim"), t.p("out/q.svg")).unwrap();
    assert!(write(&mut c, "q.svg", Kind::Profile, "EVIL").is_err());
    assert_eq!(fs::read_to_string(t.p("outside/victim")).unwrap(), "precious\n");
    // Another listener (another run of the program) did not write it.
    write(&mut c, "r.svg", Kind::Profile, "r").unwrap();
    let mut other = t.confined();
    assert!(write(&mut other, "r.svg", Kind::Profile, "EVIL").is_err());
    assert_eq!(fs::read_to_string(t.p("out/r.svg")).unwrap(), "r");
}

#[test]
fn a_file_that_appears_between_the_check_and_the_write_is_not_written_over() {
    let t = Tree::new("race");
    let mut c = t.confined();
    let place = c.place(b"late.svg", Kind::Profile).unwrap();
    fs::write(t.p("out/late.svg"), b"theirs").unwrap();
    let err = c.write(&place, b"EVIL", Kind::Profile).unwrap_err();
    assert!(err.contains("not a file this channel wrote"), "{}", err);
    // Even when it appears after write's own check: the rename that puts
    // the text in place refuses to replace it.
    let place = c.place(b"later.svg", Kind::Profile).unwrap();
    let (temporary, f) = c.temporary_file(place.dir).unwrap();
    drop(f);
    symlink(t.p("outside/victim"), t.p("out/later.svg")).unwrap();
    let err = c.dirs[place.dir].dir.rename_new(&temporary, &place.name).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(fs::read_link(t.p("out/later.svg")).unwrap(), t.p("outside/victim"));
    assert_eq!(fs::read_to_string(t.p("outside/victim")).unwrap(), "precious\n");
    assert_eq!(fs::read_to_string(t.p("out/late.svg")).unwrap(), "theirs");
}

#[test]
fn the_directories_are_held_open_not_looked_up_again() {
    let t = Tree::new("held");
    let mut c = t.confined();
    // The output directory moved away and a link to elsewhere put in its
    // place: its files, by a bare name or by its path, still go to the
    // directory opened.
    fs::rename(t.p("out"), t.p("moved")).unwrap();
    symlink(t.p("outside"), t.p("out")).unwrap();
    write(&mut c, "a.svg", Kind::Profile, "a").unwrap();
    assert_eq!(fs::read_to_string(t.p("moved/a.svg")).unwrap(), "a");
    write(&mut c, &t.s("out/b.svg"), Kind::Profile, "b").unwrap();
    assert_eq!(fs::read_to_string(t.p("moved/b.svg")).unwrap(), "b");
    assert!(!t.p("outside/a.svg").exists() && !t.p("outside/b.svg").exists());
}

#[test]
fn a_directory_that_cannot_be_opened_is_an_error_naming_it() {
    let t = Tree::new("bad");
    let err = Confined::new(&t.p("ctl"), Some(&t.p("nowhere"))).err().unwrap();
    assert!(err.contains("cannot use outputDir") && err.contains("nowhere"), "{}", err);
    let err = Confined::new(&t.p("ctl"), Some(&t.p("outside/victim"))).err().unwrap();
    assert!(err.contains("cannot use outputDir"), "{}", err);
}

#[test]
fn the_record_of_files_written_is_bounded() {
    let t = Tree::new("record");
    let mut c = Confined::new(&t.p("ctl"), None).unwrap();
    for i in 0..REMEMBERED + 1 {
        write(&mut c, &format!("{}.svg", i), Kind::Profile, "x").unwrap();
    }
    assert_eq!(c.written.len(), REMEMBERED);
    // The latest is written over again, the oldest is now refused.
    write(&mut c, &format!("{}.svg", REMEMBERED), Kind::Profile, "y").unwrap();
    assert!(write(&mut c, "0.svg", Kind::Profile, "y").unwrap_err().contains("not a file this channel wrote"));
    assert_eq!(fs::read_to_string(t.p("ctl/0.svg")).unwrap(), "x");
}

#[test]
fn a_file_swapped_in_after_the_check_is_swapped_back_not_replaced() {
    let t = Tree::new("swap");
    let mut c = t.confined();
    let place = c.place(b"own.svg", Kind::Profile).unwrap();
    c.write(&place, b"ours", Kind::Profile).unwrap();
    // As if between write's check and its swap: someone's file there now.
    fs::remove_file(t.p("out/own.svg")).unwrap();
    fs::write(t.p("out/own.svg"), b"theirs").unwrap();
    let (temporary, mut f) = c.temporary_file(place.dir).unwrap();
    std::io::Write::write_all(&mut f, b"new").unwrap();
    drop(f);
    match c.replace_own(&place, &temporary) {
        Err(Failure::Refused(why)) => assert!(why.contains("was replaced meanwhile"), "{}", why),
        Err(Failure::System(e)) => panic!("{}", e),
        Ok(()) => panic!("replaced a file the channel did not write"),
    }
    assert_eq!(fs::read_to_string(t.p("out/own.svg")).unwrap(), "theirs");
    let left = t.p("out").join(std::ffi::OsStr::from_bytes(temporary.to_bytes()));
    assert_eq!(fs::read_to_string(left).unwrap(), "new", "the channel's text is swapped back to its own name");
}

#[test]
fn temporary_names_planted_in_the_directory_do_not_stop_a_write() {
    let t = Tree::new("planted");
    let mut c = t.confined();
    // The names a predictable scheme would take next, planted as files and
    // as links: none is the name the write draws.
    for n in 1..=200 {
        let name = format!(".tecs-profile-{}-{}.tmp", std::process::id(), n);
        if n % 2 == 0 {
            fs::write(t.p("out").join(&name), b"theirs").unwrap();
        } else {
            symlink(t.p("outside/victim"), t.p("out").join(&name)).unwrap();
        }
    }
    for i in 0..20 {
        let place = c.place(format!("p{}.svg", i).as_bytes(), Kind::Profile).unwrap();
        c.write(&place, b"<svg/>", Kind::Profile).unwrap();
    }
    let (a, fa) = c.temporary_file(0).unwrap();
    let (b, fb) = c.temporary_file(0).unwrap();
    drop((fa, fb));
    assert_ne!(a, b);
    // Random: 16 hex digits after the pid.
    let text = a.to_str().unwrap();
    let random = text.trim_end_matches(".tmp").rsplit('-').next().unwrap();
    assert_eq!(random.len(), 16, "{}", text);
    assert!(random.bytes().all(|b| b.is_ascii_hexdigit()), "{}", text);
    assert_eq!(fs::read_to_string(t.p("outside/victim")).unwrap(), "precious\n");
}
