//! The control channel: profiling a running program from outside.
//!
//! The program opens a Unix socket in a directory only its user can enter
//! ([`directory`]) and puts a discovery entry beside it (`PID.json`, mode
//! 0600: [`Target`]). A client (`tecs-profile attach`, an MCP server)
//! connects and sends one JSON object per line ([`Request`]); the program
//! answers each with one line ([`Response`]). Nothing here runs Lua: the
//! program's thread takes requests from the [`server::Server`] when it polls
//! and runs them itself; [`client::request`] is the other end.

#![cfg(unix)]

pub mod client;
pub mod files;
pub mod http;
pub mod lines;
pub mod reads;
pub mod server;

/// The system calls the channel makes: process facts for its discovery
/// entries, and a directory held open with the calls relative to it.
pub mod sys {
    pub mod dir;
    pub mod doorbell;
    pub mod process;
}

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sys::process;

/// The longest request line a program takes, in bytes: a longer one is
/// answered with an error and its connection closed.
pub const MAX_REQUEST_LINE: usize = 64 << 10;

/// The longest answer line a client takes, in bytes (a snapshot is the
/// largest answer).
pub const MAX_ANSWER_LINE: usize = 16 << 20;

/// How long a connected client may go without sending a complete request
/// before the program closes its connection (and takes another client).
pub const IDLE_LIMIT: Duration = Duration::from_secs(60);

/// One command, as a client sends it: `{"cmd":"start","intervalMs":1}`.
/// A field the command does not take is refused; the bounds of the fields
/// that take a number or a string are [`FIELDS`]'s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    /// Whether a session runs, its samples, the program. (A struct, so
    /// that a field sent with it is refused as with the others.)
    Status {},
    /// Start sampling; `seconds` stops by itself at the first poll after
    /// that much time. With `allocations`, an allocation session (bytes by
    /// the stacks that allocated them), a sample about every
    /// `bytesPerSample` bytes.
    Start {
        #[serde(rename = "intervalMs", default, skip_serializing_if = "Option::is_none")]
        interval_ms: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        allocations: Option<bool>,
        #[serde(rename = "bytesPerSample", default, skip_serializing_if = "Option::is_none")]
        bytes_per_sample: Option<f64>,
    },
    /// Stop sampling and write the profile (to `path`, else a file in the
    /// control directory: see [`files`] for where a client may write).
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
        top: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hitches: Option<f64>,
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
        frames: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hitches: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stacks: Option<f64>,
    },
}

/// What a field of a request accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Accepts {
    /// A number from `min` to `max`.
    Number { min: f64, max: f64 },
    /// An integer from `min` to `max`.
    Integer { min: f64, max: f64 },
    /// A string of at most `max_bytes` bytes.
    Text { max_bytes: usize },
}

/// A field of a command that takes a number or a string, and its bounds.
/// (`start`'s `intervalMs` and `zone` are checked further by
/// `profile.sample`, which declares them; `report`'s `by` and `then` by
/// `profile.report`.)
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub command: &'static str,
    pub name: &'static str,
    pub accepts: Accepts,
    /// What it is, for messages and the MCP tools' schemas.
    pub what: &'static str,
}

/// Every bounded field of the protocol, declared once: the program checks
/// requests against it, the MCP server's tool schemas are made from it.
pub static FIELDS: &[Field] = &[
    Field {
        command: "start",
        name: "seconds",
        accepts: Accepts::Number { min: 0.001, max: 3600.0 },
        what: "seconds before the session stops by itself",
    },
    Field { command: "start", name: "zone", accepts: Accepts::Text { max_bytes: 1024 }, what: "a zone path" },
    Field {
        command: "start",
        name: "bytesPerSample",
        accepts: Accepts::Integer { min: 64.0, max: 1073741824.0 },
        what: "bytes allocated between two samples, on average",
    },
    Field {
        command: "stop",
        name: "path",
        accepts: Accepts::Text { max_bytes: files::MAX_PATH_BYTES },
        what: "the file to write",
    },
    Field { command: "report", name: "by", accepts: Accepts::Text { max_bytes: 64 }, what: "a grouping" },
    Field { command: "report", name: "then", accepts: Accepts::Text { max_bytes: 64 }, what: "a second level" },
    Field { command: "report", name: "top", accepts: Accepts::Integer { min: 1.0, max: 10000.0 }, what: "rows shown" },
    Field {
        command: "report",
        name: "hitches",
        accepts: Accepts::Integer { min: 1.0, max: 200.0 },
        what: "the slowest frames shown",
    },
    Field {
        command: "trace_stop",
        name: "path",
        accepts: Accepts::Text { max_bytes: files::MAX_PATH_BYTES },
        what: "the CSV file to write",
    },
    Field {
        command: "snapshot",
        name: "frames",
        accepts: Accepts::Integer { min: 1.0, max: 20000.0 },
        what: "the last frames marked",
    },
    Field {
        command: "snapshot",
        name: "hitches",
        accepts: Accepts::Integer { min: 1.0, max: 200.0 },
        what: "the slowest frames, with their functions",
    },
    Field {
        command: "snapshot",
        name: "stacks",
        accepts: Accepts::Integer { min: 1.0, max: 20000.0 },
        what: "the heaviest stacks",
    },
];

