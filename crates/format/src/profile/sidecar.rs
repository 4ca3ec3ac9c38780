//! The functions file beside a collapsed profile (`x.collapsed.functions.json`):
//! the function a session recorded for each frame, so that a report made
//! later, elsewhere, or after the sources changed names functions as the
//! session did. Collapsed text itself stays `frames count` lines.
//!
//! ```json
//! {"version":1,"frames":{"game.lua:12":{"source":"game.lua","first":10,"last":20,"name":"update",
//!   "label":"game.update (game.lua:10)"}}}
//! ```
//!
//! `label` is how the session's views named the function; a report of the
//! file uses it whatever the sources say then.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::frames::FrameIdentity;

/// The ending added to a collapsed file's name.
pub const ENDING: &str = ".functions.json";
const VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Sidecar {
    version: u32,
    /// What the profile's counts are when not samples: `bytes` (an
    /// allocation session's), which a report of the file says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unit: Option<String>,
    frames: BTreeMap<String, Function>,
}

#[derive(Serialize, Deserialize)]
struct Function {
    source: String,
    first: u32,
    last: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    ambiguous: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
}

/// The functions file of `ids`, for the frames `label` names: how the
/// views named each (None leaves a frame out); `unit` says what the counts
/// are when they are not samples.
pub fn write(
    ids: &HashMap<String, FrameIdentity>,
    label: impl Fn(&str) -> Option<String>,
    unit: Option<&str>,
) -> String {
    let frames = ids
        .iter()
        .filter_map(|(frame, id)| Some((frame, id, label(frame)?)))
        .map(|(frame, id, label)| {
            let f = Function {
                source: id.source.clone(),
                first: id.first,
                last: id.last,
                name: id.name.clone(),
                ambiguous: id.ambiguous,
                label: Some(label),
            };
            (frame.clone(), f)
        })
        .collect();
    let unit = unit.map(str::to_string);
    serde_json::to_string(&Sidecar { version: VERSION, unit, frames }).expect("plain data serialises")
}

/// The recorded functions of a functions file, or why it cannot be read.
pub fn read(text: &str) -> Result<HashMap<String, FrameIdentity>, String> {
    let s: Sidecar = serde_json::from_str(text).map_err(|e| format!("not a functions file ({})", e))?;
    if s.version != VERSION {
        return Err(format!("functions file version {} (this build reads version {})", s.version, VERSION));
    }
    Ok(s.frames
        .into_iter()
        .map(|(frame, f)| {
            let id = FrameIdentity {
                first: f.first,
                last: f.last,
                name: f.name,
                source: f.source,
                ambiguous: f.ambiguous,
                label: f.label,
            };
            (frame, id)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_functions_file_reads_back_what_was_written() {
        let mut ids = HashMap::new();
        let id = |name: Option<&str>| FrameIdentity {
            first: 10,
            last: 20,
            name: name.map(str::to_string),
            source: "game.lua".into(),
            ambiguous: false,
            label: name.map(|n| format!("{} (game.lua:10)", n)),
        };
        ids.insert("game.lua:12".to_string(), id(Some("update")));
        ids.insert("game.lua:15".to_string(), id(None));
        ids.insert("other.lua:1".to_string(), id(Some("x")));
        let text = write(&ids, |f| f.starts_with("game.lua").then(|| ids[f].label.clone().unwrap_or_default()), None);
        assert!(!text.contains("unit"), "{text}");
        let back = read(&text).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back["game.lua:12"], ids["game.lua:12"]);
        assert_eq!(back["game.lua:15"], FrameIdentity { label: Some(String::new()), ..ids["game.lua:15"].clone() });
        assert!(read("{\"version\":2,\"frames\":{}}").unwrap_err().contains("version 2"));
        assert!(read("not json").unwrap_err().starts_with("not a functions file"));
        // The unit goes with the frames, and the frames read back the same.
        let bytes = write(&ids, |f| f.starts_with("game.lua").then(String::new), Some("bytes"));
        assert!(bytes.contains("\"unit\":\"bytes\""), "{bytes}");
        assert_eq!(read(&bytes).unwrap().len(), 2);
    }
}
