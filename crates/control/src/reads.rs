//! What a client may have read: a file a client names (an MCP resource) is
//! read under the rules a write follows ([`super::files`]).
//!
//! The name is looked up in a directory opened first (as the program named
//! it) and must be a plain name there: no NUL, no `/`, not `.` or `..`. The
//! file is opened without following a link (`O_NOFOLLOW`) and without
//! waiting (`O_NONBLOCK`: a FIFO or a device opens at once), then checked
//! on the open descriptor (`fstat`): a regular file, owned by this process's
//! user, with one name (a hard link another user made to a file elsewhere
//! is refused). Its size is the open file's, and at most `max_bytes` are
//! read whatever the size says (a file that grows, or reports 0, still
//! costs no more).

use std::ffi::CString;
use std::io::{self, Read};
use std::path::Path;

use crate::sys::dir::{Dir, Entry};

/// A file opened for a client and checked, not read yet.
#[derive(Debug)]
pub struct Checked {
    file: std::fs::File,
    /// Its size when it was checked.
    pub size: u64,
}

/// Why a file is not given to a client, said as "cannot read NAME: ...".
fn refuse(name: &[u8], why: impl std::fmt::Display) -> String {
    format!("cannot read '{}': {}", String::from_utf8_lossy(name), why)
}

/// Checks that `name` may be looked up in a directory: a plain name.
pub fn plain_name(name: &[u8]) -> Result<CString, String> {
    if name.contains(&0) {
        return Err(refuse(name, "a name with a NUL byte"));
    }
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
        return Err(refuse(name, "not a file name"));
    }
    if name.len() > super::files::MAX_PATH_BYTES {
        return Err(refuse(name, "a name too long"));
    }
    Ok(CString::new(name).expect("no NUL byte: checked"))
}

/// Opens the file `name` of the directory `dir` for a client, checked as
/// the module says; the error names the file and the rule.
pub fn open(dir: &Path, name: &[u8]) -> Result<Checked, String> {
    let cname = plain_name(name)?;
    let dir = Dir::open(dir).map_err(|e| refuse(name, format!("cannot open {}: {}", dir.display(), e)))?;
    let file = dir.open_read(&cname).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => refuse(name, "a symbolic link (a link is never followed)"),
        _ => refuse(name, e),
    })?;
    let entry = Entry::of_file(&file).map_err(|e| refuse(name, e))?;
    if !entry.regular {
        return Err(refuse(name, "not a regular file (a FIFO, a device, a directory or a socket)"));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if entry.uid != me {
        return Err(refuse(name, format!("owned by user {}, not by this user ({})", entry.uid, me)));
    }
    if entry.links != 1 {
        return Err(refuse(name, format!("a file with {} names (a hard link is never read)", entry.links)));
    }
    Ok(Checked { file, size: entry.size })
}

impl Checked {
    /// The file's bytes, at most `max_bytes` of them: a file found longer
    /// than that (whatever its size said) is an error that says so.
    pub fn read(mut self, max_bytes: u64) -> io::Result<Vec<u8>> {
        let mut data = Vec::with_capacity(self.size.min(max_bytes) as usize);
        (&mut self.file).take(max_bytes + 1).read_to_end(&mut data)?;
        if data.len() as u64 > max_bytes {
            return Err(io::Error::other(format!("longer than the {} bytes a read returns", max_bytes)));
        }
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn dir() -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("tecs-reads-{}-{:?}", std::process::id(), std::thread::current().id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn reads_a_regular_file_of_this_user() {
        let d = dir();
        std::fs::write(d.join("a.collapsed"), b"main;f 3\n").unwrap();
        let c = open(&d, b"a.collapsed").unwrap();
        assert_eq!(c.size, 9);
        assert_eq!(c.read(100).unwrap(), b"main;f 3\n");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn refuses_names_links_fifos_devices_hard_links_and_long_files() {
        let d = dir();
        std::fs::write(d.join("secret"), b"x").unwrap();
        for bad in [&b"a\0.collapsed"[..], b"", b".", b"..", b"../secret", b"sub/x.collapsed"] {
            assert!(open(&d, bad).is_err(), "{:?}", bad);
        }
        assert!(open(&d, b"a\0.collapsed").unwrap_err().contains("NUL"));
        symlink(d.join("secret"), d.join("link.collapsed")).unwrap();
        assert!(open(&d, b"link.collapsed").unwrap_err().contains("symbolic link"));
        symlink("/dev/zero", d.join("zero.collapsed")).unwrap();
        assert!(open(&d, b"zero.collapsed").unwrap_err().contains("symbolic link"));
        let fifo = CString::new(d.join("hang.svg").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(open(&d, b"hang.svg").unwrap_err().contains("not a regular file"));
        std::fs::hard_link(d.join("secret"), d.join("hard.collapsed")).unwrap();
        assert!(open(&d, b"hard.collapsed").unwrap_err().contains("hard link"));
        std::fs::write(d.join("big.collapsed"), vec![b'x'; 100]).unwrap();
        let c = open(&d, b"big.collapsed").unwrap();
        assert_eq!(c.size, 100);
        assert!(c.read(99).unwrap_err().to_string().contains("longer than the 99 bytes"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
