//! Blocks still live, for allocation sessions: which sampled blocks have
//! not been freed (pprof's `inuse_space` and `inuse_objects`).
//!
//! When a sample point falls in a block, the allocator wrapper records the
//! block's address here with the points it crossed and their object
//! weight (`record::alloc_objects`). The stack is not known yet: LuaJIT
//! runs the sample callback at its next safe point, and that callback
//! gives every block still waiting its stack table entry and VM state. A
//! free removes the block, a `realloc` moves it. What is left when the
//! session stops was allocated while it ran and not freed: each point
//! stands for `bytesPerSample` bytes, as in the allocation profile.
//!
//! Everything is allocated when the session starts; the allocator wrapper
//! only reads and writes it. The table is open addressing with linear
//! probing and backward-shift deletion (no tombstones), at most half full.
//! Every free of the VM asks whether its block is tracked, so a bitmap
//! indexed by a hash of the address answers first: an untracked block
//! almost always finds its bit clear, one load and a test. Bits are not
//! cleared by a removal (another tracked block may share them); the bitmap
//! is rebuilt from the table once the stale bits are many.

/// Bits of the filter: 16 KiB, so that it stays in the cache; eight per
/// block at the default `maxLiveBlocks`, so that an untracked block finds
/// a set bit at most about one time in eight. The bit is the block's
/// address in 16-byte units, modulo the size: allocators hand out blocks
/// of at least 16 bytes, so neighbours take neighbouring bits; and the
/// test is a few shifts and a load.
const FILTER_LOG2: u32 = 17;
pub const FILTER_WORDS: usize = (1 << FILTER_LOG2) / 64;

/// The filter: atomics (plain loads and stores, relaxed) so that the
/// allocator wrapper reads it through a shared reference while the table
/// that owns it updates it.
pub type Filter = [AtomicU64; FILTER_WORDS];

/// The filter of a table with no block: what the wrapper reads when no
/// table is there.
pub static NO_BLOCKS: Filter = [const { AtomicU64::new(0) }; FILTER_WORDS];

/// Whether `addr` may be tracked in the table of `filter`: false means
/// surely not.
#[inline(always)]
pub fn maybe_tracked(filter: &Filter, addr: usize) -> bool {
    let word = (addr >> 10) & (FILTER_WORDS - 1);
    filter[word].load(Ordering::Relaxed) & (1 << ((addr >> 4) & 63)) != 0
}
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// The entry of a block whose stack is not known yet.
const WAITING: u32 = u32::MAX;
const EMPTY: usize = 0;

