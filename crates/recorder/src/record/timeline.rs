//! The time axis of a session: when each sample was taken, and where the
//! frames of the program begin.
//!
//! The sampler appends one [`TimedSample`] per recorded callback to a ring
//! allocated when the session starts: the callback never allocates, and once
//! the ring is full the oldest samples are overwritten (and counted as
//! dropped). A sample points at its stack-table entry, so the timeline
//! costs 16 bytes per sample whatever the stack depth.
//!
//! Frame marks (`profile.frame()`) are kept apart, outside the callback, in
//! a bounded list of their own ([`FrameMarks`]). Frame `i` runs from its mark
//! to the next one; the last frame runs to the end of the session (or to
//! now while it runs).

use std::collections::VecDeque;

use tecs_profile_format::profile::VM_STATES;

/// Frame marks kept per session; older ones are dropped (their frames
/// leave `frames()`, and the frame indices of the rest do not change).
pub const MAX_FRAME_MARKS: usize = 100_000;

/// The entry of a sample whose stack did not fit the stack table (it is
/// counted in the table's overflow).
pub const OVERFLOW_ENTRY: u32 = u32::MAX;

/// Bits of [`TimedSample`]'s packed word that hold the sample count; the
/// VM state's index is in the bits above.
const COUNT_BITS: u32 = 29;
const COUNT_MASK: u32 = (1 << COUNT_BITS) - 1;

/// One recorded callback: when, which stack-table entry, VM state, count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedSample {
    /// Monotonic clock, nanoseconds.
    pub t_ns: u64,
    /// Stack-table entry index, or [`OVERFLOW_ENTRY`].
    pub entry: u32,
    state_and_count: u32,
}

impl TimedSample {
    pub fn new(t_ns: u64, entry: Option<u32>, state: usize, count: u32) -> Self {
        let state = (state.min(VM_STATES.len() - 1) as u32) << COUNT_BITS;
        TimedSample { t_ns, entry: entry.unwrap_or(OVERFLOW_ENTRY), state_and_count: state | count.min(COUNT_MASK) }
    }

    /// Index of the VM state in [`VM_STATES`].
    pub fn state(&self) -> usize {
        (self.state_and_count >> COUNT_BITS) as usize
    }

    /// Ticks this callback carried.
    pub fn count(&self) -> u32 {
        self.state_and_count & COUNT_MASK
    }
}

/// The bounded ring of timestamped samples.
pub struct Timeline {
    ring: Vec<TimedSample>,
    capacity: usize,
    /// The slot of the oldest sample held.
    head: usize,
    /// Samples held, from `head` on (wrapping once the ring is full).
    len: usize,
    /// Ticks held by the ring, and ticks whose samples were overwritten.
    pub kept_samples: u64,
    pub dropped_samples: u64,
    /// Ticks whose samples were taken out because their frame was fast
    /// (`slowFrameMs`).
    pub fast_frame_samples: u64,
}

impl Timeline {
    /// A ring of `capacity` samples, allocated now; 0 records nothing.
    pub fn new(capacity: usize) -> Self {
        Timeline {
            ring: Vec::with_capacity(capacity),
            capacity,
            head: 0,
            len: 0,
            kept_samples: 0,
            dropped_samples: 0,
            fast_frame_samples: 0,
        }
    }

    #[inline]
    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Appends a sample, overwriting the oldest when full. Never allocates:
    /// the ring's capacity was reserved by `new`.
    #[inline]
    pub fn push(&mut self, sample: TimedSample) {
        if self.capacity == 0 {
            return;
        }
        if self.len < self.capacity {
            // Slots past the end are filled in order; once the ring has
            // wrapped, or after `truncate_from`, the slot exists already.
            let at = (self.head + self.len) % self.capacity;
            if at == self.ring.len() {
                self.ring.push(sample);
            } else {
                self.ring[at] = sample;
            }
            self.len += 1;
        } else {
            let old = std::mem::replace(&mut self.ring[self.head], sample);
            self.kept_samples -= old.count() as u64;
            self.dropped_samples += old.count() as u64;
            self.head = (self.head + 1) % self.capacity;
        }
        self.kept_samples += sample.count() as u64;
    }

