//! The profile built from a stack table and written as collapsed text,
//! checked against a reference built the obvious way: every frame a
//! `String`, rows merged in a map, sorted, joined.

use std::collections::HashMap;

use super::stack_table::{Key, StackTable, FRAME_SEP};
use super::VM_STATES;
use super::{add_counts, collapsed, sanitize, sum_counts, FrameNamer, Profile, OVERFLOW_FRAME};

fn key(path: &[u8], frames: &[&[u8]]) -> Vec<u8> {
    let mut k = Vec::new();
    Key::begin(&mut k);
    k.extend_from_slice(path);
    Key::end_path(&mut k);
    for (i, f) in frames.iter().enumerate() {
        if i > 0 {
            k.push(FRAME_SEP);
        }
        k.extend_from_slice(f);
    }
    k
}

type Rows = Vec<((Vec<String>, Vec<String>), [u64; 5])>;

fn reference(table: &StackTable, ffnames: &[Option<String>]) -> String {
    let mut namer = FrameNamer::new(ffnames, false);
    let mut merged: HashMap<(Vec<String>, Vec<String>), [u64; 5]> = HashMap::new();
    for (key, entry) in table.iter() {
        let path = Key::path(key);
        let zones: Vec<String> =
            if path.is_empty() { Vec::new() } else { path.split(|&b| b == b'/').map(sanitize).collect() };
        let raw = Key::stack(key);
        let stack: Vec<String> =
            if raw.is_empty() { Vec::new() } else { raw.split(|&b| b == FRAME_SEP).map(|f| namer.name(f)).collect() };
        add_counts(merged.entry((zones, stack)).or_insert([0; 5]), entry.counts.map(u64::from));
    }
    let mut rows: Rows = merged.into_iter().collect();
    if table.overflow_total() > 0 {
        rows.push(((Vec::new(), vec![OVERFLOW_FRAME.to_string()]), table.overflow));
    }
    rows.sort_by(|a, b| sum_counts(b.1).cmp(&sum_counts(a.1)).then_with(|| a.0.cmp(&b.0)));
    let mut out = String::new();
    for ((zones, stack), counts) in rows {
        for z in &zones {
            out.push_str(z);
            out.push(';');
        }
        out.push_str(&if stack.is_empty() { "<root>".to_string() } else { stack.join(";") });
        let mut best = 0;
        for i in 1..5 {
            if counts[i] > counts[best] {
                best = i;
            }
        }
        out.push_str(&format!("_[{}] {}\n", VM_STATES[best] as char, sum_counts(counts)));
    }
    out
}

fn direct(table: &StackTable, ffnames: &[Option<String>]) -> String {
    collapsed::write(&Profile::from_table(table, &mut FrameNamer::new(ffnames, false)))
}

#[test]
fn matches_the_reference_on_awkward_keys() {
    let ffnames = vec![None, Some("string.format".to_string()), Some("a;b".to_string())];
    let mut t = StackTable::new(1000);
    let keys: Vec<Vec<u8>> = vec![
        key(b"", &[]),
        key(b"z", &[]),
        key(b"", &[b"main.lua:1", b"a.lua:2"]),
        key(b"update/ai", &[b"main.lua:1", b"a.lua:2"]),
        key(b"update", &[b"ai", b"main.lua:1", b"a.lua:2"]),
        key(b"", &[b"update", b"ai", b"main.lua:1", b"a.lua:2"]),
        key(b"a.x", &[b"m.lua:1"]),
        key(b"a/c", &[b"m.lua:1"]),
        key(b"a", &[b"m.lua:1"]),
        key(b"a b", &[b"m.lua:1"]),
        key(b"", &[b"m.lua:1", b"[builtin#1]"]),
        key(b"", &[b"m.lua:1", b"string.format"]),
        key(b"", &[b"m.lua:1", b"[builtin#2]"]),
        key(b"", &[b"m.lua:1", b"[builtin#99]"]),
        key(b"", &[b"m.lua:1", b"@0x10"]),
        key(b"", &[b"m.lua:1", b"x;y", b"t.lua:9"]),
        key(b"", &[b"m.lua:1", b"x_y", b"t.lua:9"]),
        key(b"", &[b"m.lua:1", b"tab\there"]),
        key(b"", &[b"m.lua:1", b"tab here"]),
        key(b"", &[b"m.lua:1", b"bad\xffutf8"]),
        // Frames that need naming among ones that do not, in one key.
        key(b"", &[b"m.lua:2", b"bad\xffutf8", b"t.lua:9", b"caf\xc3\xa9.lua:1"]),
        key(b"", &[b"m.lua:2", b"t.lua:9", b"tab\there", b"caf\xc3\xa9.lua:1"]),
        key(b"", &[b"m.lua:1", b"", b"e.lua:3"]),
        key(b"", &[b"m.lua:1", b"?", b"e.lua:3"]),
        key(b"w//x", &[b"m.lua:1"]),
        key(b"w/?/x", &[b"m.lua:1"]),
        key(b"/lead", &[b"m.lua:1"]),
        key(b"cr\r", &[b"m.lua:1"]),
        key(b"", &[b"m.lua:1", b"m.lua:1"]),
        key(b"", &[b"m.lua"]),
        key(b"", &[b"m.lua:1", b"line\nfeed"]),
    ];
    for (i, k) in keys.iter().enumerate() {
        // Several counts and states, with many equal totals.
        t.add(k, i % 5, 1 + (i % 3) as u32);
        t.add(k, (i + 2) % 5, (i % 2) as u32);
    }
    assert_eq!(t.len(), keys.len());
    let expected = reference(&t, &ffnames);
    assert!(expected.lines().count() < keys.len(), "some keys must merge for this test to mean anything");
    assert_eq!(direct(&t, &ffnames), expected);
}

