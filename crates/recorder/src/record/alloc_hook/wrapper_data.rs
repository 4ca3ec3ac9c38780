//! The data of one VM's wrapper ([`WrapperData`]): the allocator it wraps, the
//! session's byte and block counts, and the Poisson sample points over the
//! bytes. Plain counting: nothing here touches the VM.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use mlua::ffi;

use crate::record::alloc_live::{Filter, LiveTable, NO_BLOCKS};
use crate::record::alloc_objects::PendingWeight;

/// What the wrapper of one VM needs: the allocator it wraps, and the
/// counters of the session recording through it. Written and read on the
/// VM's thread only (allocations and session calls both run there): the
/// two counters of the hot path are plain cells ([`VmCell`]), the rest
/// relaxed atomics.
pub(super) struct WrapperData {
    pub(super) inner: ffi::lua_Alloc,
    pub(super) inner_ud: *mut c_void,
    pub(super) recording: AtomicBool,
    /// Bytes left before the next sample point, which is crossed when this
    /// goes below zero (a sign test, which the hot path takes from the
    /// flags of its subtraction); far out of reach once the session
    /// stopped, so the hot path needs no other test.
    pub(super) countdown: VmCell<i64>,
    /// The byte count at the next sample point: bytes counted so far are
    /// `target - countdown`.
    pub(super) target: AtomicU64,
    pub(super) mean: AtomicU64,
    pub(super) rng: AtomicU64,
    /// New blocks counted.
    pub(super) objects: VmCell<u64>,
    /// Sample points crossed (each one a trigger passed to LuaJIT).
    pub(super) samples: AtomicU64,
    /// The byte and block counts when recording ended.
    pub(super) final_bytes: AtomicU64,
    pub(super) final_objects: AtomicU64,
    /// Object weights of the crossings not yet charged to a stack, and
    /// the sums of all weights and of their squares (`record::alloc_objects`).
    pub(super) pending_objects: PendingWeight,
    pub(super) objects_estimate: PendingWeight,
    pub(super) objects_squares: PendingWeight,
    /// The session's live table while it records; null otherwise.
    pub(super) live: AtomicPtr<LiveTable>,
    /// That table's filter, or the empty one: never null, so that a free
    /// costs one filter test and no other.
    pub(super) filter: AtomicPtr<Filter>,
    /// The wrapper's data installed before this one ([`KEPT`]).
    pub(super) kept_next: AtomicPtr<WrapperData>,
}

/// A counter of one VM's wrapper, read and written on the VM's thread
/// only. Plain loads and stores, which the compiler folds into one
/// instruction on memory (`adc`, `add`), as it does not for atomics.
pub(super) struct VmCell<T: Copy>(std::cell::Cell<T>);

// SAFETY: the cells of a WrapperData are touched only by its VM's allocator calls
// and by its session's methods, which all run on the VM's thread, one at
// a time (a LuaJIT VM runs one thread at a time; one that is handed
// between threads is handed with a lock, which orders the accesses).
unsafe impl<T: Copy> Sync for VmCell<T> {}

impl<T: Copy> VmCell<T> {
    pub(super) const fn new(v: T) -> VmCell<T> {
        VmCell(std::cell::Cell::new(v))
    }
    #[inline(always)]
    pub(super) fn get(&self) -> T {
        self.0.get()
    }
    #[inline(always)]
    pub(super) fn set(&self, v: T) {
        self.0.set(v)
    }
}

/// Every wrapper's data ever installed, newest first, linked through `kept_next`.
pub(super) static KEPT: AtomicPtr<WrapperData> = AtomicPtr::new(std::ptr::null_mut());

/// Keeps `data` on the list of wrappers' data, for the life of the process.
pub(super) fn keep(data: &'static WrapperData) {
    let this = data as *const WrapperData as *mut WrapperData;
    let mut head = KEPT.load(Ordering::Acquire);
    loop {
        data.kept_next.store(head, Ordering::Relaxed);
        match KEPT.compare_exchange_weak(head, this, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(now) => head = now,
        }
    }
}

