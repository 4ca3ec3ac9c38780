//! speedscope files (https://www.speedscope.app/file-format-schema.json):
//! one `sampled` profile whose samples are the profile's rows (zone frames
//! first, then the stack, caller first) weighted by their counts.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::profile::frames;
use crate::profile::Profile;

pub const SCHEMA_URL: &str = "https://www.speedscope.app/file-format-schema.json";

#[derive(Clone, Debug, Default)]
pub struct SpeedscopeOptions {
    pub name: String,
    /// Sampling interval; when known, weights are in milliseconds.
    pub interval_ms: Option<f64>,
}

/// Renders `profile` as a speedscope JSON document.
pub fn render(profile: &Profile, opts: &SpeedscopeOptions) -> String {
    let mut frame_index: HashMap<String, usize> = HashMap::new();
    let mut frame_list: Vec<Value> = Vec::new();
    let mut intern = |name: String, file: Option<(&str, u32)>| -> usize {
        if let Some(&i) = frame_index.get(&name) {
            return i;
        }
        let v = match file {
            Some((f, line)) => json!({ "name": name, "file": f, "line": line }),
            None => json!({ "name": name }),
        };
        frame_list.push(v);
        frame_index.insert(name, frame_list.len() - 1);
        frame_list.len() - 1
    };
    let scale = opts.interval_ms.unwrap_or(1.0);
    let mut samples: Vec<Vec<usize>> = Vec::with_capacity(profile.rows.len());
    let mut weights: Vec<f64> = Vec::with_capacity(profile.rows.len());
    for row in profile.named_rows() {
        let n = row.total();
        if n == 0 {
            continue;
        }
        let mut stack = Vec::with_capacity(row.zones.len() + row.stack.len());
        for z in &row.zones {
            stack.push(intern(format!("zone {}", z), None));
        }
        let last = row.stack.len();
        for (i, f) in row.stack.iter().enumerate() {
            let name = if i + 1 == last { format!("{}_[{}]", f, row.dominant_state() as char) } else { f.to_string() };
            stack.push(intern(
                name,
                frames::file_line(f).or_else(|| frames::file_span(f).map(|(file, first, _)| (file, first))),
            ));
        }
        if row.stack.is_empty() {
            stack.push(intern(format!("<root>_[{}]", row.dominant_state() as char), None));
        }
        samples.push(stack);
        weights.push(n as f64 * scale);
    }
    let end: f64 = weights.iter().sum();
    let doc = json!({
        "$schema": SCHEMA_URL,
        "name": opts.name,
        "exporter": concat!("tecs-profile ", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": { "frames": frame_list },
        "profiles": [{
            "type": "sampled",
            "name": opts.name,
            "unit": if opts.interval_ms.is_some() { "milliseconds" } else { "none" },
            "startValue": 0,
            "endValue": end,
            "samples": samples,
            "weights": weights,
        }],
    });
    let mut s = serde_json::to_string_pretty(&doc).expect("a JSON value always serialises");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::collapsed;

    #[test]
    fn writes_a_sampled_profile() {
        let p = collapsed::parse("render;main.lua:3;a.lua:5_[N] 7\nmain.lua:3;pcall_[C] 2\n").unwrap();
        let s = render(&p, &SpeedscopeOptions { name: "t".into(), interval_ms: Some(2.0) });
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
    fn counts_as_large_as_a_u64_holds() {
        // Weights are floats: two rows of u64::MAX neither wrap nor panic.
        let p = collapsed::parse("a.lua:1_[N] 18446744073709551615\nb.lua:2_[N] 18446744073709551615\n").unwrap();
        let v: Value = serde_json::from_str(&render(&p, &SpeedscopeOptions::default())).unwrap();
        let prof = &v["profiles"][0];
        assert_eq!(prof["weights"], json!([u64::MAX as f64, u64::MAX as f64]));
        assert_eq!(prof["endValue"], json!(2.0 * u64::MAX as f64));
    }
}
