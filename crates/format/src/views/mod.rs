//! Text views of a profile, the ones `luajit -jp` prints and a few more:
//! top functions, lines or modules by self or total share; callers and
//! callees of each function; zones by full path or by component; VM states;
//! any two of these nested (zone by function, VM state by function, lines
//! within a function, ...); and source annotated with per-line shares.
//!
//! Self time of a key is the samples whose innermost frame has that key;
//! total time counts a sample once for every distinct key anywhere on its
//! stack. For zones, a path's total includes the paths below it and a
//! component's self time is the time it was the innermost zone.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;

use crate::profile::frames::{self, FunctionMap};
use crate::profile::VM_STATES;
use crate::profile::{sum_counts, NamedRow, Profile};

mod annotate;
mod hot_aborts;
pub mod plugins;
pub mod timeline;
mod unit;

pub use annotate::{annotate, annotate_with, HitCounts, LineNotes, TraceCounts, TraceNotes};
pub use hot_aborts::{hot_aborts, render_hot_aborts, AbortSite, HotSite};
pub use plugins::Plugins;
use unit::fmt_value;
pub use unit::Unit;

/// What a level of a view groups samples by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Function,
    Line,
    Module,
    /// The full zone path, `update/physics`.
    Zone,
    /// Each zone name on the path, wherever it appears.
    ZoneComponent,
    VmState,
    /// The plugin (runtime path directory) of the innermost Lua frame; a C
    /// function goes with the line that called it (see `plugins`).
    Plugin,
    /// The function that called (second level only).
    Caller,
    /// The function called (second level only).
    Callee,
}

impl Group {
    /// The grouping `tecs.profile.report` names (its `by` and `then`
    /// options, and `-jp` mode letters translated there).
    pub fn parse(s: &str) -> Option<Group> {
        Some(match s {
            "function" => Group::Function,
            "line" => Group::Line,
            "module" => Group::Module,
            "zone" => Group::Zone,
            "zonecomponent" => Group::ZoneComponent,
            "vmstate" => Group::VmState,
            "plugin" => Group::Plugin,
            "caller" => Group::Caller,
            "callee" => Group::Callee,
            _ => return None,
        })
    }

    fn title(self) -> &'static str {
        match self {
            Group::Function => "function",
            Group::Line => "line",
            Group::Module => "module",
            Group::Zone => "zone path",
            Group::ZoneComponent => "zone",
            Group::VmState => "VM state",
            Group::Plugin => "plugin",
            Group::Caller => "caller",
            Group::Callee => "callee",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    SelfTime,
    Total,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Annotate {
    /// Hot lines with `context` lines around them.
    Excerpts(usize),
    /// Whole files.
    Full,
}

#[derive(Clone, Debug)]
pub struct ReportOptions {
    pub by: Group,
    pub then: Option<Group>,
    pub sort: Metric,
    /// Rows below this share (percent) are not shown; second-level rows are
    /// compared with their parent.
    pub min_percent: f64,
    /// Frames per key for function/line/module keys (like `-jp=N`): the
    /// innermost frame and its callers, joined by ` < `. Negative: the same
    /// frames caller first, joined by ` > `.
    pub depth: i32,
    /// Print sample counts instead of percentages.
    pub raw: bool,
    /// What the counts are: samples, whose shares carry their sampling
    /// error, or bytes (an allocation profile read from a file, whose
    /// sample count is not known), whose shares are shown without one.
    pub unit: Unit,
    /// At most this many first-level rows.
    pub limit: Option<usize>,
    pub annotate: Option<Annotate>,
    /// Where plugins live, for the plugin grouping.
    pub plugins: Plugins,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            by: Group::Function,
            then: None,
            sort: Metric::SelfTime,
            min_percent: 3.0,
            depth: 1,
            raw: false,
            unit: Unit::Samples,
            limit: None,
            annotate: None,
            plugins: Plugins::default(),
        }
    }
}

