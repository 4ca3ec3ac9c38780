//! The options of `profile.report`, `profile.hotAborts`,
//! `profile.flamegraph`, `profile.speedscope`, `profile.pprof`,
//! `profile.trace` and `profile.listen`, declared once (names,
//! accepted values, defaults), and their conversion into [`ReportOptions`].
//! `tecs.profile.report` checks the user's tables here (through the native
//! `checkOptions`) before it translates a `mode` string. `declared` finds
//! any public function's declarations, and `option_tables` gives them to
//! Lua (`native.options`).

use mlua::{Lua, Table, Value};

use super::options::{check_table, opt, setting, Check, Declared, DefaultValue, Setting};
use crate::views::{Annotate, Group, Metric, Plugins, ReportOptions};

/// Groupings of `by`.
pub const GROUPS: &[&str] = &["function", "line", "module", "zone", "zonecomponent", "vmstate", "plugin"];
/// Groupings of `then`: those of `by`, plus callers and callees.
pub const THEN_GROUPS: &[&str] =
    &["function", "line", "module", "zone", "zonecomponent", "vmstate", "plugin", "caller", "callee"];

const ZONE: Check = Check::ZonePath("a non-empty zone path string");
const FRAMES: Check = Check::OneOf(&["line", "function"]);

/// Options several functions declare alike: declared once here.
const SAMPLE_INTERVAL: Declared = opt(
    "intervalMs",
    Check::Number { lo: 0.001, hi: 1e6, expected: "a positive number of milliseconds" },
    DefaultValue::None,
    "milliseconds each sample stands for (weights in time)",
);
const RAW: Declared = opt("raw", Check::Boolean, DefaultValue::Boolean(false), "sample counts instead of percentages");
/// Where plugins live (the `plugin` grouping, the `plugin` root level).
pub const PLUGINS: Declared = opt(
    "plugins",
    Check::Table("a table of plugin directories: { [name] = dir or { dir, ... }, ... } or { dir, ... }"),
    DefaultValue::None,
    "the directories plugins live in, by name (a list: each named by its last component); a Lua file in none of them belongs to the directory a runtime path's layout shows (see docs/neovim.md)",
);
/// A root level above every stack of a written profile.
const ROOT: Declared = opt(
    "root",
    Check::OneOf(&["plugin"]),
    DefaultValue::None,
    "a root level above each stack: \"plugin\", the plugin of its innermost Lua frame, as [plugin NAME]",
);
const FUNCTIONS_FROM_SOURCES: Declared = opt(
    "functions",
    Check::Boolean,
    DefaultValue::Boolean(true),
    "group lines into the functions read from the source files",
);

/// `profile.report`.
pub const REPORT_OPTIONS: &[Declared] = &[
    opt(
        "by",
        Check::OneOf(GROUPS),
        DefaultValue::Text("function"),
        "what the rows are: functions, lines, modules, zone paths, zone components, VM states or plugins",
    ),
    opt(
        "then",
        Check::OneOf(THEN_GROUPS),
        DefaultValue::None,
        "a second level under each row: the same groupings, or its callers or callees",
    ),
    opt("sort", Check::OneOf(&["self", "total"]), DefaultValue::Text("self"), "order rows by self or total time"),
    opt(
        "minPercent",
        Check::Number { lo: 0.0, hi: 100.0, expected: "a percentage from 0 to 100" },
        DefaultValue::Number(3.0),
        "hide rows below this share",
    ),
    opt(
        "depth",
        Check::NonZeroInteger { lo: -100.0, hi: 100.0, expected: "a non-zero integer from -100 to 100" },
        DefaultValue::Number(1.0),
        "frames per key; negative counts from the caller",
    ),
    RAW,
    opt(
        "unit",
        Check::OneOf(crate::views::Unit::NAMES),
        DefaultValue::Text("samples"),
        "what the counts are: \"samples\", or \"bytes\" (an allocation profile read from a file, whose sample count is not known: shares without a sampling error); a file's functions file says which",
    ),
    opt(
        "limit",
        Check::Integer { lo: 1.0, hi: 1e9, expected: "a positive integer" },
        DefaultValue::None,
        "show at most this many rows",
    ),
    opt(
        "annotate",
        Check::OneOf(&["hot", "full"]),
        DefaultValue::None,
        "source listings with each line's share: \"hot\" excerpts or \"full\" files",
    ),
    opt(
        "context",
        Check::Integer { lo: 0.0, hi: 1000.0, expected: "an integer from 0 to 1000" },
        DefaultValue::Number(3.0),
        "lines shown around each hot line of an annotated excerpt",
    ),
    opt("zone", ZONE, DefaultValue::None, "keep only samples inside this zone path"),
    FUNCTIONS_FROM_SOURCES,
    PLUGINS,
    opt(
        "mode",
        Check::Text("a -jp style mode string such as \"vf\" or \"3si\""),
        DefaultValue::None,
        "a luajit -jp mode string (\"vf\", \"3si\"...) translated into these options",
    ),
    opt(
        "trace",
        Check::Table("a TraceReport from profile.trace (a table with a 'sites' list)"),
        DefaultValue::None,
        "with annotate: a TraceReport whose abort sites go under their lines",
    ),
    opt(
        "counts",
        Check::Table("a CoverageSession from profile.coverage or its files() table"),
        DefaultValue::None,
        "with annotate: a CoverageSession whose exact line counts go beside each line",
    ),
];