/// The filter of no table, as the wrapper's data holds it.
pub(super) fn no_filter() -> *mut Filter {
    &NO_BLOCKS as *const Filter as *mut Filter
}

/// The countdown of a wrapper that records nothing (2^62 bytes).
pub(super) const NEVER: i64 = 1 << 62;

impl WrapperData {
    pub(super) fn new(inner: ffi::lua_Alloc, inner_ud: *mut c_void, mean: u64, seed: u64) -> WrapperData {
        let r = WrapperData {
            inner,
            inner_ud,
            recording: AtomicBool::new(true),
            countdown: VmCell::new(0),
            target: AtomicU64::new(0),
            mean: AtomicU64::new(mean.max(1)),
            rng: AtomicU64::new(seed | 1),
            objects: VmCell::new(0),
            samples: AtomicU64::new(0),
            final_bytes: AtomicU64::new(0),
            final_objects: AtomicU64::new(0),
            pending_objects: PendingWeight::default(),
            objects_estimate: PendingWeight::default(),
            objects_squares: PendingWeight::default(),
            live: AtomicPtr::new(std::ptr::null_mut()),
            filter: AtomicPtr::new(no_filter()),
            kept_next: AtomicPtr::new(std::ptr::null_mut()),
        };
        let first = r.next_distance();
        r.countdown.set(first);
        r.target.store(first as u64, Ordering::Relaxed);
        r
    }