#[inline(always)]
fn hash(addr: usize) -> u64 {
    // Blocks are at least 8-byte aligned: the low bits carry nothing.
    ((addr as u64) >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// What the sample callback reaches the live table through: the slot the
/// allocator wrapper's record keeps the session's table in (see
/// `record::alloc_hook`), null once recording ended.
#[derive(Clone, Copy)]
pub struct LiveLink(&'static AtomicPtr<LiveTable>);

impl LiveLink {
    /// A link through `slot`, which holds the session's table while it
    /// records and null after.
    pub fn new(slot: &'static AtomicPtr<LiveTable>) -> LiveLink {
        LiveLink(slot)
    }

    /// Gives the blocks waiting for a stack the one sampled (`None`: the
    /// sample was not recorded).
    pub fn attribute(&self, entry: Option<u32>, state: usize) {
        let t = self.0.load(Ordering::Relaxed);
        if t.is_null() {
            return;
        }
        // SAFETY: a non-null pointer is the session's table, alive while
        // recording (the hook forgets it before freeing it, see
        // `record::alloc_hook`); the callback runs on the VM's thread at a
        // safe point, never inside the allocator.
        unsafe { &mut *t }.attribute(entry, state);
    }
}

/// A live block's share of the live profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiveBlock {
    pub entry: u32,
    pub state: u8,
    pub points: u32,
    pub objects: f64,
}

/// Counters of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LiveCounts {
    /// Sample points on tracked blocks with a stack, still live.
    pub points: u64,
    /// Tracked blocks with a stack, still live.
    pub blocks: u64,
    /// Points that found no room (table or waiting list full), and points
    /// of blocks still waiting for a stack: not in the live profile.
    pub dropped: u64,
}

pub struct LiveTable {
    filter: Box<Filter>,
    addrs: Vec<usize>,
    points: Vec<u32>,
    entries: Vec<u32>,
    states: Vec<u8>,
    weights: Vec<f64>,
    mask: usize,
    shift: u32,
    len: usize,
    max_len: usize,
    /// Removals since the filter was built.
    stale: usize,
    /// Blocks waiting for their stack (compiled code in function precision
    /// runs the callback only where it enters or leaves a function: a loop
    /// can cross many points before): room for every tracked block.
    waiting: Vec<usize>,
    dropped: u64,
}

impl LiveTable {
    /// A table for up to `max_blocks` live blocks (at least one).
    pub fn new(max_blocks: usize) -> LiveTable {
        let max_len = max_blocks.max(1);
        let cap = (max_len * 2).next_power_of_two();
        LiveTable {
            filter: Box::new([const { AtomicU64::new(0) }; FILTER_WORDS]),
            addrs: vec![EMPTY; cap],
            points: vec![0; cap],
            entries: vec![0; cap],
            states: vec![0; cap],
            weights: vec![0.0; cap],
            mask: cap - 1,
            shift: 64 - cap.trailing_zeros(),
            len: 0,
            max_len,
            stale: 0,
            waiting: Vec::with_capacity(max_len),
            dropped: 0,
        }
    }

    /// Bytes the table holds.
    pub fn memory_bytes(&self) -> usize {
        self.filter.len() * 8 + self.addrs.len() * (8 + 4 + 4 + 1 + 8) + self.waiting.capacity() * 8
    }

    /// The table's filter (see [`maybe_tracked`]); it stays where it is
    /// for the table's life.
    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    #[cfg(test)]
    fn maybe_tracked(&self, addr: usize) -> bool {
        maybe_tracked(&self.filter, addr)
    }

    #[inline]
    fn home(&self, addr: usize) -> usize {
        if self.shift >= 64 {
            0
        } else {
            (hash(addr) >> self.shift) as usize
        }
    }

    fn find(&self, addr: usize) -> Option<usize> {
        let mut i = self.home(addr);
        loop {
            match self.addrs[i] {
                EMPTY => return None,
                a if a == addr => return Some(i),
                _ => i = (i + 1) & self.mask,
            }
        }
    }

    /// Whether `addr` is a tracked block.
    pub fn is_tracked(&self, addr: usize) -> bool {
        self.find(addr).is_some()
    }

    fn set_bit(&mut self, addr: usize) {
        let word = &self.filter[(addr >> 10) & (FILTER_WORDS - 1)];
        word.store(word.load(Ordering::Relaxed) | 1 << ((addr >> 4) & 63), Ordering::Relaxed);
    }

    /// Tracks a block that `points` sample points fell in, with their
    /// object weight; its stack comes with the next `attribute`. Returns
    /// whether it is tracked (no room: the points are counted as dropped).
    pub fn insert(&mut self, addr: usize, points: u32, weight: f64) -> bool {
        if let Some(i) = self.find(addr) {
            // The same address again (its free went unseen): the new block.
            self.remove_at(i);
        }
        // Within its capacity (the table's), the waiting list does not
        // allocate.
        if self.len >= self.max_len || self.waiting.len() >= self.waiting.capacity() || addr == EMPTY {
            self.dropped += u64::from(points);
            return false;
        }
        self.place(addr, points, WAITING, 0, weight);
        self.waiting.push(addr);
        true
    }

    fn place(&mut self, addr: usize, points: u32, entry: u32, state: u8, weight: f64) {
        let mut i = self.home(addr);
        while self.addrs[i] != EMPTY {
            i = (i + 1) & self.mask;
        }
        self.addrs[i] = addr;
        self.points[i] = points;
        self.entries[i] = entry;
        self.states[i] = state;
        self.weights[i] = weight;
        self.len += 1;
        self.set_bit(addr);
    }

    /// Forgets a freed block; whether it was tracked.
    pub fn remove(&mut self, addr: usize) -> bool {
        match self.find(addr) {
            Some(i) => {
                self.remove_at(i);
                true
            }
            None => false,
        }
    }

    /// A tracked block moved by `realloc` to `to`, grown by `more` points.
    /// Returns whether `from` was tracked.
    pub fn moved(&mut self, from: usize, to: usize, more: u32) -> bool {
        let Some(i) = self.find(from) else { return false };
        let (points, entry, state, weight) = (self.points[i], self.entries[i], self.states[i], self.weights[i]);
        let points = points.saturating_add(more);
        if from == to {
            self.points[i] = points;
            return true;
        }
        self.remove_at(i);
        if let Some(j) = self.find(to) {
            self.remove_at(j);
        }
        self.place(to, points, entry, state, weight);
        if entry == WAITING {
            for w in &mut self.waiting {
                if *w == from {
                    *w = to;
                }
            }
        }
        true
    }

    fn remove_at(&mut self, mut i: usize) {
        self.addrs[i] = EMPTY;
        self.len -= 1;
        // Backward shift: later blocks of the run move into the hole when
        // their home is not between the hole and themselves.
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let a = self.addrs[j];
            if a == EMPTY {
                break;
            }
            let home = self.home(a);
            let between = if i <= j { i < home && home <= j } else { i < home || home <= j };
            if !between {
                self.addrs[i] = a;
                self.points[i] = self.points[j];
                self.entries[i] = self.entries[j];
                self.states[i] = self.states[j];
                self.weights[i] = self.weights[j];
                self.addrs[j] = EMPTY;
                i = j;
            }
        }
        self.stale += 1;
        // Stale bits let untracked frees through to a lookup: rebuilt once
        // they are as many as the blocks (and at least a few thousand), so
        // the scan costs a few slots per removal.
        if self.stale > self.len.max(self.addrs.len() / 16).max(4096) {
            self.rebuild_filter();
        }
    }

    fn rebuild_filter(&mut self) {
        self.filter.iter().for_each(|w| w.store(0, Ordering::Relaxed));
        for k in 0..self.addrs.len() {
            let a = self.addrs[k];
            if a != EMPTY {
                self.set_bit(a);
            }
        }
        self.stale = 0;
    }

    /// Gives the blocks waiting their stack: table entry `entry` in VM
    /// state `state`, or, for a sample not recorded (`None`), no stack: they
    /// are forgotten.
    pub fn attribute(&mut self, entry: Option<u32>, state: usize) {
        for k in 0..self.waiting.len() {
            let addr = self.waiting[k];
            let Some(i) = self.find(addr) else { continue };
            if self.entries[i] != WAITING {
                continue;
            }
            match entry {
                Some(e) if e != WAITING => {
                    self.entries[i] = e;
                    self.states[i] = state as u8;
                }
                _ => self.remove_at(i),
            }
        }
        self.waiting.clear();
    }

    /// The live blocks with a stack, and the counters.
    pub fn snapshot(&self) -> (Vec<LiveBlock>, LiveCounts) {
        let mut out = Vec::new();
        let mut counts = LiveCounts { dropped: self.dropped, ..Default::default() };
        for i in 0..self.addrs.len() {
            if self.addrs[i] == EMPTY {
                continue;
            }
            if self.entries[i] == WAITING {
                counts.dropped += u64::from(self.points[i]);
                continue;
            }
            counts.points += u64::from(self.points[i]);
            counts.blocks += 1;
            out.push(LiveBlock {
                entry: self.entries[i],
                state: self.states[i],
                points: self.points[i],
                objects: self.weights[i],
            });
        }
        (out, counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(i: usize) -> usize {
        0x7f00_0000_0000 + i * 48
    }

    #[test]
    fn blocks_are_found_moved_and_forgotten() {
        let mut t = LiveTable::new(1000);
        for i in 1..=500 {
            assert!(t.insert(addr(i), 1 + (i % 3) as u32, 0.5));
            if i % 100 == 0 {
                t.attribute(Some(i as u32), 2);
            }
        }
        t.attribute(Some(7), 1);
        for i in 1..=500 {
            assert!(t.maybe_tracked(addr(i)));
        }
        // Frees of every other block; a move; a free of an untracked block.
        for i in (2..=500).step_by(2) {
            assert!(t.remove(addr(i)));
        }
        assert!(!t.remove(addr(10_000)));
        assert!(t.moved(addr(1), addr(20_000), 5));
        assert!(!t.moved(addr(1), addr(20_001), 5));
        let (blocks, counts) = t.snapshot();
        assert_eq!(counts.blocks, 250);
        assert_eq!(blocks.len(), 250);
        let want: u64 = (1..=500).step_by(2).map(|i| 1 + (i % 3) as u64).sum::<u64>() + 5;
        assert_eq!(counts.points, want);
        assert_eq!(counts.dropped, 0);
        let moved = blocks.iter().find(|b| b.points == 2 + 5).expect("the moved block");
        assert_eq!((moved.entry, moved.state), (100, 2));
        assert!(blocks.iter().all(|b| b.objects == 0.5));
    }

    #[test]
    fn deletion_keeps_every_other_block_reachable() {
        // A small table, many collisions: every block stays findable as
        // others are removed from the middle of runs.
        let mut t = LiveTable::new(64);
        let mut live = std::collections::HashSet::new();
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = addr((x % 200) as usize + 1);
            if live.contains(&a) {
                assert!(t.remove(a));
                live.remove(&a);
            } else if t.insert(a, 1, 1.0) {
                live.insert(a);
            }
            t.attribute(Some(0), 0);
        }
        for i in 1..=200 {
            assert_eq!(t.find(addr(i)).is_some(), live.contains(&addr(i)), "{i}");
            if live.contains(&addr(i)) {
                assert!(t.maybe_tracked(addr(i)));
            }
        }
        assert_eq!(t.snapshot().1.blocks as usize, live.len());
    }

    #[test]
    fn no_room_is_counted_and_unrecorded_samples_forget_their_blocks() {
        let mut t = LiveTable::new(4);
        for i in 1..=6 {
            t.insert(addr(i), 2, 1.0);
        }
        t.attribute(None, 0);
        let (_, c) = t.snapshot();
        assert_eq!((c.blocks, c.points, c.dropped), (0, 0, 4));
        // Blocks waiting for a stack: as many as the table holds.
        let mut t = LiveTable::new(1000);
        let before = t.waiting.as_ptr();
        for i in 1..=1003 {
            t.insert(addr(i), 1, 1.0);
        }
        assert_eq!(t.waiting.as_ptr(), before, "the waiting list does not grow");
        t.attribute(Some(1), 0);
        t.remove(addr(1));
        t.insert(addr(100_000), 1, 1.0);
        let (_, c) = t.snapshot();
        assert_eq!(c.blocks, 999);
        // Three found the table full; the last waits for a stack.
        assert_eq!(c.dropped, 3 + 1);
    }

    #[test]
    fn untracked_addresses_mostly_miss_the_filter() {
        let mut t = LiveTable::new(1 << 15);
        for i in 0..1000 {
            t.insert(addr(i * 1000 + 1), 1, 1.0);
            t.attribute(Some(0), 0);
        }
        let hits = (0..100_000).filter(|&i| i % 1000 != 1 && t.maybe_tracked(addr(i))).count();
        // 1000 bits of 2^17 set: about 0.8% false positives.
        assert!(!(0..100_000).any(|i| maybe_tracked(&NO_BLOCKS, addr(i))));
        assert!(hits < 3000, "{hits}");
        // Stale bits go with a rebuild.
        for i in 0..1000 {
            t.remove(addr(i * 1000 + 1));
        }
        t.rebuild_filter();
        assert!((0..100_000).all(|i| !t.maybe_tracked(addr(i))));
    }
}
