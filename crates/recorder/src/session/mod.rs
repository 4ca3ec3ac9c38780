//! A recording session's start and stop, and their order, in one place.
//!
//! [`Session::start`] takes a [`Plan`] (the typed options; `lua_api` reads
//! them from Lua) and runs these steps, each undone if a later one fails
//! (the guards of `guards`):
//!
//! 1. the profiler API and the process's owner flag; a `jit.p` or
//!    `jit.profile` sampler running in this VM is stopped first;
//! 2. the precision settled (`auto`: compiled code read in the tick
//!    handler when a probe proves this build's layout);
//! 3. the sampler and its registry anchors (`record::sampler`);
//! 4. LuaJIT's profiler started with the sampler's callback, on its own
//!    timer at the session's interval, or at a quiet one when ticks of ours
//!    or the allocator are to drive it;
//! 5. the tick handler armed (`sys::posix::ticks`), with what it reads of
//!    the VM (the running C function, a lost profiler hook), then the tick
//!    source: the one fallback ladder in `tick_source::start` (perf event,
//!    POSIX timer, LuaJIT's timer, each step with its reason); or, for an
//!    allocation session, the handler alone, which the allocator wrapper
//!    triggers;
//! 6. the handler's reading of compiled code armed (`exact` precision),
//!    with the VM event handlers that build each trace's fine map.
//!
//! [`Session::stop`] undoes them in the reverse order, once, whether called
//! by `stop()` or by a drop without a `Lua` (the GC, `lua_close`). What
//! differs between platforms is behind `platform`: elsewhere than Linux no
//! tick source of ours exists, and a session runs on LuaJIT's timer.

pub mod autosave;
mod guards;
pub mod objects;
mod platform;
pub mod state;
mod tick_source;
pub mod timed;
mod timing;

use mlua::Lua;

use crate::record::alloc_hook::{AllocHook, Restored};
use crate::record::alloc_objects::ObjectTable;
use crate::record::sampler::{Precision, Sampler, MAX_CALL_SITES};
use crate::record::timeline::Timeline;
use crate::sys::{self, FunctionAnchor, SamplerBox, TickOrigin, VmHandle, ZoneAnchor};
#[cfg(any(test, feature = "test-support"))]
pub use guards::fail_at;
pub use guards::Ownership;
use guards::{ArmedHandler, Attachable, ProfilerRun, Running, UnblockedSignals};
pub use tick_source::{preference, ClockKind, TickKind, TickSource};
pub use timing::Timing;

/// LuaJIT's profiler is started with this interval (in ms) when the
/// session's own tick source (or, for an allocation session, the
/// allocator) is to drive it, and LuaJIT's timer is disarmed right after:
/// at 1000 s it cannot fire before that, so no process-directed SIGPROF
/// can reach another thread meanwhile, or arrive after a stop has put
/// back the default disposition.
pub const QUIET_TIMER_MS: u64 = 1_000_000;

pub const NO_PROFILER_API: &str = "this LuaJIT has no profiler API (luaJIT_profile_start needs LuaJIT 2.1 or later)";

const ALREADY_RUNNING: &str = "a sampling session is already running in this process (LuaJIT has one \
     profiler per process; stop the other session, which may belong to another Lua state or thread, first)";

/// Ticks refused (LuaJIT's profiler no longer ours) after which the session
/// reports that it lost LuaJIT's profiler: at least this many, standing for
/// at least 250 ms of its clock at the rate its ticks came (a source on the
/// kernel's tick comes slower than the interval asked).
const STALL_TICKS: u64 = 20;
const STALL_SECONDS: f64 = 0.25;

/// The interval LuaJIT's timer takes, in whole milliseconds (at least 1).
pub fn interval_ms(interval_ns: u64) -> u64 {
    ((interval_ns as f64) / 1e6).round().max(1.0) as u64
}

