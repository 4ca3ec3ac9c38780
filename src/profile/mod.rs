//! A finished profile: rows of (zone path, stack, counts per VM state), with
//! frames already named and sanitised. Every output format and view is built
//! from this one structure.

pub mod collapsed;
pub mod frames;

use std::collections::HashMap;

use crate::record::sampler::FRAME_SEP;
use crate::record::stack_table::{Key, StackTable, VM_STATES};

/// Frame name given to samples that arrived once the stack table was full.
pub const OVERFLOW_FRAME: &str = "[overflow: stack table full]";

/// Sum of sample counts, saturating at `u64::MAX`: counts read from a file
/// can be as large as a u64 holds. Every count sum in the views and outputs
/// goes through this (or [`add_counts`]).
pub fn sum_counts(counts: impl IntoIterator<Item = u64>) -> u64 {
    counts.into_iter().fold(0u64, u64::saturating_add)
}

/// Adds `counts` into `acc`, state by state, saturating.
pub fn add_counts(acc: &mut [u64; 5], counts: [u64; 5]) {
    for (a, c) in acc.iter_mut().zip(counts) {
        *a = a.saturating_add(c);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Zone path components, root first.
    pub zones: Vec<String>,
    /// Stack frames, caller first.
    pub stack: Vec<String>,
    /// Samples per VM state, in [`VM_STATES`] order.
    pub counts: [u64; 5],
}

impl Row {
    /// Samples of the row (saturating, see [`sum_counts`]).
    pub fn total(&self) -> u64 {
        sum_counts(self.counts)
    }

    /// The VM state seen most often; ties go to the earlier of N I C G J.
    pub fn dominant_state(&self) -> u8 {
        let mut best = 0;
        for i in 1..5 {
            if self.counts[i] > self.counts[best] {
                best = i;
            }
        }
        VM_STATES[best]
    }
}

#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub rows: Vec<Row>,
}

/// Names `[builtin#N]` and `@0x...` frames.
pub struct FrameNamer<'a> {
    ffnames: &'a [Option<String>],
    c_cache: HashMap<usize, String>,
    resolve_c: bool,
}

impl<'a> FrameNamer<'a> {
    pub fn new(ffnames: &'a [Option<String>], resolve_c: bool) -> Self {
        FrameNamer { ffnames, c_cache: HashMap::new(), resolve_c }
    }

    pub fn name(&mut self, raw: &[u8]) -> String {
        if let Some(rest) = raw.strip_prefix(b"[builtin#") {
            if let Some(num) = rest.strip_suffix(b"]") {
                if let Some(id) = std::str::from_utf8(num).ok().and_then(|s| s.parse::<usize>().ok()) {
                    if let Some(Some(name)) = self.ffnames.get(id) {
                        return sanitize(name.as_bytes());
                    }
                }
            }
        }
        if let Some(hex) = raw.strip_prefix(b"@0x").or_else(|| raw.strip_prefix(b"@")) {
            if let Some(addr) =
                std::str::from_utf8(hex).ok().and_then(|s| usize::from_str_radix(s.trim_start_matches("0x"), 16).ok())
            {
                let resolve_c = self.resolve_c;
                let name = self.c_cache.entry(addr).or_insert_with(|| {
                    let sym = if resolve_c { crate::sys::c_symbol_name(addr) } else { None };
                    match sym {
                        Some(s) => format!("[C:{}]", sanitize(s.as_bytes())),
                        None => format!("[C:0x{:x}]", addr),
                    }
                });
                return name.clone();
            }
        }
        sanitize(raw)
    }
}

/// Makes a frame safe for collapsed-stack text: `;`, CR and LF become `_`,
/// invalid UTF-8 becomes U+FFFD, an empty name becomes `?`.
pub fn sanitize(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    let mut out: String = s.chars().map(|c| if c == ';' || c == '\r' || c == '\n' { '_' } else { c }).collect();
    if out.is_empty() {
        out.push('?');
    }
    out
}

impl Profile {
    /// Builds the profile from a sampler's table. Keys that name to the same
    /// frames are merged before the dominant VM state is chosen.
    pub fn from_table(table: &StackTable, namer: &mut FrameNamer) -> Profile {
        let mut merged: HashMap<(Vec<String>, Vec<String>), [u64; 5]> = HashMap::with_capacity(table.len());
        for (key, entry) in table.iter() {
            let path = Key::path(key);
            let zones: Vec<String> =
                if path.is_empty() { Vec::new() } else { path.split(|&b| b == b'/').map(sanitize).collect() };
            let raw_stack = Key::stack(key);
            let stack: Vec<String> = if raw_stack.is_empty() {
                Vec::new()
            } else {
                raw_stack.split(|&b| b == FRAME_SEP).map(|f| namer.name(f)).collect()
            };
            let slot = merged.entry((zones, stack)).or_insert([0; 5]);
            add_counts(slot, entry.counts.map(u64::from));
        }
        let mut rows: Vec<Row> =
            merged.into_iter().map(|((zones, stack), counts)| Row { zones, stack, counts }).collect();
        if table.overflow_total() > 0 {
            rows.push(Row { zones: Vec::new(), stack: vec![OVERFLOW_FRAME.to_string()], counts: table.overflow });
        }
        let mut p = Profile { rows };
        p.sort();
        p
    }