    /// The next pseudo-random 64-bit word (xorshift64*).
    pub(super) fn next_random(&self) -> u64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.store(x, Ordering::Relaxed);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Distance to the next sample point: exponential with mean `mean`.
    pub(super) fn next_distance(&self) -> i64 {
        let mean = self.mean.load(Ordering::Relaxed) as f64;
        // Uniform in (0, 1]: 53 random bits, never 0 (ln 0 is -inf).
        let u = ((self.next_random() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        ((-u.ln() * mean) as i64).max(1)
    }

    /// Counts `grow` more bytes; returns the sample points crossed.
    #[cfg(test)]
    pub(super) fn count(&self, grow: usize, new_block: bool) -> u64 {
        match self.count_fast(grow, new_block) {
            Some(left) => {
                let crossed = self.crossed(left);
                let _ = self.weigh(crossed, grow, new_block);
                crossed
            }
            None => 0,
        }
    }

    /// The hot path: counts `grow` more bytes; the countdown left when a
    /// sample point was reached.
    #[inline(always)]
    pub(super) fn count_fast(&self, grow: usize, new_block: bool) -> Option<i64> {
        self.objects.set(self.objects.get() + new_block as u64);
        let left = self.countdown.get().wrapping_sub(grow as i64);
        self.countdown.set(left);
        (left < 0).then_some(left)
    }

    /// Weighs `crossed` crossings of a block of `grow` counted bytes: each
    /// crossing of a new block stands for `mean / grow` objects. Returns
    /// the weight of the block's crossings.
    pub(super) fn weigh(&self, crossed: u64, grow: usize, new_block: bool) -> f64 {
        if crossed == 0 || !new_block {
            return 0.0;
        }
        let w = self.mean.load(Ordering::Relaxed) as f64 / grow as f64;
        self.pending_objects.add(crossed as f64 * w);
        self.objects_estimate.add(crossed as f64 * w);
        self.objects_squares.add(crossed as f64 * w * w);
        crossed as f64 * w
    }

    /// The slow path: new sample points drawn until one lies ahead.
    #[cold]
    pub(super) fn crossed(&self, mut left: i64) -> u64 {
        if !self.recording.load(Ordering::Relaxed) {
            self.countdown.set(NEVER);
            return 0;
        }
        let mut crossed = 0u64;
        let mut target = self.target.load(Ordering::Relaxed);
        while left < 0 {
            let d = self.next_distance();
            left += d;
            target += d as u64;
            crossed += 1;
        }
        self.countdown.set(left);
        self.target.store(target, Ordering::Relaxed);
        self.samples.store(self.samples.load(Ordering::Relaxed) + crossed, Ordering::Relaxed);
        crossed
    }

    pub(super) fn bytes(&self) -> u64 {
        if self.recording.load(Ordering::Relaxed) {
            self.target.load(Ordering::Relaxed).wrapping_sub(self.countdown.get() as u64)
        } else {
            self.final_bytes.load(Ordering::Relaxed)
        }
    }

    /// Ends recording: the counters keep their values, and the live table
    /// is no longer reached from the wrapper or the callback.
    pub(super) fn end(&self) {
        self.filter.store(no_filter(), Ordering::Relaxed);
        self.live.store(std::ptr::null_mut(), Ordering::Relaxed);
        if self.recording.load(Ordering::Relaxed) {
            self.final_bytes.store(self.bytes(), Ordering::Relaxed);
            self.final_objects.store(self.objects.get(), Ordering::Relaxed);
            self.recording.store(false, Ordering::Relaxed);
            self.countdown.set(NEVER);
        }
    }

    pub(super) fn objects(&self) -> u64 {
        if self.recording.load(Ordering::Relaxed) {
            self.objects.get()
        } else {
            self.final_objects.load(Ordering::Relaxed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn never_called(_: *mut c_void, _: *mut c_void, _: usize, _: usize) -> *mut c_void {
        unreachable!("the tests count without allocating")
    }

    fn wrapper_data(mean: u64) -> WrapperData {
        WrapperData::new(never_called, std::ptr::null_mut(), mean, 0x9e37_79b9_7f4a_7c15)
    }

    #[test]
    fn sample_points_are_a_mean_distance_apart() {
        let r = wrapper_data(1000);
        let mut crossed = 0;
        for _ in 0..1_000_000 {
            crossed += r.count(64, true);
        }
        // 64e6 bytes at one point per 1000: 64000 expected, sd about 253.
        assert!((62_800..=65_200).contains(&crossed), "{crossed}");
        assert_eq!(r.bytes(), 64_000_000);
        assert_eq!(r.objects(), 1_000_000);
        assert_eq!(r.samples.load(Ordering::Relaxed), crossed);
    }

    #[test]
    fn a_large_block_crosses_several_points() {
        let r = wrapper_data(100);
        let crossed: u64 = (0..100).map(|_| r.count(100_000, false)).sum();
        // 1e7 bytes at one point per 100: 1e5 expected, sd about 316.
        assert!((98_500..=101_500).contains(&crossed), "{crossed}");
        assert_eq!(r.objects(), 0);
        assert_eq!(r.bytes(), 10_000_000);
    }

    #[test]
    fn object_weights_estimate_the_new_blocks() {
        let r = wrapper_data(1000);
        // Blocks of 40, 200 and 3000 bytes, and growth that adds no block.
        let mut crossed_new = 0u64;
        for i in 0..300_000u64 {
            let size = [40usize, 200, 3000][(i % 3) as usize];
            let before = r.samples.load(Ordering::Relaxed);
            r.count(size, true);
            crossed_new += r.samples.load(Ordering::Relaxed) - before;
            r.count(500, false);
        }
        let estimate = r.objects_estimate.get();
        let sd = r.objects_squares.get().sqrt();
        // Variance: sum of mean/size over blocks = 1e5 * (25 + 5 + 1/3).
        let exact_sd = (100_000.0f64 * (1000.0 / 40.0 + 1000.0 / 200.0 + 1000.0 / 3000.0)).sqrt();
        assert!((sd / exact_sd - 1.0).abs() < 0.1, "{sd} {exact_sd}");
        assert!((estimate - 300_000.0).abs() < 5.0 * exact_sd, "{estimate} {crossed_new}");
        assert_eq!(r.pending_objects.get(), estimate);
    }

    #[test]
    fn an_ended_record_counts_nothing_more() {
        let r = wrapper_data(100);
        let _ = r.count(1000, true);
        r.end();
        let (samples, bytes) = (r.samples.load(Ordering::Relaxed), r.bytes());
        for _ in 0..1000 {
            assert_eq!(r.count(1 << 20, true), 0);
        }
        assert_eq!((r.samples.load(Ordering::Relaxed), r.bytes(), r.objects()), (samples, bytes, 1));
    }
}
