//! Chrome trace event files read back: the timeline a session wrote with
//! [`super::chrome_trace::render`] rebuilt into its frames and, per frame,
//! what ran in it.
//!
//! What ran in each frame is in `otherData.frameSamples`: the samples the
//! frame holds, by stack, as the session counted them. A file without it is
//! read from the Lua track, which holds the sampled stacks as nested
//! ranges: the time a range does not share with a range nested in it is
//! time its stack was the innermost one sampled. That self time, as the
//! samples that fit in it (one per sampling interval), each counted in the
//! frame where it ends (a sample stands for the interval before it, and a
//! frame holds the samples taken in it), is then what ran in the frame.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::chrome_trace::{FRAMES_TID, LUA_TID};

/// What the writer puts in `otherData.exporter`, before its version.
const EXPORTER: &str = "tecs-profile";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InFile {
    trace_events: Vec<InEvent>,
    #[serde(default)]
    other_data: Option<InOther>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InOther {
    #[serde(default)]
    exporter: String,
    #[serde(default)]
    interval_ms: f64,
    #[serde(default)]
    stacks: Vec<String>,
    /// The function of each of `stacks`, as the session named it; absent
    /// in files written before the writer named them.
    #[serde(default)]
    stack_functions: Vec<String>,
    /// Absent in files written before frames counted their samples.
    #[serde(default)]
    frame_samples: Option<Vec<InFrameSamples>>,
}

/// The samples taken in one frame, by stack, as the writer counted them.
#[derive(Deserialize)]
struct InFrameSamples {
    frame: u64,
    samples: Vec<(usize, u64)>,
}

#[derive(Deserialize)]
struct InEvent {
    #[serde(default)]
    name: String,
    #[serde(default)]
    cat: String,
    #[serde(default)]
    ph: String,
    #[serde(default)]
    ts: f64,
    #[serde(default)]
    dur: Option<f64>,
    #[serde(default)]
    tid: u32,
    #[serde(default)]
    args: Map<String, Value>,
}

/// One frame of the frames track.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadFrame {
    pub index: u64,
    pub start_ms: f64,
    pub ms: f64,
    pub samples: u64,
    pub gc_samples: u64,
    /// The CPU time the frame's thread used in it, where the file says.
    pub cpu_ms: Option<f64>,
    /// Samples by stack (`;`-joined Lua frames, caller first), in the
    /// order the stacks first ran in the frame.
    pub stacks: Vec<(String, u64)>,
    /// What ran in the frame by function, ranked as the session ranks a
    /// frame's samples (`rank_by_function`), from the functions the file
    /// names; None when it names none.
    pub functions: Option<Vec<(String, u64)>>,
}

/// A timeline read back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadTimeline {
    /// The process name (the session's name).
    pub name: String,
    pub interval_ms: f64,
    /// Frames in time order.
    pub frames: Vec<ReadFrame>,
    /// Ranges on the Lua track.
    pub ranges: usize,
}

/// A stretch of time in which one stack was the innermost sampled.
struct Segment {
    start: f64,
    end: f64,
    stack: usize,
}

/// The self-time segments of the Lua track, in time order, and the stacks
/// they point at. Ranges come parent first (a caller before its callees),
/// in time order, as the writer puts them.
fn segments(events: &[&InEvent]) -> (Vec<Segment>, Vec<String>) {
    let mut stacks: Vec<String> = Vec::new();
    let mut ids: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out: Vec<Segment> = Vec::new();
    // The open ranges: name and end.
    let mut open: Vec<(&str, f64)> = Vec::new();
    let mut cursor = 0.0f64;
    let mut emit = |open: &[(&str, f64)], from: f64, to: f64, out: &mut Vec<Segment>| {
        if to <= from || open.is_empty() {
            return;
        }
        let key = open.iter().map(|o| o.0).collect::<Vec<_>>().join(";");
        let next = stacks.len();
        let id = *ids.entry(key.clone()).or_insert(next);
        if id == next {
            stacks.push(key);
        }
        out.push(Segment { start: from, end: to, stack: id });
    };
    for e in events {
        let end = e.ts + e.dur.unwrap_or(0.0);
        while let Some(&(_, top_end)) = open.last() {
            if top_end > e.ts {
                break;
            }
            emit(&open, cursor, top_end, &mut out);
            cursor = cursor.max(top_end);
            open.pop();
        }
        emit(&open, cursor, e.ts, &mut out);
        cursor = cursor.max(e.ts);
        open.push((&e.name, end));
    }
    while let Some(&(_, top_end)) = open.last() {
        emit(&open, cursor, top_end, &mut out);
        cursor = cursor.max(top_end);
        open.pop();
    }
    (out, stacks)
}

