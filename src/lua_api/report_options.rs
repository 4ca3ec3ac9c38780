//! The options of `profile.report`, `profile.hotAborts`,
//! `profile.flamegraph`, `profile.speedscope`, `profile.pprof`,
//! `profile.trace` and `profile.listen`, declared once (names,
//! accepted values, defaults), and their conversion into [`ReportOptions`].
//! `tecs.profile.report` checks the user's tables here (through the native
//! `check_options`) before it translates a `mode` string.

use mlua::Table;

use super::options::{check_table, setting, Check, Declared, DefaultValue, Setting};
use crate::views::{Annotate, Group, Metric, ReportOptions};

const fn opt(name: &'static str, check: Check, default: DefaultValue) -> Declared {
    Declared { name, check, default }
}

/// Groupings of `by`.
pub const GROUPS: &[&str] = &["function", "line", "module", "zone", "zonecomponent", "vmstate"];
/// Groupings of `then`: those of `by`, plus callers and callees.
pub const THEN_GROUPS: &[&str] =
    &["function", "line", "module", "zone", "zonecomponent", "vmstate", "caller", "callee"];

const ZONE: Check = Check::ZonePath("a non-empty zone path string");
const FRAMES: Check = Check::OneOf(&["line", "function"]);

/// `profile.report`.
pub const REPORT_OPTIONS: &[Declared] = &[
    opt("by", Check::OneOf(GROUPS), DefaultValue::Text("function")),
    opt("then", Check::OneOf(THEN_GROUPS), DefaultValue::None),
    opt("sort", Check::OneOf(&["self", "total"]), DefaultValue::Text("self")),
    opt(
        "minPercent",
        Check::Number { lo: 0.0, hi: 100.0, expected: "a percentage from 0 to 100" },
        DefaultValue::Number(3.0),
    ),
    opt(
        "depth",
        Check::NonZeroInteger { lo: -100.0, hi: 100.0, expected: "a non-zero integer from -100 to 100" },
        DefaultValue::Number(1.0),
    ),
    opt("raw", Check::Boolean, DefaultValue::Boolean(false)),
    opt("limit", Check::Integer { lo: 1.0, hi: 1e9, expected: "a positive integer" }, DefaultValue::None),
    opt("annotate", Check::OneOf(&["hot", "full"]), DefaultValue::None),
    opt(
        "context",
        Check::Integer { lo: 0.0, hi: 1000.0, expected: "an integer from 0 to 1000" },
        DefaultValue::Number(3.0),
    ),
    opt("zone", ZONE, DefaultValue::None),
    opt("functions", Check::Boolean, DefaultValue::Boolean(true)),
    opt("mode", Check::Text("a -jp style mode string such as \"vf\" or \"3si\""), DefaultValue::None),
    opt("trace", Check::Table("a TraceReport from profile.trace (a table with a 'sites' list)"), DefaultValue::None),
    opt("counts", Check::Table("a CoverageSession from profile.coverage or its files() table"), DefaultValue::None),
];

/// `profile.hotAborts`.
pub const HOT_ABORTS_OPTIONS: &[Declared] = &[
    opt("raw", Check::Boolean, DefaultValue::Boolean(false)),
    opt("functions", Check::Boolean, DefaultValue::Boolean(true)),
];

/// `profile.flamegraph`.
pub const FLAMEGRAPH_OPTIONS: &[Declared] = &[
    opt("title", Check::Text("a string"), DefaultValue::None),
    opt("countName", Check::Text("a string"), DefaultValue::None),
    opt("inverted", Check::Boolean, DefaultValue::Boolean(false)),
    opt("zone", ZONE, DefaultValue::None),
    opt("frames", FRAMES, DefaultValue::Text("line")),
];

/// `profile.speedscope`.
pub const SPEEDSCOPE_OPTIONS: &[Declared] = &[
    opt("name", Check::Text("a string"), DefaultValue::None),
    opt(
        "intervalMs",
        Check::Number { lo: 0.001, hi: 1e6, expected: "a positive number of milliseconds" },
        DefaultValue::None,
    ),
    opt("zone", ZONE, DefaultValue::None),
    opt("frames", FRAMES, DefaultValue::Text("line")),
];

/// `profile.pprof`.
pub const PPROF_OPTIONS: &[Declared] = &[
    opt(
        "intervalMs",
        Check::Number { lo: 0.001, hi: 1e6, expected: "a positive number of milliseconds" },
        DefaultValue::None,
    ),
    opt("clock", Check::OneOf(&["cpu", "wall"]), DefaultValue::Text("cpu")),
    opt("zone", ZONE, DefaultValue::None),
];

/// `profile.trace`: the tracker itself is Lua (`jit.attach` calls Lua),
/// but its options are declared here with every other function's.
pub const TRACE_OPTIONS: &[Declared] = &[opt("includeBenign", Check::Boolean, DefaultValue::Boolean(false))];

/// `profile.listen`: the control channel (`tecs.profile.listen`), whose
/// socket and protocol are native (`crate::control`).
pub const LISTEN_OPTIONS: &[Declared] = &[
    opt("dir", Check::Text("a directory path string"), DefaultValue::None),
    opt("program", Check::Text("a string"), DefaultValue::None),
    opt("wake", Check::Boolean, DefaultValue::Boolean(false)),
];

/// The declarations of a public function, by its name in `profile`.
pub fn declared(function: &str) -> Option<&'static [Declared]> {
    Some(match function {
        "sample" => super::options::SAMPLE_OPTIONS,
        "report" => REPORT_OPTIONS,
        "hotAborts" => HOT_ABORTS_OPTIONS,
        "flamegraph" => FLAMEGRAPH_OPTIONS,
        "speedscope" => SPEEDSCOPE_OPTIONS,
        "pprof" => PPROF_OPTIONS,
        "trace" => TRACE_OPTIONS,
        "listen" => LISTEN_OPTIONS,
        _ => return None,
    })
}

/// Every function whose options are declared here.
pub const FUNCTIONS: [&str; 8] =
    ["sample", "report", "hotAborts", "flamegraph", "speedscope", "pprof", "trace", "listen"];

/// The [`ReportOptions`] of a table (options of `profile.report` after its
/// `mode` string was translated). Checked first, so a table that reaches
/// the views without passing through `tecs.profile.report` gets the same
/// errors.
pub fn read(t: Option<Table>) -> mlua::Result<ReportOptions> {
    if let Some(t) = &t {
        check_table(REPORT_OPTIONS, &mlua::Value::Table(t.clone())).map_err(mlua::Error::runtime)?;
    }
    let get = |name| setting(REPORT_OPTIONS, t.as_ref(), name);
    let group = |name| get(name).text().and_then(Group::parse);
    // Checked above, so every setting is given or declared: the fallbacks
    // below never apply.
    let number = |name| get(name).number().unwrap_or_default();
    let defaults = ReportOptions::default();
    let context = number("context") as usize;
    Ok(ReportOptions {
        by: group("by").unwrap_or(defaults.by),
        then: group("then"),
        sort: match get("sort").text() {
            Some("total") => Metric::Total,
            _ => Metric::SelfTime,
        },
        min_percent: number("minPercent"),
        depth: number("depth") as i32,
        raw: get("raw").boolean().unwrap_or_default(),
        limit: get("limit").number().map(|n| n as usize),
        annotate: match get("annotate") {
            Setting::Text(s) if s == "hot" => Some(Annotate::Excerpts(context)),
            Setting::Text(s) if s == "full" => Some(Annotate::Full),
            _ => None,
        },
    })
}
