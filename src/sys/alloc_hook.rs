//! The allocator wrapper of allocation sessions.
//!
//! Every GC allocation of a LuaJIT VM, from the interpreter or from
//! compiled code, goes through the VM's `lua_Alloc` function. The wrapper
//! installed here passes every call on to the allocator it replaced and,
//! while its session records, counts the bytes asked for: a new block
//! counts its size, a block grown by `realloc` the growth. Samples are
//! Poisson-distributed over those bytes (the distance to the next sample
//! is drawn from an exponential distribution of mean `bytes_per_sample`),
//! so periodic allocation patterns cannot alias with the sampling. A byte
//! count crossing the next sample point triggers LuaJIT's profiler the way
//! a timer tick does (`posix::pass_alloc_ticks`); LuaJIT then calls the session's
//! callback at its next safe point, where the stack is dumped. Nothing else
//! runs inside the allocator: no Lua, no stack dump, no Rust allocation.
//!
//! A block a sample point falls in is also tracked until it is freed
//! (`record::alloc_live`): the wrapper asks, for every block it frees or
//! moves, the live table's bitmap whether the block may be tracked, and
//! looks it up only then. The table belongs to the session ([`AllocHook`]);
//! the wrapper and the sample callback reach it through the record, which
//! forgets it when recording ends, before the session frees it.
//!
//! The wrapper's data (its [`Record`]) is never freed, on purpose:
//! `lua_close` frees the whole heap through the allocator after every
//! session object is gone, and another library may have wrapped our
//! wrapper, in which case it stays in place, a plain pass-through, until
//! the process ends. Every record stays reachable from a process-wide list
//! ([`KEPT`]), so that a leak checker sees memory held, not lost.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, Ordering};

use mlua::ffi;

use super::VmHandle;
use crate::record::alloc_live::{self, Filter, LiveBlock, LiveCounts, LiveTable, NO_BLOCKS};
use crate::record::alloc_objects::PendingWeight;

/// What the wrapper of one VM needs: the allocator it wraps, and the
/// counters of the session recording through it. Written and read on the
/// VM's thread only (allocations and session calls both run there); the
/// atomics are relaxed, plain loads and stores on the hot path.
struct Record {
    inner: ffi::lua_Alloc,
    inner_ud: *mut c_void,
    recording: AtomicBool,
    /// Bytes left before the next sample point; far out of reach once the
    /// session stopped, so the hot path needs no other test.
    countdown: AtomicI64,
    /// The byte count at the next sample point: bytes counted so far are
    /// `target - countdown`.
    target: AtomicU64,
    mean: AtomicU64,
    rng: AtomicU64,
    /// New blocks counted.
    objects: AtomicU64,
    /// Sample points crossed (each one a trigger passed to LuaJIT).
    samples: AtomicU64,
    /// The byte and block counts when recording ended.
    final_bytes: AtomicU64,
    final_objects: AtomicU64,
    /// Object weights of the crossings not yet charged to a stack, and
    /// the sums of all weights and of their squares (`record::alloc_objects`).
    pending_objects: PendingWeight,
    objects_estimate: PendingWeight,
    objects_squares: PendingWeight,
    /// The session's live table while it records; null otherwise.
    live: AtomicPtr<LiveTable>,
    /// That table's filter, or the empty one: never null, so that a free
    /// costs one filter test and no other.
    filter: AtomicPtr<Filter>,
    /// The record installed before this one ([`KEPT`]).
    kept_next: AtomicPtr<Record>,
}

/// Every record ever installed, newest first, linked through `kept_next`.
static KEPT: AtomicPtr<Record> = AtomicPtr::new(std::ptr::null_mut());

/// Keeps `rec` on the list of records, for the life of the process.
fn keep(rec: &'static Record) {
    let this = rec as *const Record as *mut Record;
    let mut head = KEPT.load(Ordering::Acquire);
    loop {
        rec.kept_next.store(head, Ordering::Relaxed);
        match KEPT.compare_exchange_weak(head, this, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(now) => head = now,
        }
    }
}

/// The filter of no table, as the record holds it.
fn no_filter() -> *mut Filter {
    &NO_BLOCKS as *const Filter as *mut Filter
}

/// The countdown of a wrapper that records nothing (2^62 bytes).
const NEVER: i64 = 1 << 62;

