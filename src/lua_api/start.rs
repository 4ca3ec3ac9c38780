//! Starting a session: options read, anchors taken, LuaJIT's profiler
//! and the tick source started, each step undone if a later one fails
//! (the guards of `lifecycle`); and the session value every start builds.

use std::collections::{HashMap, HashSet};

use mlua::{Lua, Table, Value};

use super::lifecycle::{self, Ownership, ProfilerRun, Running, UnblockedSignals};
use super::options::{self, StartOptions};
use super::stats::Timing;
use super::{runtime, NativeSession, NO_PROFILER_API, SAMPLE_OPTIONS};
use crate::record::sampler::{Precision, Sampler, MAX_CALL_SITES};
use crate::record::stack_table::CountsMark;
use crate::record::tick_source::TickSource;
use crate::sys::{self, FunctionAnchor, SamplerBox, VmHandle, ZoneAnchor};

/// `native.raw.start(opts, env)`: a session handle and the settings it runs
/// with (every option of `profile.sample`, defaults filled in).
pub(super) fn start_raw(lua: &Lua, (opts, env): (Value, Value)) -> mlua::Result<(NativeSession, Table)> {
    let o = options::read_options(&opts, &env).map_err(runtime)?;
    let given = if let Value::Table(t) = &opts { Some(t) } else { None };
    let settings = options::settings_table(lua, SAMPLE_OPTIONS, given)?;
    Ok((start(lua, o, None)?, settings))
}

/// Starts a session. Every step that can fail comes before the session
/// exists; the guards taken so far undo themselves on the way out. With
/// `bytes_per_sample`, an allocation session: no timer, allocations trigger
/// the samples.
pub(super) fn start(lua: &Lua, mut o: StartOptions, bytes_per_sample: Option<u64>) -> mlua::Result<NativeSession> {
    let api = sys::profiler_api().ok_or_else(|| runtime(NO_PROFILER_API))?;
    let owner = Ownership::claim().ok_or_else(|| runtime(lifecycle::ALREADY_RUNNING))?;
    let foreign = lifecycle::take_over_foreign(&api, lua)?;
    let mut compiled = resolve_precision(lua, &mut o, bytes_per_sample.is_some());
    let vm = VmHandle::of(lua)?;
    lifecycle::failpoint("anchors")?;
    let mut recorder = new_sampler(lua, &o)?;
    if o.skip_starting_thread {
        recorder.skipped_thread = Some(lua.current_thread().to_pointer() as usize);
    }
    recorder.timeline = crate::record::timeline::Timeline::new(o.timeline_samples);
    let sampler = SamplerBox::new(recorder);
    // SIGPROF carries LuaJIT's own timer when no per-thread source can run.
    let mut signals = UnblockedSignals::default();
    #[cfg(target_os = "linux")]
    signals.unblock(libc::SIGPROF);
    // A tick source of ours or the allocator drives LuaJIT's profiler:
    // its own timer starts quiet (see `QUIET_TIMER_MS`).
    let ms = if bytes_per_sample.is_some() || (o.env.precise && cfg!(target_os = "linux")) {
        lifecycle::QUIET_TIMER_MS
    } else {
        lifecycle::interval_ms(o.interval_ns)
    };
    let mode = sys::cstring(&format!("{}i{}", o.precision.mode(), ms));
    if let Err(e) = lifecycle::failpoint("profiler").and_then(|_| sampler.start(&api, lua, &mode)) {
        lifecycle::release_anchors(lua, &sampler);
        return Err(e);
    }
    let profiler = ProfilerRun { api, vm };
    let (ticks, armed) = if bytes_per_sample.is_some() {
        match lifecycle::allocation_triggers(lua, &profiler, &sampler) {
            Ok(armed) => (TickSource::luajit(None), Some(armed)),
            Err(e) => {
                drop(profiler);
                lifecycle::release_anchors(lua, &sampler);
                return Err(e);
            }
        }
    } else if o.env.precise {
        lifecycle::per_thread_ticks(lua, &profiler, &sampler, o.clock, o.interval_ns, &mut signals)
    } else {
        (TickSource::luajit(None), None)
    };
    let (running_c, lost_hook) = match &armed {
        Some(a) => (a.running_c, a.lost_hook),
        None => (Err("the tick source is LuaJIT's own timer"), Err("the tick source is LuaJIT's own timer")),
    };
    #[allow(unused_mut)]
    let mut session_fine_map = Err("compiled code is not read in the tick handler");
    if o.precision == Precision::Exact {
        if running_c.is_ok() {
            #[cfg(target_os = "linux")]
            {
                let zones = sampler.with(|s| s.zones_mut().map(|z| z.table_address()).unwrap_or(0));
                sys::posix::compiled::arm(o.depth.max(1) as usize, zones);
                session_fine_map = sys::posix::compiled::attach_logger(lua, true);
            }
        } else {
            compiled = Err("the session's own tick source did not start");
        }
    }
    let mut session = NativeSession::new(sampler, &o, ticks);
    session.fine_map = session_fine_map;
    session.running_c = running_c;
    session.compiled = compiled;
    session.lost_hook = lost_hook;
    session.bytes_per_sample = bytes_per_sample;
    session.run = Some(Running {
        attachable: (bytes_per_sample.is_none() && armed.is_some())
            .then(|| lifecycle::Attachable::mark(&vm, running_c)),
        armed,
        profiler: Some(profiler),
        signals,
        owner,
    });
    session.start_warning = foreign.then(|| {
        "another sampler (jit.p or jit.profile) was running when this session started; \
         LuaJIT has one profiler per process and this session took it over"
            .into()
    });
    Ok(session)
}

