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
//! (`record::alloc_live`), when the session tracks live blocks: its wrapper
//! (`counting_alloc`) asks, for every block it frees or moves, the live
//! table's bitmap whether the block may be tracked, and looks it up only
//! then. A session that tracks none installs the wrapper that only counts
//! (`counting_alloc_untracked`). The table belongs to the session ([`AllocHook`]);
//! the wrapper and the sample callback reach it through the wrapper's data,
//! which forgets it when recording ends, before the session frees it.
//!
//! The wrapper's data (its [`WrapperData`]) is never freed, on purpose:
//! `lua_close` frees the whole heap through the allocator after every
//! session object is gone, and another library may have wrapped our
//! wrapper, in which case it stays in place, a plain pass-through, until
//! the process ends. Every wrapper's data stays reachable from a
//! process-wide list ([`wrapper_data::KEPT`]), so that a leak checker sees memory held, not lost.

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use mlua::ffi;

use crate::record::alloc_live::{self, Filter, LiveBlock, LiveCounts, LiveLink, LiveTable};
use crate::record::alloc_objects::PendingWeight;
use crate::sys::{self, VmHandle};

mod wrapper_data;
use wrapper_data::{keep, no_filter, WrapperData};

// The allocator path stays a few instructions and a tail call: no stack
// frame, nothing saved. The rare sample point and the rare tracked block
// are functions of the wrapper's own signature, which it jumps to as it
// jumps to the allocator: a call would cost every path a stack frame.
unsafe extern "C" fn counting_alloc(ud: *mut c_void, ptr: *mut c_void, osize: usize, nsize: usize) -> *mut c_void {
    // SAFETY: `ud` is the leaked WrapperData installed with this function by
    // `AllocHook::install`; it is never freed.
    let data = unsafe { &*(ud as *const WrapperData) };
    // A block freed or moved: tracked, perhaps (a new one has no pointer).
    // SAFETY: the filter is the static empty one or the session's table's,
    // which the wrapper's data forgets (ending recording) before the table is
    // freed; allocations and the session's calls run on the VM's thread,
    // one at a time.
    let filter = unsafe { &*data.filter.load(Ordering::Relaxed) };
    if !ptr.is_null() && alloc_live::maybe_tracked(filter, ptr as usize) {
        // SAFETY: the same call, passed on.
        return unsafe { tracked_block(ud, ptr, osize, nsize) };
    }
    // SAFETY: the same call, passed on.
    unsafe { counted(data, ptr, osize, nsize) }
}

/// The wrapper of a session that tracks no live block: the count alone.
unsafe extern "C" fn counting_alloc_untracked(
    ud: *mut c_void,
    ptr: *mut c_void,
    osize: usize,
    nsize: usize,
) -> *mut c_void {
    // SAFETY: as in `counting_alloc`.
    let data = unsafe { &*(ud as *const WrapperData) };
    // SAFETY: the same call, passed on.
    unsafe { counted(data, ptr, osize, nsize) }
}

/// Counts the bytes of a call and passes it on.
#[inline(always)]
unsafe fn counted(data: &WrapperData, ptr: *mut c_void, osize: usize, nsize: usize) -> *mut c_void {
    // A new block comes with a null pointer (and an `osize` of 0).
    if nsize > osize && data.count_fast(nsize - osize, ptr.is_null()).is_some() {
        // SAFETY: the same call, passed on.
        return unsafe { sample_point(data as *const WrapperData as *mut c_void, ptr, osize, nsize) };
    }
    // SAFETY: the allocator this wrapper replaced, called with its own
    // data and the caller's arguments unchanged.
    unsafe { (data.inner)(data.inner_ud, ptr, osize, nsize) }
}

/// Passes `crossed` triggers to LuaJIT's profiler.
#[inline]
fn pass_ticks(crossed: u64) {
    // Counted first: the callback may tell them from timer ticks.
    sys::note_alloc_triggers(crossed);
    #[cfg(target_os = "linux")]
    sys::posix::pass_alloc_ticks(crossed);
    #[cfg(not(target_os = "linux"))]
    let _ = crossed;
}

