//! speedscope files (https://www.speedscope.app/file-format-schema.json):
//! one `sampled` profile whose samples are stacks (zone frames first, then
//! the stack, caller first, the leaf tagged with its VM state) weighted by
//! their counts. [`render`] writes a profile's rows (aggregated);
//! [`render_timeline`] writes a session's timeline, one sample per
//! recorded callback in the order they were taken, so that speedscope's
//! "Time Order" view shows the program's run.

use std::collections::HashMap;

use serde::Serialize;

use super::timed::TimedProfile;
use crate::profile::frames;
use crate::profile::{Profile, OVERFLOW_FRAME};

pub const SCHEMA_URL: &str = "https://www.speedscope.app/file-format-schema.json";

#[derive(Clone, Debug, Default)]
pub struct SpeedscopeOptions {
    pub name: String,
    /// Sampling interval; when known, weights are in milliseconds.
    pub interval_ms: Option<f64>,
}

// Fields in name order: the files are written with their keys sorted, as
// earlier versions wrote them (byte for byte the same files).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct File<'a> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    active_profile_index: usize,
    exporter: &'static str,
    name: &'a str,
    profiles: [SampledProfile<'a>; 1],
    shared: Shared,
}

#[derive(Serialize)]
struct Shared {
    frames: Vec<Frame>,
}

#[derive(Serialize)]
struct Frame {
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SampledProfile<'a> {
    end_value: f64,
    name: &'a str,
    samples: Vec<Vec<usize>>,
    /// Always 0.
    start_value: u32,
    #[serde(rename = "type")]
    kind: &'static str,
    unit: &'static str,
    weights: Vec<f64>,
}

/// The shared frame list, each (name, line) once.
struct Frames<'n> {
    index: HashMap<(String, Option<u32>), usize>,
    list: Vec<Frame>,
    /// The function a Lua frame belongs to, where its sources named it: a
    /// frame's name is its function's, its line the line sampled.
    function_of: &'n dyn Fn(&str) -> Option<String>,
}

impl<'n> Frames<'n> {
    fn new(function_of: &'n dyn Fn(&str) -> Option<String>) -> Self {
        Frames { index: HashMap::new(), list: Vec::new(), function_of }
    }

    fn intern(&mut self, name: String, file: Option<(&str, u32)>) -> usize {
        let key = (name, file.map(|f| f.1));
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        self.list.push(Frame { name: key.0.clone(), file: file.map(|f| f.0.to_string()), line: key.1 });
        self.index.insert(key, self.list.len() - 1);
        self.list.len() - 1
    }

    /// A sample's stack: zones, then frames with the leaf tagged by `state`.
    fn stack<Z: AsRef<str>, F: AsRef<str>>(&mut self, zones: &[Z], stack: &[F], state: u8) -> Vec<usize> {
        let mut out = Vec::with_capacity(zones.len() + stack.len().max(1));
        for z in zones {
            out.push(self.intern(format!("zone {}", z.as_ref()), None));
        }
        let last = stack.len();
        for (i, f) in stack.iter().enumerate() {
            let f = f.as_ref();
            let function = (self.function_of)(f);
            let shown = function.as_deref().unwrap_or(f);
            let name = if i + 1 == last { format!("{}_[{}]", shown, state as char) } else { shown.to_string() };
            let file = frames::file_line(f).or_else(|| frames::file_span(f).map(|(file, first, _)| (file, first)));
            out.push(self.intern(name, file));
        }
        if stack.is_empty() {
            out.push(self.intern(format!("<root>_[{}]", state as char), None));
        }
        out
    }
}

fn document(name: &str, unit: &'static str, frames: Frames<'_>, samples: Vec<Vec<usize>>, weights: Vec<f64>) -> String {
    let end: f64 = weights.iter().sum();
    let file = File {
        schema: SCHEMA_URL,
        name,
        exporter: concat!("tecs-profile ", env!("CARGO_PKG_VERSION")),
        active_profile_index: 0,
        shared: Shared { frames: frames.list },
        profiles: [SampledProfile { kind: "sampled", name, unit, start_value: 0, end_value: end, samples, weights }],
    };
    let mut s = serde_json::to_string_pretty(&file).expect("a speedscope file always serialises");
    s.push('\n');
    s
}

