//! One name per concept in the Rust code: "timeline" is spelled one way in
//! identifiers (the native API's `timeLine` field, a string the Lua side
//! reads, is not an identifier), and no file is named after a top-level
//! module it is not part of (a `record.rs` outside `src/record/` reads as
//! `crate::record`).

mod rust_source;

use rust_source::crate_files;

#[test]
fn timeline_is_spelled_one_way_in_identifiers() {
    let mut found = Vec::new();
    for f in crate_files() {
        for spelling in ["time_line", "TimeLine", "timeLine", "Time_line"] {
            for (at, _) in f.code.match_indices(spelling) {
                found.push(format!("src/{}:{}: {}", f.path, f.line_of(at), spelling));
            }
        }
    }
    assert!(found.is_empty(), "spell it timeline (Timeline for a type):\n{}", found.join("\n"));
}

/// Files still named after another top-level module, with why.
const STILL_SHARING_A_NAME: &[(&str, &str)] = &[(
    "lua_api/control.rs",
    "the control channel's Lua side, being changed on another branch: renamed after it lands",
)];

#[test]
fn no_file_shares_its_name_with_another_top_level_module() {
    let files = crate_files();
    let tops: Vec<String> = files.iter().filter_map(|f| f.module.first().cloned()).collect();
    let mut found = Vec::new();
    for f in &files {
        let Some(stem) = f.path.rsplit('/').next().map(|n| n.trim_end_matches(".rs")) else { continue };
        let own = f.module.first().map(String::as_str);
        let excepted = STILL_SHARING_A_NAME.iter().any(|(p, _)| *p == f.path);
        if f.module.len() > 1 && own != Some(stem) && tops.iter().any(|t| t == stem) && !excepted {
            found.push(format!("src/{}", f.path));
        }
    }
    assert!(found.is_empty(), "files named after another top-level module: {:?}", found);
}
