//! The options of `start`, read from a Lua table with raw reads only (no
//! metamethod runs). Every error names the option and what was expected.

use mlua::{Table, Value};

use super::DEFAULT_MAX_STACKS;
use crate::record::sampler::Precision;
use crate::record::tick_source::ClockKind;

/// Options as the shim passes them (already validated there).
pub(super) struct StartOptions {
    pub(super) interval_ns: u64,
    pub(super) depth: i32,
    pub(super) filter: Option<Vec<u8>>,
    pub(super) clock: ClockKind,
    pub(super) precise: bool,
    pub(super) max_stacks: usize,
    pub(super) zones: Option<Table>,
    pub(super) ffnames: Vec<Option<String>>,
    pub(super) resolve_c: bool,
    pub(super) precision: Precision,
    pub(super) call_site: Option<mlua::Function>,
}

/// Option names `start` accepts.
pub const START_OPTIONS: [&str; 11] = [
    "interval_us",
    "depth",
    "filter",
    "clock",
    "precise",
    "max_stacks",
    "zones",
    "ffnames",
    "resolve_c",
    "precision",
    "call_site",
];

fn type_name(v: &Value) -> &'static str {
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

pub(super) fn describe(v: &Value) -> String {
    match v {
        Value::Integer(i) => format!("number {}", i),
        Value::Number(n) => format!("number {}", n),
        Value::String(s) => {
            let t = s.to_string_lossy();
            let t: String = if t.chars().count() > 40 { t.chars().take(37).chain("...".chars()).collect() } else { t };
            format!("string {:?}", t)
        }
        other => type_name(other).to_string(),
    }
}

fn bad_option(key: &str, expected: &str, got: &Value) -> String {
    format!("option '{}' must be {} (got {})", key, expected, describe(got))
}

fn opt_number(opts: &Table, key: &str, expected: &str, ok: impl Fn(f64) -> bool) -> Result<Option<f64>, String> {
    let v: Value = opts.raw_get(key).map_err(|e| e.to_string())?;
    let n = match v {
        Value::Nil => return Ok(None),
        Value::Integer(i) => i as f64,
        Value::Number(n) => n,
        ref other => return Err(bad_option(key, expected, other)),
    };
    if n.is_finite() && ok(n) {
        Ok(Some(n))
    } else {
        Err(bad_option(key, expected, &v))
    }
}

fn opt_integer(opts: &Table, key: &str, lo: i64, hi: i64) -> Result<Option<i64>, String> {
    let expected = format!("an integer from {} to {}", lo, hi);
    let n = opt_number(opts, key, &expected, |n| n.fract() == 0.0 && n >= lo as f64 && n <= hi as f64)?;
    Ok(n.map(|n| n as i64))
}

fn opt_bool(opts: &Table, key: &str) -> Result<Option<bool>, String> {
    match opts.raw_get::<Value>(key).map_err(|e| e.to_string())? {
        Value::Nil => Ok(None),
        Value::Boolean(b) => Ok(Some(b)),
        other => Err(bad_option(key, "a boolean", &other)),
    }
}

fn opt_string(opts: &Table, key: &str, expected: &str) -> Result<Option<mlua::LuaString>, String> {
    match opts.raw_get::<Value>(key).map_err(|e| e.to_string())? {
        Value::Nil => Ok(None),
        Value::String(s) => Ok(Some(s)),
        other => Err(bad_option(key, expected, &other)),
    }
}

fn opt_table(opts: &Table, key: &str, expected: &str) -> Result<Option<Table>, String> {
    match opts.raw_get::<Value>(key).map_err(|e| e.to_string())? {
        Value::Nil => Ok(None),
        Value::Table(t) => Ok(Some(t)),
        other => Err(bad_option(key, expected, &other)),
    }
}

/// Reads and checks the options table of `start`. Every error names the
/// option and what was expected. Only raw reads: no metamethod runs.
pub(super) fn read_options(opts: &Table) -> Result<StartOptions, String> {
    for pair in opts.pairs::<Value, Value>() {
        let (k, _) = pair.map_err(|e| e.to_string())?;
        let known = match &k {
            Value::String(s) => START_OPTIONS.iter().any(|o| s.as_bytes().as_ref() == o.as_bytes()),
            _ => false,
        };
        if !known {
            return Err(format!("unknown option {} (known options: {})", describe(&k), START_OPTIONS.join(", ")));
        }
    }
    let interval_us = opt_number(opts, "interval_us", "a number of microseconds from 1 to 60000000", |n| {
        (1.0..=60_000_000.0).contains(&n)
    })?
    .unwrap_or(1000.0);
    let depth = opt_integer(opts, "depth", 1, 10_000)?.unwrap_or(16);
    let filter = opt_string(opts, "filter", "a zone path string")?.map(|s| s.as_bytes().to_vec());
    let clock = match opt_string(opts, "clock", "\"cpu\" or \"wall\"")? {
        None => ClockKind::Cpu,
        Some(s) => ClockKind::parse(&s.to_string_lossy())
            .ok_or_else(|| bad_option("clock", "\"cpu\" or \"wall\"", &Value::String(s.clone())))?,
    };
    let precise = opt_bool(opts, "precise")?.unwrap_or(true);
    let max_stacks = opt_integer(opts, "max_stacks", 1, 100_000_000)?.unwrap_or(DEFAULT_MAX_STACKS as i64);
    let zones = opt_table(opts, "zones", "a table (the jit.zone stack)")?;
    let mut ffnames = Vec::new();
    if let Some(t) = opt_table(opts, "ffnames", "a table of builtin names indexed by number")? {
        for pair in t.pairs::<Value, Value>() {
            let (k, v) = pair.map_err(|e| e.to_string())?;
            let (Value::Integer(k), Value::String(v)) = (&k, &v) else {
                // jit.vmdef.ffnames is a plain array of strings; anything else is skipped.
                continue;
            };
            if (0..100_000).contains(k) {
                let k = *k as usize;
                if ffnames.len() <= k {
                    ffnames.resize(k + 1, None);
                }
                ffnames[k] = Some(v.to_string_lossy());
            }
        }
    }
    let resolve_c = opt_bool(opts, "resolve_c")?.unwrap_or(true);
    let precision = match opt_string(opts, "precision", "\"function\" or \"line\"")? {
        None => Precision::Function,
        Some(s) => Precision::parse(&s.to_string_lossy())
            .ok_or_else(|| bad_option("precision", "\"function\" or \"line\"", &Value::String(s.clone())))?,
    };
    let call_site = match opts.raw_get::<Value>("call_site").map_err(|e| e.to_string())? {
        Value::Nil => None,
        Value::Function(f) => Some(f),
        other => return Err(bad_option("call_site", "a function", &other)),
    };
    Ok(StartOptions {
        interval_ns: (interval_us * 1000.0).round() as u64,
        depth: depth as i32,
        filter,
        clock,
        precise,
        max_stacks: max_stacks as usize,
        zones,
        ffnames,
        resolve_c,
        precision,
        call_site,
    })
}

/// Checks an options table the way `start` does, without starting anything
/// (for tests and the option fuzzer).
pub fn check_start_options(opts: &Table) -> Result<(), String> {
    read_options(opts).map(|_| ())
}