/// Settles `auto` precision before LuaJIT's profiler starts: `Exact` when
/// this build's traces are proved readable in the tick handler, else
/// `Function`. Returns why compiled code is not read in the handler.
fn resolve_precision(lua: &Lua, o: &mut StartOptions, allocations: bool) -> Result<(), &'static str> {
    if o.precision != Precision::Auto {
        return Err("the precision option asks for LuaJIT's own mode");
    }
    o.precision = Precision::Function;
    if allocations {
        return Err("allocation sessions take their samples where allocations happen");
    }
    if !o.env.precise {
        return Err("the tick source is LuaJIT's own timer");
    }
    #[cfg(target_os = "linux")]
    {
        sys::posix::compiled::prove(lua)?;
        o.precision = Precision::Exact;
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = lua;
        Err("compiled code is read in the handler only on x86-64 Linux")
    }
}

/// The sampler of a new session, with its registry anchors: the functions
/// of call sites and, when there is one, the `jit.zone` stack.
pub(super) fn new_sampler(lua: &Lua, o: &StartOptions) -> mlua::Result<Sampler> {
    let mut functions = FunctionAnchor::new(lua, MAX_CALL_SITES)?;
    let zones = match &o.env.zones {
        Some(t) => Some(ZoneAnchor::new(lua, t).inspect_err(|_| functions.release(lua))?),
        None => None,
    };
    Ok(Sampler::new(zones, functions, o.filter.clone(), o.depth, o.max_stacks, o.precision))
}

impl NativeSession {
    /// A session recording into `sampler`, not yet holding anything that
    /// runs (no guards: the caller adds them, or attaches the sampler).
    pub(super) fn new(sampler: SamplerBox<Sampler>, o: &StartOptions, ticks: TickSource) -> NativeSession {
        NativeSession {
            running_c: Err("the tick source is LuaJIT's own timer"),
            lost_hook: Err("the session's samples come through another session's ticks"),
            hooks_rearmed_at_stop: 0,
            // An allocation session's wrapper: installed by `alloc::start_raw`.
            alloc: None,
            bytes_per_sample: None,
            alloc_restored: None,
            sampler,
            ticks,
            interval_ns: o.interval_ns,
            run: None,
            attached: false,
            timing: Timing::start(),
            ffnames: o.env.ffnames.clone(),
            resolve_c: o.resolve_c,
            c_paths: HashMap::new(),
            c_shared: HashSet::new(),
            lua_paths: HashMap::new(),
            finished: None,
            ticks_at_stop: (0, 0),
            precision: o.precision,
            compiled: Err("the session has not started"),
            fine_map: Err("the session has not started"),
            call_site: o.env.call_site.clone(),
            call_sites_checked: HashSet::new(),
            call_site_lines: HashMap::new(),
            delta_mark: CountsMark::default(),
            delta_objects_mark: Vec::new(),
            frame_marks: crate::record::timeline::FrameMarks::new(sys::monotonic_ns())
                .keeping_slow_frames(o.slow_frame_ns),
            timeline_events: Default::default(),
            start_warning: None,
        }
    }
}
