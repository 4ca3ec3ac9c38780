//! What a session's owner keeps beside the recording, with no Lua in it:
//! the names of the recorded functions (the Lua paths a walk found), the
//! call-site lines the Lua resolver corrected, the profile of a stopped
//! session (built once), the marks `delta` hands out samples from, and the
//! timeline's frame marks and events. The Lua side (`lua_api`) walks the
//! VM and calls the resolver, and hands the results in here.

use std::collections::{HashMap, HashSet};

use tecs_profile_format::profile::frames::{file_proto, FrameIdentity};
use tecs_profile_format::profile::stack_table::{CountsMark, Key, StackTable, FRAME_SEP};
use tecs_profile_format::profile::{c_address, collapsed, Profile};

use super::autosave::Names;
use super::timed::SessionView;
use super::Session;
use crate::record::timeline::{Event, Events, FrameMarks, FrameSpan};
use crate::sys;

/// A Lua function among the paths: its chunk's short name and the lines
/// it spans.
pub type SpanKey = (String, u32, u32);

/// The key of a Lua function defined in `source` from `first` to `last`.
pub fn span_key(source: &str, first: u32, last: u32) -> SpanKey {
    (source.to_string(), first, last.max(first))
}

/// The Lua paths of the recorded functions, and which functions a walk
/// looked for.
#[derive(Default)]
pub struct FunctionPaths {
    /// C function addresses -> Lua paths, None where a walk found none.
    pub c_paths: HashMap<usize, Option<String>>,
    /// Addresses several C functions share, which no path names.
    c_shared: HashSet<usize>,
    /// Lua functions -> Lua paths, None where a walk found none.
    lua_paths: HashMap<SpanKey, Option<String>>,
    /// Functions of bytecode without lines (frames `file:@0xADDR`), by
    /// prototype address -> what a walk found, None where it found none.
    stripped: HashMap<u64, Option<StrippedFunction>>,
}

/// What a walk found of a function of bytecode without lines: the path
/// that reaches it, if one does (else it was an upvalue of one), and the
/// lines its source file defines it on (0-0 where that file was not read).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrippedFunction {
    pub path: Option<String>,
    pub first: u32,
    pub last: u32,
}

impl FunctionPaths {
    /// The C functions of `table`'s stacks (frames `@0x...`) that no walk
    /// looked for.
    pub fn c_addresses_not_looked_for(&self, table: &StackTable) -> Vec<usize> {
        let mut found = HashSet::new();
        for (key, _) in table.iter() {
            let stack = Key::stack(key);
            for at in memchr::memchr_iter(b'@', stack) {
                if at > 0 && stack[at - 1] != FRAME_SEP {
                    continue;
                }
                let end = memchr::memchr(FRAME_SEP, &stack[at..]).map_or(stack.len(), |n| at + n);
                if let Some(addr) = c_address(&stack[at..end]) {
                    if !self.c_paths.contains_key(&addr) {
                        found.insert(addr);
                    }
                }
            }
        }
        found.into_iter().collect()
    }

