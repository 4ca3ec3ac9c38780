//! Source annotated with per-line shares, like `luajit -jp=a` / `-jp=A`;
//! with a trace session's report, also where trace recording aborted and
//! why, under each line, each line's compiled share and the traces that
//! compiled it; with a coverage session's counts, the exact number of times
//! each line ran.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::*;

/// Per-line counts of one file: (self, total, self samples in compiled code).
type LineCounts = HashMap<u32, (u64, u64, u64)>;

/// What an annotated line shows beside its sampled shares. Every field is
/// optional; with none, the view is the sampled one alone. Another per-line
/// source (exact hit counts, say) is one more field here and one more column.
#[derive(Clone, Debug, Default)]
pub struct LineNotes {
    /// A trace session's report: abort sites go under their lines, and a
    /// `jit` column gives each line's compiled share.
    pub trace: Option<TraceNotes>,
    /// Exact hit counts by file and line (a coverage session's): a `count`
    /// column, blank on lines the counts do not cover.
    pub counts: Option<HitCounts>,
}

/// Times each counted line ran, by file name as the coverage session names
/// chunks (a `@path` chunk under its path, as frames name it).
pub type HitCounts = HashMap<String, HashMap<u32, u64>>;

/// A file name as frames and chunk names compare: without a leading `./`.
fn same_file(name: &str) -> &str {
    name.strip_prefix("./").unwrap_or(name)
}

/// The parts of a trace report the annotated source shows.
#[derive(Clone, Debug, Default)]
pub struct TraceNotes {
    pub sites: Vec<AbortSite>,
    /// Traces started, completed and aborted, and loops blacklisted; None
    /// when the report does not say (one read back from CSV).
    pub counts: Option<TraceCounts>,
    /// The completed traces that cover each line (LuaJIT's trace numbers,
    /// ascending), by file named as abort locations name it; None when the
    /// report does not say: no `traces` column then.
    pub lines: Option<HashMap<String, HashMap<u32, Vec<u32>>>>,
    /// The completed traces, in the report's order, for the list under each
    /// file of the traces that start in it (see [`TraceNotes::add_start`]).
    pub starts: Vec<TraceStart>,
}

/// Where a completed trace starts and how it ends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceStart {
    pub number: u32,
    /// `file:line`, as abort locations name it.
    pub start: String,
    /// LuaJIT's link type ("loop", "root", "return", ...), "" when unknown.
    pub link: String,
    /// The trace linked to (0: none).
    pub link_to: u32,
    /// The trace a side trace starts from.
    pub parent: Option<u32>,
}

impl TraceNotes {
    /// Add a completed trace to the lists under the files.
    pub fn add_start(&mut self, number: u32, start: String, link: String, link_to: u32, parent: Option<u32>) {
        self.starts.push(TraceStart { number, start, link, link_to, parent });
    }
}

/// Traces listed under a file before a `+n more`.
const STARTS_SHOWN: usize = 12;

/// One trace in a file's list: `T5 line 20 (side of T3) -> T1`.
fn start_text(t: &TraceStart, line: u32) -> String {
    let mut text = format!("T{} line {}", t.number, line);
    if let Some(p) = t.parent {
        let _ = write!(text, " (side of T{})", p);
    }
    match t.link.as_str() {
        "" => {}
        "root" | "stitch" if t.link_to != 0 => {
            let _ = write!(text, " {} -> T{}", t.link, t.link_to);
        }
        link => {
            let _ = write!(text, " {}", link);
        }
    }
    text
}

/// Trace numbers a `traces` cell shows before a `+n` for the rest.
const TRACES_SHOWN: usize = 2;
/// Width of the `traces` column (a longer cell widens its own line only).
const TRACES_WIDTH: usize = 10;

/// A `traces` cell: the first trace numbers, then how many more.
fn traces_cell(list: &[u32]) -> String {
    let mut cell: Vec<String> = list.iter().take(TRACES_SHOWN).map(|t| format!("T{}", t)).collect();
    if list.len() > TRACES_SHOWN {
        cell.push(format!("+{}", list.len() - TRACES_SHOWN));
    }
    cell.join(" ")
}

/// A trace session's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceCounts {
    pub started: u64,
    pub completed: u64,
    pub aborted: u64,
    pub blacklistings: u64,
}

/// Index of the compiled state (`N`) in a row's counts.
pub(super) const COMPILED: usize = 0;