impl Record {
    fn new(inner: ffi::lua_Alloc, inner_ud: *mut c_void, mean: u64, seed: u64) -> Record {
        let r = Record {
            inner,
            inner_ud,
            recording: AtomicBool::new(true),
            countdown: AtomicI64::new(0),
            target: AtomicU64::new(0),
            mean: AtomicU64::new(mean.max(1)),
            rng: AtomicU64::new(seed | 1),
            objects: AtomicU64::new(0),
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
        r.countdown.store(first, Ordering::Relaxed);
        r.target.store(first as u64, Ordering::Relaxed);
        r
    }

    /// The next pseudo-random 64-bit word (xorshift64*).
    fn next_random(&self) -> u64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.store(x, Ordering::Relaxed);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Distance to the next sample point: exponential with mean `mean`.
    fn next_distance(&self) -> i64 {
        let mean = self.mean.load(Ordering::Relaxed) as f64;
        // Uniform in (0, 1]: 53 random bits, never 0 (ln 0 is -inf).
        let u = ((self.next_random() >> 11) + 1) as f64 / (1u64 << 53) as f64;
        ((-u.ln() * mean) as i64).max(1)
    }

    /// Counts `grow` more bytes; returns the sample points crossed.
    #[cfg(test)]
    fn count(&self, grow: usize, new_block: bool) -> u64 {
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
    fn count_fast(&self, grow: usize, new_block: bool) -> Option<i64> {
        self.objects.store(self.objects.load(Ordering::Relaxed) + new_block as u64, Ordering::Relaxed);
        let left = self.countdown.load(Ordering::Relaxed) - grow as i64;
        self.countdown.store(left, Ordering::Relaxed);
        (left <= 0).then_some(left)
    }

    /// Weighs `crossed` crossings of a block of `grow` counted bytes: each
    /// crossing of a new block stands for `mean / grow` objects. Returns
    /// the weight of the block's crossings.
    fn weigh(&self, crossed: u64, grow: usize, new_block: bool) -> f64 {
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
    fn crossed(&self, mut left: i64) -> u64 {
        if !self.recording.load(Ordering::Relaxed) {
            self.countdown.store(NEVER, Ordering::Relaxed);
            return 0;
        }
        let mut crossed = 0u64;
        let mut target = self.target.load(Ordering::Relaxed);
        while left <= 0 {
            let d = self.next_distance();
            left += d;
            target += d as u64;
            crossed += 1;
        }
        self.countdown.store(left, Ordering::Relaxed);
        self.target.store(target, Ordering::Relaxed);
        self.samples.store(self.samples.load(Ordering::Relaxed) + crossed, Ordering::Relaxed);
        crossed
    }

    fn bytes(&self) -> u64 {
        if self.recording.load(Ordering::Relaxed) {
            self.target.load(Ordering::Relaxed).wrapping_sub(self.countdown.load(Ordering::Relaxed) as u64)
        } else {
            self.final_bytes.load(Ordering::Relaxed)
        }
    }

    /// Ends recording: the counters keep their values, and the live table
    /// is no longer reached from the wrapper or the callback.
    fn end(&self) {
        self.filter.store(no_filter(), Ordering::Relaxed);
        self.live.store(std::ptr::null_mut(), Ordering::Relaxed);
        if self.recording.load(Ordering::Relaxed) {
            self.final_bytes.store(self.bytes(), Ordering::Relaxed);
            self.final_objects.store(self.objects.load(Ordering::Relaxed), Ordering::Relaxed);
            self.recording.store(false, Ordering::Relaxed);
            self.countdown.store(NEVER, Ordering::Relaxed);
        }
    }

    fn objects(&self) -> u64 {
        let field = if self.recording.load(Ordering::Relaxed) { &self.objects } else { &self.final_objects };
        field.load(Ordering::Relaxed)
    }
}

// The allocator path stays a few instructions and a tail call: no stack
// frame, nothing saved. The rare sample point and the rare tracked block
// are functions of the wrapper's own signature, which it jumps to as it
// jumps to the allocator: a call would cost every path a stack frame.
unsafe extern "C" fn counting_alloc(ud: *mut c_void, ptr: *mut c_void, osize: usize, nsize: usize) -> *mut c_void {
    // SAFETY: `ud` is the leaked Record installed with this function by
    // `AllocHook::install`; it is never freed.
    let rec = unsafe { &*(ud as *const Record) };
    // A block freed or moved: tracked, perhaps (a new one has no pointer).
    // SAFETY: the filter is the static empty one or the session's table's,
    // which the record forgets (ending recording) before the table is
    // freed; allocations and the session's calls run on the VM's thread,
    // one at a time.
    let filter = unsafe { &*rec.filter.load(Ordering::Relaxed) };
    if !ptr.is_null() && alloc_live::maybe_tracked(filter, ptr as usize) {
        // SAFETY: the same call, passed on.
        return unsafe { tracked_block(ud, ptr, osize, nsize) };
    }
    // SAFETY: the same call, passed on.
    unsafe { counted(rec, ptr, osize, nsize) }
}

/// Counts the bytes of a call and passes it on.
#[inline(always)]
unsafe fn counted(rec: &Record, ptr: *mut c_void, osize: usize, nsize: usize) -> *mut c_void {
    // A new block comes with a null pointer (and an `osize` of 0).
    if nsize > osize && rec.count_fast(nsize - osize, ptr.is_null()).is_some() {
        // SAFETY: the same call, passed on.
        return unsafe { sample_point(rec as *const Record as *mut c_void, ptr, osize, nsize) };
    }
    // SAFETY: the allocator this wrapper replaced, called with its own
    // data and the caller's arguments unchanged.
    unsafe { (rec.inner)(rec.inner_ud, ptr, osize, nsize) }
}

/// Passes `crossed` triggers to LuaJIT's profiler.
#[inline]
fn pass_ticks(crossed: u64) {
    // Counted first: the callback may tell them from timer ticks.
    super::note_alloc_triggers(crossed);
    #[cfg(target_os = "linux")]
    super::posix::pass_alloc_ticks(crossed);
    #[cfg(not(target_os = "linux"))]
    let _ = crossed;
}

/// A sample point was reached (the countdown is at or below zero): trigger
/// LuaJIT's profiler once per point crossed, allocate, then track the block
/// the points fell in. The wrapper's own signature, so that the wrapper
/// jumps here rather than calling (no stack frame on its path).
#[cold]
#[inline(never)]
unsafe extern "C" fn sample_point(ud: *mut c_void, ptr: *mut c_void, osize: usize, nsize: usize) -> *mut c_void {
    // SAFETY: as in `counting_alloc`.
    let rec = unsafe { &*(ud as *const Record) };
    let crossed = rec.crossed(rec.countdown.load(Ordering::Relaxed));
    let weight = rec.weigh(crossed, nsize - osize, ptr.is_null());
    pass_ticks(crossed);
    // SAFETY: as in `counting_alloc`.
    let out = unsafe { (rec.inner)(rec.inner_ud, ptr, osize, nsize) };
    let live = rec.live.load(Ordering::Relaxed);
    if crossed > 0 && !out.is_null() && !live.is_null() {
        // SAFETY: as in `counting_alloc`; no other reference to the table
        // is held (the inner allocator does not call back into us).
        unsafe { &mut *live }.insert(out as usize, crossed.min(u32::MAX as u64) as u32, weight);
    }
    out
}

/// A block the live table may track is freed or moved. The wrapper's
/// signature, as for `sample_point`.
#[cold]
#[inline(never)]
unsafe extern "C" fn tracked_block(ud: *mut c_void, ptr: *mut c_void, osize: usize, nsize: usize) -> *mut c_void {
    // SAFETY: as in `counting_alloc`.
    let rec = unsafe { &*(ud as *const Record) };
    let addr = ptr as usize;
    let live = rec.live.load(Ordering::Relaxed);
    // SAFETY: a non-null `live` is the session's table, alive until the
    // session ends recording, which clears `live` (see `counting_alloc`).
    if ptr.is_null() || live.is_null() || !unsafe { &*live }.is_tracked(addr) {
        // SAFETY: the same call, passed on.
        return unsafe { counted(rec, ptr, osize, nsize) };
    }
    if nsize == 0 {
        // SAFETY: as in `counting_alloc`; the reference ends here.
        unsafe { &mut *live }.remove(addr);
        // SAFETY: as in `counted`.
        return unsafe { (rec.inner)(rec.inner_ud, ptr, osize, nsize) };
    }
    // Moved by `realloc`: growth is counted (bytes, no object) and its
    // points stay with the block.
    let mut more = 0;
    if nsize > osize {
        if let Some(left) = rec.count_fast(nsize - osize, false) {
            more = rec.crossed(left);
            pass_ticks(more);
        }
    }
    // SAFETY: as in `counted`.
    let out = unsafe { (rec.inner)(rec.inner_ud, ptr, osize, nsize) };
    if !out.is_null() {
        // SAFETY: as in `sample_point`.
        unsafe { &mut *live }.moved(addr, out as usize, more.min(u32::MAX as u64) as u32);
    }
    out
}

/// Totals counted by a session's wrapper.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AllocTotals {
    pub bytes: u64,
    pub objects: u64,
    pub samples: u64,
    /// Objects estimated from the samples, and the estimate's variance.
    pub estimated_objects: f64,
    pub estimated_objects_variance: f64,
}

/// How a stop left the VM's allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restored {
    /// The wrapped allocator is the VM's allocator again.
    Original,
    /// Another function wrapped ours since: ours stays, passing through.
    PassThrough,
}

/// The wrapper installed on one VM for one session, and the session's
/// live table (null when live blocks are not tracked), which it owns.
pub struct AllocHook {
    rec: &'static Record,
    vm: VmHandle,
    live: *mut LiveTable,
}

/// What the sample callback reaches the live table through: nothing once
/// recording ended.
#[derive(Clone, Copy)]
pub struct LiveLink(&'static AtomicPtr<LiveTable>);

impl LiveLink {
    /// Gives the blocks waiting for a stack the one sampled (`None`: the
    /// sample was not recorded).
    pub fn attribute(&self, entry: Option<u32>, state: usize) {
        let t = self.0.load(Ordering::Relaxed);
        if t.is_null() {
            return;
        }
        // SAFETY: a non-null pointer is the session's table, alive while
        // recording (see `counting_alloc`); the callback runs on the VM's
        // thread at a safe point, never inside the allocator.
        unsafe { &mut *t }.attribute(entry, state);
    }
}

impl AllocHook {
    /// Wraps the allocator of the VM of `vm`, recording from now on, a
    /// sample about every `bytes_per_sample` bytes, tracking up to
    /// `max_live` sampled blocks until they are freed (0: none).
    pub fn install(vm: VmHandle, bytes_per_sample: u64, seed: u64, max_live: usize) -> AllocHook {
        let l = vm.0;
        #[cfg(target_os = "linux")]
        super::posix::pin_this_library();
        let mut inner_ud = std::ptr::null_mut();
        // SAFETY: `l` is a live state of this VM (a `VmHandle` is taken
        // from a live `Lua`); lua_getallocf only reads the global state.
        let inner = unsafe { ffi::lua_getallocf(l, &mut inner_ud) };
        let rec: &'static Record = Box::leak(Box::new(Record::new(inner, inner_ud, bytes_per_sample, seed)));
        keep(rec);
        let (live, filter) = if max_live == 0 {
            (std::ptr::null_mut(), no_filter())
        } else {
            let table = Box::new(LiveTable::new(max_live));
            // The filter is a box of its own: moving the table moves not it.
            let filter = table.filter() as *const Filter as *mut Filter;
            (Box::into_raw(table), filter)
        };
        rec.live.store(live, Ordering::Relaxed);
        rec.filter.store(filter, Ordering::Relaxed);
        // SAFETY: the record is leaked, so the data pointer outlives every
        // call; the wrapper passes each call on to the allocator read just
        // above, on the same thread, with nothing in between.
        unsafe { ffi::lua_setallocf(l, counting_alloc, rec as *const Record as *mut c_void) };
        AllocHook { rec, vm, live }
    }

    /// Ends recording and puts the wrapped allocator back if ours is still
    /// the VM's; otherwise leaves ours in place as a pass-through.
    pub fn uninstall(&self) -> Restored {
        self.rec.end();
        let mut ud = std::ptr::null_mut();
        // SAFETY: `l` is still open (stops run before lua_close frees the
        // heap: see `VmHandle`); both calls only touch the global state.
        unsafe {
            let f = ffi::lua_getallocf(self.vm.0, &mut ud);
            if f as usize == counting_alloc as *const () as usize && std::ptr::eq(ud as *const Record, self.rec) {
                ffi::lua_setallocf(self.vm.0, self.rec.inner, self.rec.inner_ud);
                return Restored::Original;
            }
        }
        Restored::PassThrough
    }

    pub fn totals(&self) -> AllocTotals {
        AllocTotals {
            bytes: self.rec.bytes(),
            objects: self.rec.objects(),
            samples: self.rec.samples.load(Ordering::Relaxed),
            estimated_objects: self.rec.objects_estimate.get(),
            estimated_objects_variance: self.rec.objects_squares.get(),
        }
    }

    /// The object weights the sample callback charges to stacks.
    pub fn pending_objects(&self) -> &'static PendingWeight {
        &self.rec.pending_objects
    }

    /// The live table as the sample callback reaches it.
    pub fn live_link(&self) -> LiveLink {
        LiveLink(&self.rec.live)
    }

    /// The tracked blocks with a stack, and the live table's counters
    /// (None when blocks are not tracked).
    pub fn live(&self) -> Option<(Vec<LiveBlock>, LiveCounts)> {
        if self.live.is_null() {
            return None;
        }
        // SAFETY: the table is owned by this hook and freed only by its
        // drop; this runs on the VM's thread in a call of the session, not
        // inside the allocator or the sample callback.
        Some(unsafe { &*self.live }.snapshot())
    }

    /// Bytes of the live table.
    pub fn live_memory_bytes(&self) -> usize {
        // SAFETY: as in `live`.
        if self.live.is_null() {
            0
        } else {
            unsafe { &*self.live }.memory_bytes()
        }
    }
}

impl Drop for AllocHook {
    fn drop(&mut self) {
        // Neither the wrapper (still installed if it was wrapped) nor the
        // callback reach the table once recording ended.
        self.rec.end();
        if !self.live.is_null() {
            // SAFETY: made by `Box::into_raw` in `install`, freed only here,
            // no longer reachable from the record (just above).
            drop(unsafe { Box::from_raw(self.live) });
            self.live = std::ptr::null_mut();
        }
    }
}

/// Whether the allocator of the VM of `l` is an allocation session's
/// wrapper (any session's).
pub fn wrapper_installed(vm: VmHandle) -> bool {
    let l = vm.0;
    let mut ud = std::ptr::null_mut();
    // SAFETY: `l` is a live state; lua_getallocf only reads.
    let f = unsafe { ffi::lua_getallocf(l, &mut ud) };
    f as usize == counting_alloc as *const () as usize
}

/// The data of [`wrap_in_pass_through`]'s wrapper.
struct Inner {
    f: ffi::lua_Alloc,
    ud: *mut c_void,
}

unsafe extern "C" fn pass_through(ud: *mut c_void, ptr: *mut c_void, osize: usize, nsize: usize) -> *mut c_void {
    // SAFETY: `ud` is the leaked Inner installed with this function.
    let inner = unsafe { &*(ud as *const Inner) };
    // SAFETY: the wrapped allocator, with its data and the caller's arguments.
    unsafe { (inner.f)(inner.ud, ptr, osize, nsize) }
}

/// Wraps the VM's allocator in a plain pass-through, as another library
/// would (for tests of a stop that finds its wrapper wrapped). Returns
/// whether the allocator it wrapped was an allocation session's wrapper.
pub fn wrap_in_pass_through(vm: VmHandle) -> bool {
    let l = vm.0;
    #[cfg(target_os = "linux")]
    super::posix::pin_this_library();
    let mut ud = std::ptr::null_mut();
    // SAFETY: `l` is a live state; the leaked Inner outlives every call of
    // the wrapper, which only forwards to the allocator read here.
    unsafe {
        let f = ffi::lua_getallocf(l, &mut ud);
        let inner: &'static Inner = Box::leak(Box::new(Inner { f, ud }));
        ffi::lua_setallocf(l, pass_through, inner as *const Inner as *mut c_void);
        f as usize == counting_alloc as *const () as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(mean: u64) -> Record {
        Record::new(counting_alloc, std::ptr::null_mut(), mean, 0x9e37_79b9_7f4a_7c15)
    }

    #[test]
    fn sample_points_are_a_mean_distance_apart() {
        let r = record(1000);
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
        let r = record(100);
        let crossed: u64 = (0..100).map(|_| r.count(100_000, false)).sum();
        // 1e7 bytes at one point per 100: 1e5 expected, sd about 316.
        assert!((98_500..=101_500).contains(&crossed), "{crossed}");
        assert_eq!(r.objects(), 0);
        assert_eq!(r.bytes(), 10_000_000);
    }

    #[test]
    fn object_weights_estimate_the_new_blocks() {
        let r = record(1000);
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
        let r = record(100);
        let _ = r.count(1000, true);
        r.end();
        let (samples, bytes) = (r.samples.load(Ordering::Relaxed), r.bytes());
        for _ in 0..1000 {
            assert_eq!(r.count(1 << 20, true), 0);
        }
        assert_eq!((r.samples.load(Ordering::Relaxed), r.bytes(), r.objects()), (samples, bytes, 1));
    }
}