pub fn vm_state_name(state: u8) -> &'static str {
    match state {
        b'N' => "Compiled",
        b'I' => "Interpreted",
        b'C' => "C code",
        b'G' => "Garbage Collector",
        _ => "JIT Compiler",
    }
}

/// The name of the rows taken outside any zone.
pub const NO_ZONE: &str = "(no zone)";
const NO_STACK: &str = "(no stack)";

/// Counts of one first-level key.
#[derive(Default, Debug, Clone)]
pub struct Entry {
    pub self_samples: u64,
    pub total_samples: u64,
    pub children: HashMap<String, u64>,
}

impl Entry {
    fn value(&self, m: Metric) -> u64 {
        match m {
            Metric::SelfTime => self.self_samples,
            Metric::Total => self.total_samples,
        }
    }
}

/// A computed view: every first-level key with its counts.
#[derive(Debug, Default)]
pub struct Table {
    pub samples: u64,
    pub entries: HashMap<String, Entry>,
}

impl Table {
    /// Keys sorted by the metric, descending, then by name.
    pub fn sorted(&self, m: Metric) -> Vec<(&String, &Entry)> {
        let mut v: Vec<_> = self.entries.iter().collect();
        v.sort_by(|a, b| b.1.value(m).cmp(&a.1.value(m)).then_with(|| a.0.cmp(b.0)));
        v
    }
}

struct Keyer<'a> {
    funcs: &'a FunctionMap,
    /// Function of each frame seen so far: profiles repeat frames a lot, and
    /// finding a line's function scans the file's ranges.
    memo: RefCell<HashMap<&'a str, &'a str>>,
    plugins: &'a Plugins,
    /// Plugin of each file seen so far.
    plugin_memo: RefCell<HashMap<&'a str, &'a str>>,
}

impl<'a> Keyer<'a> {
    fn new(funcs: &'a FunctionMap, plugins: &'a Plugins) -> Self {
        Keyer { funcs, memo: RefCell::new(HashMap::new()), plugins, plugin_memo: RefCell::new(HashMap::new()) }
    }