    /// Count descending, then zone path, then stack.
    pub fn sort(&mut self) {
        self.rows.sort_by(|a, b| {
            b.total().cmp(&a.total()).then_with(|| a.zones.cmp(&b.zones)).then_with(|| a.stack.cmp(&b.stack))
        });
    }

    /// Samples of the profile (saturating, see [`sum_counts`]).
    pub fn total(&self) -> u64 {
        sum_counts(self.rows.iter().map(Row::total))
    }

    /// The same samples with every frame renamed by `rename`; rows that end
    /// up equal are merged, and consecutive equal frames (lines of one
    /// function) become one.
    pub fn map_frames(&self, mut rename: impl FnMut(&str) -> String) -> Profile {
        let mut merged: HashMap<(Vec<String>, Vec<String>), [u64; 5]> = HashMap::with_capacity(self.rows.len());
        for row in &self.rows {
            let mut stack: Vec<String> = Vec::with_capacity(row.stack.len());
            for f in &row.stack {
                let name = rename(f);
                if stack.last() != Some(&name) {
                    stack.push(name);
                }
            }
            let slot = merged.entry((row.zones.clone(), stack)).or_insert([0; 5]);
            add_counts(slot, row.counts);
        }
        let rows = merged.into_iter().map(|((zones, stack), counts)| Row { zones, stack, counts }).collect();
        let mut p = Profile { rows };
        p.sort();
        p
    }

    /// Keeps the rows whose zone path is `prefix` or lies below it.
    pub fn filter_zone(&mut self, prefix: &[String]) {
        self.rows.retain(|r| r.zones.len() >= prefix.len() && r.zones[..prefix.len()] == *prefix);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_replaces_separators_and_bad_utf8() {
        assert_eq!(sanitize(b"a;b\nc\rd"), "a_b_c_d");
        assert_eq!(sanitize(b"caf\xc3\xa9"), "café");
        assert_eq!(sanitize(b"x\xffy"), "x\u{fffd}y");
        assert_eq!(sanitize(b""), "?");
    }

    #[test]
    fn builtins_are_named() {
        let names = vec![None, Some("assert".to_string()), Some("string.format".to_string())];
        let mut n = FrameNamer::new(&names, false);
        assert_eq!(n.name(b"[builtin#2]"), "string.format");
        assert_eq!(n.name(b"[builtin#99]"), "[builtin#99]");
        assert_eq!(n.name(b"@0x10"), "[C:0x10]");
        assert_eq!(n.name(b"a.lua:3"), "a.lua:3");
    }

    #[test]
    fn map_frames_merges_rows_and_repeated_frames() {
        let p = Profile {
            rows: vec![
                Row { zones: vec![], stack: vec!["a:1".into(), "a:2".into(), "b:7".into()], counts: [3, 0, 0, 0, 0] },
                Row { zones: vec![], stack: vec!["a:1".into(), "b:8".into()], counts: [0, 2, 0, 0, 0] },
            ],
        };
        let m = p.map_frames(|f| f.split(':').next().unwrap().to_string());
        assert_eq!(m.rows.len(), 1);
        assert_eq!(m.rows[0].stack, vec!["a", "b"]);
        assert_eq!(m.rows[0].counts, [3, 2, 0, 0, 0]);
    }

    #[test]
    fn totals_saturate_instead_of_overflowing() {
        // Found by the collapsed_parse fuzz target: two rows of u64::MAX.
        let p = crate::profile::collapsed::parse("a 18446744073709551615\nb 18446744073709551615\n").unwrap();
        assert_eq!(p.total(), u64::MAX);
        // Rows that merge add their counts state by state, saturating too.
        let m = p.map_frames(|_| "same.lua:1".to_string());
        assert_eq!(m.rows.len(), 1);
        assert_eq!(m.rows[0].counts, [u64::MAX, 0, 0, 0, 0]);
        assert_eq!(sum_counts([u64::MAX, 1, 2]), u64::MAX);
    }

    #[test]
    fn dominant_state_ties_prefer_earlier() {
        let r = Row { zones: vec![], stack: vec![], counts: [1, 3, 3, 0, 0] };
        assert_eq!(r.dominant_state(), b'I');
        let r = Row { zones: vec![], stack: vec![], counts: [0, 0, 0, 0, 0] };
        assert_eq!(r.dominant_state(), b'N');
    }
}
