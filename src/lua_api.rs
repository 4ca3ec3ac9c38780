//! The Lua-facing native module `tecs.profile.native`.
//!
//! Options are validated by the Lua shim (which raises errors at the caller's
//! level); this layer re-checks what it relies on and reports plain errors.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use mlua::{Lua, Table, UserData, UserDataMethods, Value};

use crate::collapsed;
use crate::profile_data::{FrameNamer, Profile};
use crate::profiler::Sampler;
use crate::sys::{self, ProfilerApi, SamplerBox, ZoneAnchor};
use crate::timer::{ClockKind, PreciseTimer, TimerSource};

/// One sampling session per process: LuaJIT keeps a single profiler state.
static OWNER: AtomicBool = AtomicBool::new(false);

pub const DEFAULT_MAX_STACKS: usize = 100_000;

struct Timing {
    started: Instant,
    ended: Option<Instant>,
    cpu_clock: Option<libc::clockid_t>,
    cpu_start: u64,
    cpu_end: Option<u64>,
}

impl Timing {
    fn start() -> Timing {
        #[cfg(target_os = "linux")]
        let cpu_clock = sys::posix::thread_cpu_clock();
        #[cfg(not(target_os = "linux"))]
        let cpu_clock = None;
        let cpu_start = cpu_clock.and_then(cpu_now).unwrap_or(0);
        Timing { started: Instant::now(), ended: None, cpu_clock, cpu_start, cpu_end: None }
    }

    fn finish(&mut self) {
        self.ended = Some(Instant::now());
        self.cpu_end = self.cpu_clock.and_then(cpu_now);
    }

    fn wall_sec(&self) -> f64 {
        self.ended.unwrap_or_else(Instant::now).duration_since(self.started).as_secs_f64()
    }

    fn cpu_sec(&self) -> Option<f64> {
        let end = self.cpu_end.or_else(|| self.cpu_clock.and_then(cpu_now))?;
        Some(end.saturating_sub(self.cpu_start) as f64 / 1e9)
    }
}

#[cfg(target_os = "linux")]
fn cpu_now(c: libc::clockid_t) -> Option<u64> {
    sys::posix::clock_ns(c)
}
#[cfg(not(target_os = "linux"))]
fn cpu_now(_c: libc::clockid_t) -> Option<u64> {
    None
}

pub struct NativeSession {
    api: ProfilerApi,
    sampler: SamplerBox<Sampler>,
    timer: Option<PreciseTimer>,
    source: TimerSource,
    interval_ns: u64,
    running: bool,
    timing: Timing,
    ffnames: Vec<Option<String>>,
    resolve_c: bool,
    unblocked_sigprof: bool,
    ignored_sigprof: bool,
    main_state: *mut mlua::ffi::lua_State,
}

/// Options as the shim passes them (already validated there).
struct StartOptions {
    interval_ns: u64,
    depth: i32,
    filter: Option<Vec<u8>>,
    clock: ClockKind,
    precise: bool,
    max_stacks: usize,
    zones: Option<Table>,
    ffnames: Vec<Option<String>>,
    resolve_c: bool,
}

fn read_options(opts: &Table) -> mlua::Result<StartOptions> {
    let interval_us: f64 = opts.get::<Option<f64>>("interval_us")?.unwrap_or(1000.0);
    if !(interval_us.is_finite() && interval_us >= 1.0) {
        return Err(mlua::Error::runtime("interval_us must be a number >= 1"));
    }
    let depth: i64 = opts.get::<Option<i64>>("depth")?.unwrap_or(16);
    if !(1..=10_000).contains(&depth) {
        return Err(mlua::Error::runtime("depth must be an integer from 1 to 10000"));
    }
    let filter = opts.get::<Option<mlua::LuaString>>("filter")?.map(|s| s.as_bytes().to_vec());
    let clock_name = opts.get::<Option<String>>("clock")?.unwrap_or_else(|| "cpu".into());
    let clock = ClockKind::parse(&clock_name).ok_or_else(|| mlua::Error::runtime("clock must be \"cpu\" or \"wall\""))?;
    let precise = opts.get::<Option<bool>>("precise")?.unwrap_or(true);
    let max_stacks = opts.get::<Option<i64>>("max_stacks")?.unwrap_or(DEFAULT_MAX_STACKS as i64);
    if max_stacks < 1 {
        return Err(mlua::Error::runtime("max_stacks must be a positive integer"));
    }
    let zones = opts.get::<Option<Table>>("zones")?;
    let mut ffnames = Vec::new();
    if let Some(t) = opts.get::<Option<Table>>("ffnames")? {
        for pair in t.pairs::<i64, mlua::LuaString>() {
            let (k, v) = pair?;
            if (0..100_000).contains(&k) {
                let k = k as usize;
                if ffnames.len() <= k {
                    ffnames.resize(k + 1, None);
                }
                ffnames[k] = Some(v.to_string_lossy());
            }
        }
    }
    let resolve_c = opts.get::<Option<bool>>("resolve_c")?.unwrap_or(true);
    Ok(StartOptions {
        interval_ns: (interval_us * 1000.0).round() as u64,
        depth: depth as i32,
        filter,
        clock,
        precise,
        max_stacks: max_stacks as usize,
        zones,
        ffnames,
        resolve_c,
    })
}