/// What a session records and how: the typed options of `profile.sample`
/// and `profile.allocations`.
pub struct Plan {
    pub interval_ns: u64,
    pub clock: ClockKind,
    pub precision: Precision,
    /// At exact precision, flush the traces at the start so that each is
    /// compiled again with its fine map.
    pub flush_traces: bool,
    /// Native frames below C functions, walked in the tick handler.
    pub native_frames: bool,
    pub depth: i32,
    /// Only samples under this zone path are recorded.
    pub filter: Option<Vec<u8>>,
    pub max_stacks: usize,
    pub skip_starting_thread: bool,
    /// A thread whose samples are not recorded, kept alive by the session
    /// (so that no other thread takes its address while it runs).
    pub skip_thread: Option<mlua::Thread>,
    pub timeline_samples: usize,
    /// The `jit.zone` stack table, read at each sample.
    pub zones: Option<mlua::Table>,
    /// Whether the session may run ticks of its own (false: LuaJIT's own
    /// timer, as `jit.p` runs).
    pub own_ticks: bool,
    /// An allocation session: the mean bytes allocated between two samples.
    /// None for a sampling session, whose ticks take the samples.
    pub bytes_per_sample: Option<u64>,
}

/// A session: its sampler, its tick source and, while it runs, the guards
/// that undo its start.
pub struct Session {
    sampler: SamplerBox<Sampler>,
    ticks: TickSource,
    interval_ns: u64,
    /// The guards of a running session; None once stopped.
    run: Option<Running>,
    /// An allocation session attached to the running sampling session (its
    /// samples come through that session's callback), until it stops.
    attached: bool,
    precision: Precision,
    /// Why compiled code is not read in the tick handler (Ok: it is).
    compiled: Result<(), &'static str>,
    /// Why native frames are not walked (Ok: they are).
    native: Result<(), &'static str>,
    /// Why traces get no fine map between snapshots (Ok: they do).
    fine_map: Result<(), &'static str>,
    /// Whether the tick handler notes the C function a tick lands in (the
    /// leaf of samples in state C), or why not.
    running_c: Result<(), &'static str>,
    /// Whether the tick handler sets a profiler hook LuaJIT lost again, or
    /// why not; and how many it had set again when the session stopped.
    lost_hook: Result<(), &'static str>,
    hooks_rearmed_at_stop: u64,
    /// Ticks passed on and refused, read at the stop.
    ticks_at_stop: (u64, u64),
    start_warning: Option<String>,
    /// Allocation sessions: the allocator wrapper, the bytes each sample
    /// stands for, and how the stop left the VM's allocator.
    alloc: Option<AllocHook>,
    bytes_per_sample: Option<u64>,
    alloc_restored: Option<Restored>,
    timing: Timing,
    /// `Plan::skip_thread`, held while the session lives.
    _skipped: Option<mlua::Thread>,
}

