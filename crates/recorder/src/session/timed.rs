//! A session's profiles, and its timeline as the frame views and the
//! timeline formats take it: the profile of the samples so far or since a
//! mark, the profile of a window of time, the samples in order with their
//! stacks named as the profile names them, the frames, and an attached
//! allocation session's samples. No Lua: the Lua side (`session:stop`,
//! `frames`, `timedProfile`, ...) hands in what the session knows
//! ([`SessionView`]).

use std::collections::HashMap;

use tecs_profile_format::output::timed::{
    TimedAllocation, TimedEvent, TimedFrame, TimedPoint, TimedProfile, TimedStack,
};
use tecs_profile_format::profile::stack_table::{CountsMark, StackTable};
use tecs_profile_format::profile::{FrameNamer, Profile, VM_STATES};

use super::Session;
use crate::record::timeline::{Events, FrameMarks, OVERFLOW_ENTRY};

/// A running or stopped session with what names its frames and marks its
/// timeline, borrowed from its owner.
pub struct SessionView<'a> {
    pub session: &'a Session,
    /// Builtin names by fast function id.
    pub ffnames: &'a [Option<String>],
    /// Whether C functions no path names are named by their symbols.
    pub resolve_c: bool,
    /// C function addresses -> Lua paths, None where a walk found none.
    pub c_paths: &'a HashMap<usize, Option<String>>,
    /// State letter and leaf frame -> the corrected leaf frame.
    pub call_site_lines: &'a HashMap<Vec<u8>, Vec<u8>>,
    /// Where frames begin, on the timeline's clock.
    pub frame_marks: &'a FrameMarks,
    /// Events on the timeline (trace aborts).
    pub timeline_events: &'a Events,
}