/// A number as a message shows it: no 300 digits for 1e300.
fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else if n.abs() >= 1e15 || n.abs() < 1e-4 {
        format!("{:e}", n)
    } else {
        format!("{}", n)
    }
}

impl Accepts {
    /// What it expects, for a message: "an integer from 1 to 200".
    pub fn expected(&self) -> String {
        match *self {
            Accepts::Number { min, max } => format!("a number from {} to {}", number_text(min), number_text(max)),
            Accepts::Integer { min, max } => format!("an integer from {} to {}", number_text(min), number_text(max)),
            Accepts::Text { max_bytes } => format!("a string of at most {} bytes", max_bytes),
        }
    }

    /// Why `v` is not accepted, or None.
    fn refuses(&self, v: &serde_json::Value) -> Option<String> {
        match (*self, v) {
            (Accepts::Number { min, max }, serde_json::Value::Number(n)) => {
                let n = n.as_f64()?;
                (!(n >= min && n <= max)).then(|| number_text(n))
            }
            (Accepts::Integer { min, max }, serde_json::Value::Number(n)) => {
                let n = n.as_f64()?;
                (!(n >= min && n <= max && n.fract() == 0.0)).then(|| number_text(n))
            }
            (Accepts::Text { max_bytes }, serde_json::Value::String(s)) => {
                (s.len() > max_bytes).then(|| format!("a string of {} bytes", s.len()))
            }
            // The types are serde's to check.
            _ => None,
        }
    }
}

impl Request {
    /// The command's name, as `cmd` gives it.
    pub fn command(&self) -> &'static str {
        match self {
            Request::Status {} => "status",
            Request::Start { .. } => "start",
            Request::Stop { .. } => "stop",
            Request::Report { .. } => "report",
            Request::TraceStart { .. } => "trace_start",
            Request::TraceStop { .. } => "trace_stop",
            Request::Snapshot { .. } => "snapshot",
        }
    }

    /// Checks the fields against their bounds ([`FIELDS`]); the error
    /// names the first out of bounds.
    pub fn check(&self) -> Result<(), String> {
        let value = serde_json::to_value(self).map_err(|e| e.to_string())?;
        let command = self.command();
        for f in FIELDS.iter().filter(|f| f.command == command) {
            let Some(v) = value.get(f.name) else { continue };
            if let Some(got) = f.accepts.refuses(v) {
                return Err(format!(
                    "bad field '{}' ({}: {} expected, got {})",
                    f.name,
                    f.what,
                    f.accepts.expected(),
                    got
                ));
            }
        }
        Ok(())
    }
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

/// One frame of a session's timeline, as `SampleSession:frames` gives it.
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

/// An event of a session's timeline (a trace abort).
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
    /// An allocation session's (start, stop, status): its samples are
    /// bytes, one about every `bytesPerSample` bytes allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocations: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_sample: Option<f64>,
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
    /// The timeline's events (snapshot: trace aborts), the last ones.
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
    /// "love", "nginx", "nvim" or "luajit".
    pub kind: String,
    pub socket: String,
    /// Unix time in seconds.
    pub started: u64,
    /// The directory clients may also have the program write in
    /// (`listen{ outputDir }`), absolute; its profiles are resources of
    /// `tecs-profile mcp` as the control directory's are.
    #[serde(default, rename = "outputDir", skip_serializing_if = "Option::is_none")]
    pub output_dir: Option<String>,
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
        // Only `PID.json`: the other files there (profiles a client had
        // written, `.trace.json` ones among them) are not entries.
        let Some(stem) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // Read as a client's file is (a regular file of this user, no link
        // followed, bounded): a FIFO there does not hang the listing.
        let name = path.file_name().map(|n| n.as_encoded_bytes().to_vec()).unwrap_or_default();
        let Ok(text) = reads::open(dir, &name).and_then(|c| c.read(MAX_REQUEST_LINE as u64).map_err(|e| e.to_string()))
        else {
            continue;
        };
        let Ok(target) = serde_json::from_slice::<Target>(&text) else { continue };
        if stem != target.pid.to_string() {
            continue;
        }
        if !process::process_alive(target.pid) {
            // Its own socket only, whatever the entry says.
            let (socket, _) = paths_for(dir, target.pid);
            let _ = fs::remove_file(socket);
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