/// Source annotated with each line's self and total share. `read` supplies a
/// file's text (the file system, or a test double in unit tests).
pub fn annotate(
    profile: &Profile,
    opts: &ReportOptions,
    mode: Annotate,
    read: &mut dyn FnMut(&str) -> std::io::Result<String>,
) -> String {
    annotate_with(profile, opts, mode, &LineNotes::default(), read)
}

/// [`annotate`] with `notes` beside the shares.
pub fn annotate_with(
    profile: &Profile,
    opts: &ReportOptions,
    mode: Annotate,
    notes: &LineNotes,
    read: &mut dyn FnMut(&str) -> std::io::Result<String>,
) -> String {
    let total = profile.total();
    let mut files: HashMap<&str, LineCounts> = HashMap::new();
    for row in profile.named_rows() {
        let n = row.total();
        let mut seen: Vec<&str> = Vec::new();
        let leaf = frames::line_leaf(&row.stack);
        for (i, f) in row.stack.iter().enumerate().rev() {
            let Some((file, line)) = frames::file_line(f) else { continue };
            let is_leaf = i == leaf;
            let c = files.entry(file).or_default().entry(line).or_default();
            if is_leaf {
                c.0 = c.0.saturating_add(n);
                c.2 = c.2.saturating_add(row.counts[COMPILED]);
            }
            if !seen.contains(f) {
                c.1 = c.1.saturating_add(n);
                seen.push(f);
            }
        }
    }
    // Abort sites by source line; sites elsewhere (inside a builtin with no
    // Lua caller) are listed in the header.
    let mut aborts: HashMap<(&str, u32), Vec<&AbortSite>> = HashMap::new();
    let mut elsewhere: Vec<&AbortSite> = Vec::new();
    if let Some(t) = &notes.trace {
        for s in &t.sites {
            match frames::file_line(&s.location) {
                Some((file, line)) => {
                    files.entry(file).or_default();
                    aborts.entry((file, line)).or_default().push(s);
                }
                None => elsewhere.push(s),
            }
        }
        for list in aborts.values_mut() {
            list.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {} samples; annotated source; lines below {}% self and total left blank",
        total, opts.min_percent
    );
    if let Some(t) = &notes.trace {
        match t.counts {
            Some(c) => {
                let _ = writeln!(
                    out,
                    "# traces: {} started, {} completed, {} aborted, {} loops blacklisted; abort sites under their lines (^)",
                    c.started, c.completed, c.aborted, c.blacklistings
                );
            }
            None => out.push_str("# traces: counts not in the report; abort sites under their lines (^)\n"),
        }
        let _ = writeln!(
            out,
            "# jit: the share of a line's self samples in compiled code (compiled samples name lines only at precision \"line\")"
        );
        if t.lines.is_some() {
            let _ = writeln!(
                out,
                "# traces column: the completed traces that cover a line (LuaJIT's numbers, as -jv shows them; +n: n more); blank: in none"
            );
        }
        for s in &elsewhere {
            let _ = writeln!(out, "# {}", abort_text(s));
        }
    }
    // Each profiled file's counts; in a full view, counted files no sample
    // reached are shown too (lines that never ran show 0).
    let counted: HashMap<&str, &HashMap<u32, u64>> =
        notes.counts.iter().flatten().map(|(f, lines)| (same_file(f), lines)).collect();
    let full = matches!(mode, Annotate::Full);
    if let Some(c) = &notes.counts {
        let _ =
            writeln!(out, "# count: times each line ran, from a coverage session (blank: a line it does not count)");
        if full {
            for f in c.keys() {
                if !files.keys().any(|k| same_file(k) == same_file(f)) {
                    files.entry(f.as_str()).or_default();
                }
            }
        }
    }
    let counted_files_shown = full && !counted.is_empty();
    if total == 0 && aborts.is_empty() && !counted_files_shown {
        out.push_str("[no samples]\n");
        return out;
    }
    if !opts.raw && total > 0 {
        let _ = writeln!(out, "# {}", error_note(total));
    }
    let shown = |c: (u64, u64, u64)| pct(c.0, total) >= opts.min_percent || pct(c.1, total) >= opts.min_percent;
    let marked = |file: &str, line: u32, lines: &LineCounts| {
        lines.get(&line).is_some_and(|&c| shown(c)) || aborts.contains_key(&(file, line))
    };
    let mut order: Vec<(&str, u64, u64)> = files
        .iter()
        .filter(|(f, lines)| {
            lines.values().any(|&c| shown(c))
                || aborts.keys().any(|(af, _)| af == *f)
                || (full && counted.contains_key(same_file(f)))
        })
        .map(|(f, lines)| (*f, sum_counts(lines.values().map(|c| c.0)), lines.values().map(|c| c.1).max().unwrap_or(0)))
        .collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.2.cmp(&a.2)).then_with(|| a.0.cmp(b.0)));
    let with_jit = notes.trace.is_some();
    let with_count = notes.counts.is_some();
    let traced: Option<HashMap<&str, &HashMap<u32, Vec<u32>>>> = notes
        .trace
        .as_ref()
        .and_then(|t| t.lines.as_ref())
        .map(|l| l.iter().map(|(f, lines)| (same_file(f), lines)).collect());
    for (file, self_sum, _) in order {
        let lines = &files[file];
        let _ = writeln!(out, "\n====== {} ====== (self {})", file, fmt_share(self_sum, total, opts.raw));
        // Abort sites of lines this view cannot show, listed by line.
        let unplaced = |out: &mut String, from: u32| {
            let mut at: Vec<(&u32, &Vec<&AbortSite>)> =
                aborts.iter().filter(|((f, l), _)| *f == file && *l >= from).map(|((_, l), v)| (l, v)).collect();
            at.sort_by_key(|(l, _)| **l);
            for (line, list) in at {
                for s in list {
                    let _ = writeln!(out, "^ line {}: {}", line, abort_text(s));
                }
            }
        };
        let text = match read(file) {
            Ok(t) => t,
            Err(e) => {
                let _ = writeln!(out, "[cannot read {}: {}]", file, e);
                unplaced(&mut out, 0);
                continue;
            }
        };
        if text.as_bytes().first() == Some(&0x1b) {
            out.push_str("[bytecode file: cannot annotate]\n");
            unplaced(&mut out, 0);
            continue;
        }
        let mut jit_head = if with_jit { format!(" {:>5}", "jit") } else { String::new() };
        if with_count {
            let _ = write!(jit_head, " {:>9}", "count");
        }
        if traced.is_some() {
            let _ = write!(jit_head, " {:>w$}", "traces", w = TRACES_WIDTH);
        }
        let _ = writeln!(out, "{:>7} {:>7}{} | {:>5} | source", "self", "total", jit_head, "line");
        let file_counts = counted.get(same_file(file)).copied();
        let file_traces = traced.as_ref().and_then(|t| t.get(same_file(file)).copied());
        // The columns after `jit`: `count` and `traces`, when shown.
        let count_of = |n: usize| -> String {
            let mut cells = String::new();
            if with_count {
                match file_counts.and_then(|c| c.get(&(n as u32))) {
                    Some(c) => cells = format!(" {:>9}", c),
                    None => cells = format!(" {:>9}", ""),
                }
            }
            if traced.is_some() {
                let list = file_traces.and_then(|t| t.get(&(n as u32))).map(|l| traces_cell(l)).unwrap_or_default();
                let _ = write!(cells, " {:>w$}", list, w = TRACES_WIDTH);
            }
            cells
        };
        let src: Vec<&str> = text.lines().collect();
        let hot: Vec<usize> = (1..=src.len()).filter(|n| marked(file, *n as u32, lines)).collect();
        let visible = |n: usize| match mode {
            Annotate::Full => true,
            Annotate::Excerpts(ctx) => hot.iter().any(|&h| h.abs_diff(n) <= ctx),
        };
        let mut blank_jit = if with_jit { format!(" {:>5}", "") } else { String::new() };
        if with_count {
            let _ = write!(blank_jit, " {:>9}", "");
        }
        if traced.is_some() {
            let _ = write!(blank_jit, " {:>w$}", "", w = TRACES_WIDTH);
        }
        let blank_share = if with_jit { format!(" {:>5}", "") } else { String::new() };
        let mut gap = true;
        for (idx, code) in src.iter().enumerate() {
            let n = idx + 1;
            if !visible(n) {
                gap = true;
                continue;
            }
            if gap && matches!(mode, Annotate::Excerpts(_)) {
                let _ = writeln!(out, "@@ {} @@", n);
            }
            gap = false;
            match lines.get(&(n as u32)) {
                Some(&c) if shown(c) => {
                    let mut jit = if !with_jit {
                        String::new()
                    } else if c.0 == 0 {
                        blank_share.clone()
                    } else if opts.raw {
                        format!(" {:>5}", c.2)
                    } else {
                        format!(" {:>4.0}%", pct(c.2, c.0))
                    };
                    jit.push_str(&count_of(n));
                    let _ = writeln!(
                        out,
                        "{:>7} {:>7}{} | {:>5} | {}",
                        fmt_share(c.0, total, opts.raw),
                        fmt_share(c.1, total, opts.raw),
                        jit,
                        n,
                        code
                    );
                }
                _ => {
                    let _ = writeln!(out, "{:>7} {:>7}{}{} | {:>5} | {}", "", "", blank_share, count_of(n), n, code);
                }
            }
            for s in aborts.get(&(file, n as u32)).into_iter().flatten() {
                let _ = writeln!(out, "{:>7} {:>7}{} | {:>5} | ^ {}", "", "", blank_jit, "", abort_text(s));
            }
        }
        // Past the end: the file changed since, or the site's line is off.
        unplaced(&mut out, src.len() as u32 + 1);
        if traced.is_some() {
            starts_in(&mut out, notes, file);
        }
    }
    out
}

