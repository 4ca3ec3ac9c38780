//! Aggregation: a table of unique sample keys with a count per VM state.
//!
//! A key is the zone path (length-prefixed) followed by the raw dumpstack
//! bytes. Keys live back to back in one byte arena; the hash index stores
//! entry numbers only, so finding a key seen before hashes the scratch buffer
//! once and compares bytes in place: no allocation, no owned key.

use hashbrown::HashTable;

use super::VM_STATES;

#[derive(Clone, Copy, Debug, Default)]
pub struct Entry {
    /// Arena chunk holding the key, and the key's place in it.
    chunk: u32,
    start: u32,
    len: u32,
    pub counts: [u32; 5],
}

impl Entry {
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|&c| c as u64).sum()
    }
}

/// The counts of a table at one moment (see [`StackTable::counts_mark`]).
#[derive(Clone, Debug, Default)]
pub struct CountsMark {
    entries: Vec<[u32; 5]>,
    overflow: [u64; 5],
}

/// Separator between the frames of a key's stack (the raw dumpstack bytes,
/// which the sampler asks LuaJIT to separate so). A control character
/// rather than `;`, so that `;` inside chunk names cannot split a frame.
pub const FRAME_SEP: u8 = 0x1f;

/// Builds and splits sample keys: `[path_len: u32 LE][path][stack]`, the
/// stack's frames separated by [`FRAME_SEP`].
pub struct Key;

impl Key {
    /// Starts a key in `buf`, leaving room for the path length.
    #[inline]
    pub fn begin(buf: &mut Vec<u8>) {
        buf.clear();
        buf.extend_from_slice(&[0, 0, 0, 0]);
    }

    /// Records the path length once the path bytes have been appended.
    #[inline]
    pub fn end_path(buf: &mut [u8]) {
        let len = (buf.len() - 4) as u32;
        buf[..4].copy_from_slice(&len.to_le_bytes());
    }

    /// The zone path part of a finished key.
    #[inline]
    pub fn path(key: &[u8]) -> &[u8] {
        let n = u32::from_le_bytes([key[0], key[1], key[2], key[3]]) as usize;
        &key[4..4 + n]
    }

    /// The stack part of a finished key.
    #[inline]
    pub fn stack(key: &[u8]) -> &[u8] {
        let n = u32::from_le_bytes([key[0], key[1], key[2], key[3]]) as usize;
        &key[4 + n..]
    }
}

/// Bytes per arena chunk. Keys are stored in fixed-size chunks rather than
/// one growing buffer, so growth never copies what is stored (no latency
/// spike inside the callback) and unused capacity stays below one chunk.
const ARENA_CHUNK: usize = 64 * 1024;
/// Entries per entry chunk, for the same reasons.
const ENTRY_CHUNK_BITS: u32 = 12;
const ENTRY_CHUNK: usize = 1 << ENTRY_CHUNK_BITS;

pub struct StackTable {
    hasher: ahash::RandomState,
    index: HashTable<u32>,
    entries: Vec<Vec<Entry>>,
    len: usize,
    arena: Vec<Vec<u8>>,
    max_entries: usize,
    /// Budget for key bytes: very long names (huge chunk names, deep zone
    /// paths) must not let a table of `max_entries` keys grow without bound.
    max_bytes: usize,
    /// Key bytes stored so far.
    key_bytes: usize,
    /// Samples whose key was new once the table was full, per VM state.
    pub overflow: [u64; 5],
}

impl StackTable {
    pub fn new(max_entries: usize) -> Self {
        StackTable {
            // Fixed seeds: hashing needs no randomness source inside the callback.
            hasher: ahash::RandomState::with_seeds(0x7ec5, 0x9f0f, 0x51a7, 0xc0de),
            index: HashTable::with_capacity(1024),
            entries: Vec::new(),
            len: 0,
            arena: Vec::new(),
            max_entries: max_entries.max(1),
            max_bytes: Self::byte_budget(max_entries),
            key_bytes: 0,
            overflow: [0; 5],
        }
    }

    /// Key bytes allowed for a table of `max_entries` keys: 1 KiB per key on
    /// average, at least 1 MiB, and never past the u32 offsets of the arena.
    pub fn byte_budget(max_entries: usize) -> usize {
        max_entries.max(1).saturating_mul(1024).clamp(1 << 20, u32::MAX as usize)
    }

