//! Every option of the Lua API, declared once: its public name, what it
//! accepts and its default. `profile.sample` passes the user's table through
//! to `start`, which checks it here; `tecs.profile.report` checks its tables
//! with [`check_table`] against the declarations of `report_options`. Reads
//! are raw (no metamethod runs), and every error names the option and what
//! was expected, the way docs/api.md documents them.

use mlua::{Lua, Table, Value};

use crate::record::sampler::Precision;
use crate::session::ClockKind;

/// Unique stacks a session keeps by default (`maxStacks`).
pub const DEFAULT_MAX_STACKS: usize = 100_000;

/// Timestamped samples a session keeps by default (`timelineSamples`):
/// 16 bytes each, 4 MiB in all; about 4 minutes at the default interval.
pub const DEFAULT_TIMELINE_SAMPLES: usize = 262_144;

/// What an option accepts.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// A number within `[lo, hi]` (not NaN).
    Number {
        lo: f64,
        hi: f64,
        expected: &'static str,
    },
    /// An integer within `[lo, hi]`.
    Integer {
        lo: f64,
        hi: f64,
        expected: &'static str,
    },
    /// An integer within `[lo, hi]` other than 0.
    NonZeroInteger {
        lo: f64,
        hi: f64,
        expected: &'static str,
    },
    Boolean,
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// Any string.
    Text(&'static str),
    /// A zone path: a string that is not empty once trailing slashes go.
    ZonePath(&'static str),
    /// A table (its fields are read by the function that takes it).
    Table(&'static str),
    /// "auto" or the name of a format of the registry (`output::REGISTRY`).
    Format,
    /// A Lua thread (a coroutine, or the main thread as
    /// `native.raw.currentThread()` gives it).
    Thread(&'static str),
}

/// An option's value when the caller gives none.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DefaultValue {
    None,
    Number(f64),
    Boolean(bool),
    Text(&'static str),
}

/// One option: public name, accepted values, default, and what it does
/// (the text the docs' option tables and `native.options` give).
#[derive(Clone, Copy, Debug)]
pub struct Declared {
    pub name: &'static str,
    pub check: Check,
    pub default: DefaultValue,
    pub help: &'static str,
}

/// Declares an option; every public function's options are declared with it.
pub const fn opt(name: &'static str, check: Check, default: DefaultValue, help: &'static str) -> Declared {
    Declared { name, check, default, help }
}

// Options shared by sampling and allocation sessions: declared once here.
pub const ZONE: Declared = opt(
    "zone",
    Check::ZonePath("a non-empty zone path string such as \"update/physics\""),
    DefaultValue::None,
    "keep only samples in this zone path or below it, matching whole components (\"a/Render\" keeps a/Render/post, not a/Renderer)",
);
pub const STACK_DEPTH: Declared = opt(
    "stackDepth",
    Check::Integer { lo: 1.0, hi: 1000.0, expected: "an integer from 1 to 1000" },
    DefaultValue::Number(16.0),
    "frames kept per stack (the innermost ones); a deeper stack is kept under a [truncated stack] root frame",
);
pub const PRECISION: Declared =
    opt("precision", Check::OneOf(&["auto", "function", "line"]), DefaultValue::Text("auto"), "where a sample in compiled code goes: \"auto\" reads it in the tick handler where the probe passes (stats().precision \"exact\"), else \"function\"; \"function\" charges it to its function; \"line\" uses LuaJIT's line mode, exact but slower");
pub const MAX_STACKS: Declared = opt(
    "maxStacks",
    Check::Integer { lo: 1.0, hi: 100_000_000.0, expected: "an integer from 1 to 100000000" },
    DefaultValue::Number(DEFAULT_MAX_STACKS as f64),
    "unique stacks kept; samples of further new stacks are counted on one [overflow: stack table full] line",
);
pub const RESOLVE_C: Declared = opt(
    "resolveC",
    Check::Boolean,
    DefaultValue::Boolean(true),
    "name C functions by their Lua path, else by their symbol (the dynamic linker's, then the symbol table's): [C:symbol] or [C:lib.so+0xoffset]",
);
pub const FORMAT: Declared = opt(
    "format",
    Check::Format,
    DefaultValue::Text("auto"),
    "format of the files stop() and write() produce: \"auto\" follows the file name's ending",
);

/// What the `format` option takes: "auto" (by the file name), then every
/// format of the registry in its order.
pub fn format_names() -> impl Iterator<Item = &'static str> {
    std::iter::once("auto").chain(crate::output::REGISTRY.iter().map(|d| d.name))
}

/// The options of `profile.sample` (docs/api.md, `profile.sample`).
pub const SAMPLE_OPTIONS: &[Declared] = &[
    opt(
        "intervalMs",
        Check::Number { lo: 0.1, hi: 60_000.0, expected: "a number of milliseconds from 0.1 to 60000" },
        DefaultValue::Number(1.0),
        "sampling interval, in milliseconds of CPU time (of real time with clock = \"wall\")",
    ),
    ZONE,
    STACK_DEPTH,
    opt(
        "clock",
        Check::OneOf(&["cpu", "wall"]),
        DefaultValue::Text("cpu"),
        "\"cpu\": the thread's CPU time (a sleeping or waiting thread is not sampled); \"wall\": real time, time blocked in C calls (vsync, sleep, I/O) charged where the thread blocked",
    ),
    PRECISION,
    opt(
        "flushTraces",
        Check::Boolean,
        DefaultValue::Boolean(true),
        "at precision \"exact\", flush the program's traces at the start, so that each is compiled again with the map that places a tick between two of its snapshots; false keeps the code compiled before the session (no recompilation), whose ticks go to their snapshots (stats().traceMap.noMap); \"function\" and \"line\" always flush (LuaJIT's own modes)",
    ),
    MAX_STACKS,
    RESOLVE_C,
    opt(
        "nativeFrames",
        Check::Boolean,
        DefaultValue::Boolean(false),
        "below a C function (love.graphics.points, a function called through the FFI), the native frames of the C code it runs, [native:function], walked in the tick handler with the loaded objects' unwind tables (Linux x86-64, precision \"exact\"; stats().nativeFrames, or nativeFramesNote says why not)",
    ),
    opt(
        "skipStartingThread",
        Check::Boolean,
        DefaultValue::Boolean(false),
        "record no sample taken on the Lua thread that started the session (counted as filteredSamples), only those on other coroutines: tecs-profile run runs the program on a coroutine",
    ),
    opt(
        "skipThread",
        Check::Thread("a thread (a coroutine)"),
        DefaultValue::None,
        "record no sample taken on this Lua thread (counted as filteredSamples), which the session keeps alive: tecs-profile run --listen gives its own, so that a session a client starts holds the program's frames only; not with skipStartingThread",
    ),
    FORMAT,
    opt(
        "timelineSamples",
        Check::Integer { lo: 0.0, hi: 16_777_216.0, expected: "an integer from 0 (no timeline) to 16777216" },
        DefaultValue::Number(DEFAULT_TIMELINE_SAMPLES as f64),
        "timestamped samples kept for :frames() and :hitches(n), 16 bytes each, reserved at the start (4 MiB by default, about 4 minutes at 1 ms); past it the oldest are dropped; 0 keeps none",
    ),
    opt(
        "slowFrameMs",
        Check::Number { lo: 0.0, hi: 60_000.0, expected: "a number of milliseconds from 0 to 60000" },
        DefaultValue::None,
        "frames shorter than this keep their duration and sample counts in :frames(), but their samples leave the timeline when they end, so that a long session's ring holds the slow frames",
    ),
    opt(
        "autosavePath",
        Check::Text("a file path string"),
        DefaultValue::None,
        "write the collapsed profile to this file at the start, a second later, then every autosaveSeconds while the session runs (from a thread of the profiler's: also while the program hangs, even in a compiled loop) and at the stop, so that a program killed while it hangs leaves its profile",
    ),
    opt(
        "autosaveSeconds",
        Check::Number { lo: 0.1, hi: 86_400.0, expected: "a number of seconds from 0.1 to 86400" },
        DefaultValue::Number(10.0),
        "seconds between two writes of autosavePath",
    ),
    opt(
        "loveZones",
        Check::Boolean,
        DefaultValue::Boolean(true),
        "in a LÖVE game, run each love.* callback in a zone named after it (love.update, love.draw...)",
    ),
];

/// Lua's type name of a value.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        Value::UserData(_) | Value::LightUserData(_) => "userdata",
        _ => "other value",
    }
}

