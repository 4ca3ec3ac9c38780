//! Chrome trace event files (the JSON Perfetto, chrome://tracing and
//! speedscope read): the timeline of a session as nested ranges.
//!
//! Consecutive samples with the same frames merge into one range per frame,
//! so a function that ran for twenty samples is one "X" (complete) event
//! whose children are the calls it made; zones are ranges above the Lua
//! frames. A sample stands for the interval before it was taken (it was
//! charged with that time), so its range ends at its timestamp. Frames
//! marked with `profile.frame()` are ranges on a track of their own; runs of
//! garbage-collector samples and events such as trace aborts are instant
//! events on the Lua track.
//! Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::timed::{TimedPoint, TimedProfile};

const PID: u32 = 1;
/// Track of the sampled Lua stacks (and zones).
pub const LUA_TID: u32 = 1;
/// Track of the marked frames.
pub const FRAMES_TID: u32 = 2;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TraceFile<'a> {
    trace_events: Vec<Event<'a>>,
    display_time_unit: &'static str,
    other_data: OtherData,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OtherData {
    exporter: &'static str,
    interval_ms: f64,
    /// The stacks of `frame_samples`: the Lua track's range names (the
    /// frames, caller first) joined by `;`.
    stacks: Vec<String>,
    /// The function each of `stacks` ran in at its leaf, as the session's
    /// by-function views named it (its sources, the functions it recorded
    /// while sampling): the names a reader ranks a frame's samples by,
    /// whatever sources it can read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    stack_functions: Vec<String>,
    /// What ran in each frame that holds samples, sample for sample, so
    /// that a reader needs not count samples back from the ranges' lengths
    /// (a range's samples can be drawn shorter than their intervals where
    /// they came closer together).
    frame_samples: Vec<FrameSamples>,
}

/// The samples taken in one frame, by stack (an index in
/// `OtherData::stacks`), in the order the stacks first ran in it.
#[derive(Serialize)]
struct FrameSamples {
    frame: u64,
    samples: Vec<(usize, u64)>,
}

/// The samples taken in each frame (`[start, end)`, as the session counts
/// them), by stack, the stacks named as the Lua track's ranges are, and the
/// function of each stack's leaf (when the profile names them).
fn frame_samples(tp: &TimedProfile) -> (Vec<String>, Vec<String>, Vec<FrameSamples>) {
    let mut stacks: Vec<String> = Vec::new();
    let mut functions: Vec<String> = Vec::new();
    // By the stack's index, and by its text: stacks that differ in their
    // zones alone are one stack of the Lua track.
    let mut ids: BTreeMap<u32, usize> = BTreeMap::new();
    let mut by_text: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let named = tp.stack_functions.len() == tp.stacks.len() && !tp.stacks.is_empty();
    let mut out = Vec::new();
    for (frame, sums) in tp.frames.iter().zip(tp.frame_stack_samples()) {
        let mut samples: Vec<(usize, u64)> = Vec::new();
        for (stack, n) in sums {
            let id = *ids.entry(stack).or_insert_with(|| {
                let key = tp.stacks.get(stack as usize).map(|s| s.frames.join(";")).unwrap_or_default();
                *by_text.entry(key).or_insert_with_key(|k| {
                    stacks.push(k.clone());
                    if named {
                        functions.push(tp.stack_functions[stack as usize].clone());
                    }
                    stacks.len() - 1
                })
            });
            // A sample without frames counts where the frames' functions
            // are named (as the session's ranking counts it), else not.
            if stacks[id].is_empty() && !named {
                continue;
            }
            match samples.iter_mut().find(|(s, _)| *s == id) {
                Some((_, sum)) => *sum += n,
                None => samples.push((id, n)),
            }
        }
        if !samples.is_empty() {
            out.push(FrameSamples { frame: frame.index, samples });
        }
    }
    (stacks, functions, out)
}

/// One trace event; `ts` and `dur` in microseconds.
#[derive(Serialize, Debug, Clone, PartialEq)]
struct Event<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    cat: &'static str,
    ph: &'static str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u32,
    /// Scope of an instant event ("t": its thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    args: BTreeMap<&'a str, Value>,
}

/// Nanoseconds to whole microseconds (the unit of `ts` and `dur`).
fn us(ns: u64) -> f64 {
    (ns.saturating_add(500) / 1000) as f64
}

