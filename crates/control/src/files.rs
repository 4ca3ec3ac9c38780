//! Where a client of the control channel may have the program write, and
//! how it is written.
//!
//! A client names a file (`stop`'s and `trace_stop`'s `path`); the program
//! writes it only
//!
//! - in the control directory or in the directory the program named
//!   (`listen{ outputDir = ... }`): a bare file name goes to the latter
//!   (else to the control directory), an absolute path must name a file
//!   right in one of them, as the program named it or with its links
//!   resolved (compared as text: nothing a client names outside is looked
//!   up; `..` is refused);
//! - under a name without control characters, with a profile format's ending (the format registry's,
//!   and [`COLLAPSED_ENDINGS`] for collapsed text, whose declaration has
//!   none: any other name is collapsed), or [`TRACE_ENDING`] for a trace
//!   report; the functions file beside a collapsed profile is named after
//!   it;
//! - as a new name, or over a file this channel wrote there itself and
//!   that has not changed since ([`Confined`] keeps the record); a link, a
//!   device, another file is never written over, nor through.
//!
//! Each directory is opened once, when the channel opens, and every name is
//! looked up and written relative to that handle (`openat`): a link or a
//! rename on the way to it later changes nothing. The text goes to a new
//! temporary file (`O_EXCL | O_NOFOLLOW`) in the directory and is renamed
//! to its name there: without replacing anything for a new name (the
//! kernel refuses when something appeared meanwhile), and in the place of
//! the channel's own file otherwise: the two names swapped atomically
//! (`RENAME_EXCHANGE`), then the file swapped out checked, and swapped
//! back if it is not the channel's (something put there meanwhile). A
//! rename never writes into a file; where a system cannot swap, the check
//! made just before stands, and at worst (something put there between the
//! check and the rename by someone who may write in that directory) a name
//! of theirs goes, never the content of a file.

use std::collections::{HashMap, VecDeque};
use std::ffi::{CString, OsStr};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::sys::dir::{Dir, Entry};
use crate::sys::process;
use tecs_profile_format::output::REGISTRY;
use tecs_profile_format::profile::sidecar;

/// The endings the channel accepts for collapsed text: its own default
/// names end in `.collapsed`; `.folded` is the other usual one.
pub const COLLAPSED_ENDINGS: &[&str] = &[".collapsed", ".folded"];

/// The ending of a trace-abort report (`trace_stop`), which is CSV.
pub const TRACE_ENDING: &str = ".csv";

/// The longest path a request may name, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// How many of the files it wrote the channel remembers (the latest): past
/// them, an older one is not written over again (a client that stops
/// sessions for ever does not grow the program's memory for ever).
pub const REMEMBERED: usize = 4096;

/// What a file holds, which decides the endings its name may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A profile, in the format its name's ending chooses.
    Profile,
    /// A trace-abort report (CSV).
    TraceReport,
    /// The functions file beside a collapsed profile.
    Functions,
}

impl Kind {
    /// The kind named `name` (`"profile"`, `"trace"`, `"functions"`).
    pub fn from_name(name: &str) -> Option<Kind> {
        Some(match name {
            "profile" => Kind::Profile,
            "trace" => Kind::TraceReport,
            "functions" => Kind::Functions,
            _ => return None,
        })
    }

    /// The endings (lower case) a name of this kind may have.
    pub fn endings(self) -> Vec<String> {
        match self {
            Kind::Profile => profile_endings().map(String::from).collect(),
            Kind::TraceReport => vec![TRACE_ENDING.to_string()],
            Kind::Functions => COLLAPSED_ENDINGS.iter().map(|e| format!("{}{}", e, sidecar::ENDING)).collect(),
        }
    }
}

/// The endings of profiles: collapsed text's, then the registry's.
pub fn profile_endings() -> impl Iterator<Item = &'static str> {
    COLLAPSED_ENDINGS.iter().copied().chain(REGISTRY.iter().flat_map(|d| d.endings.iter().copied()))
}

/// A directory a client may have the program write in.
struct Allowed {
    /// As the program named it, made absolute (with links resolved when
    /// it had `..` in it): how answers name its files.
    path: PathBuf,
    /// The components of the paths that name it for a client: `path`'s,
    /// and its links resolved.
    spellings: Vec<Vec<Vec<u8>>>,
    dir: Dir,
    id: (u64, u64),
    /// What it is, for messages: "the control directory", "outputDir".
    role: &'static str,
}

/// Why a rename did not happen: the rules, or the system.
enum Failure {
    Refused(String),
    System(io::Error),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::System(e)
    }
}

/// Where one file goes: a directory of [`Confined`] and a name in it.
#[derive(Debug)]
pub struct Place {
    dir: usize,
    name: CString,
    /// The file's absolute path, for the answer.
    pub path: PathBuf,
}