fn start(lua: &Lua, opts: Table) -> mlua::Result<NativeSession> {
    let o = read_options(&opts)?;
    let api = sys::profiler_api().ok_or_else(|| {
        mlua::Error::runtime("this LuaJIT has no profiler API (luaJIT_profile_start needs LuaJIT 2.1 or later)")
    })?;
    if OWNER.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return Err(mlua::Error::runtime(
            "a sampling session is already running in this process (LuaJIT has one profiler per process; \
             stop the other session, which may belong to another Lua state or thread, first)",
        ));
    }
    let result = start_owned(lua, api, o);
    if result.is_err() {
        OWNER.store(false, Ordering::Release);
    }
    result
}

fn start_owned(lua: &Lua, api: ProfilerApi, o: StartOptions) -> mlua::Result<NativeSession> {
    let zones = match &o.zones {
        Some(t) => Some(ZoneAnchor::new(lua, t)?),
        None => None,
    };
    let sampler = SamplerBox::new(Sampler::new(zones, o.filter, o.depth, o.max_stacks));
    let mut main_state = std::ptr::null_mut();
    // SAFETY-free: exec_raw is wrapped in sys; we only need the pointer value
    // for the finaliser, which runs while the state is still open.
    sys_main_state(lua, &mut main_state)?;

    #[cfg(target_os = "linux")]
    let (unblocked, ignored) = (sys::posix::unblock_sigprof(), sys::posix::ignore_sigprof_if_default());
    #[cfg(not(target_os = "linux"))]
    let (unblocked, ignored) = (false, false);

    let want_precise = o.precise && cfg!(target_os = "linux");
    let ms = ((o.interval_ns as f64) / 1e6).round().max(1.0) as u64;
    let mode = sys::cstring(&format!("li{}", ms));
    sampler.start(&api, lua, &mode)?;
    let mut source = TimerSource::LuaJit;
    let mut timer = None;
    if want_precise {
        #[cfg(target_os = "linux")]
        {
            sys::posix::disarm_itimer_prof();
            match PreciseTimer::start(o.clock, o.interval_ns) {
                Some(t) => {
                    timer = Some(t);
                    source = if o.clock == ClockKind::Cpu { TimerSource::PreciseCpu } else { TimerSource::PreciseWall };
                }
                None => {
                    // Could not start the thread: re-arm LuaJIT's own timer.
                    sampler.stop(&api, lua)?;
                    sampler.start(&api, lua, &mode)?;
                }
            }
        }
    }
    Ok(NativeSession {
        api,
        sampler,
        timer,
        source,
        interval_ns: o.interval_ns,
        running: true,
        timing: Timing::start(),
        ffnames: o.ffnames,
        resolve_c: o.resolve_c,
        unblocked_sigprof: unblocked,
        ignored_sigprof: ignored,
        main_state,
    })
}

fn sys_main_state(lua: &Lua, out: &mut *mut mlua::ffi::lua_State) -> mlua::Result<()> {
    *out = sys::main_state(lua)?;
    Ok(())
}

impl NativeSession {
    fn stop_sampling(&mut self, lua: Option<&Lua>) {
        if !self.running {
            return;
        }
        if let Some(t) = self.timer.as_mut() {
            t.stop();
        }
        match lua {
            Some(lua) => {
                let _ = self.sampler.stop(&self.api, lua);
            }
            None => sys::stop_raw(&self.api, self.main_state),
        }
        #[cfg(target_os = "linux")]
        {
            if self.ignored_sigprof {
                sys::posix::restore_sigprof_default();
            }
            if self.unblocked_sigprof {
                sys::posix::block_sigprof();
            }
        }
        if let Some(lua) = lua {
            self.sampler.with(|s| {
                if let Some(z) = s.zones_mut() {
                    z.release(lua);
                }
            });
        }
        self.timing.finish();
        self.running = false;
        OWNER.store(false, Ordering::Release);
    }