fn arg_u64(args: &Map<String, Value>, key: &str) -> u64 {
    args.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Reads a Chrome trace event file a session wrote. Errors say what is
/// wrong: not JSON, not trace events, or trace events another tool wrote.
pub fn read(text: &str) -> Result<ReadTimeline, String> {
    let file: InFile = serde_json::from_str(text).map_err(|e| format!("not Chrome trace event JSON ({})", e))?;
    let other = file.other_data.ok_or("Chrome trace events without otherData: not a timeline tecs-profile wrote")?;
    if !other.exporter.starts_with(EXPORTER) {
        return Err(format!(
            "Chrome trace events from {:?}, not a timeline tecs-profile wrote (otherData.exporter)",
            other.exporter
        ));
    }
    let name = file
        .trace_events
        .iter()
        .find(|e| e.ph == "M" && e.name == "process_name")
        .and_then(|e| e.args.get("name").and_then(Value::as_str))
        .unwrap_or(EXPORTER)
        .to_string();
    let lua: Vec<&InEvent> = file
        .trace_events
        .iter()
        .filter(|e| e.ph == "X" && e.tid == LUA_TID && e.dur.is_some_and(|d| d > 0.0))
        .filter(|e| e.cat == "lua")
        .collect();
    let (segs, stacks) = segments(&lua);
    let mut frames = Vec::new();
    // The window of each frame, in microseconds.
    let mut windows: Vec<(f64, f64)> = Vec::new();
    for e in file.trace_events.iter().filter(|e| e.ph == "X" && e.tid == FRAMES_TID && e.cat == "frame") {
        let index = e
            .name
            .strip_prefix("frame ")
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| format!("frames track: range {:?} is not named \"frame N\"", e.name))?;
        windows.push((e.ts, e.ts + e.dur.unwrap_or(0.0)));
        frames.push(ReadFrame {
            index,
            start_ms: e.ts / 1e3,
            ms: e.args.get("ms").and_then(Value::as_f64).unwrap_or(e.dur.unwrap_or(0.0) / 1e3),
            samples: arg_u64(&e.args, "samples"),
            gc_samples: arg_u64(&e.args, "gcSamples"),
            cpu_ms: e.args.get("cpuMs").and_then(Value::as_f64),
            stacks: Vec::new(),
            functions: None,
        });
    }
    let mut order: Vec<usize> = (0..frames.len()).collect();
    order.sort_by(|&a, &b| windows[a].0.total_cmp(&windows[b].0).then(frames[a].index.cmp(&frames[b].index)));
    let frames: Vec<ReadFrame> = order.iter().map(|&i| frames[i].clone()).collect();
    let windows: Vec<(f64, f64)> = order.iter().map(|&i| windows[i]).collect();
    let mut by_frame: Vec<Vec<(usize, u64)>> = vec![Vec::new(); frames.len()];
    // A frame holds the samples taken in it, and a sample stands for the
    // interval before it: a segment is as many samples as intervals fit
    // in it (at least one), evenly spread, each in the frame where it ends.
    let step = other.interval_ms * 1e3;
    for s in &segs {
        let len = s.end - s.start;
        let n = if step > 0.0 { ((len / step).round() as u64).max(1) } else { 1 };
        for k in 0..n {
            let end = (s.end - step * k as f64).max(s.start + len / n as f64);
            let at = windows.partition_point(|w| w.0 <= end);
            if at > 0 && end <= windows[at - 1].1 {
                let sums = &mut by_frame[at - 1];
                match sums.iter_mut().find(|(id, _)| *id == s.stack) {
                    Some((_, sum)) => *sum += 1,
                    None => sums.push((s.stack, 1)),
                }
            }
        }
    }
    let mut frames: Vec<ReadFrame> = frames
        .into_iter()
        .zip(by_frame)
        .map(|(f, sums)| ReadFrame { stacks: sums.into_iter().map(|(id, n)| (stacks[id].clone(), n)).collect(), ..f })
        .collect();
    // Files that count each frame's samples are read as counted: what ran
    // in a frame is then the session's, exactly.
    if let Some(counted) = &other.frame_samples {
        let counted: std::collections::HashMap<u64, &InFrameSamples> = counted.iter().map(|f| (f.frame, f)).collect();
        let named = !other.stack_functions.is_empty();
        if named && other.stack_functions.len() != other.stacks.len() {
            return Err(format!(
                "otherData.stackFunctions: {} functions for {} stacks",
                other.stack_functions.len(),
                other.stacks.len()
            ));
        }
        for f in &mut frames {
            if named {
                let samples = counted.get(&f.index).map_or(&[][..], |c| &c.samples[..]);
                let charged = samples
                    .iter()
                    .map(|&(id, n)| other.stack_functions.get(id).map(|name| (name.as_str(), n)))
                    .collect::<Option<Vec<_>>>();
                // A stack out of range is refused below, naming it.
                f.functions = charged.map(crate::output::timed::rank_by_function);
            }
            let Some(c) = counted.get(&f.index) else {
                f.stacks.clear();
                continue;
            };
            f.stacks = c
                .samples
                .iter()
                .map(|&(id, n)| {
                    let stack = other.stacks.get(id).ok_or_else(|| {
                        format!(
                            "otherData.frameSamples: frame {} names stack {}, of {}",
                            f.index,
                            id,
                            other.stacks.len()
                        )
                    })?;
                    Ok((stack.clone(), n))
                })
                .collect::<Result<_, String>>()?;
        }
    }
    Ok(ReadTimeline { name, interval_ms: other.interval_ms, frames, ranges: lua.len() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::chrome_trace::render;
    use crate::output::timed::{TimedFrame, TimedPoint, TimedProfile, TimedStack};

    fn point(t_ms: u64, stack: u32) -> TimedPoint {
        TimedPoint { t_ns: t_ms * 1_000_000, stack, state: b'N', count: 1 }
    }

    #[test]
    fn frames_and_what_ran_in_them_come_back() {
        let st =
            |f: &[&str]| TimedStack { zones: vec!["update".into()], frames: f.iter().map(|s| s.to_string()).collect() };
        let tp = TimedProfile {
            name: "game".into(),
            stacks: vec![st(&["main.lua:1", "a.lua:5"]), st(&["main.lua:1", "b.lua:9"]), st(&["main.lua:1"])],
            // Frame 1 (0-3.5 ms): a, a, b. Frame 2 (3.5-6.5 ms): b, main, a.
            samples: vec![point(1, 0), point(2, 0), point(3, 1), point(4, 1), point(5, 2), point(6, 0)],
            frames: vec![
                TimedFrame {
                    index: 1,
                    start_ns: 0,
                    end_ns: 3_500_000,
                    samples: 3,
                    gc_samples: 0,
                    allocated_bytes: None,
                    cpu_ns: Some(1_250_000),
                    own_ns: 0,
                },
                TimedFrame {
                    index: 2,
                    start_ns: 3_500_000,
                    end_ns: 6_500_000,
                    samples: 3,
                    gc_samples: 1,
                    allocated_bytes: None,
                    cpu_ns: None,
                    own_ns: 0,
                },
            ],
            events: vec![],
            interval_ns: 1_000_000,
            end_ns: 6_500_000,
            ..Default::default()
        };
        let got = read(&render(&tp)).unwrap();
        assert_eq!(got.name, "game");
        assert_eq!(got.interval_ms, 1.0);
        let want = vec![
            ReadFrame {
                index: 1,
                start_ms: 0.0,
                ms: 3.5,
                samples: 3,
                gc_samples: 0,
                cpu_ms: Some(1.25),
                stacks: vec![("main.lua:1;a.lua:5".into(), 2), ("main.lua:1;b.lua:9".into(), 1)],
                functions: None,
            },
            ReadFrame {
                index: 2,
                start_ms: 3.5,
                ms: 3.0,
                samples: 3,
                gc_samples: 1,
                cpu_ms: None,
                stacks: vec![
                    ("main.lua:1;b.lua:9".into(), 1),
                    ("main.lua:1".into(), 1),
                    ("main.lua:1;a.lua:5".into(), 1),
                ],
                functions: None,
            },
        ];
        assert_eq!(got.frames, want);
    }

    #[test]
    fn samples_closer_than_the_interval_come_back_as_counted() {
        // Three samples of `a` within 0.4 ms (a callback delayed, then two
        // on time) are drawn 1.4 ms long in all: counted back from the
        // range, one sample; as the frame counted them, three.
        let tp = TimedProfile {
            name: "game".into(),
            stacks: vec![
                TimedStack { zones: vec![], frames: vec!["main.lua:1".into(), "a.lua:5".into()] },
                TimedStack { zones: vec![], frames: vec!["main.lua:1".into(), "b.lua:9".into()] },
            ],
            samples: vec![
                TimedPoint { t_ns: 1_000_000, stack: 0, state: b'N', count: 1 },
                TimedPoint { t_ns: 1_200_000, stack: 0, state: b'N', count: 1 },
                TimedPoint { t_ns: 1_400_000, stack: 0, state: b'N', count: 1 },
                TimedPoint { t_ns: 5_000_000, stack: 1, state: b'C', count: 2 },
            ],
            frames: vec![TimedFrame {
                index: 1,
                start_ns: 0,
                end_ns: 10_000_000,
                samples: 5,
                gc_samples: 0,
                allocated_bytes: None,
                cpu_ns: None,
                own_ns: 0,
            }],
            interval_ns: 1_000_000,
            end_ns: 10_000_000,
            ..Default::default()
        };
        let text = render(&tp);
        let got = read(&text).unwrap();
        assert_eq!(got.frames[0].stacks, vec![("main.lua:1;a.lua:5".into(), 3), ("main.lua:1;b.lua:9".into(), 2)]);
        // A file without the counts is counted back from the ranges.
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let other = v["otherData"].as_object_mut().unwrap();
        other.remove("frameSamples");
        other.remove("stacks");
        let old = read(&v.to_string()).unwrap();
        assert_eq!(old.frames[0].stacks[0], ("main.lua:1;a.lua:5".into(), 1));
        // A count naming a stack the file lacks is refused.
        let bad = text.replace("\"stacks\":[", "\"stacks\":[\"x\"],\"unused\":[");
        assert!(read(&bad).unwrap_err().contains("names stack"));
    }

    #[test]
    fn frames_come_back_ranked_by_the_functions_the_session_named() {
        let st = |f: &[&str]| TimedStack { zones: vec![], frames: f.iter().map(|s| s.to_string()).collect() };
        let tp = TimedProfile {
            name: "game".into(),
            // Two lines of one function, a C function, and a sample without frames.
            stacks: vec![
                st(&["main.lua:1", "a.lua:5"]),
                st(&["main.lua:1", "a.lua:7"]),
                st(&["love.graphics.print"]),
                st(&[]),
            ],
            stack_functions: vec![
                "f (a.lua:4)".into(),
                "f (a.lua:4)".into(),
                "love.graphics.print".into(),
                "[no stack]".into(),
            ],
            samples: vec![point(1, 0), point(2, 1), point(3, 2), point(4, 2), point(5, 3), point(6, 2)],
            frames: vec![TimedFrame {
                index: 1,
                start_ns: 0,
                end_ns: 10_000_000,
                samples: 6,
                gc_samples: 0,
                allocated_bytes: None,
                cpu_ns: None,
                own_ns: 0,
            }],
            interval_ns: 1_000_000,
            end_ns: 10_000_000,
            ..Default::default()
        };
        let text = render(&tp);
        let got = read(&text).unwrap();
        let want: Vec<(String, u64)> =
            vec![("love.graphics.print".into(), 3), ("f (a.lua:4)".into(), 2), ("[no stack]".into(), 1)];
        assert_eq!(got.frames[0].functions, Some(want));
        // The session's ranking of the same samples is the file's.
        let stacks = &tp.frame_stack_samples()[0];
        let session = crate::output::timed::rank_by_function(
            stacks.iter().map(|&(s, n)| (tp.stack_functions[s as usize].as_str(), n)),
        );
        assert_eq!(got.frames[0].functions.as_ref(), Some(&session));
        // A list of functions that does not match the stacks is refused.
        let bad = text.replace("\"stackFunctions\":[", "\"stackFunctions\":[\"x\",");
        assert!(read(&bad).unwrap_err().contains("5 functions for 4 stacks"), "{}", read(&bad).unwrap_err());
    }

    #[test]
    fn other_files_are_refused_with_a_reason() {
        assert!(read("{").unwrap_err().contains("not Chrome trace event JSON"));
        assert!(read("[1, 2]").unwrap_err().contains("not Chrome trace event JSON"));
        let other = r#"{"traceEvents":[],"otherData":{"exporter":"perfetto"}}"#;
        assert!(read(other).unwrap_err().contains("\"perfetto\""));
        assert!(read(r#"{"traceEvents":[]}"#).unwrap_err().contains("without otherData"));
        let empty = read(&render(&TimedProfile::default())).unwrap();
        assert!(empty.frames.is_empty());
    }
}
