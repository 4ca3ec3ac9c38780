//! The control channel: profiling a running program from outside.
//!
//! The program opens a Unix socket in a directory only its user can enter
//! ([`directory`]) and puts a discovery entry beside it (`PID.json`, mode
//! 0600: [`Target`]). A client (`tecs-profile attach`, an MCP server)
//! connects and sends one JSON object per line ([`Request`]); the program
//! answers each with one line ([`Response`]). Nothing here runs Lua: the
//! program's thread takes requests from the [`server::Server`] when it polls
//! and runs them itself; [`client::request`] is the other end.

pub mod client;
pub mod http;
pub mod server;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sys::process;

/// The longest request or response line taken, in bytes: a line longer
/// than this ends the connection.
pub const MAX_LINE: usize = 16 << 20;

/// One command, as a client sends it: `{"cmd":"start","intervalMs":1}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Request {
    /// Whether a session runs, its samples, the program.
    Status,
    /// Start sampling; `seconds` stops by itself at the first poll after
    /// that much time.
    Start {
        #[serde(rename = "intervalMs", default, skip_serializing_if = "Option::is_none")]
        interval_ms: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<f64>,
    },
    /// Stop sampling and write the profile (to `path`, else a file in the
    /// control directory).
    Stop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// The text report of the last profile: rows `by` a grouping, `then`
    /// a second level (callers, callees, ...), at most `top` rows; or with
    /// `hitches`, that many slowest frames and what ran in them.
    Report {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<String>,
        #[serde(rename = "then", default, skip_serializing_if = "Option::is_none")]
        then_by: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        top: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hitches: Option<u32>,
    },
    /// Start tracking trace aborts (`profile.trace`).
    #[serde(rename = "trace_start")]
    TraceStart {
        #[serde(rename = "includeBenign", default, skip_serializing_if = "Option::is_none")]
        include_benign: Option<bool>,
    },
    /// Stop tracking and write the report as CSV (to `path`, else a file in
    /// the control directory).
    #[serde(rename = "trace_stop")]
    TraceStop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
    },
    /// What the running session (else the last one) has recorded so far,
    /// without stopping it: the last `frames` frames, the `hitches`
    /// slowest with their functions, the `stacks` heaviest stacks by
    /// function (the others summed into one), the heaviest functions.
    Snapshot {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        frames: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hitches: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stacks: Option<u32>,
    },
}

/// A trace-abort site of a trace report: where, why and how often.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbortSite {
    pub severity: String,
    pub count: u64,
    pub reason: String,
    pub location: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// A function (by self samples) or a zone path among the heaviest of a
/// profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub name: String,
    pub samples: u64,
    /// Of all the profile's samples, 0 to 1.
    pub share: f64,
}

/// One frame of a session's time line, as `SampleSession:frames` gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrameTime {
    pub index: u64,
    /// From the session's start.
    pub start_ms: f64,
    pub ms: f64,
    pub samples: u64,
    pub gc_samples: u64,
}

/// A function's share of the samples of one frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameFunction {
    pub name: String,
    /// Of the frame's samples, 0 to 1.
    pub share: f64,
}

/// One of the slowest frames, with what ran in it (`SampleSession:hitches`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlowFrame {
    pub index: u64,
    pub start_ms: f64,
    pub ms: f64,
    pub samples: u64,
    pub gc_samples: u64,
    pub top: Vec<FrameFunction>,
}

/// An event of a session's time line (a trace abort).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimedEvent {
    /// From the session's start.
    pub t_ms: f64,
    pub name: String,
    #[serde(default)]
    pub details: BTreeMap<String, String>,
}

