//! The input of the timeline formats (speedscope in time order, Chrome
//! trace events): the samples a session's timeline holds, in the order
//! they were taken, each pointing at a named stack, and the frames marked
//! with `profile.frame()`. Times are nanoseconds from the session's start.

use std::collections::HashMap;

use crate::profile::frames::FunctionMap;

/// A named stack: zone path (root first) and frames (caller first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimedStack {
    pub zones: Vec<String>,
    pub frames: Vec<String>,
}

/// One sample of the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedPoint {
    /// When the sample was taken.
    pub t_ns: u64,
    /// Index in [`TimedProfile::stacks`].
    pub stack: u32,
    /// The VM state's letter (`N`, `I`, `C`, `G`, `J`).
    pub state: u8,
    /// Ticks the sample carried.
    pub count: u32,
}

/// One marked frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedFrame {
    pub index: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub samples: u64,
    pub gc_samples: u64,
    /// Bytes the allocation session attached to the session sampled in the
    /// frame; None without one.
    pub allocated_bytes: Option<u64>,
    /// The CPU time the frame's thread used in it, where known.
    pub cpu_ns: Option<u64>,
    /// The profiler's own work in the frame, left out of its length.
    pub own_ns: u64,
}

/// One sample of an allocation session attached to the sampling session:
/// when it was taken, the bytes it stands for, and where (its leaf frame,
/// an index in [`TimedProfile::allocation_sites`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedAllocation {
    pub t_ns: u64,
    pub bytes: u64,
    pub site: u32,
}

/// A moment of interest on the timeline, such as a trace abort.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedEvent {
    pub t_ns: u64,
    pub name: String,
    /// Shown with the event (`key = value`).
    pub args: Vec<(String, String)>,
}

/// Everything a timeline format writes.
#[derive(Clone, Debug, Default)]
pub struct TimedProfile {
    pub name: String,
    pub stacks: Vec<TimedStack>,
    /// The function each stack's leaf frame belongs to, as the by-function
    /// views name it (by index in `stacks`; [`NO_STACK`] for a stack
    /// without frames); empty when not named.
    pub stack_functions: Vec<String>,
    /// The function each Lua frame of `stacks` belongs to, where the
    /// by-function views name it otherwise than the frame (the writers'
    /// frame names); empty when not named.
    pub frame_functions: HashMap<String, String>,
    /// Oldest first.
    pub samples: Vec<TimedPoint>,
    pub frames: Vec<TimedFrame>,
    pub events: Vec<TimedEvent>,
    /// Whether an allocation session was attached; its samples, oldest
    /// first, and the leaf frames they name.
    pub with_allocations: bool,
    pub allocations: Vec<TimedAllocation>,
    pub allocation_sites: Vec<String>,
    /// The sampling interval: a sample stands for `count` intervals.
    pub interval_ns: u64,
    /// The session's length (to now while it runs).
    pub end_ns: u64,
}

impl TimedProfile {
    /// The function `frame` belongs to, where it was named
    /// ([`TimedProfile::frame_functions`]).
    pub fn function_name(&self, frame: &str) -> Option<&str> {
        self.frame_functions.get(frame).map(String::as_str)
    }

    /// Names the function of each stack's leaf, and of each Lua frame of
    /// the stacks, by `m` (the map the by-function views name functions
    /// with): fills [`TimedProfile::stack_functions`] and
    /// [`TimedProfile::frame_functions`].
    pub fn name_functions(&mut self, m: &FunctionMap) {
        self.stack_functions =
            self.stacks.iter().map(|s| s.frames.last().map_or(NO_STACK, |f| m.function_of(f)).to_string()).collect();
        let mut named = HashMap::new();
        for frame in self.stacks.iter().flat_map(|s| s.frames.iter()) {
            let function = m.function_of(frame);
            if function != frame && !named.contains_key(frame) {
                named.insert(frame.clone(), function.to_string());
            }
        }
        self.frame_functions = named;
    }

    /// Time a sample stands for, in nanoseconds.
    pub fn weight_ns(&self, p: &TimedPoint) -> u64 {
        self.interval_ns.saturating_mul(p.count as u64)
    }

    /// The samples taken in each frame of `frames` (from its start, up to
    /// its end), by stack (an index in `stacks`), in the order the stacks
    /// first ran in it.
    pub fn frame_stack_samples(&self) -> Vec<Vec<(u32, u64)>> {
        let mut out: Vec<Vec<(u32, u64)>> = vec![Vec::new(); self.frames.len()];
        for p in &self.samples {
            let at = self.frames.partition_point(|f| f.start_ns <= p.t_ns);
            if at == 0 || p.t_ns >= self.frames[at - 1].end_ns {
                continue;
            }
            let sums = &mut out[at - 1];
            match sums.iter_mut().find(|(s, _)| *s == p.stack) {
                Some((_, n)) => *n += p.count as u64,
                None => sums.push((p.stack, p.count as u64)),
            }
        }
        out
    }
}

/// What a sample without frames is charged to.
pub const NO_STACK: &str = "[no stack]";

/// Samples by function, largest first (ties by name): `samples` pairs a
/// function with samples charged to it, a function any number of times.
/// The one ranking of what ran in a frame, whether the session ranks its
/// own samples or a timeline file's are read back.
pub fn rank_by_function<'a>(samples: impl IntoIterator<Item = (&'a str, u64)>) -> Vec<(String, u64)> {
    let mut by_name: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for (name, n) in samples {
        let sum = by_name.entry(name).or_default();
        *sum = sum.saturating_add(n);
    }
    let mut out: Vec<(String, u64)> = by_name.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::frames::FuncRange;

    fn stack(frames: &[&str]) -> TimedStack {
        TimedStack { zones: Vec::new(), frames: frames.iter().map(|f| f.to_string()).collect() }
    }

    #[test]
    fn functions_name_leaves_and_frames_by_the_map() {
        let mut m = FunctionMap::default();
        let ranges = vec![
            FuncRange { first: 3, last: 9, label: "love.update (g.lua:3)".into() },
            FuncRange { first: 11, last: 20, label: "draw (g.lua:11)".into() },
        ];
        m.add_file("g.lua", ranges, "(main chunk) g.lua".into());
        let mut tp = TimedProfile {
            stacks: vec![stack(&["g.lua:5", "g.lua:12"]), stack(&[]), stack(&["@0x10"])],
            ..Default::default()
        };
        tp.name_functions(&m);
        assert_eq!(tp.stack_functions, vec!["draw (g.lua:11)", NO_STACK, "@0x10"]);
        assert_eq!(tp.function_name("g.lua:5"), Some("love.update (g.lua:3)"));
        assert_eq!(tp.function_name("g.lua:12"), Some("draw (g.lua:11)"));
        // A frame its function does not rename is left out.
        assert_eq!(tp.function_name("@0x10"), None);
        assert_eq!(tp.frame_functions.len(), 2);
    }

    #[test]
    fn an_empty_map_leaves_frames_as_lines() {
        let mut tp = TimedProfile { stacks: vec![stack(&["a.lua:1", "b.lua:2"])], ..Default::default() };
        tp.name_functions(&FunctionMap::default());
        assert_eq!(tp.stack_functions, vec!["b.lua:2"]);
        assert!(tp.frame_functions.is_empty());
    }
}