/// The duration from `start_ns` to `end_ns` in microseconds. Times are
/// whole microseconds, so readers that add `ts` and `dur` as floats (or
/// shift every `ts`) get exactly the end: ranges that end where the next
/// begins, or where their parent ends, stay nested.
fn dur_us(start_ns: u64, end_ns: u64) -> f64 {
    us(end_ns.max(start_ns)) - us(start_ns)
}

fn event<'a>(name: &'a str, cat: &'static str, ph: &'static str, ts_ns: u64, tid: u32) -> Event<'a> {
    Event { name, cat, ph, ts: us(ts_ns), dur: None, pid: PID, tid, s: None, args: BTreeMap::new() }
}

fn metadata<'a>(kind: &'a str, tid: u32, name: &str) -> Event<'a> {
    let mut e = event(kind, "", "M", 0, tid);
    e.args.insert("name", Value::from(name));
    e
}

/// A frame of the open stack: where it began, and its event (written when
/// it opens, so that a caller comes before its callees even when their
/// ranges are equal; its duration is set when it closes).
struct Open {
    start_ns: u64,
    event: usize,
}

fn close(open: Open, end_ns: u64, out: &mut [Event]) {
    out[open.event].dur = Some(dur_us(open.start_ns, end_ns));
}

/// The names (and categories) of a sample's ranges, outermost first.
fn names<'a>(tp: &'a TimedProfile, zone_names: &'a [Vec<String>], p: &TimedPoint) -> Vec<(&'a str, &'static str)> {
    let Some(stack) = tp.stacks.get(p.stack as usize) else { return Vec::new() };
    let zones = zone_names[p.stack as usize].iter().map(|z| (z.as_str(), "zone"));
    // A Lua frame is its function's range where the timeline names it:
    // consecutive samples on other lines of one function extend one range.
    let frames = stack.frames.iter().map(|f| (tp.function_name(f).unwrap_or(f.as_str()), "lua"));
    zones.chain(frames).collect()
}

/// The sampled stacks as nested complete events, and runs of GC samples as
/// instant events.
fn sample_events<'a>(tp: &'a TimedProfile, zone_names: &'a [Vec<String>], out: &mut Vec<Event<'a>>) {
    let mut open: Vec<Open> = Vec::new();
    let mut prev_end = 0u64;
    // The GC run being extended: start, end, samples.
    let mut gc: Option<(u64, u64, u64)> = None;
    let mut allocated = AllocatedBefore::new(tp);
    let mut flush_gc = |gc: &mut Option<(u64, u64, u64)>, out: &mut Vec<Event<'a>>| {
        if let Some((start, end, samples)) = gc.take() {
            let mut e = event("GC", "gc", "i", start, LUA_TID);
            e.s = Some("t");
            e.args.insert("samples", Value::from(samples));
            e.args.insert("ms", Value::from(end.saturating_sub(start) as f64 / 1e6));
            if let Some((bytes, sites)) = allocated.until(end) {
                e.args.insert("allocatedBytes", Value::from(bytes));
                e.args.insert("allocatedBy", Value::from(sites));
            }
            out.push(e);
        }
    };
    // Points one callback split (by VM state, or by the C function each
    // tick found) share its time: they are drawn back to back, the last
    // ending at that time.
    let mut later = vec![0u64; tp.samples.len()];
    for i in (0..tp.samples.len().saturating_sub(1)).rev() {
        if tp.samples[i].t_ns == tp.samples[i + 1].t_ns {
            later[i] = later[i + 1] + tp.weight_ns(&tp.samples[i + 1]);
        }
    }
    for (p, &later) in tp.samples.iter().zip(&later) {
        let end = p.t_ns.saturating_sub(later);
        let start = end.saturating_sub(tp.weight_ns(p)).max(prev_end);
        // Within the microsecond of the one before, a sample has nothing to
        // draw (readers do not order empty ranges among their neighbours);
        // otherwise a gap (the thread did not run on the CPU clock, samples
        // were dropped, the session was paused) ends every range.
        let empty = us(start) >= us(end);
        let contiguous = empty || start == prev_end;
        // Runs of GC samples count every GC sample, drawn or not.
        if p.state == b'G' {
            match &mut gc {
                Some((_, e, n)) if contiguous => {
                    *e = end.max(*e);
                    *n += p.count as u64;
                }
                _ => {
                    flush_gc(&mut gc, out);
                    gc = Some((start, end, p.count as u64));
                }
            }
        } else {
            flush_gc(&mut gc, out);
        }
        if empty {
            continue;
        }
        let names = names(tp, zone_names, p);
        let keep =
            if contiguous { open.iter().zip(&names).take_while(|(o, n)| out[o.event].name == n.0).count() } else { 0 };
        while open.len() > keep {
            let o = open.pop().expect("longer than keep");
            close(o, prev_end, out);
        }
        for &(name, cat) in &names[keep..] {
            // No args: speedscope makes them part of the name, and a
            // function would then be a new frame in every range.
            open.push(Open { start_ns: start, event: out.len() });
            out.push(event(name, cat, "X", start, LUA_TID));
        }
        prev_end = end;
    }
    while let Some(o) = open.pop() {
        close(o, prev_end, out);
    }
    flush_gc(&mut gc, out);
}

