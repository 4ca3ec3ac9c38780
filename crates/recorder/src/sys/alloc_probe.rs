//! Counts heap allocations made inside the sample callback (tests only):
//! the callback must not allocate when it counts a stack seen before
//! (checked by `lua_api`'s start tests, which run a session from Lua). A
//! test binary installs [`Counting`] as its global allocator; this crate's
//! own tests do.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    static IN_SAMPLE: Cell<bool> = const { Cell::new(false) };
}
pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// The allocator the module itself uses (`lib.rs`).
#[cfg(target_os = "linux")]
use super::large_pages::LargePages as Heap;
#[cfg(not(target_os = "linux"))]
use std::alloc::System as Heap;

/// The module's allocator, counting what the callback allocates.
pub struct Counting;

// SAFETY: every call is forwarded to the module's allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if IN_SAMPLE.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { Heap.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if IN_SAMPLE.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { Heap.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if IN_SAMPLE.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { Heap.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { Heap.dealloc(ptr, layout) }
    }
}

#[cfg(test)]
#[global_allocator]
static COUNTING: Counting = Counting;

/// Marks the calling thread as inside the callback until dropped.
pub struct InSample;

impl InSample {
    pub fn enter() -> InSample {
        IN_SAMPLE.with(|c| c.set(true));
        InSample
    }
}

impl Drop for InSample {
    fn drop(&mut self) {
        IN_SAMPLE.with(|c| c.set(false));
    }
}