    /// The plugin of each frame of `row` (see `plugins`).
    fn plugins_of(&self, row: &NamedRow<'a>) -> Vec<&'a str> {
        self.plugins.of_stack(&row.stack, &mut self.plugin_memo.borrow_mut())
    }

    fn function_of(&self, frame: &'a str) -> &'a str {
        if let Some(f) = self.memo.borrow().get(frame) {
            return f;
        }
        let f = self.funcs.function_of(frame);
        self.memo.borrow_mut().insert(frame, f);
        f
    }

    fn frame_key(&self, g: Group, frame: &'a str) -> &'a str {
        match g {
            Group::Function | Group::Caller | Group::Callee => self.function_of(frame),
            Group::Module => frames::module(frame),
            _ => frame,
        }
    }

    /// Key of the frame at `i` for a frame group, with `depth` frames.
    fn frame_key_at(&self, g: Group, row: &NamedRow<'a>, i: usize, depth: i32) -> String {
        let n = depth.unsigned_abs().max(1) as usize;
        if n == 1 {
            return self.frame_key(g, row.stack[i]).to_string();
        }
        let lo = (i + 1).saturating_sub(n);
        let mut keys: Vec<&str> = Vec::with_capacity(n);
        for j in (lo..=i).rev() {
            let k = self.frame_key(g, row.stack[j]);
            // Consecutive frames of one function are one level of the key.
            if keys.last() != Some(&k) || g == Group::Line {
                keys.push(k);
            }
        }
        if depth < 0 {
            keys.reverse();
            keys.join(" > ")
        } else {
            keys.join(" < ")
        }
    }
}

/// One place a first-level key occurs in a sample: the key and, for frame
/// groups, the index of its innermost frame.
struct Occurrence {
    key: String,
    frame: Option<usize>,
    is_self: bool,
}

fn occurrences<'a>(k: &Keyer<'a>, g: Group, row: &NamedRow<'a>, state: u8, depth: i32) -> Vec<Occurrence> {
    let mut out: Vec<Occurrence> = Vec::new();
    match g {
        Group::Function | Group::Line | Group::Module | Group::Caller | Group::Callee => {
            if row.stack.is_empty() {
                out.push(Occurrence { key: NO_STACK.into(), frame: None, is_self: true });
                return out;
            }
            let leaf = if g == Group::Line { frames::line_leaf(&row.stack) } else { row.stack.len() - 1 };
            out.push(Occurrence { key: k.frame_key_at(g, row, leaf, depth), frame: Some(leaf), is_self: true });
            if depth.unsigned_abs() <= 1 {
                for i in (0..leaf).rev() {
                    let key = k.frame_key(g, row.stack[i]);
                    if !out.iter().any(|o| o.key == key) {
                        out.push(Occurrence { key: key.to_string(), frame: Some(i), is_self: false });
                    }
                }
            }
        }
        Group::Plugin => {
            if row.stack.is_empty() {
                out.push(Occurrence { key: NO_STACK.into(), frame: None, is_self: true });
                return out;
            }
            let keys = k.plugins_of(row);
            for (i, key) in keys.iter().enumerate().rev() {
                if !out.iter().any(|o| o.key == *key) {
                    out.push(Occurrence { key: key.to_string(), frame: Some(i), is_self: i + 1 == keys.len() });
                }
            }
        }
        Group::Zone => {
            let full = if row.zones.is_empty() { NO_ZONE.to_string() } else { row.zones.join("/") };
            out.push(Occurrence { key: full, frame: None, is_self: true });
            for n in (1..row.zones.len()).rev() {
                out.push(Occurrence { key: row.zones[..n].join("/"), frame: None, is_self: false });
            }
        }
        Group::ZoneComponent => {
            if row.zones.is_empty() {
                out.push(Occurrence { key: NO_ZONE.into(), frame: None, is_self: true });
            }
            for (i, z) in row.zones.iter().enumerate().rev() {
                if !out.iter().any(|o| o.key == *z) {
                    out.push(Occurrence { key: z.to_string(), frame: None, is_self: i + 1 == row.zones.len() });
                }
            }
        }
        Group::VmState => {
            out.push(Occurrence { key: vm_state_name(state).into(), frame: None, is_self: true });
        }
    }
    out
}

/// Second-level keys for one first-level occurrence.
fn second_keys<'a>(
    k: &Keyer<'a>,
    g: Group,
    row: &NamedRow<'a>,
    state: u8,
    occ: &Occurrence,
    sort: Metric,
) -> Vec<String> {
    match g {
        Group::Caller => {
            let i = occ.frame.unwrap_or(row.stack.len().saturating_sub(1));
            if i == 0 || row.stack.is_empty() {
                vec!["(root)".into()]
            } else {
                vec![k.frame_key(Group::Function, row.stack[i - 1]).to_string()]
            }
        }
        Group::Callee => match occ.frame {
            Some(i) if i + 1 < row.stack.len() => {
                // The next frame of another function: consecutive frames of
                // the same function (recursion aside) are one call level.
                let me = k.frame_key(Group::Function, row.stack[i]);
                let next = row.stack[i + 1..].iter().map(|f| k.frame_key(Group::Function, f)).find(|f| *f != me);
                vec![next.unwrap_or("(self)").to_string()]
            }
            _ => vec!["(self)".into()],
        },
        Group::Function | Group::Line | Group::Module => {
            if row.stack.is_empty() {
                return vec![NO_STACK.into()];
            }
            match occ.frame {
                Some(i) => vec![k.frame_key(g, row.stack[i]).to_string()],
                None => {
                    let at = if g == Group::Line { frames::line_leaf(&row.stack) } else { row.stack.len() - 1 };
                    let leaf = k.frame_key(g, row.stack[at]).to_string();
                    if sort == Metric::SelfTime {
                        vec![leaf]
                    } else {
                        let mut v: Vec<String> = Vec::new();
                        for f in row.stack.iter().rev() {
                            let key = k.frame_key(g, f);
                            if !v.iter().any(|x| x == key) {
                                v.push(key.to_string());
                            }
                        }
                        v
                    }
                }
            }
        }
        Group::Plugin => {
            if row.stack.is_empty() {
                return vec![NO_STACK.into()];
            }
            let keys = k.plugins_of(row);
            match occ.frame {
                Some(i) => vec![keys[i].to_string()],
                None if sort == Metric::SelfTime => vec![keys[keys.len() - 1].to_string()],
                None => {
                    let mut v: Vec<String> = Vec::new();
                    for key in keys.iter().rev() {
                        if !v.iter().any(|x| x == key) {
                            v.push(key.to_string());
                        }
                    }
                    v
                }
            }
        }
        Group::Zone => vec![if row.zones.is_empty() { NO_ZONE.into() } else { row.zones.join("/") }],
        Group::ZoneComponent => vec![row.zones.last().map(|z| z.to_string()).unwrap_or_else(|| NO_ZONE.into())],
        Group::VmState => vec![vm_state_name(state).into()],
    }
}

/// Aggregates a profile into a view table.
pub fn aggregate(profile: &Profile, funcs: &FunctionMap, opts: &ReportOptions) -> Table {
    let k = Keyer::new(funcs, &opts.plugins);
    let mut t = Table::default();
    let split_states = opts.by == Group::VmState || opts.then == Some(Group::VmState);
    for row in profile.named_rows() {
        let row = &row;
        let parts: Vec<(u8, u64)> = if split_states {
            VM_STATES.iter().zip(row.counts.iter()).filter(|(_, &c)| c > 0).map(|(&s, &c)| (s, c)).collect()
        } else {
            let n = row.total();
            if n == 0 {
                continue;
            }
            vec![(row.dominant_state(), n)]
        };
        for (state, weight) in parts {
            t.samples = t.samples.saturating_add(weight);
            for occ in occurrences(&k, opts.by, row, state, opts.depth) {
                let e = t.entries.entry(occ.key.clone()).or_default();
                e.total_samples = e.total_samples.saturating_add(weight);
                if occ.is_self {
                    e.self_samples = e.self_samples.saturating_add(weight);
                }
                if let Some(g2) = opts.then {
                    let counts = occ.is_self || opts.sort == Metric::Total;
                    if counts {
                        for k2 in second_keys(&k, g2, row, state, &occ, opts.sort) {
                            let c = e.children.entry(k2).or_insert(0);
                            *c = c.saturating_add(weight);
                        }
                    }
                }
            }
        }
    }
    t
}

fn pct(v: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * v as f64 / of as f64
    }
}