    /// The Lua functions of `ids` (the recorded ones) that no walk looked
    /// for, sorted, each once.
    pub fn lua_functions_not_looked_for(&self, ids: &HashMap<String, FrameIdentity>) -> Vec<SpanKey> {
        let mut keys: Vec<_> = ids
            .values()
            .map(|id| span_key(&id.source, id.first, id.last))
            .filter(|k| !self.lua_paths.contains_key(k))
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// The prototypes of the functions of bytecode without lines among
    /// `ids` (frames `file:@0xADDR`) that no walk looked for, sorted.
    pub fn stripped_not_looked_for(&self, ids: &HashMap<String, FrameIdentity>) -> Vec<u64> {
        let mut protos: Vec<u64> = ids
            .keys()
            .filter_map(|text| file_proto(text).map(|(_, pt)| pt))
            .filter(|pt| !self.stripped.contains_key(pt))
            .collect();
        protos.sort_unstable();
        protos.dedup();
        protos
    }

    /// A walk looked for these functions: those it did not name stay
    /// unnamed until [`FunctionPaths::forget_unnamed`].
    pub fn looked_for(&mut self, c: Vec<usize>, lua: Vec<SpanKey>, stripped: Vec<u64>) {
        for addr in c {
            self.c_paths.entry(addr).or_insert(None);
        }
        for key in lua {
            self.lua_paths.entry(key).or_insert(None);
        }
        for pt in stripped {
            self.stripped.entry(pt).or_insert(None);
        }
    }

    /// Forgets which functions were looked for and not found: a module
    /// loaded since may reach them, and a later walk looks once more.
    pub fn forget_unnamed(&mut self) {
        self.c_paths.retain(|_, path| path.is_some());
        self.lua_paths.retain(|_, path| path.is_some());
        self.stripped.retain(|_, found| found.is_some());
    }

    /// Records what a walk found of functions of bytecode without lines,
    /// by prototype address; the first found of a prototype wins.
    pub fn name_stripped(&mut self, list: impl IntoIterator<Item = (u64, StrippedFunction)>) {
        for (pt, found) in list {
            let named = self.stripped.entry(pt).or_insert(None);
            if named.is_none() {
                *named = Some(found);
            }
        }
    }

    /// Records the Lua paths of C functions, one walk's list in its order:
    /// `(address, function identity, path)`, the first path of a function
    /// wins. Returns whether a name changed.
    ///
    /// Functions made by one C function (mlua's, sol's) share its address:
    /// an address two listed functions share names neither, unless both
    /// are the same method of several types (LÖVE's `Data:getString`,
    /// registered again for each kind of Data): the first listed, the type
    /// with the fewest methods, names it.
    pub fn name_c_functions(&mut self, list: impl IntoIterator<Item = (usize, usize, String)>) -> bool {
        let mut added = false;
        let mut seen: HashMap<usize, (usize, String)> = HashMap::new();
        let method = |p: &str| p.rsplit_once(':').map(|(_, m)| m.to_string());
        for (addr, function, path) in list {
            let (first_fn, first_path) = seen.entry(addr).or_insert_with(|| (function, path.clone()));
            let same_method = method(first_path).is_some() && method(first_path) == method(&path);
            if *first_fn != function && !same_method {
                self.c_shared.insert(addr);
            }
            let named = self.c_paths.entry(addr).or_insert(None);
            if self.c_shared.contains(&addr) {
                added |= named.take().is_some();
            } else if named.is_none() {
                *named = Some(path);
                added = true;
            }
        }
        added
    }

    /// Records the Lua paths of Lua functions: `(path, short_src,
    /// linedefined, lastlinedefined)`, the first path wins.
    pub fn name_lua_functions(&mut self, list: impl IntoIterator<Item = (String, String, u32, u32)>) {
        for (path, source, first, last) in list {
            let named = self.lua_paths.entry(span_key(&source, first, last)).or_insert(None);
            if named.is_none() {
                *named = Some(path);
            }
        }
    }

    /// Names the recorded functions `ids` by their Lua paths where a walk
    /// found one.
    ///
    /// A function of bytecode without lines takes the lines its source
    /// file defines it on, where a walk found them, so that it is named
    /// and placed as a function compiled from that file would be.
    pub fn name_identities(&self, ids: &mut HashMap<String, FrameIdentity>) {
        if self.lua_paths.is_empty() && self.stripped.is_empty() {
            return;
        }
        for (text, id) in ids.iter_mut() {
            if let Some(Some(path)) = self.lua_paths.get(&span_key(&id.source, id.first, id.last)) {
                id.name = Some(path.clone());
            }
            let Some((_, pt)) = file_proto(text) else { continue };
            if let Some(Some(found)) = self.stripped.get(&pt) {
                (id.first, id.last) = (found.first, found.last.max(found.first));
                if let Some(path) = &found.path {
                    id.name = Some(path.clone());
                }
            }
        }
    }
}

/// The call-site lines of C-state leaves: which leaves the resolver was
/// asked about, and the lines it corrected.
#[derive(Default)]
pub struct CallSiteFixes {
    checked: HashSet<Vec<u8>>,
    /// State letter and leaf frame -> the corrected leaf frame.
    pub lines: HashMap<Vec<u8>, Vec<u8>>,
}

impl CallSiteFixes {
    /// The call sites of `recorded` (the sampler's, with the slot of each
    /// one's function) not asked about yet.
    pub fn pending(&self, recorded: &HashMap<Vec<u8>, i32>) -> Vec<(Vec<u8>, i32)> {
        recorded.iter().filter(|(k, _)| !self.checked.contains(*k)).map(|(k, &v)| (k.clone(), v)).collect()
    }

