//! The session state's bookkeeping, without a Lua state.

use std::collections::HashMap;

use tecs_profile_format::profile::frames::FrameIdentity;
use tecs_profile_format::profile::stack_table::{Key, StackTable, FRAME_SEP};

use super::{frames_window, span_key, CallSiteFixes, FunctionPaths, SessionState, StrippedFunction};
use crate::record::timeline::{FrameSpan, Timeline};

/// A table holding one sample of each stack (frames root first).
fn table(stacks: &[&[&str]]) -> StackTable {
    let mut t = StackTable::new(64);
    for frames in stacks {
        let mut key = Vec::new();
        Key::begin(&mut key);
        Key::end_path(&mut key);
        key.extend_from_slice(frames.join(&(FRAME_SEP as char).to_string()).as_bytes());
        t.add(&key, 0, 1);
    }
    t
}

fn identity(source: &str, first: u32, last: u32) -> FrameIdentity {
    FrameIdentity { first, last, name: None, source: source.into(), ambiguous: false, label: None }
}

fn sorted(mut v: Vec<usize>) -> Vec<usize> {
    v.sort();
    v
}

#[test]
fn c_addresses_are_whole_frames_not_looked_for_yet() {
    let t = table(&[&["main.lua:1", "@0x10", "@0x20"], &["a.lua:3", "x@0x30"], &["@0x10"]]);
    let mut paths = FunctionPaths::default();
    // `x@0x30` is a frame whose text holds an `@`, not a C function.
    assert_eq!(sorted(paths.c_addresses_not_looked_for(&t)), vec![0x10, 0x20]);
    paths.looked_for(vec![0x10], Vec::new(), Vec::new());
    assert_eq!(paths.c_addresses_not_looked_for(&t), vec![0x20]);
    // Looked for and not found: asked again once forgotten.
    paths.forget_unnamed();
    assert_eq!(sorted(paths.c_addresses_not_looked_for(&t)), vec![0x10, 0x20]);
}

#[test]
fn lua_functions_not_looked_for_are_sorted_once_each() {
    let mut ids = HashMap::new();
    ids.insert("b.lua:5".to_string(), identity("b.lua", 4, 9));
    ids.insert("b.lua:6".to_string(), identity("b.lua", 4, 9));
    ids.insert("a.lua:1".to_string(), identity("a.lua", 0, 0));
    let mut paths = FunctionPaths::default();
    let keys = paths.lua_functions_not_looked_for(&ids);
    assert_eq!(keys, vec![span_key("a.lua", 0, 0), span_key("b.lua", 4, 9)]);
    paths.looked_for(Vec::new(), vec![span_key("a.lua", 0, 0)], Vec::new());
    assert_eq!(paths.lua_functions_not_looked_for(&ids), vec![span_key("b.lua", 4, 9)]);
}

#[test]
fn functions_without_lines_are_named_by_their_prototype() {
    let mut ids = HashMap::new();
    ids.insert("m.lua:@0x10".to_string(), identity("m.lua", 0, 0));
    ids.insert("m.lua:@0x20".to_string(), identity("m.lua", 0, 0));
    ids.insert("m.lua:0".to_string(), identity("m.lua", 0, 0));
    let mut paths = FunctionPaths::default();
    assert_eq!(paths.stripped_not_looked_for(&ids), vec![0x10, 0x20]);
    paths.looked_for(Vec::new(), Vec::new(), vec![0x10, 0x20]);
    assert!(paths.stripped_not_looked_for(&ids).is_empty());
    paths.name_stripped([
        (0x10, StrippedFunction { path: Some("m.f".into()), first: 3, last: 9 }),
        (0x10, StrippedFunction { path: Some("m.g".into()), first: 0, last: 0 }),
    ]);
    paths.name_identities(&mut ids);
    assert_eq!((ids["m.lua:@0x10"].first, ids["m.lua:@0x10"].last), (3, 9));
    assert_eq!(ids["m.lua:@0x10"].name.as_deref(), Some("m.f"), "the first found wins");
    assert_eq!((ids["m.lua:@0x20"].first, ids["m.lua:@0x20"].name.as_deref()), (0, None));
    assert_eq!((ids["m.lua:0"].first, ids["m.lua:0"].name.as_deref()), (0, None));
    // Not found: asked again once forgotten.
    paths.forget_unnamed();
    assert_eq!(paths.stripped_not_looked_for(&ids), vec![0x20]);
}

#[test]
fn span_key_last_line_is_at_least_the_first() {
    assert_eq!(span_key("m.lua", 7, 0), ("m.lua".to_string(), 7, 7));
}

#[test]
fn first_c_path_wins_and_shared_addresses_name_nothing() {
    let mut paths = FunctionPaths::default();
    let added = paths.name_c_functions([
        (0x1, 100, "love.graphics.points".to_string()),
        (0x1, 100, "graphics.points".to_string()),
        // Two functions at one address (made by one C function).
        (0x2, 200, "mod.a".to_string()),
        (0x2, 201, "mod.b".to_string()),
        // One method of several types keeps the first type's name.
        (0x3, 300, "ByteData:getString".to_string()),
        (0x3, 301, "CompressedData:getString".to_string()),
    ]);
    assert!(added);
    assert_eq!(paths.c_paths[&0x1].as_deref(), Some("love.graphics.points"));
    assert_eq!(paths.c_paths[&0x2], None);
    assert_eq!(paths.c_paths[&0x3].as_deref(), Some("ByteData:getString"));
    // Nothing new: no change.
    assert!(!paths.name_c_functions([(0x1, 100, "other".to_string())]));
    // An address found shared later loses the name it had.
    assert!(paths.name_c_functions([(0x1, 100, "x.p".to_string()), (0x1, 102, "x.q".to_string())]));
    assert_eq!(paths.c_paths[&0x1], None);
    // Unnamed ones are forgotten, named ones stay.
    paths.forget_unnamed();
    assert!(!paths.c_paths.contains_key(&0x1));
    assert_eq!(paths.c_paths[&0x3].as_deref(), Some("ByteData:getString"));
}