/// `profile.hotAborts`.
pub const HOT_ABORTS_OPTIONS: &[Declared] = &[RAW, FUNCTIONS_FROM_SOURCES];

/// `profile.flamegraph`.
pub const FLAMEGRAPH_OPTIONS: &[Declared] = &[
    opt("title", Check::Text("a string"), DefaultValue::None, "the flamegraph's title"),
    opt("countName", Check::Text("a string"), DefaultValue::None, "what a sample counts, in the flamegraph's tooltips"),
    opt("inverted", Check::Boolean, DefaultValue::Boolean(false), "an icicle graph: leaves at the top"),
    opt("zone", ZONE, DefaultValue::None, "keep only samples inside this zone path"),
    opt(
        "frames",
        FRAMES,
        DefaultValue::Text("line"),
        "\"line\": one box per source line; \"function\": lines grouped into their functions",
    ),
    ROOT,
    PLUGINS,
];

/// `profile.speedscope`.
pub const SPEEDSCOPE_OPTIONS: &[Declared] = &[
    opt("name", Check::Text("a string"), DefaultValue::None, "the profile's name in speedscope"),
    SAMPLE_INTERVAL,
    opt("zone", ZONE, DefaultValue::None, "keep only samples inside this zone path"),
    opt(
        "frames",
        FRAMES,
        DefaultValue::Text("line"),
        "\"line\": one box per source line; \"function\": lines grouped into their functions",
    ),
    ROOT,
    PLUGINS,
];

/// `profile.pprof`.
pub const PPROF_OPTIONS: &[Declared] = &[
    SAMPLE_INTERVAL,
    opt(
        "clock",
        Check::OneOf(&["cpu", "wall"]),
        DefaultValue::Text("cpu"),
        "what the samples measured: \"cpu\" or \"wall\" time",
    ),
    opt("zone", ZONE, DefaultValue::None, "keep only samples inside this zone path"),
    ROOT,
    PLUGINS,
];

/// `profile.trace`: the tracker itself is Lua (`jit.attach` calls Lua),
/// but its options are declared here with every other function's.
pub const TRACE_OPTIONS: &[Declared] = &[opt(
    "includeBenign",
    Check::Boolean,
    DefaultValue::Boolean(false),
    "also list aborts LuaJIT recovers from by itself (loop unrolling, down-recursion, retry)",
)];

/// `profile.listen`: the control channel (`tecs.profile.listen`), whose
/// socket and protocol are native (`crate::control`).
pub const LISTEN_OPTIONS: &[Declared] = &[
    opt(
        "dir",
        Check::Text("a directory path string"),
        DefaultValue::None,
        "the control directory, which only this user may enter ($TECS_PROFILE_DIR, else $XDG_RUNTIME_DIR/tecs-profile, else /tmp/tecs-profile-UID)",
    ),
    opt(
        "outputDir",
        Check::Text("a directory path string"),
        DefaultValue::None,
        "a directory, besides the control directory, where clients may have the program write profiles (a file name they give alone goes there); new files, or files the channel wrote itself, with a format's ending",
    ),
    opt(
        "program",
        Check::Text("a string"),
        DefaultValue::None,
        "the name tecs-profile targets shows (arg[0], or a LÖVE game's identity)",
    ),
    opt(
        "skipThread",
        Check::Thread("a thread (a coroutine)"),
        DefaultValue::None,
        "a Lua thread whose samples the sessions clients start do not record (tecs-profile run --listen gives its own, which runs the program on a coroutine)",
    ),
    opt(
        "wake",
        Check::Boolean,
        DefaultValue::Boolean(false),
        "Linux: run a command as soon as a client sends it (a signal sets a one-shot hook, which runs at the next interpreted instruction), not only at profile.poll()",
    ),
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
        "allocations" => super::alloc::ALLOCATION_OPTIONS,
        "listen" => LISTEN_OPTIONS,
        _ => return None,
    })
}