impl Session {
    /// Starts a session (the steps of the module's documentation). Every
    /// step that can fail comes before the session exists; the guards taken
    /// so far undo themselves on the way out.
    pub fn start(lua: &Lua, mut plan: Plan) -> mlua::Result<Session> {
        let allocations = plan.bytes_per_sample.is_some();
        let api = sys::profiler_api().ok_or_else(|| mlua::Error::runtime(NO_PROFILER_API))?;
        let owner = Ownership::claim().ok_or_else(|| mlua::Error::runtime(ALREADY_RUNNING))?;
        let foreign = take_over_foreign(&api, lua)?;
        let mut compiled = settle_precision(lua, &mut plan);
        let vm = VmHandle::of(lua)?;
        guards::failpoint("anchors")?;
        let mut recorder = new_sampler(lua, &plan)?;
        if plan.skip_starting_thread {
            recorder.skipped_thread = Some(lua.current_thread().to_pointer() as usize);
        }
        if let Some(thread) = &plan.skip_thread {
            recorder.skipped_thread = Some(thread.to_pointer() as usize);
        }
        let sampler = SamplerBox::new(recorder);
        // SIGPROF carries LuaJIT's own timer when no per-thread source can run.
        let mut signals = UnblockedSignals::default();
        signals.unblock(platform::LUAJIT_TIMER_SIGNAL);
        // A tick source of ours or the allocator drives LuaJIT's profiler:
        // its own timer starts quiet (see `QUIET_TIMER_MS`).
        let ms = if allocations || (plan.own_ticks && platform::PER_THREAD_TICKS) {
            QUIET_TIMER_MS
        } else {
            interval_ms(plan.interval_ns)
        };
        let mode = sys::cstring(&format!("{}i{}", plan.precision.mode(), ms));
        if let Err(e) = guards::failpoint("profiler").and_then(|_| sampler.start(&api, lua, &mode)) {
            guards::release_anchors(lua, &sampler);
            return Err(e);
        }
        let profiler = ProfilerRun { api, vm };
        let (ticks, armed) = if allocations {
            match allocation_triggers(lua, &profiler, &sampler) {
                Ok(armed) => (TickSource::luajit(None), Some(armed)),
                Err(e) => {
                    drop(profiler);
                    guards::release_anchors(lua, &sampler);
                    return Err(e);
                }
            }
        } else if plan.own_ticks && platform::PER_THREAD_TICKS {
            tick_source::start(plan.clock, plan.interval_ns, |signal| {
                let armed = ArmedHandler::arm(lua, &profiler, &sampler)?;
                for s in [signal, platform::TRAP_SIGNAL] {
                    signals.unblock(s);
                }
                Ok(armed)
            })
        } else {
            (TickSource::luajit(None), None)
        };
        let (running_c, lost_hook) = match &armed {
            Some(a) => (a.reads.running_c, a.reads.lost_hook),
            None => (Err("the tick source is LuaJIT's own timer"), Err("the tick source is LuaJIT's own timer")),
        };
        let mut fine_map = Err("compiled code is not read in the tick handler");
        let mut native = Err("not asked for (nativeFrames)");
        if plan.precision == Precision::Exact {
            if running_c.is_ok() {
                let zones = sampler.with(|s| s.zones_mut().map(|z| z.table_address()).unwrap_or(0));
                if plan.native_frames {
                    native = compiled.and_then(|_| crate::native_frames::arm());
                }
                platform::arm_compiled(plan.depth.max(1) as usize, zones);
                fine_map = platform::attach_fine_map(lua, plan.flush_traces);
            } else {
                compiled = Err("the session's own tick source did not start");
            }
        }
        let attachable = (!allocations && armed.is_some()).then(|| Attachable::mark(&vm, running_c));
        let mut session = Session::new(sampler, &plan, ticks);
        session.fine_map = fine_map;
        if plan.native_frames && plan.precision != Precision::Exact {
            native = Err("native frames are walked in the tick handler, at precision \"exact\" only");
        } else if plan.native_frames && native == Err("not asked for (nativeFrames)") {
            native = Err("the stacks of C functions are not read in the tick handler (see cFunctionLeavesNote)");
        }
        session.native = native;
        session.running_c = running_c;
        session.compiled = compiled;
        session.lost_hook = lost_hook;
        let keep_traces = plan.precision.mode().is_empty();
        session.run = Some(Running { attachable, armed, profiler: Some(profiler), keep_traces, signals, owner });
        session.start_warning = foreign.then(|| {
            "another sampler (jit.p or jit.profile) was running when this session started; \
             LuaJIT has one profiler per process and this session took it over"
                .into()
        });
        Ok(session)
    }

    /// Starts an allocation session attached to the sampling session of
    /// this VM that runs (see `guards::Attachable`): LuaJIT's profiler and
    /// the tick handler are that session's; this one only adds its own
    /// sampler to the callback. None when no such session runs.
    pub fn attach(lua: &Lua, plan: Plan) -> mlua::Result<Option<Session>> {
        let vm = VmHandle::of(lua)?;
        if !Attachable::is(&vm) {
            return Ok(None);
        }
        let recorder = new_sampler(lua, &plan)?;
        let sampler = SamplerBox::new(recorder);
        if !sampler.attach() {
            guards::release_anchors(lua, &sampler);
            return Ok(None);
        }
        let mut session = Session::new(sampler, &plan, TickSource::luajit(None));
        session.attached = true;
        session.running_c = Attachable::running_c();
        Ok(Some(session))
    }

    /// A session recording into `sampler`, not yet holding anything that
    /// runs (no guards: `start` adds them, or `attach` attaches the sampler).
    fn new(sampler: SamplerBox<Sampler>, plan: &Plan, ticks: TickSource) -> Session {
        Session {
            sampler,
            ticks,
            interval_ns: plan.interval_ns,
            run: None,
            attached: false,
            precision: plan.precision,
            compiled: Err("the session has not started"),
            fine_map: Err("the session has not started"),
            native: Err("not asked for (nativeFrames)"),
            running_c: Err("the tick source is LuaJIT's own timer"),
            lost_hook: Err("the session's samples come through another session's ticks"),
            hooks_rearmed_at_stop: 0,
            ticks_at_stop: (0, 0),
            start_warning: None,
            // An allocation session's wrapper: installed by `install_allocator`.
            alloc: None,
            bytes_per_sample: plan.bytes_per_sample,
            alloc_restored: None,
            timing: Timing::start(),
            _skipped: plan.skip_thread.clone(),
        }
    }