    /// The collapsed text, written straight from the stack table (same
    /// bytes as `collapsed::write(&self.profile())`, less time and memory).
    fn collapsed_text(&self) -> String {
        let mut namer = FrameNamer::new(&self.ffnames, self.resolve_c);
        self.sampler.with(|s| crate::collapsed_table::write(&s.table, &mut namer))
    }

    #[allow(dead_code)]
    fn profile(&self) -> Profile {
        let mut namer = FrameNamer::new(&self.ffnames, self.resolve_c);
        self.sampler.with(|s| Profile::from_table(&s.table, &mut namer))
    }

    fn stats_table(&self, lua: &Lua) -> mlua::Result<Table> {
        // Copy first: building the Lua table may run the GC (and so Lua code).
        let (st, stacks, overflow, mem) =
            self.sampler.with(|s| (s.stats, s.table.len(), s.table.overflow_total(), s.table.memory_bytes()));
        let t = lua.create_table()?;
        let wall = self.timing.wall_sec();
        let cpu = self.timing.cpu_sec();
        t.set("samples", st.samples)?;
        t.set("callbacks", st.callbacks)?;
        t.set("pausedSamples", st.paused)?;
        t.set("filteredSamples", st.filtered)?;
        t.set("recordedSamples", st.samples - st.paused - st.filtered)?;
        t.set("stacks", stacks)?;
        t.set("overflowSamples", overflow)?;
        t.set("memoryBytes", mem)?;
        t.set("durationSec", wall)?;
        if let Some(c) = cpu {
            t.set("cpuSec", c)?;
        }
        t.set("clock", self.source.describe())?;
        t.set("intervalMs", self.interval_ns as f64 / 1e6)?;
        t.set("requestedRate", 1e9 / self.interval_ns as f64)?;
        let basis = match self.source {
            TimerSource::PreciseWall => wall,
            _ => cpu.unwrap_or(wall),
        };
        t.set("rate", if basis > 0.0 { st.samples as f64 / basis } else { 0.0 })?;
        if let Some(tm) = &self.timer {
            t.set("timerSignals", tm.sent())?;
        }
        t.set("running", self.running)?;
        #[cfg(feature = "bench-timing")]
        {
            t.set("callbackNs", st.callback_ns)?;
            t.set("dumpNs", st.dump_ns)?;
        }
        Ok(t)
    }
}

impl Drop for NativeSession {
    fn drop(&mut self) {
        // Reached from the GC (a session nobody stopped) or from lua_close,
        // which has already stopped LuaJIT's profiler. Either way the state is
        // still open here.
        self.stop_sampling(None);
    }
}

impl UserData for NativeSession {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("pause", |_, this, ()| {
            this.sampler.with(|s| s.paused.store(true, Ordering::Relaxed));
            Ok(())
        });
        methods.add_method("resume", |_, this, ()| {
            this.sampler.with(|s| s.paused.store(false, Ordering::Relaxed));
            Ok(())
        });
        methods.add_method_mut("stop", |lua, this, ()| {
            this.stop_sampling(Some(lua));
            Ok(())
        });
        methods.add_method("running", |_, this, ()| Ok(this.running));
        methods.add_method("collapsed", |lua, this, ()| {
            let text = this.collapsed_text();
            lua.create_string(text)
        });
        methods.add_method("stats", |lua, this, ()| this.stats_table(lua));
    }
}

fn available(_: &Lua, (): ()) -> mlua::Result<(bool, Option<String>)> {
    Ok(match sys::profiler_api() {
        Some(_) => (true, None),
        None => (false, Some("this LuaJIT has no profiler API (luaJIT_profile_start needs LuaJIT 2.1 or later)".into())),
    })
}

fn parse_collapsed(lua: &Lua, text: mlua::LuaString) -> mlua::Result<Value> {
    let text = text.to_string_lossy();
    match collapsed::parse(&text) {
        Ok(p) => {
            let t = lua.create_table()?;
            t.set("rows", p.rows.len())?;
            t.set("samples", p.total())?;
            Ok(Value::Table(t))
        }
        Err(e) => Err(mlua::Error::runtime(e.to_string())),
    }
}

pub fn exports(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("start", lua.create_function(start)?)?;
    t.set("available", lua.create_function(available)?)?;
    t.set("parse_collapsed", lua.create_function(parse_collapsed)?)?;
    t.set("default_max_stacks", DEFAULT_MAX_STACKS)?;
    t.set("version", env!("CARGO_PKG_VERSION"))?;
    Ok(t)
}
