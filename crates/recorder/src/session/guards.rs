//! What a running session holds, each part as a guard that undoes itself
//! when dropped: the process's owner flag, the signals unblocked on the VM
//! thread, the armed tick handler and LuaJIT's running profiler. A start
//! that fails halfway drops the guards it took so far; a session stops by
//! dropping its [`Running`] once (see `Session::stop`). The clean-up is
//! written here, once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use mlua::Lua;

use super::platform::{self, VmReads};
use crate::record::sampler::Sampler;
use crate::sys::{ProfilerApi, SamplerBox, VmHandle};

/// One sampling session per process: LuaJIT keeps a single profiler state.
static OWNER: AtomicBool = AtomicBool::new(false);

/// The process's owner flag, held from a successful [`Ownership::claim`]
/// until dropped.
pub struct Ownership(());

impl Ownership {
    /// Takes the flag, or None when another session holds it.
    pub(crate) fn claim() -> Option<Ownership> {
        OWNER.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok().map(|_| Ownership(()))
    }

    /// Whether some session of this process holds the flag.
    #[cfg(any(test, feature = "test-support"))]
    pub fn held() -> bool {
        OWNER.load(Ordering::Acquire)
    }
}

impl Drop for Ownership {
    fn drop(&mut self) {
        OWNER.store(false, Ordering::Release);
    }
}

/// The VM (its handle's address) of the running sampling session whose own
/// tick handler is armed, or 0: an allocation session of that VM attaches
/// to it (its triggers go through the same handler and callback).
static ATTACHABLE_VM: AtomicUsize = AtomicUsize::new(0);

/// Whether that session's tick handler notes C functions (and why not):
/// an attached session's samples have C leaves exactly when its do.
static ATTACHABLE_C_LEAVES: std::sync::Mutex<Result<(), &'static str>> = std::sync::Mutex::new(Ok(()));

/// Marks the running sampling session's VM as one an allocation session
/// can attach to, until dropped.
pub(super) struct Attachable(());

impl Attachable {
    pub(super) fn mark(vm: &VmHandle, running_c: Result<(), &'static str>) -> Attachable {
        *ATTACHABLE_C_LEAVES.lock().unwrap_or_else(|e| e.into_inner()) = running_c;
        ATTACHABLE_VM.store(vm.addr(), Ordering::Release);
        Attachable(())
    }

    /// Whether the session that takes attached sessions has C leaves.
    pub(super) fn running_c() -> Result<(), &'static str> {
        *ATTACHABLE_C_LEAVES.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a sampling session of `vm` takes attached sessions now.
    pub(super) fn is(vm: &VmHandle) -> bool {
        ATTACHABLE_VM.load(Ordering::Acquire) == vm.addr()
    }
}

impl Drop for Attachable {
    fn drop(&mut self) {
        ATTACHABLE_VM.store(0, Ordering::Release);
    }
}

/// Signals a session unblocked on the VM thread; blocked again when dropped.
#[derive(Default)]
pub(super) struct UnblockedSignals(Vec<i32>);

impl UnblockedSignals {
    /// Unblocks `sig`, remembering it if it was blocked.
    pub(super) fn unblock(&mut self, sig: i32) {
        if platform::unblock_signal(sig) {
            self.0.push(sig);
        }
    }
}

impl Drop for UnblockedSignals {
    fn drop(&mut self) {
        for &sig in &self.0 {
            platform::block_signal(sig);
        }
    }
}

/// The per-thread tick handler, armed for LuaJIT's profiler state, and what
/// it reads of the VM (see [`VmReads`]); disarmed when dropped.
pub(super) struct ArmedHandler {
    pub(super) reads: VmReads,
}

impl ArmedHandler {
    /// Arms the tick handler for LuaJIT's profiler, which `run` just
    /// started with `sampler`'s callback, and what it reads of the VM.
    pub(super) fn arm(
        lua: &Lua,
        run: &ProfilerRun,
        sampler: &SamplerBox<Sampler>,
    ) -> Result<ArmedHandler, &'static str> {
        let (cb, data) = sampler.callback_words();
        let g = platform::arm_handler(run.api.start_addr(), run.vm.addr(), cb, data)
            .ok_or("LuaJIT's profiler state could not be located in this build")?;
        Ok(ArmedHandler { reads: platform::arm_vm_reads(lua, g) })
    }
}

impl Drop for ArmedHandler {
    fn drop(&mut self) {
        platform::disarm_handler();
    }
}

/// LuaJIT's profiler, started for this VM; stopped when dropped (through
/// the VM handle: a session dropped by the GC or `lua_close` has no `Lua`).
pub(super) struct ProfilerRun {
    pub(super) api: ProfilerApi,
    pub(super) vm: VmHandle,
}

impl Drop for ProfilerRun {
    fn drop(&mut self) {
        self.vm.stop_profiler(&self.api);
    }
}

/// Everything a running session holds. Fields drop in declaration order,
/// which is the order the clean-up must run in: the tick handler, then
/// LuaJIT's profiler, then the signal mask, then the owner flag.
pub(super) struct Running {
    /// Held for its `Drop`: first, so that nothing attaches to a session
    /// that is stopping.
    #[allow(dead_code)]
    pub(super) attachable: Option<Attachable>,
    pub(super) armed: Option<ArmedHandler>,
    pub(super) profiler: Option<ProfilerRun>,
    /// LuaJIT's profiler runs in plain `i` mode, which compiles nothing
    /// into traces: its stop need not flush them.
    pub(super) keep_traces: bool,
    /// Held for its `Drop`.
    #[allow(dead_code)]
    pub(super) signals: UnblockedSignals,
    /// Held for its `Drop`.
    #[allow(dead_code)]
    pub(super) owner: Ownership,
}

impl Running {
    /// Ends the session. With `lua`, LuaJIT's profiler is stopped through the
    /// state and the callback box deactivated; the guards do the rest.
    pub(super) fn finish(mut self, lua: Option<&Lua>, sampler: &SamplerBox<Sampler>) {
        drop(self.attachable.take());
        let hook_mask = if self.keep_traces { platform::hook_mask() } else { None };
        drop(self.armed.take());
        if let Some(lua) = lua {
            platform::detach_fine_map(lua);
            if let Some(p) = self.profiler.take() {
                platform::stop_keeping_traces(hook_mask, || {
                    let _ = sampler.stop(&p.api, lua);
                });
                // Stopped through the state: nothing left for its Drop.
                std::mem::forget(p);
            }
        }
    }
}

/// Releases the registry anchors of a sampler (zones, functions).
pub(super) fn release_anchors(lua: &Lua, sampler: &SamplerBox<Sampler>) {
    sampler.with(|s| {
        s.functions.release(lua);
        if let Some(z) = s.zones_mut() {
            z.release(lua);
        }
    });
}

#[cfg(any(test, feature = "test-support"))]
thread_local! {
    static FAIL_AT: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// Fails a start at the named step when a test asked for it (tests only).
pub(super) fn failpoint(_step: &'static str) -> mlua::Result<()> {
    #[cfg(any(test, feature = "test-support"))]
    if FAIL_AT.with(|f| f.get()) == Some(_step) {
        return Err(mlua::Error::runtime(format!("test failure at {}", _step)));
    }
    Ok(())
}

/// Makes the next starts on this thread fail at `step` (None: not at all).
#[cfg(any(test, feature = "test-support"))]
pub fn fail_at(step: Option<&'static str>) {
    FAIL_AT.with(|f| f.set(step));
}
