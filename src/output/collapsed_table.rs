//! Collapsed text straight from the stack table: what `stop()` returns.
//!
//! The result is byte for byte what [`crate::profile::collapsed::write`] makes from
//! [`crate::profile::Profile::from_table`], without building a `String`
//! per frame. Most keys are already in their final form: frames that are
//! valid UTF-8, free of `;` and control characters, and need no naming
//! (not a builtin, not a C address). Those rows point at the table's own
//! bytes; only the others are named and sanitised into a side buffer, in the
//! same key layout. Rows are then sorted in place and written once into an
//! output buffer of exactly the final size, so the memory this takes beyond
//! the table is the text itself plus one small record per row.

use std::cmp::Ordering;

use hashbrown::HashTable;

use crate::profile::{add_counts, sanitize, sum_counts, FrameNamer, OVERFLOW_FRAME};
use crate::record::sampler::FRAME_SEP;
use crate::record::stack_table::{Key, StackTable, VM_STATES};

/// One output line: a key in the table or in the side buffer, with cached
/// prefixes of its zone path and stack so that most comparisons in the sort
/// never touch the key bytes (which are spread over the whole table).
#[derive(Clone, Copy)]
struct Line {
    total: u64,
    /// Until the sort, the rank of the line's zone path among all distinct
    /// paths (so paths compare without touching key bytes); after it, the
    /// line's offset in the output.
    slot: u64,
    /// 16 stack bytes from the offset all plain stacks share (when `PLAIN`).
    stack_hi: u64,
    stack_lo: u64,
    /// Index in the table (`SIDE` clear) or in the side buffer (`SIDE` set).
    idx: u32,
    /// Length of the line's text, newline included.
    text_len: u32,
    flags: u8,
    state: u8,
}

const SIDE: u8 = 1;
/// The stack part contains no byte below 0x20 except the frame separator,
/// so plain byte order is the order of its frame list.
const PLAIN: u8 = 2;
/// Merged into a side row: not written.
const DEAD: u8 = 4;
/// The whole stack is within the shared offset plus the 16 cached bytes.
const STACK_WHOLE: u8 = 32;

impl Line {
    /// A line for `key`; `path_id` numbers its zone path (see [`PathIds`]).
    fn new(total: u64, idx: u32, flags: u8, state: u8, key: &[u8], path_id: u32) -> Line {
        Line {
            total,
            text_len: line_len(key, total) as u32,
            slot: path_id as u64,
            stack_hi: 0,
            stack_lo: 0,
            idx,
            flags,
            state,
        }
    }

    /// Caches the 16 stack bytes from `shared` (a prefix every plain stack has).
    fn cache_stack(&mut self, stack: &[u8], shared: usize) {
        let mut p = [0u8; 16];
        let tail = &stack[shared.min(stack.len())..];
        let n = tail.len().min(16);
        p[..n].copy_from_slice(&tail[..n]);
        self.stack_hi = u64::from_be_bytes(p[..8].try_into().expect("8 bytes"));
        self.stack_lo = u64::from_be_bytes(p[8..].try_into().expect("8 bytes"));
        if tail.len() <= 16 {
            self.flags |= STACK_WHOLE;
        }
    }
}

/// Distinct zone paths (there are few), numbered as first seen.
#[derive(Default)]
struct PathIds {
    ids: std::collections::HashMap<Vec<u8>, u32, ahash::RandomState>,
}

impl PathIds {
    fn id(&mut self, path: &[u8]) -> u32 {
        if let Some(&id) = self.ids.get(path) {
            return id;
        }
        let id = self.ids.len() as u32;
        self.ids.insert(path.to_vec(), id);
        id
    }

    /// Rank of every id in zone path order.
    fn ranks(&self) -> Vec<u32> {
        let mut by_path: Vec<(&[u8], u32)> = self.ids.iter().map(|(p, &id)| (p.as_slice(), id)).collect();
        by_path.sort_unstable_by(|a, b| cmp_components(a.0, b.0, b'/'));
        let mut ranks = vec![0; by_path.len()];
        for (rank, (_, id)) in by_path.iter().enumerate() {
            ranks[*id as usize] = rank as u32;
        }
        ranks
    }
}

struct SideRow {
    key: Vec<u8>,
    counts: [u64; 5],
}