/// A number as Lua's `tostring` writes it (`%.14g`).
fn number_text(n: f64) -> String {
    if n.is_nan() {
        return "nan".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if n.fract() == 0.0 && n.abs() < 1e15 {
        return format!("{}", n as i64);
    }
    if n.abs() >= 1e15 || n.abs() < 1e-4 {
        let s = format!("{:e}", n);
        return match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{}e+{:0>2}", m, e),
            Some((m, e)) => format!("{}e-{:0>2}", m, &e[1..]),
            None => s,
        };
    }
    format!("{}", n)
}

/// A value as the error messages show it: `number 5`, `string "x"`, `table`.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Integer(i) => format!("number {}", i),
        Value::Number(n) => format!("number {}", number_text(*n)),
        Value::String(s) => {
            let t = s.to_string_lossy();
            let t: String = if t.len() > 40 { t.chars().take(37).chain("...".chars()).collect() } else { t };
            format!("string {:?}", t)
        }
        other => type_name(other).to_string(),
    }
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

/// Trailing slashes removed from a zone path.
pub fn trim_zone(path: &str) -> &str {
    path.trim_end_matches('/')
}

impl Check {
    /// What the option expects, as the error message says it.
    pub fn expected(&self) -> String {
        match self {
            Check::Number { expected, .. }
            | Check::Integer { expected, .. }
            | Check::NonZeroInteger { expected, .. }
            | Check::Text(expected)
            | Check::ZonePath(expected)
            | Check::Thread(expected)
            | Check::Table(expected) => expected.to_string(),
            Check::Boolean => "a boolean".into(),
            Check::OneOf(names) => names.iter().map(|n| format!("\"{}\"", n)).collect::<Vec<_>>().join(" or "),
            Check::Format => format_names().map(|n| format!("\"{}\"", n)).collect::<Vec<_>>().join(" or "),
        }
    }

