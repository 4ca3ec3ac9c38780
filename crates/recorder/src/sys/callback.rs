//! LuaJIT's profiler callback: the box of sampler state LuaJIT hands back
//! as the callback's data, and the trampoline LuaJIT calls, which passes
//! each callback's samples to the running session and, when one is
//! attached, the allocator's triggers to the attached allocation session.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use mlua::ffi;
use mlua::Lua;

use super::{profiler_api, ProfilerApi, VmStack};

/// A state object handed to LuaJIT as the callback's `data` pointer.
pub trait SampleSink {
    fn on_sample(&mut self, vm: &VmStack, samples: u32, vmstate: u8);
    /// Takes in what the tick handler recorded itself since the last call
    /// (run before every callback and every other use of the state).
    fn absorb(&mut self) {}
}

/// Owns the sampler state that the profiler callback mutates.
///
/// The callback runs on the VM's own OS thread, between two bytecodes, and
/// never while one of our Lua-facing functions is executing Rust code (those
/// run no Lua). [`SamplerBox::with`] is therefore never re-entered. The
/// state sits behind a mutex all the same: a [`SamplerWatch`] reads it from
/// a thread of ours (a session's autosave), which must see it whole. On
/// the VM thread the lock is never contended but while such a thread holds it.
pub struct SamplerBox<T: SampleSink> {
    ptr: *const Shared<T>,
}

/// What the box and its watches share: the state, until the box drops it.
struct Shared<T> {
    state: Mutex<Option<T>>,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Option<T>> {
        // A panic under the lock (caught in the trampoline) leaves counts
        // that are still counts: the state stays usable.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Access to a box's state from another thread: `None` once the box has
/// dropped it. Only [`SampleSink::absorb`] and plain reads of the state may
/// run there (no Lua).
pub struct SamplerWatch<T: SampleSink> {
    shared: Arc<Shared<T>>,
}

// SAFETY: the watch reaches the state only under its mutex, and only to
// absorb the tick handler's stacks and read the counts, which touch no Lua
// state; the state itself is dropped by the box on the VM thread (a watch
// that outlives the box holds `None`).
unsafe impl<T: SampleSink> Send for SamplerWatch<T> {}

impl<T: SampleSink> SamplerWatch<T> {
    /// Runs `f` on the state, after taking in what the tick handler
    /// recorded since the last use; `None` once the box is gone.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let mut state = self.shared.lock();
        state.as_mut().map(|t| {
            t.absorb();
            f(t)
        })
    }
}

/// The callback data of the running session, or null. LuaJIT can still call
/// the callback after `luaJIT_profile_stop`: when the stop happens inside a
/// `__gc` finaliser, the GC restores the hook mask it saved before the
/// finaliser, re-arming a pending profiler hook, and LuaJIT then calls the
/// last callback with the last data pointer. The trampoline ignores any call
/// whose data is not the active box, so a freed box is never touched.
static ACTIVE_DATA: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// The callback data of an allocation session attached to the running
/// sampling session, or null: its samples come through the same callback
/// (LuaJIT has one), told apart by [`ALLOC_TRIGGERS`].
static ATTACHED_DATA: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// Triggers the allocator wrapper passed to LuaJIT and no callback has
/// taken yet. Process-wide like LuaJIT's profiler: while an allocation
/// session is attached, no other can run.
static ALLOC_TRIGGERS: AtomicU64 = AtomicU64::new(0);

/// Counts triggers the allocator wrapper is about to pass to LuaJIT.
#[inline]
pub fn note_alloc_triggers(n: u64) {
    ALLOC_TRIGGERS.fetch_add(n, Ordering::Relaxed);
}

impl<T: SampleSink> SamplerBox<T> {
    pub fn new(value: T) -> Self {
        SamplerBox { ptr: Arc::into_raw(Arc::new(Shared { state: Mutex::new(Some(value)) })) }
    }

    fn shared(&self) -> &Shared<T> {
        // SAFETY: `ptr` came from Arc::into_raw and the box holds that
        // reference until Drop.
        unsafe { &*self.ptr }
    }

    /// Borrow the state. `f` must not run Lua code (it could re-enter the
    /// callback); plain Rust work and allocation are fine.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut state = self.shared().lock();
        let t = state.as_mut().expect("the box holds its state until it drops");
        t.absorb();
        f(t)
    }

    /// A watch on the state for a thread of ours (see [`SamplerWatch`]).
    pub fn watch(&self) -> SamplerWatch<T> {
        // SAFETY: `ptr` came from Arc::into_raw; the box's reference stays
        // counted, and the watch gets one of its own.
        let shared = unsafe {
            Arc::increment_strong_count(self.ptr);
            Arc::from_raw(self.ptr)
        };
        SamplerWatch { shared }
    }