    /// Wraps the allocator of the VM of `lua` for an allocation session,
    /// with the table of objects per stack its samples fill; the session
    /// records allocations from now on, tracking up to `max_live` sampled
    /// blocks until they are freed. Called once the session is a Lua value:
    /// the first session's metatable is built then, on the Lua heap, and no
    /// session charges its own start.
    pub fn install_allocator(&mut self, lua: &Lua, max_stacks: usize, max_live: usize) -> mlua::Result<()> {
        let Some(bytes_per_sample) = self.bytes_per_sample else { return Ok(()) };
        let vm = VmHandle::of(lua)?;
        let seed = sys::monotonic_ns() ^ (vm.addr() as u64).rotate_left(32);
        let hook = AllocHook::install(vm, bytes_per_sample, seed, max_live);
        let objects = ObjectTable::new(hook.pending_objects(), max_stacks).with_live(hook.live_link());
        self.sampler.with(|s| {
            s.objects = Some(objects);
            s.ticks_from = TickOrigin::Allocator;
        });
        self.alloc = Some(hook);
        Ok(())
    }

    /// The one stop path (`stop()`, and a drop without a `Lua`): stops the
    /// tick source, reads its counters, then drops the session's guards;
    /// with a `Lua`, `read_anchors` reads what the sampler's registry
    /// anchors hold (the call sites' functions) before they are released.
    /// Returns whether the session was running.
    pub fn stop(&mut self, lua: Option<&Lua>, read_anchors: impl FnOnce(&Lua, &SamplerBox<Sampler>)) -> bool {
        self.lost_hook = self.lost_hook_state();
        let run = self.run.take();
        if run.is_none() && !self.attached {
            return false;
        }
        self.attached = false;
        if let Some(hook) = &self.alloc {
            self.alloc_restored = Some(hook.uninstall());
        }
        self.ticks.stop();
        self.ticks_at_stop = self.handler_counts();
        self.hooks_rearmed_at_stop = self.hooks_rearmed();
        match run {
            Some(run) => run.finish(lua, &self.sampler),
            None => self.sampler.detach(),
        }
        if let Some(lua) = lua {
            read_anchors(lua, &self.sampler);
            guards::release_anchors(lua, &self.sampler);
        }
        self.timing.finish();
        true
    }

    /// The sampler the session records into.
    pub fn sampler(&self) -> &SamplerBox<Sampler> {
        &self.sampler
    }

    pub fn running(&self) -> bool {
        self.run.is_some() || self.attached
    }

    /// Whether this allocation session runs attached to a sampling session.
    pub fn attached(&self) -> bool {
        self.attached
    }

