//! The timeline's text views: the slowest frames with what ran in them
//! (`SampleSession:hitches`, `tecs-profile run --hitches`, `report
//! --hitches`), and a summary of a timeline's frames (`tecs-profile report
//! FILE.trace.json`).

use std::fmt::Write;

/// One of the slowest frames, as `SampleSession:hitches` gives it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hitch {
    pub index: u64,
    pub ms: f64,
    pub samples: u64,
    pub gc_samples: u64,
    /// Bytes allocated in the frame, with an allocation session attached.
    pub allocated_bytes: Option<f64>,
    /// The CPU time the frame's thread used in it, where known: the rest of
    /// the frame it waited (off CPU).
    pub cpu_ms: Option<f64>,
    /// What ran in it, heaviest first: name and share of its samples.
    pub top: Vec<(String, f64)>,
    /// Where it waited, largest first: the kind of wait its samples' functions
    /// say (`present`, `sleep`, `process`, `I/O`, `collector`) and their share
    /// of its samples (see `tecs.profile.timeline.WAITS`).
    pub waits: Vec<(String, f64)>,
}

/// What is said when no frame was marked.
pub const NO_FRAMES: &str =
    "No frames marked: call profile.frame() once per frame (LÖVE games are marked by themselves).\n";

/// The hitches as text: one line per frame, slowest first, with the
/// functions that ran in it (at most three, by self samples); `frames` is
/// how many frames were marked in all.
pub fn hitches_text(hitches: &[Hitch], frames: u64) -> String {
    if frames == 0 {
        return NO_FRAMES.to_string();
    }
    let alloc = hitches.first().is_some_and(|h| h.allocated_bytes.is_some());
    let cpu = hitches.iter().any(|h| h.cpu_ms.is_some());
    let mut out = String::new();
    let _ = writeln!(out, "Slowest {} of {} frames:", hitches.len(), frames);
    let alloc_head = if alloc { format!(" {:>10}", "alloc KB") } else { String::new() };
    let cpu_head = if cpu { format!(" {:>9} {:>9}", "on CPU", "waiting") } else { String::new() };
    let _ = writeln!(
        out,
        "{:>8} {:>9}{} {:>8} {:>5}{}  what ran (share of its samples)",
        "frame", "ms", cpu_head, "samples", "gc", alloc_head
    );
    for h in hitches {
        let top: Vec<String> =
            h.top.iter().take(3).map(|(name, share)| format!("{:.0}% {}", share * 100.0, name)).collect();
        let waits: Vec<String> =
            h.waits.iter().take(3).map(|(kind, share)| format!("{} {:.0}%", kind, share * 100.0)).collect();
        let what = if !top.is_empty() && !waits.is_empty() {
            format!("{}; waits: {}", top.join(", "), waits.join(", "))
        } else if !top.is_empty() {
            top.join(", ")
        } else if h.samples > 0 {
            "(samples not kept: a fast frame, see slowFrameMs)".to_string()
        } else {
            "(no samples)".to_string()
        };
        let bytes = if alloc { format!(" {:>10.1}", h.allocated_bytes.unwrap_or(0.0) / 1024.0) } else { String::new() };
        let on_cpu = match h.cpu_ms {
            Some(c) if cpu => format!(" {:>9.2} {:>9.2}", c, (h.ms - c).max(0.0)),
            _ if cpu => format!(" {:>9} {:>9}", "?", "?"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{:>8} {:>9.2}{} {:>8} {:>5}{}  {}",
            h.index, h.ms, on_cpu, h.samples, h.gc_samples, bytes, what
        );
    }
    out
}

/// One frame of a timeline: its index, duration, samples and GC samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrameTime {
    pub index: u64,
    pub ms: f64,
    pub samples: u64,
    pub gc_samples: u64,
}

/// A timeline's frames summed up: count, range, total and median time,
/// the slowest frame.
pub fn frames_text(frames: &[FrameTime]) -> String {
    let (Some(first), Some(last)) = (frames.first(), frames.last()) else { return NO_FRAMES.to_string() };
    let total: f64 = frames.iter().map(|f| f.ms).sum();
    let samples: u64 = frames.iter().map(|f| f.samples).sum();
    let gc: u64 = frames.iter().map(|f| f.gc_samples).sum();
    // The first of the slowest, as the frames are in order.
    let slowest = frames.iter().fold(first, |best, f| if f.ms > best.ms { f } else { best });
    let mut ms: Vec<f64> = frames.iter().map(|f| f.ms).collect();
    ms.sort_by(f64::total_cmp);
    // The lower middle, as `math.ceil(n / 2)` picks it in Lua.
    let median = ms[ms.len().div_ceil(2) - 1];
    format!(
        "{} frames ({} to {}), {:.2} ms in all, {} samples ({} in GC)\nframe time: median {:.2} ms, slowest {:.2} ms (frame {})\n",
        frames.len(),
        first.index,
        last.index,
        total,
        samples,
        gc,
        median,
        slowest.ms,
        slowest.index
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hitches_read_as_a_table_of_the_slowest_frames() {
        let h = |index, ms, samples, top: &[(&str, f64)]| Hitch {
            index,
            ms,
            samples,
            gc_samples: 1,
            allocated_bytes: None,
            cpu_ms: None,
            top: top.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
            waits: Vec::new(),
        };
        let text = hitches_text(
            &[h(7, 52.25, 50, &[("a", 0.6), ("b", 0.3), ("c", 0.05), ("d", 0.05)]), h(3, 2.0, 0, &[])],
            40,
        );
        assert_eq!(
            text,
            "Slowest 2 of 40 frames:\n   frame        ms  samples    gc  what ran (share of its samples)\n       7     52.25       50     1  60% a, 30% b, 5% c\n       3      2.00        0     1  (no samples)\n"
        );
        assert_eq!(hitches_text(&[], 0), NO_FRAMES);
        let alloc = Hitch { allocated_bytes: Some(2048.0), ..h(1, 1.0, 2, &[]) };
        assert!(hitches_text(&[alloc], 1).contains("alloc KB"));
        // A frame that waited: its time on the CPU and off it, side by side.
        let waited = Hitch { cpu_ms: Some(3.5), ..h(9, 120.0, 3, &[("a", 1.0)]) };
        assert_eq!(
            hitches_text(&[waited, h(4, 2.0, 0, &[])], 10),
            "Slowest 2 of 10 frames:\n   frame        ms    on CPU   waiting  samples    gc  what ran (share of its samples)\n       9    120.00      3.50    116.50        3     1  100% a\n       4      2.00         ?         ?        0     1  (no samples)\n"
        );
        // On the wall clock: where it waited, by kind, after what ran.
        let slept = Hitch {
            waits: vec![("sleep".into(), 0.9), ("collector".into(), 0.02)],
            ..h(5, 110.0, 100, &[("love.timer.sleep", 0.9), ("a", 0.1)])
        };
        let text = hitches_text(&[slept], 10);
        assert!(text.contains("  90% love.timer.sleep, 10% a; waits: sleep 90%, collector 2%\n"), "{}", text);
    }

    #[test]
    fn frames_sum_up_with_their_median_and_slowest() {
        let f = |index, ms| FrameTime { index, ms, samples: 2, gc_samples: 1 };
        assert_eq!(
            frames_text(&[f(1, 4.0), f(2, 9.0), f(3, 9.0), f(4, 1.0)]),
            "4 frames (1 to 4), 23.00 ms in all, 8 samples (4 in GC)\nframe time: median 4.00 ms, slowest 9.00 ms (frame 2)\n"
        );
        assert_eq!(frames_text(&[]), NO_FRAMES);
    }
}