    /// Marks `site` (state letter, then the leaf `file:line`) asked about,
    /// and gives its state letter and line: what the resolver is asked
    /// with; None when the leaf has no line.
    pub fn check(&mut self, site: &[u8]) -> Option<(char, i64)> {
        self.checked.insert(site.to_vec());
        let (_, line) = leaf_line(site)?;
        Some((site[0] as char, line))
    }

    /// The resolver moved `site`'s line to `fixed_line`; returns whether
    /// that changes its leaf (a line that is not positive, or the same,
    /// does not).
    pub fn fix(&mut self, site: &[u8], fixed_line: i64) -> bool {
        let Some((colon, line)) = leaf_line(site) else { return false };
        if fixed_line <= 0 || fixed_line == line {
            return false;
        }
        let mut fixed = site[1..=colon].to_vec();
        fixed.extend_from_slice(fixed_line.to_string().as_bytes());
        self.lines.insert(site.to_vec(), fixed);
        true
    }
}

/// Where the line of a call site's leaf begins (the index of its colon in
/// `site`), and the line.
fn leaf_line(site: &[u8]) -> Option<(usize, i64)> {
    let colon = site.get(1..)?.iter().rposition(|&b| b == b':')? + 1;
    let line = std::str::from_utf8(&site[colon + 1..]).ok()?.parse::<i64>().ok()?;
    Some((colon, line))
}

/// Where `delta` last handed out samples: the stack table's counts, and
/// (allocation sessions) the objects estimated per entry.
#[derive(Default)]
pub struct DeltaMarks {
    pub counts: CountsMark,
    pub objects: Vec<[f64; 5]>,
}

/// Everything a session's owner keeps beside the [`Session`] itself.
pub struct SessionState {
    /// Builtin names by fast function id.
    pub ffnames: Vec<Option<String>>,
    /// Whether C functions no path names are named by their symbols.
    pub resolve_c: bool,
    pub paths: FunctionPaths,
    pub call_sites: CallSiteFixes,
    /// The profile of the stopped session, built once for every output.
    pub finished: Option<Profile>,
    pub delta: DeltaMarks,
    /// Where frames begin (`profile.frame()`), on the timeline's clock.
    pub frame_marks: FrameMarks,
    /// Events on the timeline (trace aborts), on its clock.
    pub timeline_events: Events,
}

impl SessionState {
    /// The state of a session started at `start_ns` (monotonic), whose
    /// frames shorter than `slow_frame_ns` give their samples back.
    pub fn new(ffnames: Vec<Option<String>>, resolve_c: bool, start_ns: u64, slow_frame_ns: Option<u64>) -> Self {
        SessionState {
            ffnames,
            resolve_c,
            paths: FunctionPaths::default(),
            call_sites: CallSiteFixes::default(),
            finished: None,
            delta: DeltaMarks::default(),
            frame_marks: FrameMarks::new(start_ns).keeping_slow_frames(slow_frame_ns),
            timeline_events: Events::default(),
        }
    }