/// The directories a client may have the program write in, and what the
/// channel wrote there.
pub struct Confined {
    dirs: Vec<Allowed>,
    /// Where a bare file name goes: outputDir when the program named one.
    default: usize,
    /// The files this channel wrote, by directory and name, as they were
    /// once written; and their keys, oldest first.
    written: HashMap<(usize, Vec<u8>), Entry>,
    order: VecDeque<(usize, Vec<u8>)>,
}

/// The components of an absolute path, empty ones and `.` left out; None
/// when one is `..` (whose meaning depends on the links before it).
fn components(path: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for c in path.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return None,
            c => out.push(c.to_vec()),
        }
    }
    Some(out)
}

fn allowed(path: &Path, role: &'static str) -> Result<Allowed, String> {
    let cannot = |e: io::Error| format!("cannot use {} {}: {}", role, path.display(), e);
    let absolute = std::path::absolute(path).map_err(cannot)?;
    let resolved = std::fs::canonicalize(&absolute).map_err(cannot)?;
    let dir = Dir::open(&resolved).map_err(cannot)?;
    let id = dir.identity().map_err(cannot)?;
    let mut spellings = Vec::new();
    let shown = match components(absolute.as_os_str().as_bytes()) {
        Some(c) => {
            spellings.push(c);
            absolute
        }
        None => resolved.clone(),
    };
    spellings.extend(components(resolved.as_os_str().as_bytes()));
    spellings.dedup();
    Ok(Allowed { path: shown, spellings, dir, id, role })
}

/// `text` cut to at most 200 characters, for a message.
fn shown(text: &str) -> String {
    if text.chars().count() <= 200 {
        return text.to_string();
    }
    text.chars().take(197).collect::<String>() + "..."
}

impl Confined {
    /// The control directory `control` and, if the program named one, its
    /// output directory `output`; each opened now.
    pub fn new(control: &Path, output: Option<&Path>) -> Result<Confined, String> {
        let mut dirs = vec![allowed(control, "the control directory")?];
        if let Some(o) = output {
            let o = allowed(o, "outputDir")?;
            if o.id != dirs[0].id {
                dirs.push(o);
            }
        }
        let default = dirs.len() - 1;
        Ok(Confined { dirs, default, written: HashMap::new(), order: VecDeque::new() })
    }

    /// The control directory, absolute.
    pub fn control_directory(&self) -> &Path {
        &self.dirs[0].path
    }

    /// The directories, bare names' first.
    pub fn directories(&self) -> Vec<&Path> {
        let mut v: Vec<&Path> = vec![&self.dirs[self.default].path];
        v.extend(self.dirs.iter().enumerate().filter(|(i, _)| *i != self.default).map(|(_, d)| d.path.as_path()));
        v
    }