    /// Installs the profiler with `mode` and this box as callback data.
    pub fn start(&self, api: &ProfilerApi, lua: &Lua, mode: &CStr) -> mlua::Result<()> {
        let data = self.ptr as *mut c_void;
        ACTIVE_DATA.store(data, Ordering::Release);
        let start = api.start;
        // SAFETY: exec_raw gives a valid state of this VM; LuaJIT copies the mode
        // string before returning; `data` stays valid until stop() is called
        // (Drop of the owning session stops the profiler before freeing it).
        unsafe {
            lua.exec_raw::<()>((), |l| {
                start(l, mode.as_ptr(), trampoline::<T>, data);
            })
        }
    }

    /// The callback and data words LuaJIT stores for this box once started.
    pub fn callback_words(&self) -> (usize, usize) {
        (trampoline::<T> as *const () as usize, self.ptr as usize)
    }

    /// Makes the trampoline ignore any further call for this box (and for
    /// the box attached to it).
    pub fn deactivate(&self) {
        if ACTIVE_DATA
            .compare_exchange(self.ptr as *mut c_void, std::ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            ATTACHED_DATA.store(std::ptr::null_mut(), Ordering::Release);
        }
        self.detach();
    }

    /// Attaches this box to the running session's callback: the samples
    /// the allocator wrapper triggers come here from now on. False when no
    /// session runs or another box is attached already.
    pub fn attach(&self) -> bool {
        if ACTIVE_DATA.load(Ordering::Acquire).is_null() {
            return false;
        }
        ALLOC_TRIGGERS.store(0, Ordering::Relaxed);
        ATTACHED_DATA
            .compare_exchange(std::ptr::null_mut(), self.ptr as *mut c_void, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Detaches this box, if attached: no further call reaches it.
    pub fn detach(&self) {
        let _ = ATTACHED_DATA.compare_exchange(
            self.ptr as *mut c_void,
            std::ptr::null_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Stops LuaJIT's profiler (all sessions of this process).
    pub fn stop(&self, api: &ProfilerApi, lua: &Lua) -> mlua::Result<()> {
        self.deactivate();
        let stop = api.stop;
        // SAFETY: a valid state of this VM; stopping an idle profiler is a no-op.
        unsafe { lua.exec_raw::<()>((), |l| stop(l)) }
    }
}

impl<T: SampleSink> Drop for SamplerBox<T> {
    fn drop(&mut self) {
        self.deactivate();
        // The state is dropped here, on the VM thread, whoever holds a watch.
        let state = self.shared().lock().take();
        drop(state);
        // SAFETY: created by Arc::into_raw in new() and released once; owners
        // stop the profiler before dropping the box.
        unsafe { drop(Arc::from_raw(self.ptr)) }
    }
}

unsafe extern "C" fn trampoline<T: SampleSink>(
    data: *mut c_void,
    l: *mut ffi::lua_State,
    samples: c_int,
    vmstate: c_int,
) {
    if data.is_null() || data != ACTIVE_DATA.load(Ordering::Acquire) {
        return; // a late call for a stopped (maybe freed) session
    }
    #[cfg(target_os = "linux")]
    crate::sys::posix::lost_hook::check_in_callback();
    let Some(api) = profiler_api() else { return };
    let vm = VmStack { l, dumpstack: api.dumpstack };
    // SAFETY: `data` is the active SamplerBox pointer (checked above); boxes
    // deactivate themselves before they are freed.
    let shared = unsafe { &*(data as *const Shared<T>) };
    let mut state = shared.lock();
    let Some(sink) = state.as_mut() else { return };
    let samples = samples.max(0) as u32;
    let attached = ATTACHED_DATA.load(Ordering::Acquire);
    // The triggers of an attached allocation session are its samples; the
    // rest are the running session's ticks.
    let allocated =
        if attached.is_null() { 0 } else { ALLOC_TRIGGERS.swap(0, Ordering::Relaxed).min(samples as u64) as u32 };
    // A panic must not unwind into LuaJIT's C frames.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sink.absorb();
        if allocated < samples || attached.is_null() {
            sink.on_sample(&vm, samples - allocated, vmstate as u8);
        }
        if allocated > 0 {
            // SAFETY: a non-null `attached` is a live SamplerBox of the same
            // type (only `attach` stores it, and boxes detach themselves
            // before they are freed); it is not `data`'s box.
            let other = unsafe { &*(attached as *const Shared<T>) };
            if let Some(other) = other.lock().as_mut() {
                other.on_sample(&vm, allocated, vmstate as u8);
            }
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(u64);

    impl SampleSink for Count {
        fn on_sample(&mut self, _vm: &VmStack, samples: u32, _vmstate: u8) {
            self.0 += samples as u64;
        }
    }

    #[test]
    fn a_watch_reads_the_state_from_another_thread_until_the_box_drops() {
        let b = SamplerBox::new(Count(0));
        b.with(|c| c.0 = 7);
        let w = b.watch();
        let (seen, w) = std::thread::spawn(move || (w.with(|c| c.0), w)).join().unwrap();
        assert_eq!(seen, Some(7));
        drop(b);
        assert_eq!(w.with(|c| c.0), None, "the box took its state with it");
    }
}