/// Renders `profile` as a speedscope JSON document, Lua frames named by
/// the functions `function_of` gives.
pub fn render(profile: &Profile, opts: &SpeedscopeOptions, function_of: &dyn Fn(&str) -> Option<String>) -> String {
    let mut frames = Frames::new(function_of);
    let scale = opts.interval_ms.unwrap_or(1.0);
    let mut samples: Vec<Vec<usize>> = Vec::with_capacity(profile.rows.len());
    let mut weights: Vec<f64> = Vec::with_capacity(profile.rows.len());
    for row in profile.named_rows() {
        let n = row.total();
        if n == 0 {
            continue;
        }
        samples.push(frames.stack(&row.zones, &row.stack, row.dominant_state()));
        weights.push(n as f64 * scale);
    }
    let unit = if opts.interval_ms.is_some() { "milliseconds" } else { "none" };
    document(&opts.name, unit, frames, samples, weights)
}

/// Renders a session's timeline as a speedscope JSON document: one sample
/// per recorded callback, oldest first, weighted by the time it stands for
/// (its ticks times the interval, in milliseconds). Lua frames are named by
/// their functions where the timeline names them
/// ([`TimedProfile::function_name`]).
pub fn render_timeline(tp: &TimedProfile) -> String {
    let function_of = |f: &str| tp.function_name(f).map(str::to_string);
    let mut frames = Frames::new(&function_of);
    let mut stacks: HashMap<(u32, u8), usize> = HashMap::new();
    let mut unique: Vec<Vec<usize>> = Vec::new();
    let mut samples = Vec::with_capacity(tp.samples.len());
    let mut weights = Vec::with_capacity(tp.samples.len());
    for p in &tp.samples {
        let i = *stacks.entry((p.stack, p.state)).or_insert_with(|| {
            unique.push(match tp.stacks.get(p.stack as usize) {
                Some(s) => frames.stack(&s.zones, &s.frames, p.state),
                None => frames.stack::<&str, &str>(&[], &[OVERFLOW_FRAME], p.state),
            });
            unique.len() - 1
        });
        samples.push(unique[i].clone());
        weights.push(tp.weight_ns(p) as f64 / 1e6);
    }
    document(&tp.name, "milliseconds", frames, samples, weights)
}

/// The registry's speedscope writer ([`render`]). The interval scales the
/// weights to milliseconds, except in an allocation profile, whose
/// weights are bytes.
pub struct Speedscope;

impl super::Writer for Speedscope {
    fn write(&self, source: super::Source<'_>) -> Result<Vec<u8>, String> {
        let super::Source::Profile(p, meta) = source else { return Err(super::wrong_source("speedscope", false)) };
        let interval_ms = if meta.counts_bytes() { None } else { meta.interval_ms };
        Ok(render(p, &SpeedscopeOptions { name: meta.title.clone(), interval_ms }, meta.function_of).into_bytes())
    }
}

/// The registry's speedscope writer in time order ([`render_timeline`]).
pub struct SpeedscopeTimeline;