    /// Whether `v` (never nil) is acceptable.
    pub fn accepts(&self, v: &Value) -> bool {
        let in_range = |lo: f64, hi: f64| as_number(v).is_some_and(|n| n >= lo && n <= hi);
        let integer = || as_number(v).is_some_and(|n| n.is_finite() && n.fract() == 0.0);
        match self {
            Check::Number { lo, hi, .. } => in_range(*lo, *hi),
            Check::Integer { lo, hi, .. } => integer() && in_range(*lo, *hi),
            Check::NonZeroInteger { lo, hi, .. } => {
                integer() && in_range(*lo, *hi) && as_number(v).is_some_and(|n| n != 0.0)
            }
            Check::Boolean => matches!(v, Value::Boolean(_)),
            Check::OneOf(names) => match v {
                Value::String(s) => names.iter().any(|n| s.as_bytes().as_ref() == n.as_bytes()),
                _ => false,
            },
            Check::Format => match v {
                Value::String(s) => format_names().any(|n| s.as_bytes().as_ref() == n.as_bytes()),
                _ => false,
            },
            Check::Text(_) => matches!(v, Value::String(_)),
            Check::Table(_) => matches!(v, Value::Table(_)),
            Check::Thread(_) => matches!(v, Value::Thread(_)),
            Check::ZonePath(_) => match v {
                Value::String(s) => !trim_zone(&s.to_string_lossy()).is_empty(),
                _ => false,
            },
        }
    }
}

/// The declared names, sorted.
pub fn names(decls: &[Declared]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = decls.iter().map(|d| d.name).collect();
    v.sort_unstable();
    v
}

/// Checks an options table (or nil) against `decls`: an unknown name or an
/// unacceptable value is an error naming it and what was expected.
pub fn check_table(decls: &[Declared], opts: &Value) -> Result<(), String> {
    let opts = match opts {
        Value::Nil => return Ok(()),
        Value::Table(t) => t,
        other => return Err(format!("bad argument #1 'opts' (table or nil expected, got {})", describe(other))),
    };
    for pair in opts.pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        let decl = match &k {
            Value::String(s) => decls.iter().find(|d| s.as_bytes().as_ref() == d.name.as_bytes()),
            _ => None,
        };
        let Some(decl) = decl else {
            let shown = match &k {
                Value::String(s) => format!("'{}'", s.to_string_lossy()),
                other => describe(other),
            };
            return Err(format!("unknown option {} (known options: {})", shown, names(decls).join(", ")));
        };
        if !decl.check.accepts(&v) {
            return Err(format!("option '{}' must be {} (got {})", decl.name, decl.check.expected(), describe(&v)));
        }
    }
    Ok(())
}

/// The value of a checked option, or its default.
#[derive(Clone, Debug, PartialEq)]
pub enum Setting {
    Absent,
    Number(f64),
    Boolean(bool),
    Text(String),
}