/// A sample point was reached (the countdown went below zero): trigger
/// LuaJIT's profiler once per point crossed, allocate, then track the block
/// the points fell in. The wrapper's own signature, so that the wrapper
/// jumps here rather than calling (no stack frame on its path).
#[cold]
#[inline(never)]
unsafe extern "C" fn sample_point(ud: *mut c_void, ptr: *mut c_void, osize: usize, nsize: usize) -> *mut c_void {
    // SAFETY: as in `counting_alloc`.
    let data = unsafe { &*(ud as *const WrapperData) };
    let crossed = data.crossed(data.countdown.get());
    let weight = data.weigh(crossed, nsize - osize, ptr.is_null());
    pass_ticks(crossed);
    // SAFETY: as in `counting_alloc`.
    let out = unsafe { (data.inner)(data.inner_ud, ptr, osize, nsize) };
    let live = data.live.load(Ordering::Relaxed);
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
    let data = unsafe { &*(ud as *const WrapperData) };
    let addr = ptr as usize;
    let live = data.live.load(Ordering::Relaxed);
    // SAFETY: a non-null `live` is the session's table, alive until the
    // session ends recording, which clears `live` (see `counting_alloc`).
    if ptr.is_null() || live.is_null() || !unsafe { &*live }.is_tracked(addr) {
        // SAFETY: the same call, passed on.
        return unsafe { counted(data, ptr, osize, nsize) };
    }
    if nsize == 0 {
        // SAFETY: as in `counting_alloc`; the reference ends here.
        unsafe { &mut *live }.remove(addr);
        // SAFETY: as in `counted`.
        return unsafe { (data.inner)(data.inner_ud, ptr, osize, nsize) };
    }
    // Moved by `realloc`: growth is counted (bytes, no object) and its
    // points stay with the block.
    let mut more = 0;
    if nsize > osize {
        if let Some(left) = data.count_fast(nsize - osize, false) {
            more = data.crossed(left);
            pass_ticks(more);
        }
    }
    // SAFETY: as in `counted`.
    let out = unsafe { (data.inner)(data.inner_ud, ptr, osize, nsize) };
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
    data: &'static WrapperData,
    vm: VmHandle,
    live: *mut LiveTable,
    /// The wrapper function installed: with the live-block filter or not.
    wrapper: ffi::lua_Alloc,
}

impl AllocHook {
    /// Wraps the allocator of the VM of `vm`, recording from now on, a
    /// sample about every `bytes_per_sample` bytes, tracking up to
    /// `max_live` sampled blocks until they are freed (0: none).
    pub fn install(vm: VmHandle, bytes_per_sample: u64, seed: u64, max_live: usize) -> AllocHook {
        let l = vm.state();
        #[cfg(target_os = "linux")]
        sys::posix::pin_this_library();
        let mut inner_ud = std::ptr::null_mut();
        // SAFETY: `l` is a live state of this VM (a `VmHandle` is taken
        // from a live `Lua`); lua_getallocf only reads the global state.
        let inner = unsafe { ffi::lua_getallocf(l, &mut inner_ud) };
        let data: &'static WrapperData = Box::leak(Box::new(WrapperData::new(inner, inner_ud, bytes_per_sample, seed)));
        keep(data);
        let (live, filter) = if max_live == 0 {
            (std::ptr::null_mut(), no_filter())
        } else {
            let table = Box::new(LiveTable::new(max_live));
            // The filter is a box of its own: moving the table moves not it.
            let filter = table.filter() as *const Filter as *mut Filter;
            (Box::into_raw(table), filter)
        };
        data.live.store(live, Ordering::Relaxed);
        data.filter.store(filter, Ordering::Relaxed);
        // Without a live table no block is tracked: the wrapper that asks
        // no filter saves every free and every `realloc` the asking.
        let wrapper: ffi::lua_Alloc = if live.is_null() { counting_alloc_untracked } else { counting_alloc };
        // SAFETY: the wrapper's data is leaked, so the pointer outlives every
        // call; the wrapper passes each call on to the allocator read just
        // above, on the same thread, with nothing in between.
        unsafe { ffi::lua_setallocf(l, wrapper, data as *const WrapperData as *mut c_void) };
        AllocHook { data, vm, live, wrapper }
    }

    /// Ends recording and puts the wrapped allocator back if ours is still
    /// the VM's; otherwise leaves ours in place as a pass-through.
    pub fn uninstall(&self) -> Restored {
        self.data.end();
        let mut ud = std::ptr::null_mut();
        // SAFETY: `l` is still open (stops run before lua_close frees the
        // heap: see `VmHandle`); both calls only touch the global state.
        unsafe {
            let f = ffi::lua_getallocf(self.vm.state(), &mut ud);
            if f as usize == self.wrapper as usize && std::ptr::eq(ud as *const WrapperData, self.data) {
                ffi::lua_setallocf(self.vm.state(), self.data.inner, self.data.inner_ud);
                return Restored::Original;
            }
        }
        Restored::PassThrough
    }

