use serde_json::Value;

use super::*;
use crate::profile::collapsed;
use crate::profile::VM_STATES;

fn meta_with(interval_ms: Option<f64>) -> RenderMeta<'static> {
    RenderMeta { interval_ms, ..RenderMeta::new() }
}

fn column<'a>(table: &'a Value, name: &str) -> &'a Vec<Value> {
    table[name].as_array().unwrap_or_else(|| panic!("column {} is not an array", name))
}

fn index(v: &Value, below: usize, what: &str) -> usize {
    let i = v.as_u64().unwrap_or_else(|| panic!("{}: {} is not an index", what, v)) as usize;
    assert!(i < below, "{}: {} out of range (length {})", what, i, below);
    i
}

/// Checks what the profiler relies on: every column as long as its table,
/// every index in range, stacks pointing at earlier stacks, times in
/// order. Returns the samples as collapsed lines (zones, frames, the leaf
/// marked with the state its category stands for) and their weights.
fn check_and_read_back(doc: &Value) -> Vec<(String, u64)> {
    let meta = &doc["meta"];
    assert_eq!(meta["preprocessedProfileVersion"], PROCESSED_PROFILE_VERSION);
    assert_eq!(meta["version"], GECKO_PROFILE_VERSION);
    let categories = meta["categories"].as_array().unwrap();
    assert!(categories.iter().any(|c| c["color"] == "grey"), "a grey (default) category");
    for c in categories {
        assert!(!c["subcategories"].as_array().unwrap().is_empty());
    }
    let threads = doc["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1);
    let t = &threads[0];
    let strings: Vec<&str> = t["stringArray"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let tables = [
        ("samples", &["stack", "time", "weight"][..]),
        ("stackTable", &["prefix", "frame", "category", "subcategory"][..]),
        (
            "frameTable",
            &[
                "address",
                "inlineDepth",
                "category",
                "subcategory",
                "func",
                "nativeSymbol",
                "innerWindowID",
                "implementation",
                "line",
                "column",
            ][..],
        ),
        ("funcTable", &["name", "isJS", "relevantForJS", "resource", "fileName", "lineNumber", "columnNumber"][..]),
        ("resourceTable", &["lib", "name", "host", "type"][..]),
        ("markers", &["data", "name", "startTime", "endTime", "phase", "category"][..]),
        ("nativeSymbols", &["address", "libIndex", "name", "functionSize"][..]),
    ];
    for (table, columns) in tables {
        let len = t[table]["length"].as_u64().unwrap_or_else(|| panic!("{}.length", table)) as usize;
        for c in columns {
            assert_eq!(column(&t[table], c).len(), len, "{}.{}", table, c);
        }
    }
    let (stacks, frames, funcs, resources) = (&t["stackTable"], &t["frameTable"], &t["funcTable"], &t["resourceTable"]);
    let n_stacks = stacks["length"].as_u64().unwrap() as usize;
    let n_frames = frames["length"].as_u64().unwrap() as usize;
    let n_funcs = funcs["length"].as_u64().unwrap() as usize;
    let n_resources = resources["length"].as_u64().unwrap() as usize;
    for i in 0..n_stacks {
        if !stacks["prefix"][i].is_null() {
            index(&stacks["prefix"][i], i, "stackTable.prefix");
        }
        let f = index(&stacks["frame"][i], n_frames, "stackTable.frame");
        index(&stacks["category"][i], categories.len(), "stackTable.category");
        assert_eq!(stacks["category"][i], frames["category"][f], "a stack has its frame's category");
    }
    for i in 0..n_frames {
        index(&frames["func"][i], n_funcs, "frameTable.func");
        index(&frames["category"][i], categories.len(), "frameTable.category");
    }
    for i in 0..n_funcs {
        index(&funcs["name"][i], strings.len(), "funcTable.name");
        if funcs["resource"][i] != -1 {
            index(&funcs["resource"][i], n_resources, "funcTable.resource");
        }
        if !funcs["fileName"][i].is_null() {
            index(&funcs["fileName"][i], strings.len(), "funcTable.fileName");
        }
    }
    for i in 0..n_resources {
        index(&resources["name"][i], strings.len(), "resourceTable.name");
    }
    let samples = &t["samples"];
    let times = column(samples, "time");
    assert!(times.windows(2).all(|w| w[0].as_f64().unwrap() <= w[1].as_f64().unwrap()), "times in order");
    let zone = categories.iter().position(|c| c["name"] == "Zone").unwrap();
    let first_state = categories.iter().position(|c| c["name"] == "Compiled").unwrap();
    let mut lines = Vec::new();
    for (s, w) in column(samples, "stack").iter().zip(column(samples, "weight")) {
        let mut at = Some(index(s, n_stacks, "samples.stack"));
        let mut names = Vec::new();
        let mut leaf_category = None;
        while let Some(i) = at {
            let f = stacks["frame"][i].as_u64().unwrap() as usize;
            let func = frames["func"][f].as_u64().unwrap() as usize;
            let category = frames["category"][f].as_u64().unwrap() as usize;
            leaf_category.get_or_insert(category);
            names.push((strings[funcs["name"][func].as_u64().unwrap() as usize], category == zone));
            at = stacks["prefix"][i].as_u64().map(|p| p as usize);
        }
        names.reverse();
        let state = VM_STATES[leaf_category.unwrap() - first_state] as char;
        let text: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
        lines.push((format!("{}_[{}]", text.join(";"), state), w.as_u64().unwrap()));
    }
    lines
}

fn collapsed_lines(text: &str) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = text
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack.to_string(), n.parse().unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn every_sample_reads_back_as_the_collapsed_line_it_came_from() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../spec/golden/input.collapsed")).unwrap();
    let p = collapsed::parse(&text).unwrap();
    let doc: Value = serde_json::from_str(&render(&p, &meta_with(Some(2.0)))).unwrap();
    let mut back = check_and_read_back(&doc);
    back.sort();
    assert_eq!(back, collapsed_lines(&collapsed::write(&p)));
    let total: u64 = back.iter().map(|(_, n)| n).sum();
    assert_eq!(total, p.total());
    assert_eq!(doc["threads"][0]["samples"]["weightType"], "samples");
    assert_eq!(doc["meta"]["interval"], 2.0);
}

#[test]
fn a_stack_seen_in_several_states_is_one_sample_per_state() {
    let mut p = collapsed::parse("main.lua:1;a.lua:2_[N] 3\n").unwrap();
    p.rows[0].counts = [3, 2, 0, 1, 0];
    let doc: Value = serde_json::from_str(&render(&p, &meta_with(Some(1.0)))).unwrap();
    let mut back = check_and_read_back(&doc);
    back.sort();
    let expected: Vec<(String, u64)> =
        [("G", 1), ("I", 2), ("N", 3)].iter().map(|(s, n)| (format!("main.lua:1;a.lua:2_[{}]", s), *n)).collect();
    assert_eq!(back, expected);
    // One function per frame text; the leaf's frames differ by category.
    let t = &doc["threads"][0];
    assert_eq!(t["funcTable"]["length"], 2);
    assert_eq!(t["frameTable"]["length"], 4);
    assert_eq!(t["samples"]["time"], serde_json::json!([0.0, 3.0, 5.0]));
}

#[test]
fn lua_lines_carry_their_file_and_line_zones_their_category() {
    let p = collapsed::parse("update;main.lua:12;string.format_[C] 5\n<root>_[G] 1\n").unwrap();
    let doc: Value = serde_json::from_str(&render(&p, &meta_with(None))).unwrap();
    let lines = check_and_read_back(&doc);
    assert_eq!(lines.iter().map(|(_, n)| n).sum::<u64>(), 6);
    let t = &doc["threads"][0];
    let strings = t["stringArray"].as_array().unwrap();
    let funcs = &t["funcTable"];
    let named = |name: &str| {
        (0..funcs["length"].as_u64().unwrap() as usize)
            .find(|&i| strings[funcs["name"][i].as_u64().unwrap() as usize] == name)
    };
    let main = named("main.lua:12").unwrap();
    assert_eq!(strings[funcs["fileName"][main].as_u64().unwrap() as usize], "main.lua");
    assert_eq!(funcs["lineNumber"][main], 12);
    assert_eq!(t["resourceTable"]["length"], 1);
    let format = named("string.format").unwrap();
    assert!(funcs["fileName"][format].is_null());
    assert_eq!(funcs["resource"][format], -1);
    let update = named("update").unwrap();
    let frame = (0..t["frameTable"]["length"].as_u64().unwrap() as usize)
        .find(|&f| t["frameTable"]["func"][f] == update)
        .unwrap();
    assert_eq!(
        doc["meta"]["categories"][t["frameTable"]["category"][frame].as_u64().unwrap() as usize]["name"],
        "Zone"
    );
    // Without an interval, each sample is a millisecond.
    assert_eq!(doc["meta"]["interval"], 1.0);
    assert_eq!(t["samples"]["time"], serde_json::json!([0.0, 5.0]));
}

#[test]
fn a_named_function_is_one_function_its_frames_at_the_lines_sampled() {
    let p = collapsed::parse("main.lua:3;a.lua:5_[N] 2\nmain.lua:3;a.lua:6_[N] 1\n").unwrap();
    let function_of = |f: &str| f.starts_with("a.lua:").then(|| "f (a.lua:4)".to_string());
    let meta = RenderMeta { function_of: &function_of, ..meta_with(None) };
    let doc: Value = serde_json::from_str(&render(&p, &meta)).unwrap();
    let t = &doc["threads"][0];
    let strings = t["stringArray"].as_array().unwrap();
    let funcs = &t["funcTable"];
    let f: Vec<usize> = (0..funcs["length"].as_u64().unwrap() as usize)
        .filter(|&i| strings[funcs["name"][i].as_u64().unwrap() as usize] == "f (a.lua:4)")
        .collect();
    assert_eq!(f.len(), 1, "one function for both lines");
    assert_eq!(funcs["lineNumber"][f[0]], 4, "where the function starts");
    let mut lines: Vec<u64> = (0..t["frameTable"]["length"].as_u64().unwrap() as usize)
        .filter(|&i| t["frameTable"]["func"][i] == f[0])
        .map(|i| t["frameTable"]["line"][i].as_u64().unwrap())
        .collect();
    lines.sort();
    assert_eq!(lines, [5, 6]);
}

#[test]
fn an_allocation_profile_weighs_bytes() {
    let p = collapsed::parse("main.lua:1_[I] 4096\nmain.lua:2_[I] 1024\n").unwrap();
    let meta =
        RenderMeta { clock: crate::output::pprof::ALLOC_SPACE.into(), interval_ms: Some(0.001), ..RenderMeta::new() };
    let doc: Value = serde_json::from_str(&render(&p, &meta)).unwrap();
    check_and_read_back(&doc);
    let samples = &doc["threads"][0]["samples"];
    assert_eq!(samples["weightType"], "bytes");
    assert_eq!(samples["weight"], serde_json::json!([4096, 1024]));
    assert_eq!(samples["time"], serde_json::json!([0.0, 1.0]));
}

#[test]
fn an_empty_profile_is_a_valid_file_with_no_samples() {
    let p = collapsed::parse("").unwrap();
    let doc: Value = serde_json::from_str(&render(&p, &RenderMeta::new())).unwrap();
    assert!(check_and_read_back(&doc).is_empty());
    assert_eq!(doc["threads"][0]["samples"]["length"], 0);
}

#[test]
fn the_registry_writes_it_from_a_profile_only() {
    use crate::output::{timed::TimedProfile, FileFormat};
    let p = collapsed::parse("a.lua:1_[N] 2\n").unwrap();
    let meta = RenderMeta::new();
    let bytes = FileFormat::Firefox.write(Source::Profile(&p, &meta)).unwrap();
    assert_eq!(String::from_utf8(bytes).unwrap(), render(&p, &meta));
    assert!(FileFormat::Firefox.write(Source::Timeline(&TimedProfile::default())).is_err());
    assert_eq!(FileFormat::for_path("run.firefox.json"), FileFormat::Firefox);
}
