//! Source annotated with per-line shares, like `luajit -jp=a` / `-jp=A`.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::*;

/// Per-line counts of one file: (self, total).
type LineCounts = HashMap<u32, (u64, u64)>;

/// Source annotated with each line's self and total share. `read` supplies a
/// file's text (the file system, or a test double in unit tests).
pub fn annotate(
    profile: &Profile,
    opts: &ReportOptions,
    mode: Annotate,
    read: &mut dyn FnMut(&str) -> std::io::Result<String>,
) -> String {
    let total = profile.total();
    let mut files: HashMap<&str, LineCounts> = HashMap::new();
    for row in profile.named_rows() {
        let n = row.total();
        let mut seen: Vec<&str> = Vec::new();
        for (i, f) in row.stack.iter().enumerate().rev() {
            let Some((file, line)) = frames::file_line(f) else { continue };
            let is_leaf = i + 1 == row.stack.len();
            let c = files.entry(file).or_default().entry(line).or_default();
            if is_leaf {
                c.0 = c.0.saturating_add(n);
            }
            if !seen.contains(f) {
                c.1 = c.1.saturating_add(n);
                seen.push(f);
            }
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {} samples; annotated source; lines below {}% self and total left blank",
        total, opts.min_percent
    );
    if total == 0 {
        out.push_str("[no samples]\n");
        return out;
    }
    if !opts.raw {
        let _ = writeln!(out, "# {}", error_note(total));
    }
    let shown = |c: (u64, u64)| pct(c.0, total) >= opts.min_percent || pct(c.1, total) >= opts.min_percent;
    let mut order: Vec<(&str, u64, u64)> = files
        .iter()
        .filter(|(_, lines)| lines.values().any(|&c| shown(c)))
        .map(|(f, lines)| (*f, sum_counts(lines.values().map(|c| c.0)), lines.values().map(|c| c.1).max().unwrap_or(0)))
        .collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.2.cmp(&a.2)).then_with(|| a.0.cmp(b.0)));
    for (file, self_sum, _) in order {
        let lines = &files[file];
        let _ = writeln!(out, "\n====== {} ====== (self {})", file, fmt_share(self_sum, total, opts.raw));
        let text = match read(file) {
            Ok(t) => t,
            Err(e) => {
                let _ = writeln!(out, "[cannot read {}: {}]", file, e);
                continue;
            }
        };
        if text.as_bytes().first() == Some(&0x1b) {
            out.push_str("[bytecode file: cannot annotate]\n");
            continue;
        }
        let _ = writeln!(out, "{:>7} {:>7} | {:>5} | source", "self", "total", "line");
        let src: Vec<&str> = text.lines().collect();
        let hot: Vec<usize> = (1..=src.len()).filter(|n| lines.get(&(*n as u32)).is_some_and(|&c| shown(c))).collect();
        let visible = |n: usize| match mode {
            Annotate::Full => true,
            Annotate::Excerpts(ctx) => hot.iter().any(|&h| h.abs_diff(n) <= ctx),
        };
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
                    let _ = writeln!(
                        out,
                        "{:>7} {:>7} | {:>5} | {}",
                        fmt_share(c.0, total, opts.raw),
                        fmt_share(c.1, total, opts.raw),
                        n,
                        code
                    );
                }
                _ => {
                    let _ = writeln!(out, "{:>7} {:>7} | {:>5} | {}", "", "", n, code);
                }
            }
        }
    }
    out
}