    pub fn ticks(&self) -> &TickSource {
        &self.ticks
    }

    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    pub fn precision(&self) -> Precision {
        self.precision
    }

    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// Why compiled code is not read in the tick handler (Ok: it is).
    pub fn compiled(&self) -> Result<(), &'static str> {
        self.compiled
    }

    /// Ticks in traces the handler left to LuaJIT's hook, by reason.
    pub fn compiled_misses(&self) -> Vec<(&'static str, u64)> {
        platform::compiled_misses()
    }

    /// Samples read in traces with a frame named by its prototype, and
    /// samples named at the caller of a frame that could not be named.
    /// Whether native frames are walked, and their counts
    /// (`stats().nativeFrames`), or why not.
    pub fn native_frames(&self) -> Result<[(&'static str, u64); 4], &'static str> {
        self.native.map(|_| crate::native_frames::counts())
    }

    pub fn compiled_frames(&self) -> Vec<(&'static str, u64)> {
        platform::compiled_frames()
    }

    /// Ticks in the collector or the compiler left to the hook, by reason.
    pub fn state_misses(&self) -> Vec<(&'static str, u64)> {
        platform::state_misses()
    }

    /// Ticks in interpreted code left to the hook by reason, and all ticks
    /// left to the hook by VM state; or why interpreted code is not read in
    /// the handler.
    pub fn interp_reads(&self) -> Result<[Vec<(&'static str, u64)>; 2], &'static str> {
        self.compiled?;
        platform::interp_reads()
    }

    /// Why traces get no fine map between snapshots (Ok: they do).
    pub fn fine_map(&self) -> Result<(), &'static str> {
        self.fine_map
    }

    /// Traces mapped and not, and ticks in traces placed by a fine map, at
    /// a snapshot, or with no map, since the handler was armed.
    pub fn fine_map_counts(&self) -> [u64; 5] {
        platform::fine_map_counts()
    }

    /// Whether the tick handler notes the C function each tick lands in.
    pub fn running_c(&self) -> Result<(), &'static str> {
        self.running_c
    }

    /// Ticks charged for time off the CPU (a wall-clock session on perf
    /// events; None for the other sources).
    pub fn blocked_ticks(&self) -> Option<u64> {
        (self.ticks.kind() == TickKind::WallTaskClock).then(platform::blocked_ticks)
    }

    /// Ticks passed on and refused by the handler since this session armed it.
    fn handler_counts(&self) -> (u64, u64) {
        if self.ticks.kind() == TickKind::LuaJit {
            return (0, 0);
        }
        let c = platform::handler_counts();
        (c.passed, c.refused)
    }

    /// Whether the tick handler sets lost hooks again, or why not: the
    /// check at start, then the first callback's (which may turn it off).
    pub fn lost_hook_state(&self) -> Result<(), &'static str> {
        if self.lost_hook.is_ok() && self.run.is_some() {
            if let Some(why) = platform::lost_hook_refused() {
                return Err(why);
            }
        }
        self.lost_hook
    }

    /// Pending profiler hooks the tick handler set again, in case LuaJIT
    /// lost them, while this session armed it (see `sys::posix::lost_hook`).
    pub fn hooks_rearmed(&self) -> u64 {
        if self.lost_hook_state().is_ok() {
            return if self.run.is_some() { platform::hooks_rearmed() } else { self.hooks_rearmed_at_stop };
        }
        0
    }

    /// Why this session's data may be incomplete, if it can tell.
    pub fn warning(&self) -> Option<String> {
        let (passed, stalled) = if self.running() { self.handler_counts() } else { self.ticks_at_stop };
        let clock_sec = if self.ticks.kind().is_wall() { Some(self.timing.wall_sec()) } else { self.timing.cpu_sec() };
        let seconds = stalled_seconds(stalled, passed, clock_sec, self.interval_ns);
        let mut parts: Vec<String> = self.start_warning.iter().cloned().collect();
        if stalled >= STALL_TICKS && seconds >= STALL_SECONDS {
            parts.push(format!(
                "{} ticks (about {:.2} s) found LuaJIT's profiler no longer ours: another sampler \
                 (jit.p or jit.profile.start) took it over or stopped it",
                stalled, seconds
            ));
        }
        if parts.is_empty() {
            None
        } else {
            Some(parts.join("; "))
        }
    }

    /// An allocation session's allocator wrapper (None for a sampling
    /// session, or before `install_allocator`).
    pub fn alloc_hook(&self) -> Option<&AllocHook> {
        self.alloc.as_ref()
    }

    /// The bytes each sample stands for, for an allocation session.
    pub fn bytes_per_sample(&self) -> Option<u64> {
        self.bytes_per_sample
    }

    /// How the stop left the VM's allocator (allocation sessions).
    pub fn alloc_restored(&self) -> Option<Restored> {
        self.alloc_restored
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Reached from the GC (a session nobody stopped) or from lua_close,
        // which has already stopped LuaJIT's profiler. Either way the state is
        // still open here.
        self.stop(None, |_, _| {});
    }
}

/// The seconds that `refused` of `passed + refused` ticks stand for, over
/// `seconds` of the clock the ticks follow (the thread's CPU time, or real
/// time for a wall-clock source); the interval asked where that is not
/// known.
fn stalled_seconds(refused: u64, passed: u64, seconds: Option<f64>, interval_ns: u64) -> f64 {
    match seconds {
        Some(s) if s > 0.0 => refused as f64 * s / (passed + refused).max(1) as f64,
        _ => refused as f64 * interval_ns as f64 / 1e9,
    }
}