/// The list of the traces that start in `file`, if any.
fn starts_in(out: &mut String, notes: &LineNotes, file: &str) {
    let Some(t) = &notes.trace else { return };
    let here: Vec<String> = t
        .starts
        .iter()
        .filter_map(|s| match frames::file_line(&s.start) {
            Some((f, line)) if same_file(f) == same_file(file) => Some(start_text(s, line)),
            _ => None,
        })
        .collect();
    if here.is_empty() {
        return;
    }
    let shown = here.len().min(STARTS_SHOWN);
    let _ = write!(out, "# traces starting here: {}", here[..shown].join(", "));
    if here.len() > shown {
        let _ = write!(out, ", +{} more", here.len() - shown);
    }
    out.push('\n');
}

/// One abort site as a note: count, severity, reason and zone.
fn abort_text(s: &AbortSite) -> String {
    let zone = if s.zone.is_empty() { String::new() } else { format!(" [{}]", s.zone) };
    let at = if frames::file_line(&s.location).is_some() { String::new() } else { format!(" at {}", s.location) };
    format!(
        "trace aborted {} time{} ({}){}: {}{}",
        s.count,
        if s.count == 1 { "" } else { "s" },
        s.severity,
        at,
        s.reason,
        zone
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(entries: &[(&str, &[(u32, u64)])]) -> HitCounts {
        entries.iter().map(|(f, l)| (f.to_string(), l.iter().copied().collect())).collect()
    }

    #[test]
    fn hit_counts_beside_shares() {
        let p = crate::profile::collapsed::parse("./main.lua:2_[N] 3\n./main.lua:2_[I] 1\n").unwrap();
        let src = "a\nb\nc\n";
        let o = ReportOptions { min_percent: 1.0, ..Default::default() };
        let notes = LineNotes {
            trace: Some(TraceNotes::default()),
            counts: Some(counts(&[("main.lua", &[(2, 1000), (3, 0)]), ("other.lua", &[(1, 7)])])),
        };
        let text = annotate_with(&p, &o, Annotate::Full, &notes, &mut |_| Ok(src.to_string()));
        assert!(text.contains("# count: times each line ran"), "{}", text);
        assert!(text.contains("   self   total   jit     count |  line | source\n"), "{}", text);
        // `./main.lua` (a frame) meets `main.lua` (a chunk name).
        assert!(text.contains("                                |     1 | a\n"), "{}", text);
        assert!(text.contains(" 100.0%  100.0%   75%      1000 |     2 | b\n"), "{}", text);
        assert!(text.contains("                        0 |     3 | c\n"), "{}", text);
        // A counted file no sample reached is shown in a full view only.
        assert!(text.contains("====== other.lua ======"), "{}", text);
        assert!(text.contains("                        7 |     1 | a\n"), "{}", text);
        let hot = annotate_with(&p, &o, Annotate::Excerpts(0), &notes, &mut |_| Ok(src.to_string()));
        assert!(!hot.contains("other.lua"), "{}", hot);
        assert!(!hot.contains("| c\n"), "{}", hot);
    }

    #[test]
    fn hit_counts_without_samples() {
        let p = crate::profile::collapsed::parse("").unwrap();
        let notes = LineNotes { trace: None, counts: Some(counts(&[("f.lua", &[(1, 2)])])) };
        let o = ReportOptions::default();
        let full = annotate_with(&p, &o, Annotate::Full, &notes, &mut |_| Ok("x\ny\n".into()));
        assert!(full.contains("                2 |     1 | x\n"), "{}", full);
        assert!(full.contains("                  |     2 | y\n"), "{}", full);
        let hot = annotate_with(&p, &o, Annotate::Excerpts(3), &notes, &mut |_| Ok("x\n".into()));
        assert!(hot.contains("[no samples]"), "{}", hot);
    }
}
