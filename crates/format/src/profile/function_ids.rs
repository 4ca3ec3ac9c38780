//! The function map of a profile, checked against what the VM recorded.
//!
//! A session records the function of each frame while sampling (see
//! `record::identity`); the map the Lua side reads from the source files
//! names functions better (`love.update` rather than the caller's `update`)
//! but only while the sources are the ones that ran. So a source name is
//! used for a function only when the file still has a function with the
//! same span at the same line; otherwise the VM's name is, or, when the VM
//! knew none, the span (`file:12-40`). Every such case is told in a note.
//!
//! Profiles read back from collapsed text have no recorded functions: there
//! the sources are checked against the frames (a line past the end of the
//! file, a function span the file lacks), and a file that does not match is
//! not used at all, so its frames stay lines rather than get wrong names.

use std::collections::{BTreeMap, HashMap};

use super::frames::FrameIdentity;
use crate::profile::frames::{file_line, file_proto, file_span, FuncRange, FunctionMap, KnownFrame};

/// Functions of one file as the VM recorded them: span -> (name, chunk).
type RecordedFunctions<'a> = BTreeMap<(u32, u32), (Option<&'a str>, &'a str)>;

/// File part of a frame's text (`[string]` for `[string]:12`).
fn frame_file(frame: &str) -> Option<&str> {
    let i = frame.rfind(':')?;
    (i > 0).then(|| &frame[..i])
}

/// Whether `frame` is a function of bytecode without lines (`file:@0xADDR`)
/// that no source file placed: its lines, 0-0, are the main chunk's.
fn unplaced(frame: &str, id: &FrameIdentity) -> bool {
    id.first == 0 && file_proto(frame).is_some()
}

impl FunctionMap {
    /// Uses the functions recorded while sampling, by frame text.
    pub fn apply_identities(&mut self, ids: &HashMap<String, FrameIdentity>) {
        // file -> (first, last) -> (name, source)
        let mut by_file: BTreeMap<&str, RecordedFunctions> = BTreeMap::new();
        for (frame, id) in ids {
            let Some(file) = frame_file(frame) else { continue };
            if id.ambiguous || unplaced(frame, id) {
                continue;
            }
            let e = by_file.entry(file).or_default().entry((id.first, id.last)).or_insert((None, &id.source));
            if e.0.is_none() {
                e.0 = id.name.as_deref();
            }
        }
        let (mut changed, mut unnamed) = (Vec::new(), 0usize);
        let mut labels: HashMap<(&str, u32, u32), String> = HashMap::new();
        for (&file, funcs) in &by_file {
            let source = self.file_functions(file).map(|(r, m)| (r.to_vec(), m.map(str::to_string)));
            let matches = |first: u32, last: u32| {
                first == 0 || source.as_ref().is_some_and(|(r, _)| r.iter().any(|f| f.first == first && f.last == last))
            };
            let stale = source.is_some() && funcs.keys().any(|&(a, b)| !matches(a, b));
            let main = source.as_ref().and_then(|(_, m)| m.clone()).unwrap_or_else(|| format!("(main chunk) {}", file));
            let mut ranges = Vec::new();
            for (&(first, last), &(name, chunk)) in funcs {
                let shown = if file.starts_with('[') { chunk } else { file };
                let label = if first == 0 {
                    main.clone()
                } else if let (false, Some((r, _))) = (stale, &source) {
                    r.iter().find(|f| f.first == first && f.last == last).map(|f| f.label.clone()).unwrap_or_default()
                } else if let Some(name) = name {
                    format!("{} ({}:{})", name, shown, first)
                } else {
                    unnamed += 1;
                    format!("{}:{}-{}", shown, first, last)
                };
                if first > 0 {
                    ranges.push(FuncRange { first, last, label: label.clone() });
                }
                labels.insert((file, first, last), label);
            }
            if stale {
                changed.push(file.to_string());
            }
            if stale || source.is_none() {
                self.add_file(file, ranges, main);
                if !funcs.keys().any(|&(a, _)| a == 0) {
                    // No main chunk recorded: a line outside every recorded
                    // function is not known to be the main chunk's.
                    self.forget_main(file);
                }
            }
        }
        let mut ambiguous = 0usize;
        for (frame, id) in ids {
            let Some(file) = frame_file(frame) else { continue };
            if let Some(label) = &id.label {
                // As the profile was named when it was written.
                let range = (id.first > 0).then(|| (file.to_string(), id.first, id.last));
                self.frames.insert(frame.clone(), KnownFrame { label: label.clone(), range });
                continue;
            }
            if unplaced(frame, id) {
                // Named by its path alone, or by its prototype: a row of
                // its own, not the chunk's.
                let shown = if file.starts_with('[') { id.source.as_str() } else { file };
                let label = id.name.as_ref().map_or_else(|| frame.clone(), |name| format!("{} ({})", name, shown));
                self.frames.insert(frame.clone(), KnownFrame { label, range: None });
                continue;
            }
            let known = match labels.get(&(file, id.first, id.last)) {
                Some(label) if !id.ambiguous => KnownFrame {
                    label: label.clone(),
                    range: (id.first > 0).then(|| (file.to_string(), id.first, id.last)),
                },
                _ => {
                    ambiguous += 1;
                    KnownFrame { label: frame.clone(), range: None }
                }
            };
            self.frames.insert(frame.clone(), known);
        }
        self.unreadable.retain(|(f, _)| !by_file.contains_key(f.as_str()));
        for file in changed {
            self.changed_files.push(file.clone());
            self.notes.push(format!(
                "{} has changed since it was profiled: its functions are named as the running VM knew them",
                file
            ));
        }
        if unnamed > 0 {
            self.notes.push(format!(
                "{} function{} with no name the VM could tell shown as file:first-last",
                unnamed,
                if unnamed == 1 { "" } else { "s" }
            ));
        }
        if ambiguous > 0 {
            self.notes.push(format!(
                "{} line{} ran in two different functions (a chunk loaded again after its source changed): \
                 shown as lines",
                ambiguous,
                if ambiguous == 1 { "" } else { "s" }
            ));
        }
    }