    /// Takes out the newest samples, those taken at `from_ns` or later (the
    /// samples of a fast frame, which ends the timeline).
    pub fn truncate_from(&mut self, from_ns: u64) {
        while self.len > 0 {
            let last = (self.head + self.len - 1) % self.capacity;
            let s = self.ring[last];
            if s.t_ns < from_ns {
                break;
            }
            self.len -= 1;
            self.kept_samples -= s.count() as u64;
            self.fast_frame_samples += s.count() as u64;
        }
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The samples held, oldest first, as two slices (the ring's halves).
    pub fn halves(&self) -> (&[TimedSample], &[TimedSample]) {
        let end = self.head + self.len;
        let first = &self.ring[self.head..end.min(self.ring.len())];
        let second = &self.ring[..end.saturating_sub(self.ring.len())];
        (first, second)
    }

    /// The samples held, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &TimedSample> {
        let (older, newer) = self.halves();
        older.iter().chain(newer.iter())
    }

    /// The samples taken in `[from_ns, to_ns)`, oldest first. Times never
    /// decrease along the ring, so each half is searched, not scanned.
    pub fn window(&self, from_ns: u64, to_ns: u64) -> impl Iterator<Item = &TimedSample> {
        let cut = |s: &'_ [TimedSample]| {
            let a = s.partition_point(|x| x.t_ns < from_ns);
            let b = s.partition_point(|x| x.t_ns < to_ns).max(a);
            (a, b)
        };
        let (older, newer) = self.halves();
        let ((a, b), (c, d)) = (cut(older), cut(newer));
        older[a..b].iter().chain(newer[c..d].iter())
    }

    /// Bytes reserved for the ring.
    pub fn memory_bytes(&self) -> usize {
        self.ring.capacity() * std::mem::size_of::<TimedSample>()
    }
}

/// Events kept per session (trace aborts); later ones are counted only.
pub const MAX_EVENTS: usize = 10_000;

/// A moment of interest on the timeline: when, a name, details.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub t_ns: u64,
    pub name: String,
    pub args: Vec<(String, String)>,
}

/// The events of a session, the first [`MAX_EVENTS`] of them.
#[derive(Default)]
pub struct Events {
    pub list: Vec<Event>,
    /// Events past the bound.
    pub dropped: u64,
}

impl Events {
    pub fn add(&mut self, event: Event) {
        if self.list.len() < MAX_EVENTS {
            self.list.push(event);
        } else {
            self.dropped += 1;
        }
    }
}

/// One frame: its index (from 1, in marking order), its time span and the
/// samples taken in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSpan {
    pub index: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Ticks of the samples the timeline holds in the frame.
    pub samples: u64,
    /// Of those, ticks taken while the garbage collector ran.
    pub gc_samples: u64,
    /// The CPU time the marking thread used in the frame, where both its
    /// ends read that thread's CPU clock (not the last frame of a running
    /// session): what the frame did not spend waiting.
    pub cpu_ns: Option<u64>,
    /// The profiler's own work in the frame, left out of its length and
    /// of its CPU time: [`FrameSpan::ns`].
    pub own_ns: u64,
}

impl FrameSpan {
    /// The frame's length less the profiler's own work in it.
    pub fn ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns).saturating_sub(self.own_ns)
    }
}

/// A frame mark, the marking thread's CPU clock then, and once its frame
/// was found fast (`slowFrameMs`), the samples and GC samples it had: they
/// left the timeline then.
#[derive(Clone, Copy, Debug)]
struct Mark {
    t_ns: u64,
    cpu_ns: Option<u64>,
    counted: Option<(u64, u64)>,
    /// Time the profiler's own work took in the frame (a command of the
    /// control channel), left out of its length.
    own_ns: u64,
}

/// The frame marks of a session, and its start and end on the same clock.
pub struct FrameMarks {
    marks: VecDeque<Mark>,
    /// Marks dropped to stay within [`MAX_FRAME_MARKS`].
    pub dropped: u64,
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    /// The thread's CPU clock when the session ended.
    end_cpu_ns: Option<u64>,
    /// Frames shorter than this keep their counts but not their samples.
    slow_ns: Option<u64>,
}