/// Settles `auto` precision before LuaJIT's profiler starts: `Exact` when
/// this build's traces are proved readable in the tick handler, else
/// `Function`. Returns why compiled code is not read in the handler.
fn settle_precision(lua: &Lua, plan: &mut Plan) -> Result<(), &'static str> {
    // The layout is learned whatever the session reads with it: a function
    // of bytecode without lines is then written by its prototype in
    // LuaJIT's mode too (`file:@0xADDR`), whatever sessions ran before.
    let proved = platform::prove_compiled(lua);
    if plan.precision != Precision::Auto {
        return Err("the precision option asks for LuaJIT's own mode");
    }
    plan.precision = Precision::Function;
    if plan.bytes_per_sample.is_some() {
        return Err("allocation sessions take their samples where allocations happen");
    }
    if !plan.own_ticks {
        return Err("the tick source is LuaJIT's own timer");
    }
    proved?;
    plan.precision = Precision::Exact;
    Ok(())
}

/// The sampler of a new session, with its registry anchors (the functions
/// of call sites and, when there is one, the `jit.zone` stack) and its time
/// line.
fn new_sampler(lua: &Lua, plan: &Plan) -> mlua::Result<Sampler> {
    let mut functions = FunctionAnchor::new(lua, MAX_CALL_SITES)?;
    let zones = match &plan.zones {
        Some(t) => Some(ZoneAnchor::new(lua, t).inspect_err(|_| functions.release(lua))?),
        None => None,
    };
    let mut sampler = Sampler::new(zones, functions, plan.filter.clone(), plan.depth, plan.max_stacks, plan.precision);
    sampler.timeline = Timeline::new(plan.timeline_samples);
    Ok(sampler)
}

/// A sampler of this VM (jit.p, jit.profile) running when a session starts
/// is stopped first, as LuaJIT's start would, but before SIGPROF's
/// disposition is chosen, so that LuaJIT saves "ignore" rather than
/// "default" and a later stop by that sampler's owner cannot leave our
/// timer's signals fatal. Returns whether there was one; an error when it
/// runs in another state.
fn take_over_foreign(api: &sys::ProfilerApi, lua: &Lua) -> mlua::Result<bool> {
    if !platform::foreign_sampler_active() {
        return Ok(false);
    }
    let _ = sys::stop_profiler(api, lua);
    if platform::foreign_sampler_active() {
        return Err(mlua::Error::runtime(
            "LuaJIT's profiler is in use by another Lua state or library (SIGPROF has a handler or \
             ITIMER_PROF is armed): stop jit.p/jit.profile there first",
        ));
    }
    Ok(true)
}

/// Lets allocations pass triggers to LuaJIT's profiler, which this
/// session just started: LuaJIT's own timer is disarmed, so that only
/// allocations take samples.
fn allocation_triggers(lua: &Lua, run: &ProfilerRun, sampler: &SamplerBox<Sampler>) -> mlua::Result<ArmedHandler> {
    if !platform::PER_THREAD_TICKS {
        return Err(mlua::Error::runtime("allocation sessions are only supported on Linux"));
    }
    platform::disarm_luajit_timer();
    ArmedHandler::arm(lua, run, sampler)
        .map_err(|why| mlua::Error::runtime(format!("{} (allocation sessions need it)", why)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ownership_is_released_by_its_guard() {
        let _turn = sys::one_session_at_a_time();
        let first = Ownership::claim().expect("free at first");
        assert!(Ownership::held());
        assert!(Ownership::claim().is_none(), "one owner per process");
        drop(first);
        assert!(!Ownership::held());
        drop(Ownership::claim().expect("free again"));
    }

    #[test]
    fn refused_ticks_stand_for_the_time_at_the_rate_they_came() {
        // 1 kHz asked and given: 300 refused of 800 ticks in 0.8 s is 0.3 s.
        assert!((stalled_seconds(300, 500, Some(0.8), 1_000_000) - 0.3).abs() < 1e-9);
        // The kernel's tick at 250 Hz under a 1 ms interval: 126 refused of 201
        // in 0.8 s stand for half a second, not 126 ms.
        let s = stalled_seconds(126, 75, Some(0.8), 1_000_000);
        assert!((s - 0.5015).abs() < 1e-3, "{s}");
        assert!(126 >= STALL_TICKS && s >= STALL_SECONDS);
        // No CPU clock: the interval asked.
        assert!((stalled_seconds(250, 0, None, 1_000_000) - 0.25).abs() < 1e-9);
    }
}