/// Every function whose options are declared here.
pub const FUNCTIONS: [&str; 9] =
    ["sample", "allocations", "report", "hotAborts", "flamegraph", "speedscope", "pprof", "trace", "listen"];

/// `native.options`: for each public function, its option names (sorted),
/// their defaults, what each accepts and what it does, and the values of
/// each option that takes one of a list (`{ names = {...}, defaults =
/// {...}, accepts = {...}, help = {...}, choices = {...}, bounds = {...}
/// }`, the last five by name; `bounds`: `{ minimum, maximum }` of the
/// options that take a number): what the docs' option tables and the MCP
/// tools' schemas are generated from.
pub(super) fn option_tables(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for function in FUNCTIONS {
        let decls = declared(function).unwrap_or(&[]);
        let entry = lua.create_table()?;
        entry.set("names", lua.create_sequence_from(super::options::names(decls))?)?;
        entry.set("defaults", super::options::settings_table(lua, decls, None)?)?;
        let (accepts, help, choices) = (lua.create_table()?, lua.create_table()?, lua.create_table()?);
        let bounds = lua.create_table()?;
        for d in decls {
            accepts.set(d.name, d.check.expected())?;
            help.set(d.name, d.help)?;
            match d.check {
                Check::OneOf(names) => choices.set(d.name, lua.create_sequence_from(names.iter().copied())?)?,
                Check::Number { lo, hi, .. } | Check::Integer { lo, hi, .. } | Check::NonZeroInteger { lo, hi, .. } => {
                    let b = lua.create_table()?;
                    b.set("minimum", lo)?;
                    b.set("maximum", hi)?;
                    bounds.set(d.name, b)?;
                }
                _ => {}
            }
        }
        entry.set("accepts", accepts)?;
        entry.set("help", help)?;
        entry.set("choices", choices)?;
        entry.set("bounds", bounds)?;
        t.set(function, entry)?;
    }
    Ok(t)
}

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
    let plugins = read_plugins(t.as_ref().and_then(|t| t.raw_get::<Option<Table>>("plugins").ok().flatten()))?;
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
        unit: get("unit").text().and_then(crate::views::Unit::parse).unwrap_or_default(),
        limit: get("limit").number().map(|n| n as usize),
        annotate: match get("annotate") {
            Setting::Text(s) if s == "hot" => Some(Annotate::Excerpts(context)),
            Setting::Text(s) if s == "full" => Some(Annotate::Full),
            _ => None,
        },
        plugins,
    })
}

/// The `plugins` option: `{ [name] = dir }` pairs (a name may have a list
/// of directories: a plugin's path and the one its links lead to) and
/// `{ dir, ... }` entries, each a non-empty string.
pub fn read_plugins(t: Option<Table>) -> mlua::Result<Plugins> {
    let Some(t) = t else { return Ok(Plugins::default()) };
    let bad = |what: String| {
        mlua::Error::runtime(format!("option 'plugins' must be {} ({})", PLUGINS.check.expected(), what))
    };
    let dir = |v: &Value| match v {
        Value::String(d) if !d.to_string_lossy().is_empty() => Ok(d.to_string_lossy()),
        other => Err(bad(format!("got {} for a directory", super::options::describe(other)))),
    };
    let mut roots = Vec::new();
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair?;
        let name = match &k {
            Value::String(s) => s.to_string_lossy(),
            Value::Integer(_) | Value::Number(_) => String::new(),
            other => return Err(bad(format!("a key is a {}", super::options::describe(other)))),
        };
        match (&v, name.is_empty()) {
            (Value::Table(dirs), false) => {
                for d in dirs.sequence_values::<Value>() {
                    roots.push((dir(&d?)?, name.clone()));
                }
            }
            _ => roots.push((dir(&v)?, name)),
        }
    }
    Ok(Plugins::new(roots))
}
