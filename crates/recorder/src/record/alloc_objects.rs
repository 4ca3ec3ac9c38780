//! Objects allocated per stack, estimated for allocation sessions.
//!
//! The allocator wrapper samples bytes as a Poisson process: a block of
//! `s` counted bytes is crossed by a Poisson number of sample points, of
//! mean `s / m` (`m` the bytes per sample). Each crossing of a new block
//! therefore carries the weight `m / s`: the expected weight of every
//! block is exactly one, so the sum of the weights of a stack is an
//! unbiased estimate of the blocks it allocated (Horvitz-Thompson), with
//! variance `m / s` per block (estimated, without bias, by the sum of the
//! squared weights). Growth by `realloc` adds bytes, not objects: its
//! crossings weigh nothing.
//!
//! The wrapper adds the weights of the points it crosses into a pending
//! sum; the sample callback takes that sum and charges it to the stack
//! and VM state it records, in this table beside the stack table (whose
//! hot path it leaves alone). Room for every stack is reserved when the
//! session starts: the callback never allocates. The same charge gives the
//! blocks tracked since the previous one (`record::alloc_live`) their stack.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::record::alloc_live::LiveLink;

/// A pending sum of weights: an `f64` kept as its bits, written by the
/// allocator wrapper and taken by the sample callback, both on the VM's
/// thread.
#[derive(Debug, Default)]
pub struct PendingWeight(AtomicU64);

impl PendingWeight {
    pub fn add(&self, w: f64) {
        let now = f64::from_bits(self.0.load(Ordering::Relaxed));
        self.0.store((now + w).to_bits(), Ordering::Relaxed);
    }

    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    /// The sum so far, leaving zero.
    pub fn take(&self) -> f64 {
        f64::from_bits(self.0.swap(0f64.to_bits(), Ordering::Relaxed))
    }
}

/// Estimated objects per stack table entry and VM state.
pub struct ObjectTable {
    pending: &'static PendingWeight,
    per_entry: Vec<[f64; 5]>,
    /// Weights of samples not charged to an entry (paused, filtered, or a
    /// full table).
    pub uncharged: f64,
    /// The live table whose waiting blocks each charge gives a stack.
    live: Option<LiveLink>,
}

impl ObjectTable {
    /// A table for up to `max_entries` stacks, reading `pending`.
    pub fn new(pending: &'static PendingWeight, max_entries: usize) -> ObjectTable {
        ObjectTable { pending, per_entry: Vec::with_capacity(max_entries), uncharged: 0.0, live: None }
    }

    /// The same, also giving the live table's waiting blocks their stack.
    pub fn with_live(mut self, live: LiveLink) -> ObjectTable {
        self.live = Some(live);
        self
    }

    /// Charges the pending weight to `entry` (a stack table index; `None`
    /// when the sample was not recorded) in VM state `state`.
    #[inline]
    pub fn charge(&mut self, entry: Option<u32>, state: usize) {
        if let Some(live) = &self.live {
            live.attribute(entry, state);
        }
        let w = self.pending.take();
        match entry {
            // Entries are numbered in order, so a new one is the next index;
            // within the capacity reserved, `push` does not allocate.
            Some(i) if (i as usize) < self.per_entry.capacity() => {
                let i = i as usize;
                while self.per_entry.len() <= i {
                    self.per_entry.push([0.0; 5]);
                }
                self.per_entry[i][state] += w;
            }
            _ => self.uncharged += w,
        }
    }

    /// Estimated objects of entry `i`, per VM state.
    pub fn entry(&self, i: usize) -> [f64; 5] {
        self.per_entry.get(i).copied().unwrap_or_default()
    }

    /// Estimated objects of every entry.
    pub fn charged(&self) -> f64 {
        self.per_entry.iter().flatten().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_go_to_the_entry_sampled() {
        let pending: &'static PendingWeight = Box::leak(Box::default());
        let mut t = ObjectTable::new(pending, 4);
        pending.add(2.5);
        t.charge(Some(1), 2);
        pending.add(1.0);
        pending.add(0.5);
        t.charge(Some(1), 2);
        pending.add(3.0);
        t.charge(None, 0);
        pending.add(7.0);
        t.charge(Some(9), 0);
        assert_eq!(t.entry(1), [0.0, 0.0, 4.0, 0.0, 0.0]);
        assert_eq!(t.entry(0), [0.0; 5]);
        assert_eq!(t.uncharged, 10.0);
        assert_eq!(t.charged(), 4.0);
        assert_eq!(pending.get(), 0.0);
    }

    #[test]
    fn charging_within_the_reserved_room_does_not_allocate() {
        let pending: &'static PendingWeight = Box::leak(Box::default());
        let mut t = ObjectTable::new(pending, 1000);
        let before = t.per_entry.as_ptr();
        for i in 0..1000u32 {
            pending.add(1.0);
            t.charge(Some(i), 0);
        }
        assert_eq!(t.per_entry.as_ptr(), before);
        assert_eq!(t.charged(), 1000.0);
    }
}