    /// Where a client may write files of `kind`, for a refusal.
    pub fn rule(&self, kind: Kind) -> String {
        let dirs: Vec<String> = self
            .directories()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let role = self.dirs.iter().find(|d| d.path == *p).map_or("", |d| d.role);
                let bare = if i == 0 { ", where a bare file name goes" } else { "" };
                format!("{} ({}{})", p.display(), role, bare)
            })
            .collect();
        format!(
            "a client may write only in {}, files ending in {}, new or written there by this channel",
            dirs.join(" or "),
            kind.endings().join(", ")
        )
    }

    fn refuse(&self, path: &[u8], why: impl std::fmt::Display, kind: Kind) -> String {
        format!("cannot write '{}': {}; {}", shown(&String::from_utf8_lossy(path)), why, self.rule(kind))
    }

    /// Where the file a client named `path` goes, if it may write it
    /// there: the error says why not and where it may write.
    pub fn place(&self, path: &[u8], kind: Kind) -> Result<Place, String> {
        if path.is_empty() {
            return Err(self.refuse(path, "an empty path", kind));
        }
        if path.len() > MAX_PATH_BYTES {
            return Err(self.refuse(
                path,
                format!("a path of {} bytes (at most {})", path.len(), MAX_PATH_BYTES),
                kind,
            ));
        }
        if path.contains(&0) {
            return Err(self.refuse(path, "a path with a NUL byte", kind));
        }
        let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
            None => (self.default, path),
            Some(_) if path[0] != b'/' => {
                return Err(self.refuse(path, "a relative path (a bare file name or an absolute path expected)", kind))
            }
            Some(at) => {
                // Compared as written, never looked up: a client's path
                // leads the program nowhere outside the two directories
                // (not even to a stat on an automounted or hung file system).
                let Some(parent) = components(&path[..at]) else {
                    return Err(self.refuse(path, "a path with .. in it", kind));
                };
                let Some(dir) = self.dirs.iter().position(|d| d.spellings.contains(&parent)) else {
                    return Err(self.refuse(path, "not in a directory a client may write in", kind));
                };
                (dir, &path[at + 1..])
            }
        };
        if name.is_empty() || name == b"." || name == b".." {
            return Err(self.refuse(path, "not a file name", kind));
        }
        if name.iter().any(|&b| b < 0x20 || b == 0x7f) {
            return Err(self.refuse(path, "a name with a control character", kind));
        }
        let lower = name.to_ascii_lowercase();
        if !kind.endings().iter().any(|e| lower.len() > e.len() && lower.ends_with(e.as_bytes())) {
            return Err(self.refuse(path, "not a name with a format's ending", kind));
        }
        let place = Place {
            dir,
            name: CString::new(name).expect("no NUL byte: checked"),
            path: self.dirs[dir].path.join(OsStr::from_bytes(name)),
        };
        self.replaces(&place).map_err(|why| self.refuse(path, why, kind))?;
        Ok(place)
    }

    /// Whether writing `place` replaces a file (the channel's own), or
    /// why it may not be written.
    fn replaces(&self, place: &Place) -> Result<bool, String> {
        let existing = self.dirs[place.dir]
            .dir
            .entry(&place.name)
            .map_err(|e| format!("cannot look at {}: {}", place.path.display(), e))?;
        match existing {
            None => Ok(false),
            Some(e) if self.written.get(&(place.dir, place.name.to_bytes().to_vec())) == Some(&e) => Ok(true),
            Some(e) if e.regular => Err(format!(
                "{} exists and is not a file this channel wrote (nothing is written over it)",
                place.path.display()
            )),
            Some(_) => Err(format!("{} exists and is not a regular file", place.path.display())),
        }
    }

    /// Writes `bytes` to `place` (from [`Confined::place`], checked again
    /// now), completely or not at all; returns the file's path.
    pub fn write(&mut self, place: &Place, bytes: &[u8], kind: Kind) -> Result<PathBuf, String> {
        let shown_path = place.path.as_os_str().as_bytes().to_vec();
        let replace = self.replaces(place).map_err(|why| self.refuse(&shown_path, why, kind))?;
        let cannot = |e: io::Error| format!("cannot write '{}': {}", place.path.display(), e);
        let (temporary, mut file) = self.temporary_file(place.dir).map_err(cannot)?;
        let dir = &self.dirs[place.dir].dir;
        let written = file.write_all(bytes).and_then(|()| file.flush()).and_then(|()| Entry::of_file(&file));
        drop(file);
        let entry = match written {
            Ok(e) => e,
            Err(e) => {
                let _ = dir.remove(&temporary);
                return Err(cannot(e));
            }
        };
        let renamed = if replace {
            self.replace_own(place, &temporary)
        } else {
            dir.rename_new(&temporary, &place.name).map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => {
                    Failure::Refused(format!("{} appeared meanwhile", place.path.display()))
                }
                _ => Failure::System(e),
            })
        };
        if let Err(e) = renamed {
            let _ = self.dirs[place.dir].dir.remove(&temporary);
            return Err(match e {
                Failure::Refused(why) => {
                    self.refuse(&shown_path, format!("{} (nothing is written over it)", why), kind)
                }
                Failure::System(e) => cannot(e),
            });
        }
        self.remember((place.dir, place.name.to_bytes().to_vec()), entry);
        Ok(place.path.clone())
    }

    /// Records a file written, forgetting the oldest past [`REMEMBERED`].
    fn remember(&mut self, key: (usize, Vec<u8>), entry: Entry) {
        if self.written.insert(key.clone(), entry).is_none() {
            self.order.push_back(key);
            if self.order.len() > REMEMBERED {
                if let Some(oldest) = self.order.pop_front() {
                    self.written.remove(&oldest);
                }
            }
        }
    }

    /// Puts `temporary` in the place of the channel's own file at `place`:
    /// the names swapped atomically, then what was there checked (still
    /// the file the channel wrote: removed; else swapped back, kept);
    /// where the system cannot swap, the check made before stands and
    /// `temporary` is renamed over it.
    fn replace_own(&self, place: &Place, temporary: &CString) -> Result<(), Failure> {
        let dir = &self.dirs[place.dir].dir;
        if !dir.exchange(temporary, &place.name)? {
            return Ok(dir.rename_over(temporary, &place.name)?);
        }
        let was = dir.entry(temporary).ok().flatten();
        if was.is_some() && self.written.get(&(place.dir, place.name.to_bytes().to_vec())) == was.as_ref() {
            return Ok(dir.remove(temporary)?);
        }
        // Something else came there between the check and the swap: it
        // goes back to its name.
        dir.exchange(temporary, &place.name)?;
        Err(Failure::Refused(format!("{} was replaced meanwhile", place.path.display())))
    }

    /// A new temporary file in directory `dir`, and its name: random, so
    /// that names planted in a directory others may write in cannot stand
    /// in the way (a name taken is drawn again).
    fn temporary_file(&mut self, dir: usize) -> io::Result<(CString, std::fs::File)> {
        let mut tries = 0;
        loop {
            tries += 1;
            let name = CString::new(format!(".tecs-profile-{}-{}.tmp", std::process::id(), process::random_hex(8)?))
                .expect("no NUL byte");
            match self.dirs[dir].dir.create_new(&name, 0o666) {
                Ok(f) => return Ok((name, f)),
                // Someone's file (or link) under that name: another name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 16 => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;