/// Sites named with a GC run: the ones that allocated most before it.
const GC_ALLOCATION_SITES: usize = 3;

/// What an attached allocation session sampled between one GC run and the
/// next: the garbage a run collects was allocated before it.
struct AllocatedBefore<'a> {
    tp: &'a TimedProfile,
    next: usize,
}

impl<'a> AllocatedBefore<'a> {
    fn new(tp: &'a TimedProfile) -> Self {
        AllocatedBefore { tp, next: 0 }
    }

    /// The bytes sampled since the last call, up to `end_ns`, and the
    /// sites that allocated most of them (`"site (N bytes)"`, largest
    /// first); None without an allocation session.
    fn until(&mut self, end_ns: u64) -> Option<(u64, Vec<String>)> {
        if !self.tp.with_allocations {
            return None;
        }
        let mut by_site: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
        let mut bytes = 0u64;
        while let Some(a) = self.tp.allocations.get(self.next).filter(|a| a.t_ns <= end_ns) {
            bytes = bytes.saturating_add(a.bytes);
            *by_site.entry(a.site).or_default() += a.bytes;
            self.next += 1;
        }
        let mut sites: Vec<(u32, u64)> = by_site.into_iter().collect();
        sites.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let named = sites
            .iter()
            .take(GC_ALLOCATION_SITES)
            .map(|&(site, n)| {
                let name = self.tp.allocation_sites.get(site as usize).map_or("?", String::as_str);
                format!("{} ({} bytes)", name, n)
            })
            .collect();
        Some((bytes, named))
    }
}

/// Renders the timeline as a Chrome trace event JSON document.
pub fn render(tp: &TimedProfile) -> String {
    let zone_names: Vec<Vec<String>> =
        tp.stacks.iter().map(|s| s.zones.iter().map(|z| format!("zone {}", z)).collect()).collect();
    let frame_names: Vec<String> = tp.frames.iter().map(|f| format!("frame {}", f.index)).collect();
    let mut events = vec![
        metadata("process_name", LUA_TID, &tp.name),
        metadata("thread_name", LUA_TID, "Lua"),
        metadata("thread_name", FRAMES_TID, "frames"),
    ];
    sample_events(tp, &zone_names, &mut events);
    // Frames shorter than a microsecond are left out, as empty ranges are.
    for (f, name) in tp.frames.iter().zip(&frame_names).filter(|(f, _)| dur_us(f.start_ns, f.end_ns) > 0.0) {
        let mut e = event(name, "frame", "X", f.start_ns, FRAMES_TID);
        e.dur = Some(dur_us(f.start_ns, f.end_ns));
        e.args.insert("ms", Value::from(f.end_ns.saturating_sub(f.start_ns).saturating_sub(f.own_ns) as f64 / 1e6));
        e.args.insert("samples", Value::from(f.samples));
        e.args.insert("gcSamples", Value::from(f.gc_samples));
        if let Some(cpu) = f.cpu_ns {
            e.args.insert("cpuMs", Value::from(cpu as f64 / 1e6));
        }
        if let Some(bytes) = f.allocated_bytes {
            e.args.insert("allocatedBytes", Value::from(bytes));
        }
        events.push(e);
    }
    for ev in &tp.events {
        let mut e = event(&ev.name, "event", "i", ev.t_ns, LUA_TID);
        e.s = Some("t");
        for (k, v) in &ev.args {
            e.args.insert(k, Value::from(v.as_str()));
        }
        events.push(e);
    }
    let (stacks, stack_functions, frame_samples) = frame_samples(tp);
    let file = TraceFile {
        trace_events: events,
        display_time_unit: "ms",
        other_data: OtherData {
            exporter: concat!("tecs-profile ", env!("CARGO_PKG_VERSION")),
            interval_ms: tp.interval_ns as f64 / 1e6,
            stacks,
            stack_functions,
            frame_samples,
        },
    };
    let mut s = serde_json::to_string(&file).expect("trace events always serialise");
    s.push('\n');
    s
}

