//! What a running session holds, each part as a guard that undoes itself
//! when dropped: the process's owner flag, the signals unblocked on the VM
//! thread, the armed tick handler and LuaJIT's running profiler. A start
//! that fails halfway drops the guards it took so far; a session stops by
//! dropping its [`Running`] once (see `NativeSession::stop_sampling`). The
//! clean-up is written here, once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use mlua::Lua;

use crate::record::sampler::Sampler;
use crate::record::tick_source::{ClockKind, TickSource};
#[cfg(target_os = "linux")]
use crate::sys;
use crate::sys::{ProfilerApi, SamplerBox, VmHandle};

/// LuaJIT's profiler is started with this interval (in ms) when the
/// session's own tick source (or, for an allocation session, the
/// allocator) is to drive it, and LuaJIT's timer is disarmed right after:
/// at 1000 s it cannot fire before that, so no process-directed SIGPROF
/// can reach another thread meanwhile, or arrive after a stop has put
/// back the default disposition.
pub(super) const QUIET_TIMER_MS: u64 = 1_000_000;

/// One sampling session per process: LuaJIT keeps a single profiler state.
static OWNER: AtomicBool = AtomicBool::new(false);

pub(super) const ALREADY_RUNNING: &str = "a sampling session is already running in this process (LuaJIT has one \
     profiler per process; stop the other session, which may belong to another Lua state or thread, first)";

/// The process's owner flag, held from a successful [`Ownership::claim`]
/// until dropped.
pub(super) struct Ownership(());

impl Ownership {
    /// Takes the flag, or None when another session holds it.
    pub(super) fn claim() -> Option<Ownership> {
        OWNER.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok().map(|_| Ownership(()))
    }

