use super::*;

fn dropped(text: &str) -> Vec<(String, u64)> {
    let mut p = collapsed::parse(text).expect("parses");
    p.drop_host_and_own_frames();
    p.named_rows().map(|r| (r.stack.join(";"), r.total())).collect()
}

#[test]
fn own_and_host_entry_frames_are_dropped_and_their_rows_merged() {
    let rows = dropped(
        "[C:luajit+0x92c0];main.lua:3;/usr/share/lua/5.1/tecs/profile/sample.lua:40;[C:tecs.profile.native] 5\n\
         [C:luajit+0x92c0];main.lua:3 2\n\
         main.lua:3;lua/tecs/profile.lua:10;work.lua:7 1\n",
    );
    assert_eq!(rows, vec![("main.lua:3".to_string(), 7), ("main.lua:3;work.lua:7".to_string(), 1)]);
}

#[test]
fn what_the_profilers_own_code_calls_is_its_own_unless_program_code_runs_above() {
    // The control channel's poll, run from the game's loop: its pcall
    // and loadstring go with it, to the line that called it.
    let rows = dropped(
        "[love \"callbacks.lua\"]:150;lua/tecs/profile/listen.lua:230;lua/tecs/profile/listen.lua:200;pcall 4\n\
         [love \"callbacks.lua\"]:150;lua/tecs/profile/snapshot.lua:60;loadstring;[C:love+0x10] 2\n\
         [love \"callbacks.lua\"]:150;love.graphics.present 3\n",
    );
    assert_eq!(
        rows,
        vec![
            ("[love \"callbacks.lua\"]:150".to_string(), 6),
            ("[love \"callbacks.lua\"]:150;love.graphics.present".to_string(), 3)
        ]
    );
    // A sample in the profiler's Lua code, under a pcall it made.
    let middle =
        "[love \"callbacks.lua\"]:150;lua/tecs/profile/listen.lua:200;pcall;lua/tecs/profile/snapshot.lua:60 2\n";
    assert_eq!(dropped(middle), vec![("[love \"callbacks.lua\"]:150".to_string(), 2)]);
    // A LÖVE callback the profiler's zone wrapper calls is the
    // program's: it and what it calls stay.
    let wrapped = "[love \"callbacks.lua\"]:162;lua/tecs/profile/love_zones.lua:40;main.lua:9;pcall 5\n";
    assert_eq!(dropped(wrapped), vec![("[love \"callbacks.lua\"]:162;main.lua:9;pcall".to_string(), 5)]);
    // The profiler's work alone (a poll timer) keeps its frames.
    let alone = "lua/tecs/profile/listen.lua:90;pcall 1\n";
    assert_eq!(dropped(alone), vec![("lua/tecs/profile/listen.lua:90;pcall".to_string(), 1)]);
    assert!(is_lua_frame(b"a.lua:3") && is_lua_frame(b"a.lua:3-9") && is_lua_frame(b"[string \"x\"]:2"));
    assert!(!is_lua_frame(b"pcall") && !is_lua_frame(b"[C:love+0x10]") && !is_lua_frame(b"a.lua:3-"));
}

#[test]
fn stacks_of_nothing_else_and_cut_stacks_keep_their_c_frames() {
    assert_eq!(dropped("[C:a];[C:b] 1\n"), vec![("[C:a];[C:b]".to_string(), 1)]);
    let cut = "[truncated stack];[C:sort];a.lua:1 2\n";
    assert_eq!(dropped(cut), vec![("[truncated stack];[C:sort];a.lua:1".to_string(), 2)]);
    // Not this package: a directory that only ends in the same letters.
    let other = "main.lua:1;lib/mytecs/profile.lua:4;x/tecs/profiles/a.lua:2 3\n";
    assert_eq!(dropped(other), vec![("main.lua:1;lib/mytecs/profile.lua:4;x/tecs/profiles/a.lua:2".to_string(), 3)]);
}
use crate::profile::collapsed;

#[test]
fn sanitize_replaces_separators_and_bad_utf8() {
    assert_eq!(sanitize(b"a;b\nc\rd"), "a_b_c_d");
    assert_eq!(sanitize(b"caf\xc3\xa9"), "café");
    assert_eq!(sanitize(b"x\xffy"), "x\u{fffd}y");
    assert_eq!(sanitize(b""), "?");
}

#[test]
fn builtins_are_named() {
    let names = vec![None, Some("assert".to_string()), Some("string.format".to_string())];
    let mut n = FrameNamer::new(&names, false);
    assert_eq!(n.name(b"[builtin#2]"), "string.format");
    assert_eq!(n.name(b"[builtin#99]"), "[builtin#99]");
    assert_eq!(n.name(b"@0x10"), "[C:0x10]");
    assert_eq!(n.name(b"a.lua:3"), "a.lua:3");
}

#[test]
fn map_frames_merges_rows_and_repeated_frames() {
    let p = collapsed::parse("a:1;a:2;b:7_[N] 3\na:1;b:8_[I] 2\n").unwrap();
    let m = p.map_frames(|f| f.split(':').next().unwrap().to_string());
    assert_eq!(m.rows.len(), 1);
    assert_eq!(m.named_rows().next().unwrap().stack, vec!["a", "b"]);
    assert_eq!(m.rows[0].counts, [3, 2, 0, 0, 0]);
}

#[test]
fn sort_orders_by_count_then_zone_path_then_stack_text() {
    let text =
        "z;b.lua:1_[N] 1\nb.lua:1;a.lua:2_[N] 1\nb.lua:1_[N] 1\na.lua:10_[N] 1\na.lua:9_[N] 2\nz;y;a.lua:1_[N] 1\n";
    let mut p = collapsed::parse(text).unwrap();
    p.sort();
    assert_eq!(
        collapsed::write(&p),
        "a.lua:9_[N] 2\na.lua:10_[N] 1\nb.lua:1_[N] 1\nb.lua:1;a.lua:2_[N] 1\nz;b.lua:1_[N] 1\nz;y;a.lua:1_[N] 1\n"
    );
    p.filter_zone(&["z".to_string()]);
    assert_eq!(collapsed::write(&p), "z;b.lua:1_[N] 1\nz;y;a.lua:1_[N] 1\n");
}

#[test]
fn totals_saturate_instead_of_overflowing() {
    // Found by the collapsed_parse fuzz target: two rows of u64::MAX.
    let p = crate::profile::collapsed::parse("a 18446744073709551615\nb 18446744073709551615\n").unwrap();
    assert_eq!(p.total(), u64::MAX);
    // Rows that merge add their counts state by state, saturating too.
    let m = p.map_frames(|_| "same.lua:1".to_string());
    assert_eq!(m.rows.len(), 1);
    assert_eq!(m.rows[0].counts, [u64::MAX, 0, 0, 0, 0]);
    let mut p = p;
    p.merge_equal_rows();
    assert_eq!(sum_counts([u64::MAX, 1, 2]), u64::MAX);
}

#[test]
fn dominant_state_ties_prefer_earlier() {
    assert_eq!(dominant_state(&[1, 3, 3, 0, 0]), b'I');
    assert_eq!(dominant_state(&[0, 0, 0, 0, 0]), b'N');
}