/// The registry's Chrome trace writer ([`render`]).
pub struct ChromeTrace;

impl super::Writer for ChromeTrace {
    fn write(&self, source: super::Source<'_>) -> Result<Vec<u8>, String> {
        match source {
            super::Source::Timeline(tp) => Ok(render(tp).into_bytes()),
            super::Source::Profile(..) => Err(super::wrong_source("chrome-trace", true)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::timed::{TimedFrame, TimedStack};

    fn stack(zones: &[&str], frames: &[&str]) -> TimedStack {
        TimedStack {
            zones: zones.iter().map(|s| s.to_string()).collect(),
            frames: frames.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn point(t_ms: u64, stack: u32, state: u8) -> TimedPoint {
        TimedPoint { t_ns: t_ms * 1_000_000, stack, state, count: 1 }
    }

    /// (name, tid, ts µs, dur µs) of the complete events, sorted.
    fn ranges(v: &Value) -> Vec<(String, u64, f64, f64)> {
        let mut out: Vec<(String, u64, f64, f64)> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["tid"].as_u64().unwrap(),
                    e["ts"].as_f64().unwrap(),
                    e["dur"].as_f64().unwrap(),
                )
            })
            .collect();
        out.sort_by(|a, b| (a.1, a.2.to_bits(), &a.0).cmp(&(b.1, b.2.to_bits(), &b.0)));
        out
    }

    #[test]
    fn consecutive_samples_merge_into_nested_ranges() {
        let tp = TimedProfile {
            name: "t".into(),
            stacks: vec![
                stack(&["update"], &["main.lua:1", "a.lua:5"]),
                stack(&["update"], &["main.lua:1", "b.lua:9"]),
            ],
            // a, a, b, then a gap of 10 ms, then a again; the last one in GC.
            samples: vec![point(1, 0, b'N'), point(2, 0, b'N'), point(3, 1, b'N'), point(14, 0, b'G')],
            frames: vec![TimedFrame {
                index: 1,
                start_ns: 0,
                end_ns: 10_000_000,
                samples: 3,
                gc_samples: 0,
                allocated_bytes: None,
                cpu_ns: None,
                own_ns: 0,
            }],
            events: vec![],
            interval_ns: 1_000_000,
            end_ns: 20_000_000,
            ..Default::default()
        };
        let v: Value = serde_json::from_str(&render(&tp)).unwrap();
        let got = ranges(&v);
        let want: Vec<(String, u64, f64, f64)> = [
            ("main.lua:1", 1, 0.0, 3000.0),
            ("zone update", 1, 0.0, 3000.0),
            ("a.lua:5", 1, 0.0, 2000.0),
            ("b.lua:9", 1, 2000.0, 1000.0),
            ("a.lua:5", 1, 13000.0, 1000.0),
            ("main.lua:1", 1, 13000.0, 1000.0),
            ("zone update", 1, 13000.0, 1000.0),
            ("frame 1", 2, 0.0, 10000.0),
        ]
        .iter()
        .map(|&(n, t, ts, d)| (n.to_string(), t, ts, d))
        .collect();
        let mut want = want;
        want.sort_by(|a, b| (a.1, a.2.to_bits(), &a.0).cmp(&(b.1, b.2.to_bits(), &b.0)));
        assert_eq!(got, want);
        let events = v["traceEvents"].as_array().unwrap();
        let gc: Vec<&Value> = events.iter().filter(|e| e["ph"] == "i").collect();
        assert_eq!(gc.len(), 1);
        assert_eq!(
            (gc[0]["name"].as_str(), gc[0]["ts"].as_f64(), gc[0]["s"].as_str()),
            (Some("GC"), Some(13000.0), Some("t"))
        );
        let names: Vec<&str> =
            events.iter().filter(|e| e["ph"] == "M").map(|e| e["args"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["t", "Lua", "frames"]);
    }

    #[test]
    fn ranges_never_end_past_their_end() {
        for (a, b, c) in [(3_066u64, 3_266u64, 28_918_045u64), (1, 2, 3_000_000_000_000), (7, 7, 7)] {
            // Two ranges that share an end, and one that begins there.
            assert_eq!(us(a) + dur_us(a, c), us(b) + dur_us(b, c));
            assert_eq!(us(a) + dur_us(a, b), us(b));
            assert_eq!(us(c) - us(a) + dur_us(a, b) - (us(b) - us(a)), us(c) - us(b) + dur_us(b, b));
        }
    }

    #[test]
    fn samples_at_one_instant_and_empty_timelines() {
        let tp = TimedProfile {
            stacks: vec![stack(&[], &["a.lua:1"])],
            samples: vec![point(1, 0, b'N'), point(1, 0, b'N')],
            interval_ns: 1_000_000,
            ..Default::default()
        };
        let v: Value = serde_json::from_str(&render(&tp)).unwrap();
        assert_eq!(ranges(&v), [("a.lua:1".to_string(), 1, 0.0, 1000.0)]);
        // A GC sample within the microsecond of the one before is not
        // drawn, but its run counts it.
        let gc = TimedProfile {
            stacks: vec![stack(&[], &["a.lua:1"])],
            samples: vec![point(1, 0, b'G'), point(1, 0, b'G'), point(2, 0, b'N')],
            interval_ns: 1_000_000,
            ..Default::default()
        };
        let v: Value = serde_json::from_str(&render(&gc)).unwrap();
        let runs: Vec<&Value> = v["traceEvents"].as_array().unwrap().iter().filter(|e| e["name"] == "GC").collect();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0]["args"]["samples"], 2);
        let empty: Value = serde_json::from_str(&render(&TimedProfile::default())).unwrap();
        assert!(ranges(&empty).is_empty());
    }

    #[test]
    fn gc_runs_name_what_allocated_before_them() {
        use crate::output::timed::TimedAllocation;
        let alloc = |t_ms: u64, kb: u64, site: u32| TimedAllocation { t_ns: t_ms * 1_000_000, bytes: kb * 1024, site };
        // GC at 3 ms and at 8 ms; allocations before each, and one after.
        let tp = TimedProfile {
            stacks: vec![stack(&[], &["a.lua:1"])],
            samples: vec![
                point(2, 0, b'N'),
                point(3, 0, b'G'),
                point(7, 0, b'N'),
                point(8, 0, b'G'),
                point(9, 0, b'N'),
            ],
            interval_ns: 1_000_000,
            with_allocations: true,
            allocations: vec![alloc(1, 4, 0), alloc(2, 8, 1), alloc(2, 4, 0), alloc(5, 4, 2), alloc(9, 4, 0)],
            allocation_sites: vec!["a.lua:3".into(), "b.lua:7".into(), "c.lua:9".into()],
            frames: vec![TimedFrame {
                index: 1,
                start_ns: 0,
                end_ns: 9_000_000,
                samples: 5,
                gc_samples: 2,
                allocated_bytes: Some(24 * 1024),
                cpu_ns: None,
                own_ns: 0,
            }],
            ..Default::default()
        };
        let v: Value = serde_json::from_str(&render(&tp)).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        let runs: Vec<&Value> = events.iter().filter(|e| e["name"] == "GC").collect();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0]["args"]["allocatedBytes"], 16 * 1024);
        // Largest first; ties by site.
        assert_eq!(runs[0]["args"]["allocatedBy"], serde_json::json!(["a.lua:3 (8192 bytes)", "b.lua:7 (8192 bytes)"]));
        assert_eq!(runs[1]["args"]["allocatedBytes"], 4 * 1024);
        assert_eq!(runs[1]["args"]["allocatedBy"], serde_json::json!(["c.lua:9 (4096 bytes)"]));
        let frame = events.iter().find(|e| e["name"] == "frame 1").unwrap();
        assert_eq!(frame["args"]["allocatedBytes"], 24 * 1024);
        // Without an allocation session, neither says anything of bytes.
        let plain = TimedProfile { with_allocations: false, ..tp };
        let v: Value = serde_json::from_str(&render(&plain)).unwrap();
        assert!(v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["args"].get("allocatedBytes").is_none() || e["name"] == "frame 1"));
    }
}