    /// Whether some session of this process holds the flag.
    #[cfg(test)]
    pub(super) fn held() -> bool {
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
/// Off Linux no session signals its VM thread.
#[derive(Default)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(super) struct UnblockedSignals(Vec<i32>);

impl UnblockedSignals {
    /// Unblocks `sig`, remembering it if it was blocked.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn unblock(&mut self, sig: i32) {
        #[cfg(target_os = "linux")]
        if sys::posix::unblock_signal(sig) {
            self.0.push(sig);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = sig;
    }
}

impl Drop for UnblockedSignals {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        for &sig in &self.0 {
            sys::posix::block_signal(sig);
        }
    }
}

/// The per-thread tick handler, armed for LuaJIT's profiler state;
/// disarmed when dropped. `running_c` says whether the handler also notes
/// the C function each tick lands in, or why not; `lost_hook` whether it
/// sets a profiler hook LuaJIT lost again, or why not.
pub(super) struct ArmedTicks {
    pub(super) running_c: Result<(), &'static str>,
    pub(super) lost_hook: Result<(), &'static str>,
}

impl ArmedTicks {
    /// Arms what the tick handler reads of the VM whose global state is `g`
    /// (the tick handler itself is armed already).
    #[cfg(target_os = "linux")]
    fn arm(lua: &Lua, g: usize) -> ArmedTicks {
        use sys::posix;
        let running_c = posix::running_c::arm(lua, g);
        let lost_hook = match running_c {
            Ok(()) => posix::lost_hook::arm(lua, g, posix::running_c::is_gc64()),
            Err(_) => Err("the VM state at each tick is unknown (see cFunctionLeavesNote)"),
        };
        ArmedTicks { running_c, lost_hook }
    }
}

impl Drop for ArmedTicks {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        sys::posix::disarm_ticks();
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
    pub(super) armed: Option<ArmedTicks>,
    pub(super) profiler: Option<ProfilerRun>,
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
        drop(self.armed.take());
        #[cfg(target_os = "linux")]
        if let Some(lua) = lua {
            sys::posix::compiled::detach_logger(lua);
        }
        if let Some(lua) = lua {
            if let Some(p) = self.profiler.take() {
                let _ = sampler.stop(&p.api, lua);
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

/// A sampler of this VM (jit.p, jit.profile) running when a session starts
/// is stopped first, as LuaJIT's start would, but before SIGPROF's
/// disposition is chosen, so that LuaJIT saves "ignore" rather than
/// "default" and a later stop by that sampler's owner cannot leave our
/// timer's signals fatal. Returns whether there was one; an error when it
/// runs in another state.
pub(super) fn take_over_foreign(api: &ProfilerApi, lua: &Lua) -> mlua::Result<bool> {
    #[cfg(target_os = "linux")]
    if sys::posix::foreign_sampler_active() {
        let _ = sys::stop_profiler(api, lua);
        if sys::posix::foreign_sampler_active() {
            return Err(mlua::Error::runtime(
                "LuaJIT's profiler is in use by another Lua state or library (SIGPROF has a handler or \
                 ITIMER_PROF is armed): stop jit.p/jit.profile there first",
            ));
        }
        return Ok(true);
    }
    let _ = (api, lua);
    Ok(false)
}

/// LuaJIT's own timer at the session's interval, for a session started
/// with the quiet timer, and why it runs.
#[cfg(target_os = "linux")]
fn luajit_timer(interval_ns: u64, why: String) -> TickSource {
    sys::posix::arm_itimer_prof(interval_ms(interval_ns));
    TickSource::luajit(Some(why))
}

/// The interval LuaJIT's timer takes, in whole milliseconds (at least 1).
pub(super) fn interval_ms(interval_ns: u64) -> u64 {
    ((interval_ns as f64) / 1e6).round().max(1.0) as u64
}

/// Replaces LuaJIT's ITIMER_PROF with a per-thread tick source, or keeps
/// LuaJIT's timer and says why (see `record::tick_source`). LuaJIT's
/// profiler was started with the quiet timer.
#[cfg(target_os = "linux")]
pub(super) fn per_thread_ticks(
    lua: &Lua,
    run: &ProfilerRun,
    sampler: &SamplerBox<Sampler>,
    clock: ClockKind,
    interval_ns: u64,
    signals: &mut UnblockedSignals,
) -> (TickSource, Option<ArmedTicks>) {
    use sys::posix;
    let Some(sig) = posix::tick_signal() else {
        return (luajit_timer(interval_ns, "no free real-time signal for the tick source".into()), None);
    };
    let (cb, data) = sampler.callback_words();
    let Some(profiler) = posix::find_luajit_profiler(run.api.start_addr(), run.vm.addr(), cb, data) else {
        let why = "LuaJIT's profiler state could not be located in this build";
        return (luajit_timer(interval_ns, why.into()), None);
    };
    posix::arm_ticks(&profiler);
    let armed = ArmedTicks::arm(lua, profiler.g);
    for s in [sig, libc::SIGTRAP] {
        signals.unblock(s);
    }
    match TickSource::start(clock, interval_ns, sig) {
        Ok(t) => {
            posix::disarm_itimer_prof();
            (t, Some(armed))
        }
        Err(why) => (luajit_timer(interval_ns, why), None),
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn per_thread_ticks(
    _lua: &Lua,
    _run: &ProfilerRun,
    _sampler: &SamplerBox<Sampler>,
    _clock: ClockKind,
    _interval_ns: u64,
    _signals: &mut UnblockedSignals,
) -> (TickSource, Option<ArmedTicks>) {
    (TickSource::luajit(None), None)
}

/// Lets allocations pass triggers to LuaJIT's profiler, which this
/// session just started: LuaJIT's own timer is disarmed, so that only
/// allocations take samples.
#[cfg(target_os = "linux")]
pub(super) fn allocation_triggers(
    lua: &Lua,
    run: &ProfilerRun,
    sampler: &SamplerBox<Sampler>,
) -> mlua::Result<ArmedTicks> {
    use sys::posix;
    posix::disarm_itimer_prof();
    let (cb, data) = sampler.callback_words();
    let profiler = posix::find_luajit_profiler(run.api.start_addr(), run.vm.addr(), cb, data).ok_or_else(|| {
        mlua::Error::runtime("LuaJIT's profiler state could not be located in this build (allocation sessions need it)")
    })?;
    posix::arm_ticks(&profiler);
    Ok(ArmedTicks::arm(lua, profiler.g))
}

#[cfg(not(target_os = "linux"))]
pub(super) fn allocation_triggers(
    _lua: &Lua,
    _run: &ProfilerRun,
    _sampler: &SamplerBox<Sampler>,
) -> mlua::Result<ArmedTicks> {
    Err(mlua::Error::runtime("allocation sessions are only supported on Linux"))
}

#[cfg(test)]
thread_local! {
    static FAIL_AT: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// Fails a start at the named step when a test asked for it (tests only).
pub(super) fn failpoint(_step: &'static str) -> mlua::Result<()> {
    #[cfg(test)]
    if FAIL_AT.with(|f| f.get()) == Some(_step) {
        return Err(mlua::Error::runtime(format!("test failure at {}", _step)));
    }
    Ok(())
}

/// Makes the next starts on this thread fail at `step` (None: not at all).
#[cfg(test)]
pub(super) fn fail_at(step: Option<&'static str>) {
    FAIL_AT.with(|f| f.set(step));
}