    #[inline]
    fn key_of<'a>(arena: &'a [Vec<u8>], e: &Entry) -> &'a [u8] {
        &arena[e.chunk as usize][e.start as usize..(e.start + e.len) as usize]
    }

    #[inline]
    fn entry(entries: &[Vec<Entry>], i: u32) -> &Entry {
        &entries[(i >> ENTRY_CHUNK_BITS) as usize][i as usize & (ENTRY_CHUNK - 1)]
    }

    /// Copies `key` into the arena; returns (chunk, start).
    fn store(&mut self, key: &[u8]) -> Option<(u32, u32)> {
        let fits = self.arena.last().is_some_and(|c| c.capacity() - c.len() >= key.len());
        if !fits {
            if self.arena.len() >= u32::MAX as usize || key.len() > u32::MAX as usize {
                return None;
            }
            // A key longer than a chunk gets a chunk of its own size.
            self.arena.push(Vec::with_capacity(ARENA_CHUNK.max(key.len())));
        }
        let chunk = self.arena.len() - 1;
        let buf = &mut self.arena[chunk];
        let start = buf.len() as u32;
        buf.extend_from_slice(key);
        Some((chunk as u32, start))
    }

    /// Adds `samples` to the count of `state` for `key`; returns the key's
    /// entry index, or None when the samples went to the overflow.
    #[inline]
    pub fn add(&mut self, key: &[u8], state: usize, samples: u32) -> Option<u32> {
        let hash = self.hasher.hash_one(key);
        let (arena, entries) = (&self.arena, &self.entries);
        if let Some(&i) = self.index.find(hash, |&i| Self::key_of(arena, Self::entry(entries, i)) == key) {
            let e = &mut self.entries[(i >> ENTRY_CHUNK_BITS) as usize][i as usize & (ENTRY_CHUNK - 1)];
            let c = &mut e.counts[state];
            *c = c.saturating_add(samples);
            return Some(i);
        }
        if self.len >= self.max_entries || self.len >= u32::MAX as usize || self.key_bytes + key.len() > self.max_bytes
        {
            self.overflow[state] += samples as u64;
            return None;
        }
        let Some((chunk, start)) = self.store(key) else {
            self.overflow[state] += samples as u64;
            return None;
        };
        let mut counts = [0u32; 5];
        counts[state] = samples;
        let idx = self.len as u32;
        if self.len % ENTRY_CHUNK == 0 {
            self.entries.push(Vec::with_capacity(ENTRY_CHUNK));
        }
        self.entries.last_mut().expect("a chunk was just ensured").push(Entry {
            chunk,
            start,
            len: key.len() as u32,
            counts,
        });
        self.len += 1;
        self.key_bytes += key.len();
        let (arena, entries, hasher) = (&self.arena, &self.entries, &self.hasher);
        self.index.insert_unique(hash, idx, |&i| hasher.hash_one(Self::key_of(arena, Self::entry(entries, i))));
        Some(idx)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the keys stored.
    pub fn key_bytes(&self) -> usize {
        self.key_bytes
    }

    pub fn overflow_total(&self) -> u64 {
        self.overflow.iter().sum()
    }

    /// The key and entry first seen `i`-th (`i < len()`).
    #[inline]
    pub fn get(&self, i: usize) -> (&[u8], &Entry) {
        let e = Self::entry(&self.entries, i as u32);
        (Self::key_of(&self.arena, e), e)
    }

    /// Every (key, entry) pair, in first-seen order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.entries.iter().flatten().map(move |e| (Self::key_of(&self.arena, e), e))
    }

    /// A copy of the table in which, for every key whose VM state letter
    /// and leaf frame are in `leaves` (`[state][leaf]`), that state's count
    /// moves to the same key with the leaf replaced (the line correction).
    /// A C function noted above the leaf (see `Sampler`) stays above the
    /// replaced frame: the line is the Lua frame below it.
    pub fn with_leaves_replaced(&self, leaves: &std::collections::HashMap<Vec<u8>, Vec<u8>>) -> StackTable {
        let mut out = StackTable::new(self.max_entries);
        out.overflow = self.overflow;
        let mut moved = Vec::new();
        let mut site = Vec::new();
        for (key, e) in self.iter() {
            let stack = Key::stack(key);
            let stack_at = key.len() - stack.len();
            let frame_start = |end: usize| memchr::memrchr(FRAME_SEP, &stack[..end]).map(|i| i + 1).unwrap_or(0);
            let mut leaf_at = frame_start(stack.len());
            let mut leaf_end = stack.len();
            // Native frames, then the C function they run in, lie above
            // the Lua line.
            while leaf_at > 0 && stack[leaf_at..leaf_end].starts_with(super::NATIVE_PREFIX) {
                leaf_end = leaf_at - 1;
                leaf_at = frame_start(leaf_end);
            }
            if leaf_at > 0 && is_c_frame(&stack[leaf_at..leaf_end]) {
                leaf_end = leaf_at - 1;
                leaf_at = frame_start(leaf_end);
            }
            for (state, &n) in e.counts.iter().enumerate() {
                if n == 0 {
                    continue;
                }
                site.clear();
                site.push(VM_STATES[state]);
                site.extend_from_slice(&stack[leaf_at..leaf_end]);
                match leaves.get(&site) {
                    Some(new_leaf) => {
                        moved.clear();
                        moved.extend_from_slice(&key[..stack_at + leaf_at]);
                        moved.extend_from_slice(new_leaf);
                        moved.extend_from_slice(&stack[leaf_end..]);
                        out.add(&moved, state, n);
                    }
                    _ => {
                        out.add(key, state, n);
                    }
                }
            }
        }
        out
    }

    /// Every entry's counts, in first-seen order, and the overflow counts:
    /// the mark from which [`StackTable::since`] counts.
    pub fn counts_mark(&self) -> CountsMark {
        CountsMark { entries: self.iter().map(|(_, e)| e.counts).collect(), overflow: self.overflow }
    }

    /// A copy of the table holding only the samples recorded after `mark`
    /// was taken from this table. Entries are never removed or reordered,
    /// so the entry first seen `i`-th then is the `i`-th now.
    pub fn since(&self, mark: &CountsMark) -> StackTable {
        let mut out = StackTable::new(self.max_entries);
        for (i, (key, e)) in self.iter().enumerate() {
            let before = mark.entries.get(i).copied().unwrap_or_default();
            for (state, (&now, &then)) in e.counts.iter().zip(before.iter()).enumerate() {
                let n = now.saturating_sub(then);
                if n > 0 {
                    out.add(key, state, n);
                }
            }
        }
        for (state, (&now, &then)) in self.overflow.iter().zip(mark.overflow.iter()).enumerate() {
            out.overflow[state] = now.saturating_sub(then);
        }
        out
    }

    /// Bytes held by the table: arena chunks, entry chunks and the hash
    /// index (buckets of one u32 plus one control byte), for the stats.
    pub fn memory_bytes(&self) -> usize {
        let arena: usize = self.arena.iter().map(Vec::capacity).sum::<usize>() + self.arena.capacity() * 24;
        let entries = self.entries.iter().map(Vec::capacity).sum::<usize>() * std::mem::size_of::<Entry>()
            + self.entries.capacity() * 24;
        let buckets = (self.index.capacity() * 8 / 7 + 1).next_power_of_two();
        arena + entries + buckets * (std::mem::size_of::<u32>() + 1)
    }
}