    pub fn totals(&self) -> AllocTotals {
        AllocTotals {
            bytes: self.data.bytes(),
            objects: self.data.objects(),
            samples: self.data.samples.load(Ordering::Relaxed),
            estimated_objects: self.data.objects_estimate.get(),
            estimated_objects_variance: self.data.objects_squares.get(),
        }
    }

    /// The object weights the sample callback charges to stacks.
    pub fn pending_objects(&self) -> &'static PendingWeight {
        &self.data.pending_objects
    }

    /// The live table as the sample callback reaches it.
    pub fn live_link(&self) -> LiveLink {
        LiveLink::new(&self.data.live)
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
        if self.live.is_null() {
            0
        } else {
            // SAFETY: as in `live`.
            unsafe { &*self.live }.memory_bytes()
        }
    }
}

impl Drop for AllocHook {
    fn drop(&mut self) {
        // Neither the wrapper (still installed if it was wrapped) nor the
        // callback reach the table once recording ended.
        self.data.end();
        if !self.live.is_null() {
            // SAFETY: made by `Box::into_raw` in `install`, freed only here,
            // no longer reachable from the wrapper's data (just above).
            drop(unsafe { Box::from_raw(self.live) });
            self.live = std::ptr::null_mut();
        }
    }
}

/// Whether the allocator of the VM of `l` is an allocation session's
/// wrapper (any session's).
pub fn wrapper_installed(vm: VmHandle) -> bool {
    let l = vm.state();
    let mut ud = std::ptr::null_mut();
    // SAFETY: `l` is a live state; lua_getallocf only reads.
    let f = unsafe { ffi::lua_getallocf(l, &mut ud) };
    is_wrapper(f)
}

/// Whether `f` is one of the allocation sessions' wrappers.
fn is_wrapper(f: ffi::lua_Alloc) -> bool {
    [counting_alloc as ffi::lua_Alloc, counting_alloc_untracked].iter().any(|&w| w as usize == f as usize)
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
    let l = vm.state();
    #[cfg(target_os = "linux")]
    sys::posix::pin_this_library();
    let mut ud = std::ptr::null_mut();
    // SAFETY: `l` is a live state; the leaked Inner outlives every call of
    // the wrapper, which only forwards to the allocator read here.
    unsafe {
        let f = ffi::lua_getallocf(l, &mut ud);
        let inner: &'static Inner = Box::leak(Box::new(Inner { f, ud }));
        ffi::lua_setallocf(l, pass_through, inner as *const Inner as *mut c_void);
        is_wrapper(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlua::Lua;

    #[test]
    fn the_wrapper_asks_the_live_filter_only_when_blocks_are_tracked() {
        let _turn = crate::sys::one_session_at_a_time();
        let only_counts: ffi::lua_Alloc = counting_alloc_untracked;
        let with_filter: ffi::lua_Alloc = counting_alloc;
        for (max_live, want) in [(0, only_counts), (64, with_filter)] {
            let lua = Lua::new();
            let vm = VmHandle::of(&lua).unwrap();
            // A mean of 2^30 bytes: no sample point in these few KiB but
            // with a chance of about 1 in 10^4.
            let hook = AllocHook::install(vm, 1 << 30, 7, max_live);
            assert_eq!(hook.wrapper as usize, want as usize, "max_live {max_live}");
            assert!(wrapper_installed(vm));
            lua.load("keep = {} for i = 1, 1000 do keep[i] = { i } end").exec().unwrap();
            let t = hook.totals();
            assert!(t.objects >= 1000, "{}", t.objects);
            assert!(t.bytes >= 1000 * 32, "{}", t.bytes);
            assert_eq!(hook.live().is_some(), max_live > 0);
            assert_eq!(hook.uninstall(), Restored::Original);
            assert!(!wrapper_installed(vm));
            let at_stop = hook.totals();
            lua.load("keep = nil collectgarbage() local t = {} for i = 1, 100 do t[i] = {} end").exec().unwrap();
            assert_eq!(hook.totals(), at_stop, "nothing counted after the stop");
        }
    }
}