#[test]
fn matches_with_overflow_and_empty_tables() {
    let ffnames = vec![];
    let t = StackTable::new(10);
    assert_eq!(direct(&t, &ffnames), "");
    let mut t = StackTable::new(2);
    t.add(&key(b"", &[b"a.lua:1"]), 0, 3);
    t.add(&key(b"z", &[b"b.lua:2"]), 1, 3);
    t.add(&key(b"", &[b"c.lua:3"]), 2, 4);
    assert_eq!(t.overflow_total(), 4);
    let expected = reference(&t, &ffnames);
    assert!(expected.contains(OVERFLOW_FRAME));
    assert_eq!(direct(&t, &ffnames), expected);
}

#[test]
fn matches_on_many_generated_keys() {
    let ffnames: Vec<Option<String>> = (0..40).map(|i| Some(format!("lib.f{}", i % 7))).collect();
    let mut t = StackTable::new(100_000);
    let zones: [&[u8]; 4] = [b"", b"u", b"u/p", b"d;x"];
    for i in 0..3000usize {
        let a = format!("f{}.lua:{}", i % 13, i % 17);
        let b = if i % 5 == 0 { format!("[builtin#{}]", i % 40) } else { format!("g.lua:{}", i % 11) };
        let c = format!("h{}.lua:{}", i % 3, i % 29);
        let k = key(zones[i % 4], &[a.as_bytes(), b.as_bytes(), c.as_bytes()]);
        t.add(&k, i % 5, 1 + (i % 4) as u32);
    }
    let expected = reference(&t, &ffnames);
    assert_eq!(direct(&t, &ffnames), expected);
}

#[test]
fn matches_with_long_paths_and_long_shared_prefixes() {
    let ffnames: Vec<Option<String>> = (0..10).map(|i| Some(format!("m.f{}", i))).collect();
    let mut t = StackTable::new(100_000);
    let zones: [&[u8]; 5] =
        [b"update/physics/broadphase", b"update/physics", b"update/physics/b", b"", b"update/physicsX"];
    let root = "/srv/app/lua/main.lua:10";
    for i in 0..4000usize {
        let mid = format!("/srv/app/lua/systems/{}.lua:{}", i % 7, 100 + i % 5);
        let leaf = match i % 9 {
            0 => format!("[builtin#{}]", i % 10),
            1 => format!("/srv/app/lua/systems/{}.lua:{}", i % 7, 100 + i % 5), // same as mid
            2 => "/srv/app/lua/systems/0.lua:1000".to_string(),
            3 => "/srv/app/lua/systems/0.lua:100".to_string(),
            _ => format!("/srv/app/lua/leaf_{}.lua:{}", i % 97, i % 13),
        };
        let frames: Vec<&[u8]> =
            if i % 11 == 0 { vec![root.as_bytes()] } else { vec![root.as_bytes(), mid.as_bytes(), leaf.as_bytes()] };
        t.add(&key(zones[i % 5], &frames), i % 5, 1 + (i % 3) as u32);
    }
    let expected = reference(&t, &ffnames);
    assert!(expected.lines().count() > 500);
    assert_eq!(direct(&t, &ffnames), expected);
}

#[test]
fn frames_shared_with_the_previous_key_only_in_part_are_not_reused() {
    let ffnames = vec![None, Some("string.format".to_string())];
    let mut t = StackTable::new(1000);
    let stacks: [&[&[u8]]; 8] = [
        &[b"a.lua:1", b"b.lua:2"],
        &[b"a.lua:10", b"b.lua:2"],
        &[b"a.lua:10"],
        &[b"a.lua:10", b"b.lua:2", b"c.lua:3"],
        &[b"a.lua:10", b"b.lua:2", b"[builtin#1]"],
        &[b"a.lua:10", b"b.lua:2", b"string.format"],
        &[],
        &[b"a.lua:10", b"b.lua:2;x"],
    ];
    // Enough keys for several batches, each stack in every zone.
    for round in 0..100u32 {
        for (i, s) in stacks.iter().enumerate() {
            let zone = format!("z{}", round);
            t.add(&key(zone.as_bytes(), s), i % 5, 1 + round % 3);
        }
    }
    assert_eq!(direct(&t, &ffnames), reference(&t, &ffnames));
}