impl<'a> SessionView<'a> {
    /// The one namer of the session's frames: builtins by their names, C
    /// functions by their Lua paths, else by their symbols.
    pub fn namer(&self) -> FrameNamer<'a> {
        FrameNamer::new(self.ffnames, self.resolve_c).with_c_paths(self.c_paths)
    }

    /// Runs `f` on the stack table with the call-site correction applied.
    pub fn with_table<R>(&self, f: impl FnOnce(&StackTable) -> R) -> R {
        self.session.sampler().with(|s| {
            if self.call_site_lines.is_empty() {
                f(&s.table)
            } else {
                f(&s.table.with_leaves_replaced(self.call_site_lines))
            }
        })
    }

    /// The profile of every sample so far in samples (what the text views
    /// take, so that their sampling errors follow the number of samples).
    pub fn sample_profile(&self) -> Profile {
        let mut namer = self.namer();
        self.with_table(|t| Profile::from_table(t, &mut namer))
    }

    /// The profile of every sample so far, named and sorted, in the
    /// session's unit.
    pub fn profile(&self) -> Profile {
        self.weighed(self.sample_profile())
    }

    /// The profile of the samples recorded since `mark` (taken by an earlier
    /// call), in the session's unit, and the mark of now. The table is read
    /// in place: no trace is flushed and no sample is lost between calls.
    pub fn profile_since(&self, mark: &CountsMark) -> (Profile, CountsMark) {
        let (since, now) = self.session.sampler().with(|s| (s.table.since(mark), s.table.counts_mark()));
        let since =
            if self.call_site_lines.is_empty() { since } else { since.with_leaves_replaced(self.call_site_lines) };
        (self.weighed(Profile::from_table(&since, &mut self.namer())), now)
    }

    /// `p` in the session's unit: bytes for an allocation session.
    pub fn weighed(&self, p: Profile) -> Profile {
        match self.session.bytes_per_sample() {
            Some(n) => in_bytes(p, n),
            None => p,
        }
    }

    /// The profile of the samples the timeline holds in `[from_ns, to_ns)`.
    pub fn window_profile(&self, from_ns: u64, to_ns: u64) -> Profile {
        let table = self.session.sampler().with(|s| {
            // No entry bound: every key already fit the session's table.
            let mut out = StackTable::new(u32::MAX as usize);
            for ts in s.timeline.window(from_ns, to_ns) {
                let (state, count) = (ts.state(), ts.count());
                if ts.entry == OVERFLOW_ENTRY || ts.entry as usize >= s.table.len() {
                    out.overflow[state] += count as u64;
                } else {
                    out.add(s.table.get(ts.entry as usize).0, state, count);
                }
            }
            out
        });
        let table =
            if self.call_site_lines.is_empty() { table } else { table.with_leaves_replaced(self.call_site_lines) };
        let mut namer = self.namer();
        Profile::from_table(&table, &mut namer)
    }

    /// The samples of this allocation session's timeline (attached to a
    /// sampling session), oldest first, on the monotonic clock: time, bytes
    /// and leaf site, and the sites named as the profile names leaves.
    pub fn allocation_points(&self) -> (Vec<TimedAllocation>, Vec<String>) {
        let bytes_per_sample = self.session.bytes_per_sample().unwrap_or(0);
        let (points, keys) = self.session.sampler().with(|s| {
            let mut ids: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
            let mut keys: Vec<Option<Vec<u8>>> = Vec::new();
            let mut points = Vec::with_capacity(s.timeline.len());
            for ts in s.timeline.iter() {
                let site = *ids.entry(ts.entry).or_insert_with(|| {
                    keys.push(
                        (ts.entry != OVERFLOW_ENTRY && (ts.entry as usize) < s.table.len())
                            .then(|| s.table.get(ts.entry as usize).0.to_vec()),
                    );
                    (keys.len() - 1) as u32
                });
                let bytes = bytes_per_sample.saturating_mul(ts.count() as u64);
                points.push(TimedAllocation { t_ns: ts.t_ns, bytes, site });
            }
            (points, keys)
        });
        let mut namer = self.namer();
        let sites = keys
            .iter()
            .map(|key| {
                let mut one = StackTable::new(u32::MAX as usize);
                match key {
                    Some(key) => one.add(key, 0, 1),
                    None => return tecs_profile_format::profile::OVERFLOW_FRAME.to_string(),
                };
                if !self.call_site_lines.is_empty() {
                    one = one.with_leaves_replaced(self.call_site_lines);
                }
                let p = Profile::from_table(&one, &mut namer);
                let leaf = p.named_rows().next().and_then(|r| r.stack.last().map(|f| f.to_string()));
                leaf.unwrap_or_else(|| "[no stack]".to_string())
            })
            .collect();
        (points, sites)
    }

    /// Bytes of `points` (times on the monotonic clock) in each of `spans`.
    pub fn allocated_in(points: &[TimedAllocation], spans: &[(u64, u64)]) -> Vec<u64> {
        spans
            .iter()
            .map(|&(from, to)| {
                let first = points.partition_point(|p| p.t_ns < from);
                points[first..].iter().take_while(|p| p.t_ns < to).map(|p| p.bytes).sum()
            })
            .collect()
    }

    /// The timeline as the timeline formats take it: every sample the
    /// ring holds, oldest first, with its stack named as the profile names
    /// it, and the frames; times from the session's start. With `alloc`,
    /// an allocation session attached to this one, its samples too.
    pub fn timed_profile(&self, name: String, alloc: Option<&SessionView<'_>>) -> TimedProfile {
        let now = crate::sys::monotonic_ns();
        let start = self.frame_marks.start_ns;
        // Under the sampler's borrow only copies: the distinct (entry, VM
        // state) keys, and the samples pointing at them.
        let (keys, points, spans) = self.session.sampler().with(|s| {
            let mut ids: std::collections::HashMap<(u32, usize), u32> = std::collections::HashMap::new();
            let mut keys: Vec<(Option<Vec<u8>>, usize)> = Vec::new();
            let mut points = Vec::with_capacity(s.timeline.len());
            for ts in s.timeline.iter() {
                let state = ts.state();
                let id = *ids.entry((ts.entry, state)).or_insert_with(|| {
                    let key = (ts.entry != OVERFLOW_ENTRY && (ts.entry as usize) < s.table.len())
                        .then(|| s.table.get(ts.entry as usize).0.to_vec());
                    keys.push((key, state));
                    (keys.len() - 1) as u32
                });
                points.push(TimedPoint {
                    t_ns: ts.t_ns.saturating_sub(start),
                    stack: id,
                    state: VM_STATES[state],
                    count: ts.count(),
                });
            }
            (keys, points, self.frame_marks.spans(&s.timeline, now))
        });
        let mut namer = self.namer();
        let stacks = keys
            .iter()
            .map(|(key, state)| {
                let mut one = StackTable::new(u32::MAX as usize);
                match key {
                    Some(key) => {
                        one.add(key, *state, 1);
                    }
                    None => one.overflow[*state] = 1,
                }
                if !self.call_site_lines.is_empty() {
                    one = one.with_leaves_replaced(self.call_site_lines);
                }
                let p = Profile::from_table(&one, &mut namer);
                let stack = p.named_rows().next().map(|r| TimedStack {
                    zones: r.zones.iter().map(|z| z.to_string()).collect(),
                    frames: r.stack.iter().map(|f| f.to_string()).collect(),
                });
                stack.unwrap_or_default()
            })
            .collect();
        let (allocations, allocation_sites) = alloc.map(|a| a.allocation_points()).unwrap_or_default();
        let allocated = alloc.map(|_| {
            let windows: Vec<(u64, u64)> = spans.iter().map(|f| (f.start_ns, f.end_ns)).collect();
            Self::allocated_in(&allocations, &windows)
        });
        let frames = spans
            .iter()
            .enumerate()
            .map(|(i, f)| TimedFrame {
                index: f.index,
                start_ns: f.start_ns.saturating_sub(start),
                end_ns: f.end_ns.saturating_sub(start),
                samples: f.samples,
                gc_samples: f.gc_samples,
                allocated_bytes: allocated.as_ref().map(|a| a[i]),
                cpu_ns: f.cpu_ns,
                own_ns: f.own_ns,
            })
            .collect();
        TimedProfile {
            with_allocations: alloc.is_some(),
            allocations: allocations
                .iter()
                .map(|a| TimedAllocation { t_ns: a.t_ns.saturating_sub(start), ..*a })
                .collect(),
            allocation_sites,
            name,
            stacks,
            stack_functions: Vec::new(),
            frame_functions: Default::default(),
            samples: points,
            frames,
            events: self
                .timeline_events
                .list
                .iter()
                .map(|e| TimedEvent { t_ns: e.t_ns.saturating_sub(start), name: e.name.clone(), args: e.args.clone() })
                .collect(),
            interval_ns: self.session.interval_ns(),
            end_ns: self.frame_marks.end_ns.unwrap_or(now).saturating_sub(start),
        }
    }
}

/// A profile of sample counts turned into bytes.
pub fn in_bytes(mut p: Profile, bytes_per_sample: u64) -> Profile {
    for row in &mut p.rows {
        for c in &mut row.counts {
            *c = c.saturating_mul(bytes_per_sample);
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_of_each_span_are_those_allocated_from_its_start_to_before_its_end() {
        let at = |t_ns, bytes| TimedAllocation { t_ns, bytes, site: 0 };
        let points = [at(10, 1), at(20, 2), at(20, 4), at(30, 8), at(45, 16)];
        let spans = [(0, 10), (10, 20), (20, 31), (31, 45), (45, 46), (50, 60)];
        assert_eq!(SessionView::allocated_in(&points, &spans), vec![0, 1, 14, 0, 16, 0]);
    }
}