    /// `session` as the timeline's readers take it, with what names and
    /// marks it.
    pub fn view<'a>(&'a self, session: &'a Session) -> SessionView<'a> {
        SessionView {
            session,
            ffnames: &self.ffnames,
            resolve_c: self.resolve_c,
            c_paths: &self.paths.c_paths,
            call_site_lines: &self.call_sites.lines,
            frame_marks: &self.frame_marks,
            timeline_events: &self.timeline_events,
        }
    }

    /// A frame begins now (`profile.frame()`) in `session`'s timeline.
    pub fn mark_frame(&mut self, session: &Session) {
        let marks = &mut self.frame_marks;
        session.sampler().with(|s| marks.mark(sys::monotonic_ns(), sys::thread_cpu_ns(), &mut s.timeline));
    }

    /// The session stopped: the last frame ends now.
    pub fn end_frames(&mut self, session: &Session) {
        let marks = &mut self.frame_marks;
        session.sampler().with(|s| marks.finish(sys::monotonic_ns(), sys::thread_cpu_ns(), &mut s.timeline));
    }

    /// The kept frames of `session`'s timeline, the last to now while it
    /// runs.
    pub fn frame_spans(&self, session: &Session) -> Vec<FrameSpan> {
        session.sampler().with(|s| self.frame_marks.spans(&s.timeline, sys::monotonic_ns()))
    }

    /// The profiler's own work took `seconds` in the frame that runs (the
    /// session was paused meanwhile): left out of it. A time that is not
    /// positive and finite is ignored.
    pub fn own_work(&mut self, seconds: f64) {
        if seconds > 0.0 && seconds.is_finite() {
            self.frame_marks.exclude((seconds * 1e9) as u64);
        }
    }

    /// An event at `t_ns` (a trace abort), its details in key order.
    pub fn add_event(&mut self, t_ns: u64, name: String, mut args: Vec<(String, String)>) {
        args.sort();
        self.timeline_events.add(Event { t_ns, name, args });
    }

    /// Names changed: a kept profile is built again.
    pub fn names_changed(&mut self) {
        self.finished = None;
    }

    /// What the autosave thread names frames with: what is known now.
    pub fn autosave_names(&self) -> Names {
        Names { ffnames: self.ffnames.clone(), c_paths: self.paths.c_paths.clone(), resolve_c: self.resolve_c }
    }

    /// The profile of `session`'s samples so far. Once it has stopped the
    /// profile is built once and kept: a command that writes several
    /// outputs and reports reads the same profile.
    pub fn profile(&mut self, session: &Session) -> Profile {
        if let Some(p) = &self.finished {
            return p.clone();
        }
        let p = self.view(session).profile();
        if !session.running() {
            self.finished = Some(p.clone());
        }
        p
    }

    /// The collapsed text (valid UTF-8: every name is), written from the
    /// kept profile once the session has stopped, without copying it.
    pub fn collapsed_text(&mut self, session: &Session) -> Vec<u8> {
        if session.running() {
            return collapsed::write_bytes(&self.view(session).profile());
        }
        if self.finished.is_none() {
            self.finished = Some(self.view(session).profile());
        }
        collapsed::write_bytes(self.finished.as_ref().expect("kept just above"))
    }

    /// The profile of the samples recorded since the previous call (since
    /// the start for the first), without stopping (see
    /// `SessionView::profile_since`).
    pub fn delta_profile(&mut self, session: &Session) -> Profile {
        let (p, mark) = self.view(session).profile_since(&self.delta.counts);
        self.delta.counts = mark;
        p
    }
}

/// What a view of a running session shows of its frames: the last
/// `last` of `spans` in order, and the `slowest` slowest, the longest
/// first (the earlier of two equal).
pub fn frames_window(spans: &[FrameSpan], last: usize, slowest: usize) -> (&[FrameSpan], Vec<&FrameSpan>) {
    let recent = &spans[spans.len().saturating_sub(last)..];
    let mut order: Vec<&FrameSpan> = spans.iter().collect();
    order.sort_by(|a, b| b.ns().cmp(&a.ns()).then(a.index.cmp(&b.index)));
    order.truncate(slowest);
    (recent, order)
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
