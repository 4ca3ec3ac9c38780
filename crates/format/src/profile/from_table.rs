//! Building a [`Profile`] from a sampler's stack table.
//!
//! Each distinct raw frame is named once. Most frames need no naming at
//! all (valid UTF-8, no `;` or control characters, not a builtin number or a
//! C address): their bytes are their name and go straight into the name
//! table. Keys are walked in the order they were first seen, and
//! consecutive keys usually share their outer frames, so the ids of frames
//! equal to the previous key's, byte for byte, are reused without a lookup.
//!
//! What remains is one name-table lookup per other frame, and with many
//! distinct frames the table is larger than the cache: each lookup would
//! wait for memory in turn. So keys are taken in batches: the frames of a
//! batch are split and hashed first, their index slots are read in a
//! tight loop (the loads overlap), and only then are they looked up.

use std::collections::HashMap;

use super::stack_table::{Key, StackTable, FRAME_SEP};
use super::{sanitize, FrameNamer, Names, Profile, OVERFLOW_FRAME};

use super::NATIVE_PREFIX;

/// Keys per batch (see the loop in [`Profile::from_table`]).
const BATCH: usize = 128;

/// Zone paths found without hashing (see [`Profile::from_table`]).
const RECENT_ZONES: usize = 8;

/// A frame of a key that the previous key does not share: its raw bytes,
/// and its name and the name's hash when the raw bytes are the name.
struct Fresh<'t> {
    raw: &'t [u8],
    name: Option<(&'t str, u64)>,
}

/// A key of the batch: how many frames it shares with the previous key,
/// and its other frames in the batch's list.
struct Pending<'t> {
    key: &'t [u8],
    counts: [u32; 5],
    reuse: usize,
    fresh: std::ops::Range<usize>,
}

/// A raw frame or zone name that is already its final name, as a `str`.
fn final_name(raw: &[u8]) -> Option<&str> {
    if is_final(raw) {
        std::str::from_utf8(raw).ok()
    } else {
        None
    }
}

/// Whether raw bytes, if valid UTF-8, are already their final name: not
/// empty, not a builtin number or a C address, no `;` or control bytes.
fn is_final(raw: &[u8]) -> bool {
    is_final_kind(raw) && !has_bad_bytes(raw, 0x20)
}

/// Not empty, not a builtin number, not a C or native frame's address.
fn is_final_kind(raw: &[u8]) -> bool {
    !(raw.is_empty() || raw[0] == b'@' || raw.starts_with(b"[builtin#") || raw.starts_with(NATIVE_PREFIX))
}

/// Whether `raw` holds a `;` or a control byte other than `allowed`.
fn has_bad_bytes(raw: &[u8], allowed: u8) -> bool {
    // One branch-free pass (vectorised) over the bytes.
    raw.iter().fold(false, |acc, &b| acc | ((b < 0x20) & (b != allowed)) | (b == b';'))
}

/// Length of the common prefix of two byte strings.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let word = |s: &[u8], i: usize| u128::from_ne_bytes(s[i..i + 16].try_into().expect("16 bytes"));
    let mut i = 0;
    // Long shared prefixes (the outer frames of deep stacks) a block at a time.
    let block = |i: usize| (0..4).fold(0u128, |acc, k| acc | (word(a, i + 16 * k) ^ word(b, i + 16 * k)));
    while i + 64 <= n && block(i) == 0 {
        i += 64;
    }
    while i + 16 <= n && word(a, i) == word(b, i) {
        i += 16;
    }
    i + a[i..n].iter().zip(&b[i..n]).position(|(x, y)| x != y).unwrap_or(n - i)
}

