//! One name per concept in the Rust code of every crate of the workspace:
//! "timeline" is spelled one way in identifiers (the native API's
//! `timeLine` field, a string the Lua side reads, is not an identifier),
//! and no file is named after a top-level module of its crate it is not
//! part of (a `record.rs` outside `src/record/` reads as `crate::record`).

#[path = "../crates/recorder/tests/rust_source/mod.rs"]
mod rust_source;

use std::path::Path;

use rust_source::{files_under, SourceFile};

/// Each crate's `src/`, under the workspace root, with its files.
fn crates() -> Vec<(String, Vec<SourceFile>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec!["src".to_string()];
    for e in std::fs::read_dir(root.join("crates")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        dirs.push(format!("crates/{}/src", name));
    }
    dirs.sort();
    dirs.into_iter().map(|d| (d.clone(), files_under(&root.join(&d)))).collect()
}

#[test]
fn timeline_is_spelled_one_way_in_identifiers() {
    let mut found = Vec::new();
    let all = crates();
    assert!(all.len() >= 4, "the workspace's crates: {:?}", all.iter().map(|c| &c.0).collect::<Vec<_>>());
    for (dir, files) in &all {
        for f in files {
            for spelling in ["time_line", "TimeLine", "timeLine", "Time_line"] {
                for (at, _) in f.code.match_indices(spelling) {
                    found.push(format!("{}/{}:{}: {}", dir, f.path, f.line_of(at), spelling));
                }
            }
        }
    }
    assert!(found.is_empty(), "spell it timeline (Timeline for a type):\n{}", found.join("\n"));
}

#[test]
fn no_file_shares_its_name_with_another_top_level_module() {
    let mut found = Vec::new();
    for (dir, files) in crates() {
        let tops: Vec<String> = files.iter().filter_map(|f| f.module.first().cloned()).collect();
        for f in &files {
            let Some(stem) = f.path.rsplit('/').next().map(|n| n.trim_end_matches(".rs")) else { continue };
            let own = f.module.first().map(String::as_str);
            if f.module.len() > 1 && own != Some(stem) && tops.iter().any(|t| t == stem) {
                found.push(format!("{}/{}", dir, f.path));
            }
        }
    }
    assert!(found.is_empty(), "files named after another top-level module: {:?}", found);
}
