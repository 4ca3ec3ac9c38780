//! Counts heap allocations made inside the sample callback (tests only):
//! the callback must not allocate when it counts a stack seen before.

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

struct Counting;

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

#[test]
fn a_stack_seen_before_is_counted_without_allocating() {
    let _turn = crate::sys::one_session_at_a_time();
    let lua = mlua::Lua::new();
    let native = crate::lua_api::exports(&lua).expect("exports");
    lua.globals().set("native", native).unwrap();
    let phase = |code: &str| -> (u64, u64) {
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let samples: u64 = lua.load(code).eval().expect("workload");
        (samples, ALLOCATIONS.load(Ordering::Relaxed) - before)
    };
    let setup = r#"
        local function busy(n) local s = 0 for i = 1, n do s = (s + i * 3) % 65537 end return s end
        function burn(sec) local t0 = os.clock() while os.clock() - t0 < sec do busy(5000) end end
        -- A small time line: the measured phase overwrites its oldest samples.
        h = native.start({ intervalMs = 0.2, timelineSamples = 64 })
        burn(0.4)
        return h:stats().samples
    "#;
    let (warm, first_allocations) = phase(setup);
    assert!(warm > 100, "warm-up samples: {warm}");
    // The probe sees allocations: storing the first stacks makes some.
    assert!(first_allocations > 0, "no allocation counted while new stacks were stored");
    let (samples, allocations) =
        phase("local n0 = h:stats().samples; burn(0.4); local n = h:stats().samples - n0; h:stop(); return n");
    assert!(samples > 100, "samples in the measured phase: {samples}");
    assert_eq!(allocations, 0, "allocations in {samples} callbacks on known stacks");
    // Every recorded sample went through the time line, which wrapped.
    let (kept, dropped, recorded): (u64, u64, u64) = lua
        .load("local st = h:stats() return st.timelineSamples, st.timelineDroppedSamples, st.recordedSamples")
        .eval()
        .expect("stats");
    assert!(kept >= 64 && dropped > samples / 2, "time line kept {kept}, dropped {dropped}");
    assert_eq!(kept + dropped, recorded);
}