impl FrameMarks {
    pub fn new(start_ns: u64) -> Self {
        FrameMarks { marks: VecDeque::new(), dropped: 0, start_ns, end_ns: None, end_cpu_ns: None, slow_ns: None }
    }

    /// Frames shorter than `slow_ns` give their samples back when they end
    /// (counted, then taken out of the timeline).
    pub fn keeping_slow_frames(mut self, slow_ns: Option<u64>) -> Self {
        self.slow_ns = slow_ns;
        self
    }

    /// The last frame ends at `t_ns`: when it was fast, its samples are
    /// counted and leave the timeline.
    fn close_last(&mut self, t_ns: u64, timeline: &mut Timeline) {
        let Some(slow) = self.slow_ns else { return };
        let Some(last) = self.marks.back_mut() else { return };
        if last.counted.is_some() || t_ns.saturating_sub(last.t_ns) >= slow {
            return;
        }
        let (mut n, mut gc) = (0, 0);
        for s in timeline.window(last.t_ns, u64::MAX) {
            n += s.count() as u64;
            if VM_STATES[s.state()] == b'G' {
                gc += s.count() as u64;
            }
        }
        last.counted = Some((n, gc));
        timeline.truncate_from(last.t_ns);
    }

    /// Marks the start of a frame (the end of the previous one) at `t_ns`,
    /// when the marking thread's CPU clock read `cpu_ns`.
    pub fn mark(&mut self, t_ns: u64, cpu_ns: Option<u64>, timeline: &mut Timeline) {
        if self.end_ns.is_some() {
            return;
        }
        self.close_last(t_ns, timeline);
        if self.marks.len() >= MAX_FRAME_MARKS {
            self.marks.pop_front();
            self.dropped += 1;
        }
        self.marks.push_back(Mark { t_ns, cpu_ns, counted: None, own_ns: 0 });
    }

    /// Leaves `ns` of the profiler's own work out of the frame that runs
    /// (its samples were not recorded: the session was paused).
    pub fn exclude(&mut self, ns: u64) {
        if self.end_ns.is_none() {
            if let Some(last) = self.marks.back_mut() {
                last.own_ns = last.own_ns.saturating_add(ns);
            }
        }
    }

    /// Ends the last frame at `t_ns`, the thread's CPU clock at `cpu_ns`
    /// (the session stopped).
    pub fn finish(&mut self, t_ns: u64, cpu_ns: Option<u64>, timeline: &mut Timeline) {
        if self.end_ns.is_none() {
            self.close_last(t_ns, timeline);
            self.end_ns = Some(t_ns);
            self.end_cpu_ns = cpu_ns;
        }
    }

    /// Marks kept.
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// The frames kept, in order, with their samples counted from
    /// `timeline`; `now_ns` ends the last frame of a running session.
    pub fn spans(&self, timeline: &Timeline, now_ns: u64) -> Vec<FrameSpan> {
        let end = self.end_ns.unwrap_or(now_ns);
        let mut out: Vec<FrameSpan> = self
            .marks
            .iter()
            .enumerate()
            .map(|(i, m)| FrameSpan {
                index: self.dropped + i as u64 + 1,
                start_ns: m.t_ns,
                end_ns: self.marks.get(i + 1).map_or(end, |n| n.t_ns).max(m.t_ns),
                samples: m.counted.map_or(0, |c| c.0),
                gc_samples: m.counted.map_or(0, |c| c.1),
                cpu_ns: match (m.cpu_ns, self.marks.get(i + 1).map_or(self.end_cpu_ns, |n| n.cpu_ns)) {
                    (Some(a), Some(b)) => Some(b.saturating_sub(a).saturating_sub(m.own_ns)),
                    _ => None,
                },
                own_ns: m.own_ns,
            })
            .collect();
        let (Some(first), Some(last)) = (out.first(), out.last()) else { return out };
        // One pass: samples and frames are both in time order.
        let mut f = 0;
        for s in timeline.window(first.start_ns, last.end_ns.max(last.start_ns + 1)) {
            while f + 1 < out.len() && s.t_ns >= out[f].end_ns {
                f += 1;
            }
            if s.t_ns < out[f].start_ns {
                continue;
            }
            out[f].samples += s.count() as u64;
            if VM_STATES[s.state()] == b'G' {
                out[f].gc_samples += s.count() as u64;
            }
        }
        out
    }

