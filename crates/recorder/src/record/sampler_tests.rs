//! Tests of the sample callback's key building (`sampler.rs`).

use super::{
    leaf_start, make_room_for_leaf, mark_truncated, push_c_frame, replace_line_with_span, Sampler, FRAME_SEP,
    TRUNCATED_FRAME,
};
use crate::sys::RunningC;

#[test]
fn c_leaves_are_written_as_the_stack_dump_writes_c_frames() {
    let mut key = b"a.lua:3".to_vec();
    push_c_frame(&mut key, true, RunningC::Builtin(17));
    assert_eq!(key, b"a.lua:3\x1f[builtin#17]");
    let mut key = b"a.lua:3".to_vec();
    push_c_frame(&mut key, true, RunningC::Function(0x7f00_dead_beef));
    assert_eq!(key, b"a.lua:3\x1f@0x7f00deadbeef");
    let mut alone = Vec::new();
    push_c_frame(&mut alone, false, RunningC::Function(0x10));
    assert_eq!(alone, b"@0x00000010");
    let mut alone = Vec::new();
    push_c_frame(&mut alone, false, RunningC::Function(0x1_0040_1234));
    assert_eq!(alone, b"@0x0100401234");
    let mut alone = Vec::new();
    push_c_frame(&mut alone, false, RunningC::Function(0x0555_5555_1234));
    assert_eq!(alone, b"@0x055555551234");
}

fn stack(frames: &[&str]) -> Vec<u8> {
    frames.join("\x1f").into_bytes()
}

#[test]
fn a_stack_over_the_depth_gets_a_truncated_root() {
    for outer in ["a.lua:1", "a_much_longer_chunk_name_than_the_marker.lua:100"] {
        let mut key = b"zone\0".to_vec();
        key.extend(stack(&[outer, "b.lua:2", "c.lua:3"]));
        mark_truncated(&mut key, 5, 2);
        let mut want = b"zone\0".to_vec();
        want.extend(stack(&[std::str::from_utf8(TRUNCATED_FRAME).unwrap(), "b.lua:2", "c.lua:3"]));
        assert_eq!(key, want);
    }
    let mut whole = stack(&["a.lua:1", "b.lua:2"]);
    mark_truncated(&mut whole, 0, 2);
    assert_eq!(whole, stack(&["a.lua:1", "b.lua:2"]), "a stack of exactly the depth is whole");
    let mut empty = Vec::new();
    mark_truncated(&mut empty, 0, 1);
    assert!(empty.is_empty());
}

#[test]
fn a_c_leaf_takes_the_place_of_the_outermost_lua_frame() {
    let t = std::str::from_utf8(TRUNCATED_FRAME).unwrap();
    let room = |frames: &[&str], depth: i32| {
        let mut key = b"zone".to_vec();
        key.extend_from_slice(&stack(frames));
        make_room_for_leaf(&mut key, 4, depth);
        assert_eq!(&key[..4], b"zone");
        key[4..].to_vec()
    };
    // A full stack: its outermost frame becomes the marker.
    assert_eq!(room(&["a", "b", "c"], 3), stack(&[t, "b", "c"]));
    // A truncated one: the frame after the marker goes.
    assert_eq!(room(&[t, "b", "c", "d"], 3), stack(&[t, "c", "d"]));
    // Room to spare, or a depth of one: every frame stays.
    assert_eq!(room(&["a", "b"], 3), stack(&["a", "b"]));
    assert_eq!(room(&[t, "b"], 1), stack(&[t, "b"]));
    // The marker plus depth - 1 frames, then the leaf: as long as any
    // truncated stack of that depth.
    let mut key = stack(&[t, "b", "c", "d"]);
    make_room_for_leaf(&mut key, 0, 3);
    push_c_frame(&mut key, true, RunningC::Builtin(3));
    assert_eq!(key.split(|&b| b == FRAME_SEP).count(), 4);
}

#[test]
fn leaf_line_becomes_function_span() {
    let mut key = b"zz".to_vec();
    key.extend_from_slice(b"a.lua:3");
    key.push(FRAME_SEP);
    key.extend_from_slice(b"b/c.lua:17");
    let leaf = leaf_start(&key, 2);
    assert_eq!(&key[leaf..], b"b/c.lua:17");
    replace_line_with_span(&mut key, leaf, 12, 40);
    assert!(key.ends_with(b"\x1fb/c.lua:12-40"));
    let mut builtin = b"[builtin#3]".to_vec();
    replace_line_with_span(&mut builtin, 0, 1, 2);
    assert_eq!(builtin, b"[builtin#3]");
}

#[test]
fn filter_matches_whole_components() {
    assert!(Sampler::path_matches(b"a/Render", b"a/Render"));
    assert!(Sampler::path_matches(b"a/Render", b"a/Render/x"));
    assert!(!Sampler::path_matches(b"a/Render", b"a/Renderer"));
    assert!(!Sampler::path_matches(b"a/Render", b"a"));
    assert!(!Sampler::path_matches(b"a/Render", b""));
}