impl Setting {
    pub fn number(&self) -> Option<f64> {
        if let Setting::Number(n) = self {
            Some(*n)
        } else {
            None
        }
    }
    pub fn boolean(&self) -> Option<bool> {
        if let Setting::Boolean(b) = self {
            Some(*b)
        } else {
            None
        }
    }
    pub fn text(&self) -> Option<&str> {
        if let Setting::Text(s) = self {
            Some(s)
        } else {
            None
        }
    }
}

/// The setting of `name` in a table that passed [`check_table`].
pub fn setting(decls: &[Declared], opts: Option<&Table>, name: &str) -> Setting {
    let v = opts.and_then(|t| t.raw_get::<Value>(name).ok()).unwrap_or(Value::Nil);
    match v {
        Value::Integer(i) => Setting::Number(i as f64),
        Value::Number(n) => Setting::Number(n),
        Value::Boolean(b) => Setting::Boolean(b),
        Value::String(s) => Setting::Text(s.to_string_lossy()),
        _ => match decls.iter().find(|d| d.name == name).map(|d| d.default) {
            Some(DefaultValue::Number(n)) => Setting::Number(n),
            Some(DefaultValue::Boolean(b)) => Setting::Boolean(b),
            Some(DefaultValue::Text(s)) => Setting::Text(s.into()),
            Some(DefaultValue::None) | None => Setting::Absent,
        },
    }
}

/// A Lua table of every declared option's setting (defaults filled in).
pub fn settings_table(lua: &Lua, decls: &[Declared], opts: Option<&Table>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for d in decls {
        match setting(decls, opts, d.name) {
            Setting::Absent => {}
            Setting::Number(n) => t.set(d.name, n)?,
            Setting::Boolean(b) => t.set(d.name, b)?,
            Setting::Text(s) => {
                let s = if matches!(d.check, Check::ZonePath(_)) { trim_zone(&s).to_string() } else { s };
                t.set(d.name, s)?
            }
        }
    }
    Ok(t)
}

/// `start`'s options, converted.
pub(super) struct StartOptions {
    pub(super) interval_ns: u64,
    pub(super) depth: i32,
    pub(super) filter: Option<Vec<u8>>,
    pub(super) clock: ClockKind,
    pub(super) max_stacks: usize,
    pub(super) resolve_c: bool,
    pub(super) precision: Precision,
    pub(super) flush_traces: bool,
    pub(super) native_frames: bool,
    pub(super) skip_starting_thread: bool,
    pub(super) skip_thread: Option<mlua::Thread>,
    pub(super) timeline_samples: usize,
    /// Frames shorter than this leave the timeline once counted.
    pub(super) slow_frame_ns: Option<u64>,
    pub(super) env: StartEnv,
}

/// What the Lua layer supplies besides the user's options (`start`'s
/// second argument): the `jit.zone` stack, builtin names, the call-site
/// resolver, and `precise = false` to keep LuaJIT's own timer.
#[derive(Default)]
pub(super) struct StartEnv {
    pub(super) zones: Option<Table>,
    pub(super) ffnames: Vec<Option<String>>,
    pub(super) call_site: Option<mlua::Function>,
    pub(super) precise: bool,
}

const ENV_FIELDS: [&str; 4] = ["zones", "ffnames", "callSite", "precise"];

fn bad_env(key: &str, expected: &str, got: &Value) -> String {
    format!("bad argument #2 'env': field '{}' must be {} (got {})", key, expected, describe(got))
}

pub(super) fn read_env(env: &Value) -> Result<StartEnv, String> {
    let mut out = StartEnv { precise: true, ..StartEnv::default() };
    let env = match env {
        Value::Nil => return Ok(out),
        Value::Table(t) => t,
        other => return Err(format!("bad argument #2 'env' (table or nil expected, got {})", describe(other))),
    };
    for pair in env.pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        let key = match &k {
            Value::String(s) => s.to_string_lossy(),
            other => return Err(format!("bad argument #2 'env': unknown field {}", describe(other))),
        };
        match (key.as_str(), v) {
            ("zones", Value::Table(t)) => out.zones = Some(t),
            ("ffnames", Value::Table(t)) => out.ffnames = read_ffnames(&t)?,
            ("callSite", Value::Function(f)) => out.call_site = Some(f),
            ("precise", Value::Boolean(b)) => out.precise = b,
            ("zones", v) => return Err(bad_env("zones", "a table (the jit.zone stack)", &v)),
            ("ffnames", v) => return Err(bad_env("ffnames", "a table of builtin names indexed by number", &v)),
            ("callSite", v) => return Err(bad_env("callSite", "a function", &v)),
            ("precise", v) => return Err(bad_env("precise", "a boolean", &v)),
            (other, _) => {
                return Err(format!(
                    "bad argument #2 'env': unknown field '{}' (known fields: {})",
                    other,
                    ENV_FIELDS.join(", ")
                ))
            }
        }
    }
    Ok(out)
}