/// The answer to one request. `ok` false carries `error`; the other fields
/// are those the command returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<f64>,
    /// Seconds the session has run (or ran, once stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_sec: Option<f64>,
    /// When the session started, in Unix seconds (stop, status, report):
    /// with `elapsedSec`, which profile an answer describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<f64>,
    /// Seconds left before a session started with `seconds` stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_left: Option<f64>,
    /// The file written (stop), or the last profile's file (status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<Vec<Share>>,
    /// Zone paths by samples (stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<Share>>,
    /// Frames the session marked in all (stop; the slowest are `hitches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_marked: Option<u64>,
    /// The report's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Trace aborts reported (trace_stop), and the most frequent sites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborts: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites: Option<Vec<AbortSite>>,
    /// The last frames marked (snapshot), and how many are kept in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<Vec<FrameTime>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_kept: Option<u64>,
    /// The slowest frames, slowest first (snapshot, stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hitches: Option<Vec<SlowFrame>>,
    /// Collapsed stacks with frames named by function (snapshot), the
    /// heaviest; `stacksLeftOut` stacks more are summed into one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks_left_out: Option<u64>,
    /// The time line's events (snapshot: trace aborts), the last ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<TimedEvent>>,
}

impl Response {
    pub fn error(message: impl Into<String>) -> Response {
        Response { ok: false, error: Some(message.into()), ..Response::default() }
    }
}

/// A program that can be attached: its discovery entry (`PID.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub pid: u32,
    pub program: String,
    /// "love", "nginx" or "luajit".
    pub kind: String,
    pub socket: String,
    /// Unix time in seconds.
    pub started: u64,
}

/// The control directory: `TECS_PROFILE_DIR` when set, else
/// `$XDG_RUNTIME_DIR/tecs-profile`, else `/tmp/tecs-profile-UID`.
pub fn default_directory() -> PathBuf {
    if let Some(d) = std::env::var_os("TECS_PROFILE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        if Path::new(&d).is_dir() {
            return Path::new(&d).join("tecs-profile");
        }
    }
    PathBuf::from(format!("/tmp/tecs-profile-{}", process::user_id()))
}

/// Checks that `dir` is a directory (not a link) owned by this user that
/// no one else may enter or list: what makes its socket reachable by this
/// user alone.
pub fn check_directory(dir: &Path) -> Result<(), String> {
    let meta =
        fs::symlink_metadata(dir).map_err(|e| format!("cannot use control directory {}: {}", dir.display(), e))?;
    if !meta.is_dir() {
        return Err(format!("control directory {} is not a directory", dir.display()));
    }
    if meta.uid() != process::user_id() {
        return Err(format!(
            "control directory {} belongs to user id {}, not to this user ({})",
            dir.display(),
            meta.uid(),
            process::user_id()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "control directory {} has mode {:o}: others may enter it (0700 expected)",
            dir.display(),
            meta.mode() & 0o777
        ));
    }
    Ok(())
}

/// `dir`, created with mode 0700 when missing, and checked
/// ([`check_directory`]).
pub fn directory(dir: &Path) -> Result<PathBuf, String> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            // The umask may have taken bits off, never added any; set it
            // exactly all the same.
            let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create control directory {}: {}", dir.display(), e)),
    }
    check_directory(dir)?;
    Ok(dir.to_path_buf())
}

/// Where process `pid` puts its socket and its discovery entry.
pub fn paths_for(dir: &Path, pid: u32) -> (PathBuf, PathBuf) {
    (dir.join(format!("{}.sock", pid)), dir.join(format!("{}.json", pid)))
}

/// Writes the discovery entry `path` (mode 0600, complete or absent: it is
/// written beside and renamed into place).
pub fn write_entry(path: &Path, target: &Target) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let _ = fs::remove_file(&tmp);
    let text = serde_json::to_string(target).map_err(io::Error::other)? + "\n";
    {
        let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        io::Write::write_all(&mut f, text.as_bytes())?;
    }
    fs::rename(&tmp, path)
}

/// The programs that can be attached, from the discovery entries of
/// `dir`, by pid. Entries of processes that no longer exist are removed
/// with their sockets; unreadable ones are skipped.
pub fn targets(dir: &Path) -> Result<Vec<Target>, String> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot list control directory {}: {}", dir.display(), e)),
    };
    check_directory(dir)?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = fs::read_to_string(&path) else { continue };
        let Ok(target) = serde_json::from_str::<Target>(&text) else { continue };
        if !process::process_alive(target.pid) {
            let _ = fs::remove_file(&target.socket);
            let _ = fs::remove_file(&path);
            continue;
        }
        out.push(target);
    }
    out.sort_by_key(|t| t.pid);
    Ok(out)
}

#[cfg(test)]
mod tests;