    /// The span of the frame with this index, if it is kept.
    pub fn span(&self, index: u64, now_ns: u64) -> Option<(u64, u64)> {
        let i = index.checked_sub(self.dropped + 1)? as usize;
        let start = self.marks.get(i)?.t_ns;
        let end = self.marks.get(i + 1).map_or(self.end_ns.unwrap_or(now_ns), |m| m.t_ns);
        Some((start, end.max(start)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: u64, count: u32) -> TimedSample {
        TimedSample::new(t, Some(t as u32), 1, count)
    }

    #[test]
    fn a_frame_has_the_cpu_time_between_its_marks_where_both_were_read() {
        let mut t = Timeline::new(10);
        let mut m = FrameMarks::new(0);
        m.mark(10, Some(1_000), &mut t);
        m.mark(20, Some(1_004), &mut t);
        m.mark(30, None, &mut t);
        m.mark(40, Some(1_020), &mut t);
        let cpu: Vec<Option<u64>> = m.spans(&t, 50).iter().map(|s| s.cpu_ns).collect();
        assert_eq!(cpu, [Some(4), None, None, None], "the last frame of a running session has none");
        m.finish(50, Some(1_025), &mut t);
        assert_eq!(m.spans(&t, 99)[3].cpu_ns, Some(5));
    }

    #[test]
    fn the_profilers_own_work_is_left_out_of_its_frame() {
        let mut t = Timeline::new(10);
        let mut m = FrameMarks::new(0);
        m.mark(10, Some(0), &mut t);
        m.exclude(3);
        m.mark(20, Some(8), &mut t);
        let spans = m.spans(&t, 30);
        assert_eq!((spans[0].ns(), spans[0].cpu_ns), (7, Some(5)));
        assert_eq!(spans[1].ns(), 10);
    }

    #[test]
    fn packs_state_and_count() {
        let s = TimedSample::new(5, None, 3, 7);
        assert_eq!((s.t_ns, s.entry, s.state(), s.count()), (5, OVERFLOW_ENTRY, 3, 7));
        assert_eq!(TimedSample::new(0, Some(1), 4, u32::MAX).count(), COUNT_MASK);
        assert_eq!(std::mem::size_of::<TimedSample>(), 16);
    }

    #[test]
    fn a_full_ring_drops_the_oldest() {
        let mut t = Timeline::new(3);
        for i in 1..=5 {
            t.push(sample(i * 10, i as u32));
        }
        let times: Vec<u64> = t.iter().map(|s| s.t_ns).collect();
        assert_eq!(times, [30, 40, 50]);
        assert_eq!(t.kept_samples, 3 + 4 + 5);
        assert_eq!(t.dropped_samples, 1 + 2);
        let win: Vec<u64> = t.window(35, 50).map(|s| s.t_ns).collect();
        assert_eq!(win, [40]);
        assert_eq!(t.window(0, 100).count(), 3);
        assert_eq!(t.window(60, 100).count(), 0);
        let mut off = Timeline::new(0);
        off.push(sample(1, 1));
        assert!(off.is_empty() && !off.enabled());
        assert_eq!(off.kept_samples + off.dropped_samples, 0);
    }

    #[test]
    fn frames_split_samples_at_their_marks() {
        let mut t = Timeline::new(100);
        for time in [5, 10, 15, 20, 25, 30, 45] {
            t.push(sample(time, 1));
        }
        t.push(TimedSample::new(50, None, 3, 2)); // a GC sample
        let mut m = FrameMarks::new(0);
        m.mark(10, None, &mut t);
        m.mark(20, None, &mut t);
        m.mark(40, None, &mut t);
        let spans = m.spans(&t, 60);
        let got: Vec<(u64, u64, u64, u64, u64)> =
            spans.iter().map(|s| (s.index, s.start_ns, s.end_ns, s.samples, s.gc_samples)).collect();
        // The sample at 5 is before the first mark; each mark opens a frame.
        assert_eq!(got, [(1, 10, 20, 2, 0), (2, 20, 40, 3, 0), (3, 40, 60, 3, 2)]);
        m.finish(48, None, &mut t);
        assert_eq!(m.spans(&t, 60)[2].samples, 1, "the session's end closes the last frame");
        m.mark(55, None, &mut t);
        assert_eq!(m.len(), 3, "no mark after the end");
        assert_eq!(m.span(2, 0), Some((20, 40)));
        assert_eq!(m.span(4, 0), None);
        assert_eq!(m.span(0, 0), None);
    }

    #[test]
    fn frame_marks_are_bounded_and_keep_their_indices() {
        let mut m = FrameMarks::new(0);
        let mut t = Timeline::new(0);
        for i in 0..(MAX_FRAME_MARKS as u64 + 2) {
            m.mark(i, None, &mut t);
        }
        assert_eq!(m.len(), MAX_FRAME_MARKS);
        assert_eq!(m.dropped, 2);
        let spans = m.spans(&Timeline::new(0), MAX_FRAME_MARKS as u64 + 5);
        assert_eq!(spans[0].index, 3);
        assert_eq!(spans[0].start_ns, 2);
        assert_eq!(m.span(3, 0), Some((2, 3)));
        assert_eq!(m.span(2, 0), None);
    }

    #[test]
    fn fast_frames_keep_their_counts_and_give_their_samples_back() {
        let mut t = Timeline::new(100);
        // Frames: [10, 20) fast, [20, 50) slow, [50, 55) fast (closed by the end).
        let mut m = FrameMarks::new(0).keeping_slow_frames(Some(15));
        t.push(sample(5, 1));
        m.mark(10, None, &mut t);
        t.push(sample(12, 1));
        t.push(TimedSample::new(14, Some(1), 3, 2));
        m.mark(20, None, &mut t);
        assert_eq!((t.len(), t.kept_samples, t.fast_frame_samples), (1, 1, 3));
        for time in [25, 35, 45] {
            t.push(sample(time, 1));
        }
        m.mark(50, None, &mut t);
        t.push(sample(52, 4));
        m.finish(55, None, &mut t);
        let times: Vec<u64> = t.iter().map(|s| s.t_ns).collect();
        assert_eq!(times, [5, 25, 35, 45]);
        assert_eq!((t.kept_samples, t.fast_frame_samples), (4, 7));
        let got: Vec<(u64, u64, u64, u64)> =
            m.spans(&t, 99).iter().map(|s| (s.start_ns, s.end_ns, s.samples, s.gc_samples)).collect();
        assert_eq!(got, [(10, 20, 3, 2), (20, 50, 3, 0), (50, 55, 4, 0)]);
        // The ring keeps working after samples were taken out: it fills,
        // wraps and drops its oldest as before.
        for time in 60..200 {
            t.push(sample(time, 1));
        }
        assert_eq!(t.len(), 100);
        let times: Vec<u64> = t.iter().map(|s| s.t_ns).collect();
        assert_eq!(times, (100..200).collect::<Vec<u64>>());
        assert_eq!(t.kept_samples, 100);
        assert_eq!(t.dropped_samples, 4 + 40);
    }

    #[test]
    fn a_wrapped_ring_gives_back_its_newest() {
        let mut t = Timeline::new(4);
        for i in 1..=6 {
            t.push(sample(i * 10, 1));
        }
        t.truncate_from(45);
        assert_eq!(t.iter().map(|s| s.t_ns).collect::<Vec<_>>(), [30, 40]);
        t.push(sample(70, 1));
        t.push(sample(80, 1));
        t.push(sample(90, 1));
        assert_eq!(t.iter().map(|s| s.t_ns).collect::<Vec<_>>(), [40, 70, 80, 90]);
        assert_eq!(t.window(41, 85).map(|s| s.t_ns).collect::<Vec<_>>(), [70, 80]);
        assert_eq!((t.kept_samples, t.dropped_samples, t.fast_frame_samples), (4, 3, 2));
    }
}