/// `jit.vmdef.ffnames` (a plain array of strings); anything else is skipped.
fn read_ffnames(t: &Table) -> Result<Vec<Option<String>>, String> {
    let mut ffnames = Vec::new();
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        let (Value::Integer(k), Value::String(v)) = (&k, &v) else { continue };
        if (0..100_000).contains(k) {
            let k = *k as usize;
            if ffnames.len() <= k {
                ffnames.resize(k + 1, None);
            }
            ffnames[k] = Some(v.to_string_lossy());
        }
    }
    Ok(ffnames)
}

/// Reads and checks `start(opts, env)`.
pub(super) fn read_options(opts: &Value, env: &Value) -> Result<StartOptions, String> {
    read_start_options(SAMPLE_OPTIONS, opts, env)
}

/// Reads and checks the options of a session that records with the
/// sampler (sampling and allocation sessions), declared by `decls`. An
/// option a kind of session does not declare takes the value that kind
/// runs with: no interval (LuaJIT's own timer at its quietest, see
/// `session::QUIET_TIMER_MS`: an allocation session's samples come from
/// its allocator), CPU time, every thread, no timeline.
pub(super) fn read_start_options(decls: &[Declared], opts: &Value, env: &Value) -> Result<StartOptions, String> {
    check_table(decls, opts)?;
    let env = read_env(env)?;
    let t = if let Value::Table(t) = opts { Some(t) } else { None };
    let get = |name| setting(decls, t, name);
    let number = |name| get(name).number();
    let skip_starting_thread = get("skipStartingThread").boolean().unwrap_or_default();
    let skip_thread = match t.map(|t| t.raw_get::<Value>("skipThread")) {
        Some(Ok(Value::Thread(th))) if decls.iter().any(|d| d.name == "skipThread") => Some(th),
        _ => None,
    };
    let precision = get("precision").text().and_then(Precision::parse).unwrap_or(Precision::Auto);
    let flush_traces = get("flushTraces").boolean().unwrap_or(true);
    if !flush_traces && matches!(precision, Precision::Function | Precision::Line) {
        return Err(format!(
            "option 'flushTraces' = false needs precision \"auto\" (got \"{}\": LuaJIT's function and line modes \
             flush every trace at the start)",
            precision.name()
        ));
    }
    if skip_starting_thread && skip_thread.is_some() {
        return Err(
            "options 'skipStartingThread' and 'skipThread' cannot both be given (each names the one thread skipped)"
                .into(),
        );
    }
    Ok(StartOptions {
        interval_ns: number("intervalMs")
            .map_or(crate::session::QUIET_TIMER_MS * 1_000_000, |ms| (ms * 1e6).round() as u64),
        depth: number("stackDepth").unwrap_or(1.0) as i32,
        filter: get("zone").text().map(|z| trim_zone(z).as_bytes().to_vec()),
        clock: get("clock").text().and_then(ClockKind::parse).unwrap_or(ClockKind::Cpu),
        max_stacks: number("maxStacks").unwrap_or(1.0) as usize,
        resolve_c: get("resolveC").boolean().unwrap_or_default(),
        precision,
        flush_traces,
        native_frames: get("nativeFrames").boolean().unwrap_or_default(),
        skip_starting_thread,
        skip_thread,
        timeline_samples: number("timelineSamples").unwrap_or(0.0) as usize,
        slow_frame_ns: number("slowFrameMs").map(|ms| (ms * 1e6).round() as u64),
        env,
    })
}

/// Checks an options table the way `start` does, without starting anything
/// (for tests and the option fuzzer).
pub fn check_start_options(opts: &Table) -> Result<(), String> {
    read_options(&Value::Table(opts.clone()), &Value::Nil).map(|_| ())
}

#[cfg(test)]
#[path = "options_tests.rs"]
mod tests;