impl super::Writer for SpeedscopeTimeline {
    fn write(&self, source: super::Source<'_>) -> Result<Vec<u8>, String> {
        match source {
            super::Source::Timeline(tp) => Ok(render_timeline(tp).into_bytes()),
            super::Source::Profile(..) => Err(super::wrong_source("speedscope-timeline", true)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::timed::{TimedPoint, TimedStack};
    use crate::profile::collapsed;
    use serde_json::{json, Value};

    #[test]
    fn writes_a_sampled_profile() {
        let p = collapsed::parse("render;main.lua:3;a.lua:5_[N] 7\nmain.lua:3;pcall_[C] 2\n").unwrap();
        let s = render(&p, &SpeedscopeOptions { name: "t".into(), interval_ms: Some(2.0) }, &|_| None);
        let v: Value = serde_json::from_str(&s).unwrap();
        let prof = &v["profiles"][0];
        assert_eq!(prof["type"], "sampled");
        assert_eq!(prof["unit"], "milliseconds");
        assert_eq!(prof["weights"], json!([14.0, 4.0]));
        assert_eq!(prof["endValue"], json!(18.0));
        let frames = v["shared"]["frames"].as_array().unwrap();
        assert_eq!(frames[0]["name"], "zone render");
        assert_eq!(frames[1]["file"], "main.lua");
        assert_eq!(frames[1]["line"], 3);
        assert_eq!(prof["samples"][1], json!([1, 3]));
    }

    #[test]
    fn names_lua_frames_by_function_at_the_line_sampled() {
        let p = collapsed::parse("main.lua:3;a.lua:5_[N] 2\nmain.lua:3;a.lua:6_[N] 1\n").unwrap();
        let function_of = |f: &str| f.starts_with("a.lua:").then(|| "f (a.lua:4)".to_string());
        let v: Value = serde_json::from_str(&render(&p, &SpeedscopeOptions::default(), &function_of)).unwrap();
        let frames = v["shared"]["frames"].as_array().unwrap();
        let named: Vec<(&str, u64)> = frames
            .iter()
            .filter(|f| f["file"] == "a.lua")
            .map(|f| (f["name"].as_str().unwrap(), f["line"].as_u64().unwrap()))
            .collect();
        assert_eq!(named, [("f (a.lua:4)_[N]", 5), ("f (a.lua:4)_[N]", 6)]);
        assert!(frames.iter().any(|f| f["name"] == "main.lua:3"), "a frame not named stays its text");
    }

    #[test]
    fn counts_as_large_as_a_u64_holds() {
        // Weights are floats: two rows of u64::MAX neither wrap nor panic.
        let p = collapsed::parse("a.lua:1_[N] 18446744073709551615\nb.lua:2_[N] 18446744073709551615\n").unwrap();
        let v: Value = serde_json::from_str(&render(&p, &SpeedscopeOptions::default(), &|_| None)).unwrap();
        let prof = &v["profiles"][0];
        assert_eq!(prof["weights"], json!([u64::MAX as f64, u64::MAX as f64]));
        assert_eq!(prof["endValue"], json!(2.0 * u64::MAX as f64));
    }

    #[test]
    fn a_timeline_keeps_its_order_and_weights() {
        let tp = TimedProfile {
            name: "tl".into(),
            stacks: vec![
                TimedStack { zones: vec!["draw".into()], frames: vec!["m.lua:1".into(), "a.lua:2".into()] },
                TimedStack { zones: vec![], frames: vec!["b.lua:3".into()] },
            ],
            samples: [(0, b'N', 1), (1, b'N', 2), (0, b'N', 1), (0, b'G', 1), (7, b'N', 1)]
                .iter()
                .enumerate()
                .map(|(i, &(stack, state, count))| TimedPoint { t_ns: i as u64 * 10, stack, state, count })
                .collect(),
            interval_ns: 500_000,
            ..Default::default()
        };
        let v: Value = serde_json::from_str(&render_timeline(&tp)).unwrap();
        let prof = &v["profiles"][0];
        assert_eq!(prof["unit"], "milliseconds");
        assert_eq!(prof["weights"], json!([0.5, 1.0, 0.5, 0.5, 0.5]));
        assert_eq!(prof["endValue"], json!(3.0));
        let names: Vec<Vec<String>> = prof["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                s.as_array()
                    .unwrap()
                    .iter()
                    .map(|i| v["shared"]["frames"][i.as_u64().unwrap() as usize]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .collect();
        assert_eq!(names[0], ["zone draw", "m.lua:1", "a.lua:2_[N]"]);
        assert_eq!(names[1], ["b.lua:3_[N]"]);
        assert_eq!(names[2], names[0]);
        assert_eq!(names[3], ["zone draw", "m.lua:1", "a.lua:2_[G]"]);
        assert_eq!(names[4], [format!("{}_[N]", OVERFLOW_FRAME)]);
    }
}