impl Profile {
    /// Builds the profile from a sampler's table. Keys that name to the same
    /// frames are merged before the dominant VM state is chosen; the rows
    /// are sorted (see [`Profile::sort`]).
    pub fn from_table(table: &StackTable, namer: &mut FrameNamer) -> Profile {
        // Most keys bring a few frames of their own (leaf lines): room for
        // four new names each, so the name index seldom grows (it rehashes
        // when it does), of the length frames of the first keys have (the
        // text would be copied as it grows).
        let (mut bytes, mut frames) = (0, 0);
        for i in 0..table.len().min(64) {
            let stack = Key::stack(table.get(i).0);
            bytes += stack.len();
            frames += memchr::memchr_iter(FRAME_SEP, stack).count() + 1;
        }
        let name_bytes = bytes.checked_div(frames).map_or(64, |b| b + 1);
        // Never more than the keys hold (a few long first frames must not
        // reserve memory for every key).
        let text_bytes = (table.len() * 4 * name_bytes).min(table.key_bytes() + 4096);
        let names = Names::with_capacity(table.len() * 4, text_bytes);
        let mut p = Profile::with_capacity(table.len() + 1, table.len() * 16, names);
        // Raw frames that needed naming, by their raw bytes.
        let mut named: HashMap<&[u8], u32, ahash::RandomState> = HashMap::default();
        let mut zone_ids: HashMap<&[u8], u32, ahash::RandomState> = HashMap::default();
        // The first zone paths met, looked up by comparing bytes: most
        // profiles have a few, and hashing each key's path costs more.
        let mut recent_zones: Vec<(&[u8], u32)> = Vec::with_capacity(RECENT_ZONES);
        // Set when two different raw frames or zone paths got one name
        // (a name that existed when a raw frame was named, or a final frame
        // equal to a name given before): only then can two keys give equal rows.
        let mut may_merge = false;
        // Ids of names some raw frame was named to.
        let mut is_named: Vec<bool> = Vec::new();
        let mut zone_parts = Vec::new();
        // The previous key's stack, and where each of its frames ends (the
        // frames a key shares with it end at the same places: cut to those,
        // the list becomes the key's own).
        let mut prev_stack: &[u8] = &[];
        let mut ends: Vec<usize> = Vec::new();
        let mut prev_start = 0usize;
        let mut text_ends: Vec<usize> = Vec::new();

        let mut fresh: Vec<Fresh> = Vec::with_capacity(BATCH * 4);
        let mut pending: Vec<Pending> = Vec::with_capacity(BATCH);
        let mut sink = 0u32;
        for batch in (0..table.len()).step_by(BATCH) {
            // First pass over the batch: split the stacks, find the frames
            // not shared with the previous stack and hash their names; then
            // read the first index slot of each (independent loads).
            fresh.clear();
            pending.clear();
            for i in batch..table.len().min(batch + BATCH) {
                let (key, entry) = table.get(i);
                let stack = Key::stack(key);
                let first = fresh.len();
                // Frames wholly inside the prefix shared with the previous
                // stack, and ending where a frame ends in this one too.
                let reuse = if stack.is_empty() {
                    0
                } else {
                    let shared = common_prefix(stack, prev_stack);
                    ends.iter().take_while(|&&e| e <= shared && (e == stack.len() || stack[e] == FRAME_SEP)).count()
                };
                ends.truncate(reuse);
                if !stack.is_empty() {
                    let mut at = if reuse == 0 { 0 } else { ends[reuse - 1] + 1 };
                    // The frames not shared are checked for UTF-8 and for
                    // bytes that need naming at once (the separator is
                    // ASCII, so each frame of valid text is valid text);
                    // frame by frame only when that fails.
                    let region = &stack[at.min(stack.len())..];
                    let text = std::str::from_utf8(region).ok().filter(|_| !has_bad_bytes(region, FRAME_SEP));
                    let text_at = at;
                    while at <= stack.len() {
                        let end = memchr::memchr(FRAME_SEP, &stack[at..]).map_or(stack.len(), |i| at + i);
                        let raw = &stack[at..end];
                        let name = match text {
                            Some(text) => is_final_kind(raw).then(|| &text[at - text_at..end - text_at]),
                            None => final_name(raw),
                        };
                        let name = name.map(|name| (name, p.names.hash(name)));
                        fresh.push(Fresh { raw, name });
                        ends.push(end);
                        at = end + 1;
                    }
                }
                pending.push(Pending { key, counts: entry.counts, reuse, fresh: first..fresh.len() });
                prev_stack = stack;
            }
            // A loop of nothing but these loads, so that many are in flight.
            for f in &fresh {
                if let Some((_, hash)) = f.name {
                    sink ^= p.names.touch(hash);
                }
            }
            // Second pass: the rows.
            for row in &pending {
                let path = Key::path(row.key);
                let recent = recent_zones.iter().find(|(known, _)| *known == path).map(|&(_, z)| z);
                let zone = match recent.or_else(|| zone_ids.get(path).copied()) {
                    Some(z) => z,
                    None => {
                        zone_parts.clear();
                        if !path.is_empty() {
                            for part in path.split(|&b| b == b'/') {
                                let id = match final_name(part) {
                                    Some(name) => p.names.intern(name).0,
                                    None => p.names.intern(&sanitize(part)).0,
                                };
                                zone_parts.push(id);
                            }
                        }
                        let known = p.zone_paths.len();
                        let z = p.zone_path_id(&zone_parts);
                        may_merge |= (z as usize) < known;
                        zone_ids.insert(path, z);
                        if recent_zones.len() < RECENT_ZONES {
                            recent_zones.push((path, z));
                        }
                        z
                    }
                };
                let start = p.frames.len();
                p.frames.extend_from_within(prev_start..prev_start + row.reuse);
                // Where each frame's name ends in the row's text; the shared
                // frames end where they did in the previous row.
                text_ends.truncate(row.reuse);
                for f in &fresh[row.fresh.clone()] {
                    let (id, len) = if let Some((name, hash)) = f.name {
                        let id = p.names.intern_hashed(name, hash).0;
                        may_merge |= is_named.get(id as usize).copied().unwrap_or(false);
                        (id, name.len())
                    } else {
                        let id = match named.get(f.raw) {
                            Some(&id) => id,
                            None => {
                                let (id, existed) = p.names.intern(&namer.name(f.raw));
                                may_merge |= existed;
                                named.insert(f.raw, id);
                                if is_named.len() <= id as usize {
                                    is_named.resize(id as usize + 1, false);
                                }
                                is_named[id as usize] = true;
                                id
                            }
                        };
                        (id, p.names.bytes(id).len())
                    };
                    p.frames.push(id);
                    text_ends.push(text_ends.last().map_or(len, |end| end + 1 + len));
                }
                let text = text_ends.last().copied().unwrap_or(0);
                p.push_row_with_text(zone, start, text, row.counts.map(u64::from));
                prev_start = start;
            }
        }
        std::hint::black_box(sink);
        if may_merge {
            p.merge_equal_rows();
        }
        p.drop_host_and_own_frames();
        if table.overflow_total() > 0 {
            // Never merged, so it stays one line of its own.
            let id = p.names.intern(OVERFLOW_FRAME).0;
            let zone = p.zone_path_id(&[]);
            p.push_row(zone, &[id], table.overflow);
        }
        p.sort();
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_prefix_lengths() {
        assert_eq!(common_prefix(b"", b"abc"), 0);
        assert_eq!(common_prefix(b"abc", b"abd"), 2);
        let a = "x".repeat(40);
        let mut b = a.clone();
        b.push('y');
        assert_eq!(common_prefix(a.as_bytes(), b.as_bytes()), 40);
        assert_eq!(common_prefix(b"0123456789abcdefZ", b"0123456789abcdefY"), 16);
    }
}