fn dominant(counts: &[u64; 5]) -> u8 {
    let mut best = 0;
    for i in 1..5 {
        if counts[i] > counts[best] {
            best = i;
        }
    }
    VM_STATES[best]
}

fn widen(c: &[u32; 5]) -> [u64; 5] {
    [c[0] as u64, c[1] as u64, c[2] as u64, c[3] as u64, c[4] as u64]
}

/// Whether the zone path is already what sanitising its components gives.
fn path_is_final(path: &[u8]) -> bool {
    if path.is_empty() {
        return true;
    }
    if path[0] == b'/' || path[path.len() - 1] == b'/' {
        return false;
    }
    let mut prev = 0u8;
    for &b in path {
        if b == b';' || b == b'\r' || b == b'\n' || (b == b'/' && prev == b'/') {
            return false;
        }
        prev = b;
    }
    std::str::from_utf8(path).is_ok()
}

/// Whether every frame is already its final name (see the module comment).
fn stack_is_final(stack: &[u8]) -> bool {
    if stack.is_empty() {
        return true;
    }
    // One branch-free pass over the bytes (vectorised), then a look at
    // each frame's first bytes.
    let bad = stack.iter().fold(false, |acc, &b| acc | ((b < 0x20) & (b != FRAME_SEP)) | (b == b';'));
    if bad || stack[stack.len() - 1] == FRAME_SEP {
        return false;
    }
    let starts = std::iter::once(0).chain(memchr::memchr_iter(FRAME_SEP, stack).map(|i| i + 1));
    for i in starts {
        let f = &stack[i..];
        if f[0] == FRAME_SEP || f[0] == b'@' || f.starts_with(b"[builtin#") {
            return false;
        }
    }
    std::str::from_utf8(stack).is_ok()
}

fn stack_is_plain(stack: &[u8]) -> bool {
    !stack.iter().fold(false, |acc, &b| acc | ((b < 0x20) & (b != FRAME_SEP)))
}

/// Byte order with `sep` below every other byte: the order of the lists of
/// components `sep` separates.
fn cmp_components(a: &[u8], b: &[u8], sep: u8) -> Ordering {
    let n = a.len().min(b.len());
    match a[..n].iter().zip(&b[..n]).position(|(x, y)| x != y) {
        None => a.len().cmp(&b.len()),
        Some(i) => {
            let rank = |x: u8| if x == sep { 0u16 } else { x as u16 + 1 };
            rank(a[i]).cmp(&rank(b[i]))
        }
    }
}

/// Whether one frame or zone name is already its final form.
fn name_is_final(f: &[u8]) -> bool {
    !f.is_empty()
        && f[0] != b'@'
        && !f.starts_with(b"[builtin#")
        && !f.iter().fold(false, |acc, &b| acc | (b < 0x20) | (b == b';'))
        && std::str::from_utf8(f).is_ok()
}

/// Names and sanitises one key into the side-buffer layout.
fn render(key: &[u8], namer: &mut FrameNamer, out: &mut Vec<u8>) {
    Key::begin(out);
    let path = Key::path(key);
    if !path.is_empty() {
        for (i, z) in path.split(|&b| b == b'/').enumerate() {
            if i > 0 {
                out.push(b'/');
            }
            if name_is_final(z) {
                out.extend_from_slice(z);
            } else {
                out.extend_from_slice(sanitize(z).as_bytes());
            }
        }
    }
    Key::end_path(out);
    let stack = Key::stack(key);
    if !stack.is_empty() {
        for (i, f) in stack.split(|&b| b == FRAME_SEP).enumerate() {
            if i > 0 {
                out.push(FRAME_SEP);
            }
            if name_is_final(f) {
                out.extend_from_slice(f);
            } else {
                out.extend_from_slice(namer.name(f).as_bytes());
            }
        }
    }
}

/// Length of the line written for `key` with count `total`.
fn line_len(key: &[u8], total: u64) -> usize {
    let (path, stack) = (Key::path(key), Key::stack(key));
    let zones = if path.is_empty() { 0 } else { path.len() + 1 };
    let frames = if stack.is_empty() { "<root>".len() } else { stack.len() };
    zones + frames + "_[X] ".len() + digits(total) + 1
}