    /// Checks the sources read for the map against the frames of a profile
    /// with no recorded functions: a file whose lines (past its end, or
    /// without bytecode) or function spans do not fit the frames is dropped (its frames stay lines), and noted;
    /// so is a file that could not be read. A main chunk ends on the line
    /// after the last (LuaJIT counts the end of the file), hence the `+ 1`.
    pub fn check_sources<'a>(&mut self, frames: impl Iterator<Item = &'a str>) {
        let mut stale: BTreeMap<String, ()> = BTreeMap::new();
        for frame in frames {
            if self.frames.contains_key(frame) {
                continue;
            }
            let fits = if let Some((file, first, last)) = file_span(frame) {
                match self.file_functions(file) {
                    Some((ranges, _)) => {
                        first == 0 && self.line_counts.get(file).map_or(true, |&n| last <= n + 1)
                            || ranges.iter().any(|r| r.first == first && r.last == last)
                    }
                    None => continue,
                }
            } else if let Some((file, line)) = file_line(frame) {
                let Some((ranges, _)) = self.file_functions(file) else { continue };
                // A sample at a function's entry (before its first
                // instruction, or read where a trace enters it) is on the
                // line it is defined on, which holds no bytecode of its own.
                let entry = ranges.iter().any(|r| r.first == line);
                self.line_counts.get(file).map_or(true, |&n| line <= n + 1)
                    && (entry || self.code_lines.get(file).map_or(true, |c| c.binary_search(&line).is_ok()))
            } else {
                continue;
            };
            if !fits {
                stale.insert(frame_file(frame).unwrap_or(frame).to_string(), ());
            }
        }
        for file in stale.keys() {
            self.remove_file(file);
            self.changed_files.push(file.clone());
            self.notes.push(format!(
                "{} does not match the profile (changed since it was profiled?): its lines are not grouped into functions",
                file
            ));
        }
        let mut unreadable = std::mem::take(&mut self.unreadable);
        unreadable.sort();
        for (file, why) in unreadable {
            self.notes.push(format!("{}: {}: its lines are not grouped into functions", file, why));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(first: u32, last: u32, name: Option<&str>) -> FrameIdentity {
        FrameIdentity {
            first,
            last,
            name: name.map(str::to_string),
            source: "g.lua".into(),
            ambiguous: false,
            label: None,
        }
    }

    fn source_map() -> FunctionMap {
        let mut m = FunctionMap::default();
        m.add_file(
            "g.lua",
            vec![
                FuncRange { first: 3, last: 9, label: "love.update (g.lua:3)".into() },
                FuncRange { first: 11, last: 20, label: "draw (g.lua:11)".into() },
            ],
            "(main chunk) g.lua".into(),
        );
        m
    }

    #[test]
    fn source_names_are_used_while_the_source_matches() {
        let mut m = source_map();
        let ids = HashMap::from([("g.lua:5".to_string(), id(3, 9, Some("update")))]);
        m.apply_identities(&ids);
        assert_eq!(m.function_of("g.lua:5"), "love.update (g.lua:3)");
        assert_eq!(m.function_of("g.lua:12"), "draw (g.lua:11)");
        assert!(m.notes.is_empty(), "{:?}", m.notes);
    }

    #[test]
    fn functions_without_lines_are_placed_by_their_source_or_kept_apart() {
        let mut m = source_map();
        let ids = HashMap::from([
            // Placed in the source by a walk: named as the source names it.
            ("g.lua:@0x10".to_string(), id(3, 9, Some("update"))),
            // Not placed: by its path, or by its prototype, never the chunk.
            ("g.lua:@0x20".to_string(), id(0, 0, Some("g.helper"))),
            ("g.lua:@0x30".to_string(), id(0, 0, None)),
            ("g.lua:0-30".to_string(), id(0, 30, None)),
        ]);
        m.apply_identities(&ids);
        assert_eq!(m.function_of("g.lua:@0x10"), "love.update (g.lua:3)");
        assert_eq!(m.function_of("g.lua:@0x20"), "g.helper (g.lua)");
        assert_eq!(m.function_of("g.lua:@0x30"), "g.lua:@0x30");
        assert_eq!(m.function_of("g.lua:0-30"), "(main chunk) g.lua");
        assert_eq!(m.range_of("g.lua:@0x10"), Some(("g.lua", 3, 9)));
        assert_eq!(m.range_of("g.lua:@0x20"), None);
        assert!(m.notes.is_empty(), "{:?}", m.notes);
    }

    #[test]
    fn a_changed_source_gives_way_to_the_vm() {
        let mut m = source_map();
        let ids = HashMap::from([
            ("g.lua:5".to_string(), id(2, 9, Some("update"))),
            ("g.lua:14".to_string(), id(12, 30, None)),
        ]);
        m.apply_identities(&ids);
        assert_eq!(m.function_of("g.lua:5"), "update (g.lua:2)");
        assert_eq!(m.function_of("g.lua:14"), "g.lua:12-30");
        assert_eq!(m.function_of("g.lua:13"), "g.lua:12-30", "unsampled lines use the VM's spans too");
        assert_eq!(m.range_of("g.lua:14"), Some(("g.lua", 12, 30)));
        assert_eq!(m.notes.len(), 2, "{:?}", m.notes);
        assert!(m.notes[0].starts_with("g.lua has changed"));
    }

    #[test]
    fn unreadable_and_string_chunks_get_vm_names() {
        let mut m = FunctionMap::default();
        m.unreadable.push(("g.lua".into(), "cannot read".into()));
        let s = FrameIdentity { source: "[string \"x\"]".into(), ..id(1, 4, Some("f")) };
        let ids = HashMap::from([
            ("g.lua:5".to_string(), id(3, 9, Some("update"))),
            ("[string]:2".to_string(), s),
            ("g.lua:30".to_string(), FrameIdentity { ambiguous: true, ..id(25, 40, None) }),
        ]);
        m.apply_identities(&ids);
        m.check_sources(["g.lua:5", "[string]:2"].into_iter());
        assert_eq!(m.function_of("g.lua:5"), "update (g.lua:3)");
        assert_eq!(m.function_of("[string]:2"), "f ([string \"x\"]:1)");
        assert_eq!(m.function_of("g.lua:50"), "g.lua:50", "no main chunk recorded: an unrecorded line stays a line");
        assert_eq!(m.function_of("g.lua:30"), "g.lua:30");
        assert_eq!(m.range_of("g.lua:30"), None);
        assert_eq!(m.notes.len(), 1, "the file is known from the VM: {:?}", m.notes);
    }

    #[test]
    fn sources_that_do_not_fit_the_frames_are_dropped() {
        let mut m = source_map();
        m.line_counts.insert("g.lua".into(), 20);
        m.check_sources(["g.lua:5", "g.lua:11-20"].into_iter());
        assert!(m.notes.is_empty());
        assert_eq!(m.function_of("g.lua:5"), "love.update (g.lua:3)");
        m.check_sources(["g.lua:21", "g.lua:0-21"].into_iter());
        assert!(m.notes.is_empty(), "the end of the file is a line of the main chunk");
        m.check_sources(["g.lua:25"].into_iter());
        assert_eq!(m.function_of("g.lua:5"), "g.lua:5");
        assert_eq!(m.notes.len(), 1);
        let mut m = source_map();
        m.code_lines.insert("g.lua".into(), vec![4, 5, 12]);
        m.check_sources(["g.lua:5", "g.lua:12"].into_iter());
        assert!(m.notes.is_empty());
        m.check_sources(["g.lua:3"].into_iter());
        assert!(m.notes.is_empty(), "a function's first line fits: a sample taken at its entry");
        m.check_sources(["g.lua:6"].into_iter());
        assert_eq!(m.function_of("g.lua:5"), "g.lua:5", "a sampled line with no code: the file changed");
        let mut m = source_map();
        m.check_sources(["g.lua:4-9"].into_iter());
        assert_eq!(m.function_of("g.lua:4-9"), "g.lua:4-9");
        m.unreadable.push(("h.lua".into(), "cannot read h.lua".into()));
        m.check_sources(std::iter::empty());
        assert!(m.notes[1].contains("cannot read h.lua"), "{:?}", m.notes);
        assert_eq!(m.notes.len(), 2);
    }
}