/// Whether a raw frame is a C function as LuaJIT's stack dump writes one.
fn is_c_frame(frame: &[u8]) -> bool {
    frame.starts_with(b"[builtin#") || frame.starts_with(b"@")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(path: &str, stack: &str) -> Vec<u8> {
        let mut k = Vec::new();
        Key::begin(&mut k);
        k.extend_from_slice(path.as_bytes());
        Key::end_path(&mut k);
        k.extend_from_slice(stack.as_bytes());
        k
    }

    #[test]
    fn since_hands_out_each_sample_once() {
        let mut t = StackTable::new(2);
        let (a, b, c) = (key("", "a"), key("z", "b"), key("", "c"));
        t.add(&a, 0, 3);
        t.add(&b, 2, 1);
        let first = t.since(&CountsMark::default());
        let mark = t.counts_mark();
        assert_eq!(first.len(), 2);
        assert_eq!(first.get(0).1.counts, [3, 0, 0, 0, 0]);
        t.add(&a, 0, 2);
        t.add(&a, 1, 4);
        t.add(&c, 3, 5); // the table is full: this goes to the overflow
        let second = t.since(&mark);
        // Only `a` changed; `b` had nothing new and is left out.
        assert_eq!(second.len(), 1);
        let (k, e) = second.get(0);
        assert_eq!(k, &a[..]);
        assert_eq!(e.counts, [2, 4, 0, 0, 0]);
        assert_eq!(second.overflow, [0, 0, 0, 5, 0]);
        assert_eq!(t.since(&t.counts_mark()).len(), 0);
        assert_eq!(t.since(&t.counts_mark()).overflow_total(), 0);
    }

    #[test]
    fn counts_per_state_and_splits_keys() {
        let mut t = StackTable::new(100);
        let a = key("z1/z2", "a:1;b:2");
        let b = key("", "a:1;b:2");
        t.add(&a, 0, 3);
        t.add(&a, 1, 2);
        t.add(&b, 2, 1);
        t.add(&a, 0, 1);
        assert_eq!(t.len(), 2);
        let rows: Vec<_> = t.iter().collect();
        assert_eq!(Key::path(rows[0].0), b"z1/z2");
        assert_eq!(Key::stack(rows[0].0), b"a:1;b:2");
        assert_eq!(rows[0].1.counts, [4, 2, 0, 0, 0]);
        assert_eq!(Key::path(rows[1].0), b"");
        assert_eq!(rows[1].1.counts, [0, 0, 1, 0, 0]);
    }

    #[test]
    fn path_and_stack_do_not_alias() {
        // Same concatenated bytes, different split: must be two entries.
        let mut t = StackTable::new(100);
        t.add(&key("ab", "c"), 0, 1);
        t.add(&key("a", "bc"), 0, 1);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn full_table_folds_new_keys_into_overflow() {
        let mut t = StackTable::new(2);
        t.add(&key("", "a"), 0, 1);
        t.add(&key("", "b"), 0, 1);
        t.add(&key("", "c"), 1, 5);
        t.add(&key("", "a"), 0, 1);
        assert_eq!(t.len(), 2);
        assert_eq!(t.overflow, [0, 5, 0, 0, 0]);
        assert_eq!(t.iter().next().unwrap().1.counts[0], 2);
    }

    #[test]
    fn huge_keys_are_bounded_by_the_byte_budget() {
        let mut t = StackTable::new(10);
        let big = key("", &"x".repeat(600 * 1024));
        t.add(&big, 0, 1);
        let mut other = big.clone();
        other.push(b'y');
        t.add(&other, 0, 1);
        assert_eq!(t.len(), 1, "the second 600 KiB key exceeds the 1 MiB budget");
        assert_eq!(t.overflow_total(), 1);
    }

    #[test]
    fn keys_across_chunks_and_longer_than_a_chunk() {
        let mut t = StackTable::new(100_000);
        let long = "x".repeat(ARENA_CHUNK + 10);
        let mut want = Vec::new();
        for i in 0..(2 * ENTRY_CHUNK + 5) {
            let stack = if i == 7 { format!("{}{}", long, i) } else { format!("f{}.lua:{}", i, i * 3) };
            let k = key(if i % 2 == 0 { "z" } else { "" }, &stack);
            t.add(&k, i % 5, 1);
            want.push(k);
        }
        for (i, k) in want.iter().enumerate() {
            t.add(k, i % 5, 2);
        }
        assert_eq!(t.len(), want.len());
        for (i, (k, e)) in t.iter().enumerate() {
            assert_eq!(k, &want[i][..]);
            assert_eq!(e.counts[i % 5], 3);
            assert_eq!(t.get(i).0, k);
        }
        assert!(t.memory_bytes() > ARENA_CHUNK * 2);
    }

    #[test]
    fn state_index_maps_all_states() {
        for (i, s) in VM_STATES.iter().enumerate() {
            assert_eq!(crate::profile::state_index(*s), i);
        }
    }
}