/// A cheap fingerprint (length and last bytes) to rule out most keys
/// before hashing them whole.
fn fingerprint(key: &[u8]) -> (usize, u64) {
    let mut tail = [0u8; 8];
    let n = key.len().min(8);
    tail[..n].copy_from_slice(&key[key.len() - n..]);
    (key.len(), u64::from_le_bytes(tail))
}

/// Replaces every `from` byte by `to`. Written as an unconditional store so
/// that it compiles to vector code.
fn replace_byte(buf: &mut [u8], from: u8, to: u8) {
    for b in buf.iter_mut() {
        *b = if *b == from { to } else { *b };
    }
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Renders the table as collapsed text (count descending, then zone path,
/// then stack), merging keys that name to the same frames.
pub fn write(table: &StackTable, namer: &mut FrameNamer) -> String {
    let hasher = ahash::RandomState::with_seeds(0x51de, 0x7ab1, 0xe5e5, 0x0c0f);
    let mut side: Vec<SideRow> = Vec::new();
    let mut side_index: HashTable<u32> = HashTable::new();
    let mut lines: Vec<Line> = Vec::with_capacity(table.len() + 1);
    let mut scratch = Vec::new();
    // Output size, counted as rows are made, so the buffer is allocated once
    // without another pass over the keys.
    let mut size = 0usize;
    let mut paths = PathIds::default();

    for i in 0..table.len() {
        let (key, entry) = table.get(i);
        if path_is_final(Key::path(key)) && stack_is_final(Key::stack(key)) {
            let counts = widen(&entry.counts);
            let total = sum_counts(counts);
            let id = paths.id(Key::path(key));
            let line = Line::new(total, i as u32, PLAIN, dominant(&counts), key, id);
            size += line.text_len as usize;
            lines.push(line);
            continue;
        }
        render(key, namer, &mut scratch);
        let hash = hasher.hash_one(&scratch);
        let counts = widen(&entry.counts);
        match side_index.find(hash, |&s| side[s as usize].key == scratch) {
            Some(&s) => {
                add_counts(&mut side[s as usize].counts, counts);
            }
            None => {
                let s = side.len() as u32;
                side.push(SideRow { key: scratch.clone(), counts });
                side_index.insert_unique(hash, s, |&j| hasher.hash_one(&side[j as usize].key));
            }
        }
    }
    // A key already in final form can still name the same frames as a key
    // that needed naming; fold those into the side row.
    if !side.is_empty() {
        let prints: std::collections::HashSet<(usize, u64), ahash::RandomState> =
            side.iter().map(|r| fingerprint(&r.key)).collect();
        for line in lines.iter_mut() {
            let (key, entry) = table.get(line.idx as usize);
            if !prints.contains(&fingerprint(key)) {
                continue;
            }
            let hash = hasher.hash_one(key);
            if let Some(&s) = side_index.find(hash, |&s| side[s as usize].key == key) {
                size -= line.text_len as usize;
                add_counts(&mut side[s as usize].counts, widen(&entry.counts));
                line.flags |= DEAD;
            }
        }
        lines.retain(|l| l.flags & DEAD == 0);
    }
    drop(side_index);
    if table.overflow_total() > 0 {
        // Never merged, as in Profile::from_table.
        let mut key = Vec::new();
        Key::begin(&mut key);
        Key::end_path(&mut key);
        key.extend_from_slice(OVERFLOW_FRAME.as_bytes());
        side.push(SideRow { key, counts: table.overflow });
    }
    for (s, row) in side.iter().enumerate() {
        let flags = SIDE | if stack_is_plain(Key::stack(&row.key)) { PLAIN } else { 0 };
        let id = paths.id(Key::path(&row.key));
        let line = Line::new(sum_counts(row.counts), s as u32, flags, dominant(&row.counts), &row.key, id);
        size += line.text_len as usize;
        lines.push(line);
    }

    let key_of = |l: &Line| -> &[u8] {
        if l.flags & SIDE != 0 {
            &side[l.idx as usize].key
        } else {
            table.get(l.idx as usize).0
        }
    };
    // The longest stack prefix shared by every plain row: the cached 16
    // bytes start after it, where stacks begin to differ.
    let mut shared = usize::MAX;
    let mut first: Option<&[u8]> = None;
    for l in lines.iter().filter(|l| l.flags & PLAIN != 0) {
        let stack = Key::stack(key_of(l));
        match first {
            None => {
                first = Some(stack);
                shared = stack.len();
            }
            Some(f) => {
                let n = shared.min(stack.len());
                // Usually the whole shared prefix matches: one memcmp.
                shared = if f[..n] == stack[..n] {
                    n
                } else {
                    f[..n].iter().zip(&stack[..n]).position(|(x, y)| x != y).unwrap_or(n)
                };
            }
        }
    }
    for line in lines.iter_mut() {
        if line.flags & PLAIN != 0 {
            let stack = Key::stack(key_of(line));
            line.cache_stack(stack, shared);
        }
    }
    let ranks = paths.ranks();
    for l in lines.iter_mut() {
        l.slot = ranks[l.slot as usize] as u64;
    }
    lines.sort_unstable_by(|a, b| {
        b.total.cmp(&a.total).then_with(|| {
            let both = a.flags & b.flags;
            let by_path = a.slot.cmp(&b.slot);
            by_path.then_with(|| {
                if both & PLAIN != 0 {
                    match (a.stack_hi, a.stack_lo).cmp(&(b.stack_hi, b.stack_lo)) {
                        Ordering::Equal if both & STACK_WHOLE != 0 => Ordering::Equal,
                        Ordering::Equal => Key::stack(key_of(a)).cmp(Key::stack(key_of(b))),
                        o => o,
                    }
                } else {
                    cmp_components(Key::stack(key_of(a)), Key::stack(key_of(b)), FRAME_SEP)
                }
            })
        })
    });

    // Each line's place in the output, in sorted order; then back to
    // storage order, so the keys are read front to back (sequential, cheap)
    // and the lines are scattered to their places (writes do not stall the
    // way reads of keys spread over the whole table do).
    let mut offset = 0u64;
    for l in lines.iter_mut() {
        l.slot = offset;
        offset += l.text_len as u64;
    }
    debug_assert_eq!(offset as usize, size);
    lines.sort_unstable_by_key(|l| (((l.flags & SIDE) as u64) << 32) | l.idx as u64);
    let mut out: Vec<u8> = vec![0; size];
    crate::sys::advise_huge_pages(&mut out);
    for l in &lines {
        let key = key_of(l);
        let (path, stack) = (Key::path(key), Key::stack(key));
        let start = l.slot as usize;
        let dst = &mut out[start..start + l.text_len as usize];
        let mut at = 0;
        if !path.is_empty() {
            dst[..path.len()].copy_from_slice(path);
            replace_byte(&mut dst[..path.len()], b'/', b';');
            dst[path.len()] = b';';
            at = path.len() + 1;
        }
        if stack.is_empty() {
            dst[at..at + 6].copy_from_slice(b"<root>");
            at += 6;
        } else {
            dst[at..at + stack.len()].copy_from_slice(stack);
            replace_byte(&mut dst[at..at + stack.len()], FRAME_SEP, b';');
            at += stack.len();
        }
        dst[at..at + 2].copy_from_slice(b"_[");
        dst[at + 2] = l.state;
        dst[at + 3..at + 5].copy_from_slice(b"] ");
        at += 5;
        let n = digits(l.total);
        let mut v = l.total;
        for d in dst[at..at + n].iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        dst[at + n] = b'\n';
        debug_assert_eq!(at + n + 1, dst.len());
    }
    debug_assert_eq!(out.len(), size);
    // Every component is valid UTF-8 (checked or sanitised above).
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::collapsed;
    use crate::profile::Profile;

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

    fn reference(table: &StackTable, ffnames: &[Option<String>]) -> String {
        collapsed::write(&Profile::from_table(table, &mut FrameNamer::new(ffnames, false)))
    }

    fn direct(table: &StackTable, ffnames: &[Option<String>]) -> String {
        write(table, &mut FrameNamer::new(ffnames, false))
    }

    #[test]
    fn matches_the_profile_writer_on_awkward_keys() {
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
            let frames: Vec<&[u8]> = if i % 11 == 0 {
                vec![root.as_bytes()]
            } else {
                vec![root.as_bytes(), mid.as_bytes(), leaf.as_bytes()]
            };
            t.add(&key(zones[i % 5], &frames), i % 5, 1 + (i % 3) as u32);
        }
        let expected = reference(&t, &ffnames);
        assert!(expected.lines().count() > 500);
        assert_eq!(direct(&t, &ffnames), expected);
    }
}
