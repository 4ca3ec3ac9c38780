//! Trace-abort sites ranked by the sampled time spent where they abort.

use std::fmt::Write as _;

use super::*;

/// A trace-abort site as the trace tracker reports it.
#[derive(Clone, Debug, Default)]
pub struct AbortSite {
    pub severity: String,
    pub count: u64,
    pub reason: String,
    pub location: String,
    pub zone: String,
}

/// Samples spent at a location.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HotSite {
    /// Index of the site in the input list.
    pub site: usize,
    /// Samples whose innermost frame is the location's line.
    pub line_self: u64,
    /// Samples with the location's line anywhere on the stack.
    pub line_total: u64,
    /// Samples whose innermost frame lies in the location's function.
    pub func_self: u64,
    /// Samples with the location's function anywhere on the stack.
    pub func_total: u64,
    /// Whether the location's function is known; when it is not (its
    /// source unreadable or changed, and not sampled), the function
    /// shares are the line's.
    pub func_known: bool,
}

/// Ranks abort sites by the sampled time at their location. The location
/// names the line where recording stopped, but the time an abort costs is
/// spent in all the code the trace would have covered, which lies in the
/// same function: so sites are ranked by the total samples in the function
/// containing the location (when the function map knows the file; by the
/// samples at the line itself otherwise), then at the line, then by the
/// number of aborts.
pub fn hot_aborts(profile: &Profile, funcs: &FunctionMap, sites: &[AbortSite]) -> Vec<HotSite> {
    let mut out: Vec<HotSite> =
        sites.iter().enumerate().map(|(i, _)| HotSite { site: i, ..Default::default() }).collect();
    let site_funcs: Vec<Option<&str>> =
        sites.iter().map(|s| funcs.range_of(&s.location).map(|_| funcs.function_of(&s.location))).collect();
    // Sites by location and by function, so each row costs one lookup per frame.
    let mut by_line: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut by_func: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, s) in sites.iter().enumerate() {
        by_line.entry(s.location.as_str()).or_default().push(i);
        if let Some(f) = site_funcs[i] {
            by_func.entry(f).or_default().push(i);
        }
    }
    let plugins = super::Plugins::default();
    let k = Keyer::new(funcs, &plugins);
    let mut seen_lines: Vec<&str> = Vec::new();
    let mut seen_funcs: Vec<&str> = Vec::new();
    for row in profile.named_rows() {
        let n = row.total();
        if n == 0 || row.stack.is_empty() {
            continue;
        }
        seen_lines.clear();
        seen_funcs.clear();
        // C time counts to the calling line, and to the C function's own
        // function rather than the caller's.
        let line_leaf = frames::line_leaf(&row.stack);
        let leaf = row.stack.len() - 1;
        for (j, &frame) in row.stack.iter().enumerate().rev() {
            let func = k.function_of(frame);
            if !seen_lines.contains(&frame) {
                seen_lines.push(frame);
                for &i in by_line.get(frame).into_iter().flatten() {
                    let h = &mut out[i];
                    h.line_total = h.line_total.saturating_add(n);
                    if j == line_leaf {
                        h.line_self = h.line_self.saturating_add(n);
                    }
                }
            }
            if !seen_funcs.contains(&func) {
                seen_funcs.push(func);
                for &i in by_func.get(func).into_iter().flatten() {
                    let h = &mut out[i];
                    h.func_total = h.func_total.saturating_add(n);
                    if j == leaf {
                        h.func_self = h.func_self.saturating_add(n);
                    }
                }
            }
        }
    }
    for h in &mut out {
        h.func_known = site_funcs[h.site].is_some();
        if !h.func_known {
            (h.func_self, h.func_total) = (h.line_self, h.line_total);
        }
    }
    let rank = |h: &HotSite| h.func_total;
    out.sort_by(|a, b| {
        rank(b)
            .cmp(&rank(a))
            .then_with(|| b.line_total.cmp(&a.line_total))
            .then_with(|| sites[b.site].count.cmp(&sites[a.site].count))
            .then_with(|| a.site.cmp(&b.site))
    });
    out
}

/// The hot-aborts view as text.
pub fn render_hot_aborts(profile: &Profile, funcs: &FunctionMap, sites: &[AbortSite], raw: bool) -> String {
    let total = profile.total();
    let ranked = hot_aborts(profile, funcs, sites);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {} samples, {} abort sites; ranked by sampled time in the function of the abort location (fn), then at its line",
        total,
        sites.len()
    );
    if !raw && total > 0 {
        let _ = writeln!(out, "# {}", error_note(total));
    }
    for note in &funcs.notes {
        let _ = writeln!(out, "# note: {}", note);
    }
    if ranked.iter().any(|h| !h.func_known) {
        let _ = writeln!(out, "# *: the location's function is not known; its line's shares are shown instead");
    }
    let _ = writeln!(
        out,
        "{:>8} {:>8} {:>8} {:>8} {:>6}  {:<9}  location: reason [zone]",
        "fn self", "fn total", "self", "total", "aborts", "severity"
    );
    for h in ranked {
        let s = &sites[h.site];
        let zone = if s.zone.is_empty() { String::new() } else { format!(" [{}]", s.zone) };
        let _ = writeln!(
            out,
            "{:>8} {:>8} {:>8} {:>8} {:>6}  {:<9}  {}: {}{}",
            fmt_share(h.func_self, total, raw) + if h.func_known { "" } else { "*" },
            fmt_share(h.func_total, total, raw) + if h.func_known { "" } else { "*" },
            fmt_share(h.line_self, total, raw),
            fmt_share(h.line_total, total, raw),
            s.count,
            s.severity,
            s.location,
            s.reason,
            zone
        );
    }
    out
}