#[test]
fn lua_paths_name_identities_first_path_wins() {
    let mut paths = FunctionPaths::default();
    let mut ids = HashMap::new();
    ids.insert("g.lua:10".to_string(), identity("g.lua", 9, 20));
    ids.insert("g.lua:30".to_string(), identity("g.lua", 29, 31));
    paths.name_identities(&mut ids);
    assert!(ids.values().all(|id| id.name.is_none()));
    paths.name_lua_functions([
        ("love.update".to_string(), "g.lua".to_string(), 9, 20),
        ("game.update".to_string(), "g.lua".to_string(), 9, 20),
    ]);
    paths.looked_for(Vec::new(), vec![span_key("g.lua", 29, 31)], Vec::new());
    paths.name_identities(&mut ids);
    assert_eq!(ids["g.lua:10"].name.as_deref(), Some("love.update"));
    assert_eq!(ids["g.lua:30"].name, None);
}

#[test]
fn call_sites_are_asked_once_and_fixed_when_the_line_moves() {
    let mut fixes = CallSiteFixes::default();
    let mut recorded = HashMap::new();
    recorded.insert(b"Cgame.lua:12".to_vec(), 3);
    recorded.insert(b"Cnoline".to_vec(), 4);
    let mut pending = fixes.pending(&recorded);
    pending.sort();
    assert_eq!(pending, vec![(b"Cgame.lua:12".to_vec(), 3), (b"Cnoline".to_vec(), 4)]);
    assert_eq!(fixes.check(b"Cgame.lua:12"), Some(('C', 12)));
    assert_eq!(fixes.check(b"Cnoline"), None);
    assert!(fixes.pending(&recorded).is_empty());
    // The same line, or none, changes nothing.
    assert!(!fixes.fix(b"Cgame.lua:12", 12));
    assert!(!fixes.fix(b"Cgame.lua:12", 0));
    assert!(fixes.lines.is_empty());
    assert!(fixes.fix(b"Cgame.lua:12", 10));
    assert_eq!(fixes.lines[b"Cgame.lua:12".as_slice()], b"game.lua:10".to_vec());
    assert!(!fixes.fix(b"Cnoline", 5));
    assert!(!fixes.fix(b"", 5));
    assert_eq!(fixes.check(b""), None);
}

#[test]
fn new_state_starts_empty_with_the_names_given() {
    let mut s = SessionState::new(vec![None, Some("print".into())], true, 1_000, Some(5));
    assert_eq!(s.frame_marks.start_ns, 1_000);
    assert_eq!(s.frame_marks.len(), 0);
    assert!(s.finished.is_none() && s.call_sites.lines.is_empty() && s.delta.objects.is_empty());
    s.paths.name_c_functions([(0x9, 1, "m.f".to_string())]);
    let names = s.autosave_names();
    assert_eq!(names.ffnames, vec![None, Some("print".into())]);
    assert!(names.resolve_c);
    assert_eq!(names.c_paths[&0x9].as_deref(), Some("m.f"));
}

fn span(index: u64, start_ns: u64, end_ns: u64) -> FrameSpan {
    FrameSpan { index, start_ns, end_ns, samples: 0, gc_samples: 0, cpu_ns: None, own_ns: 0 }
}

#[test]
fn frames_window_gives_the_last_in_order_and_the_slowest_first() {
    let spans = [span(1, 0, 10), span(2, 10, 40), span(3, 40, 50), span(4, 50, 80)];
    let (recent, slow) = frames_window(&spans, 2, 3);
    assert_eq!(recent.iter().map(|f| f.index).collect::<Vec<_>>(), vec![3, 4]);
    // 2 and 4 last 30 ns each: the earlier first.
    assert_eq!(slow.iter().map(|f| f.index).collect::<Vec<_>>(), vec![2, 4, 1]);
    let (recent, slow) = frames_window(&spans, 9, 0);
    assert_eq!(recent.len(), 4);
    assert!(slow.is_empty());
    let (recent, slow) = frames_window(&[], 3, 3);
    assert!(recent.is_empty() && slow.is_empty());
}

#[test]
fn own_work_leaves_the_running_frame_shorter() {
    let mut s = SessionState::new(Vec::new(), false, 0, None);
    let mut timeline = Timeline::new(16);
    s.frame_marks.mark(100, None, &mut timeline);
    s.own_work(f64::NAN);
    s.own_work(-1.0);
    s.own_work(0.0);
    s.own_work(50e-9);
    s.frame_marks.mark(1_100, None, &mut timeline);
    let spans = s.frame_marks.spans(&timeline, 2_000);
    let first = spans.iter().find(|f| f.index == 1).expect("the first frame");
    assert_eq!(first.ns(), 1_000 - 50);
}

#[test]
fn events_keep_their_details_in_key_order() {
    let mut s = SessionState::new(Vec::new(), false, 0, None);
    let args = vec![("z".to_string(), "1".to_string()), ("a".to_string(), "2".to_string())];
    s.add_event(5, "trace abort".into(), args);
    let e = &s.timeline_events.list[0];
    assert_eq!((e.t_ns, e.name.as_str()), (5, "trace abort"));
    assert_eq!(e.args, vec![("a".to_string(), "2".to_string()), ("z".to_string(), "1".to_string())]);
}