/// z for a two-sided 95% interval.
const Z95: f64 = 1.959964;

/// Below this many samples a view says that its ranking is not reliable:
/// the 95% interval of a share near one half is then wider than ±10 points.
pub const FEW_SAMPLES: u64 = 100;

/// Half-width, in percentage points, of the 95% Wilson score interval of the
/// share `v / of`: the sampling error of a share. Unlike the normal
/// approximation it does not vanish at 0% and 100% of a small profile.
pub fn share_error(v: u64, of: u64) -> f64 {
    if of == 0 {
        return 0.0;
    }
    let n = of as f64;
    let p = (v.min(of) as f64) / n;
    let z2 = Z95 * Z95;
    100.0 * Z95 / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt()
}

/// The largest sampling error of any share of a profile of `of` samples.
pub fn worst_share_error(of: u64) -> f64 {
    share_error(of / 2, of)
}

/// What a view's header says about its sampling error: `shares ±X points at
/// most (95%)`, and that the profile is too small to rank when it is.
pub fn error_note(samples: u64) -> String {
    let worst = worst_share_error(samples);
    if samples < FEW_SAMPLES {
        format!("only {} samples: too few to rank reliably (shares are ±{:.1} points or less, 95%)", samples, worst)
    } else {
        format!("shares ±{:.1} points at most (95%)", worst)
    }
}

/// A share without its error, for tables whose header gives the bound.
fn fmt_share(v: u64, of: u64, raw: bool) -> String {
    if raw {
        format!("{}", v)
    } else {
        format!("{:.1}%", pct(v, of))
    }
}

/// The annotated source with a note, after its header line, for each file
/// known not to be the source that ran.
fn with_changed_files(text: String, funcs: &FunctionMap) -> String {
    if funcs.changed_files.is_empty() {
        return text;
    }
    let cut = text.find('\n').map_or(text.len(), |i| i + 1);
    let mut out = text[..cut].to_string();
    for file in &funcs.changed_files {
        let _ =
            writeln!(out, "# note: {} has changed since it was profiled: its lines may not be the ones sampled", file);
    }
    out.push_str(&text[cut..]);
    out
}

/// Renders a view (or, with `annotate`, the annotated source).
pub fn render(profile: &Profile, funcs: &FunctionMap, opts: &ReportOptions) -> String {
    render_with(profile, funcs, opts, &LineNotes::default())
}

/// [`render`], with `notes` beside the annotated source's shares.
pub fn render_with(profile: &Profile, funcs: &FunctionMap, opts: &ReportOptions, notes: &LineNotes) -> String {
    if let Some(a) = opts.annotate {
        let text = annotate_with(profile, opts, a, notes, &mut |p| std::fs::read_to_string(p));
        return with_changed_files(text, funcs);
    }
    let t = aggregate(profile, funcs, opts);
    let mut out = String::new();
    let metric = match opts.sort {
        Metric::SelfTime => "self",
        Metric::Total => "total",
    };
    let _ = write!(out, "# {} {}; by {}", t.samples, opts.unit.name(), opts.by.title());
    if let Some(g) = opts.then {
        let _ = write!(out, ", then {}", g.title());
    }
    let _ = writeln!(out, "; sorted by {} time; rows below {}% hidden", metric, opts.min_percent);
    if t.samples == 0 {
        out.push_str("[no samples]\n");
        return out;
    }
    if !opts.raw && opts.unit == Unit::Samples {
        if t.samples < FEW_SAMPLES {
            let _ = writeln!(
                out,
                "# only {} samples: too few to rank reliably; ± is each share's 95% sampling error",
                t.samples
            );
        } else {
            let _ = writeln!(
                out,
                "# ± is each share's 95% sampling error (at most ±{:.1} points here)",
                worst_share_error(t.samples)
            );
        }
    }
    let by_function = |g: Option<Group>| matches!(g, Some(Group::Function | Group::Caller | Group::Callee));
    if by_function(Some(opts.by)) || by_function(opts.then) {
        for note in &funcs.notes {
            let _ = writeln!(out, "# note: {}", note);
        }
    }
    let width = if opts.raw || opts.unit == Unit::Bytes { 8 } else { 12 };
    let _ = writeln!(out, "{:>w$} {:>w$}  {}", "self", "total", opts.by.title(), w = width);
    let arrow = match opts.then {
        Some(Group::Caller) => "<-",
        Some(Group::Callee) => "->",
        _ => "--",
    };
    for (shown, (key, e)) in t.sorted(opts.sort).into_iter().enumerate() {
        if opts.limit.is_some_and(|l| shown >= l) {
            break;
        }
        let v = e.value(opts.sort);
        if pct(v, t.samples) < opts.min_percent || v == 0 {
            break;
        }
        let _ = writeln!(
            out,
            "{:>w$} {:>w$}  {}",
            fmt_value(e.self_samples, t.samples, opts.raw, opts.unit),
            fmt_value(e.total_samples, t.samples, opts.raw, opts.unit),
            key,
            w = width
        );
        if opts.then.is_some() {
            let parent = sum_counts(e.children.values().copied());
            let mut kids: Vec<_> = e.children.iter().collect();
            kids.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
            for (k2, &c) in kids {
                if pct(c, parent) < opts.min_percent {
                    break;
                }
                let _ = writeln!(
                    out,
                    "{:>w$}  {} {}",
                    fmt_value(c, parent, opts.raw, opts.unit),
                    arrow,
                    k2,
                    w = 2 * width + 1
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
