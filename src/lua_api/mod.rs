//! The Lua-facing native module `tecs.profile.native`.
//!
//! Options are validated by the Lua shim (which raises errors at the caller's
//! level); this layer re-checks what it relies on and reports plain errors.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use mlua::{Lua, Table, UserData, UserDataMethods, Value};

use crate::profile::collapsed;
use crate::profile::{FrameNamer, Profile};
use crate::record::sampler::{Precision, Sampler, MAX_CALL_SITES};
use crate::record::tick_source::{ClockKind, TickKind, TickSource};
use crate::sys::{self, FunctionAnchor, ProfilerApi, SamplerBox, VmHandle, ZoneAnchor};
use std::collections::{HashMap, HashSet};

mod options;
pub mod views;

pub use options::{check_start_options, START_OPTIONS};
use options::{describe, read_options, StartOptions};

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
    ticks: TickSource,
    interval_ns: u64,
    running: bool,
    timing: Timing,
    ffnames: Vec<Option<String>>,
    resolve_c: bool,
    /// Signals this session unblocked on the VM thread (blocked again at stop).
    unblocked: Vec<i32>,
    /// Ticks the handler refused, read when the session stopped.
    refused_at_stop: u64,
    precision: Precision,
    /// Lua function (function, line, state) -> the line the time of samples
    /// charged to `line` in that VM state belongs to, or nil; see
    /// `Sampler::call_sites`.
    call_site: Option<mlua::Function>,
    call_sites_checked: HashSet<Vec<u8>>,
    /// State letter and leaf frame -> the corrected leaf frame.
    call_site_lines: HashMap<Vec<u8>, Vec<u8>>,
    vm: VmHandle,
    start_warning: Option<String>,
}

/// Ticks refused (LuaJIT's profiler no longer ours) after which the session
/// reports that it lost LuaJIT's profiler (at least this many, and at least
/// 250 ms worth).
const STALL_TICKS: u64 = 100;
const STALL_NS: u64 = 250_000_000;

/// Result convention of the raw exported functions: `(true, value)` or
/// `(false, message)`; a small Lua wrapper (see `exports`) raises the message
/// at the caller's level, prefixed with the function's name.
type Outcome = (bool, Value);

fn failure(lua: &Lua, msg: impl AsRef<str>) -> mlua::Result<Outcome> {
    Ok((false, Value::String(lua.create_string(msg.as_ref())?)))
}

fn start_export(lua: &Lua, opts: Value) -> mlua::Result<Outcome> {
    let Value::Table(opts) = opts else {
        return failure(lua, format!("bad argument #1 'opts' (table expected, got {})", describe(&opts)));
    };
    let o = match read_options(&opts) {
        Ok(o) => o,
        Err(e) => return failure(lua, e),
    };
    match start(lua, o) {
        Ok(session) => Ok((true, Value::UserData(lua.create_userdata(session)?))),
        Err(e) => failure(lua, error_text(&e)),
    }
}

/// The message of an error without mlua's wrapping and traceback.
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        other => other.to_string(),
    }
}

fn start(lua: &Lua, o: StartOptions) -> mlua::Result<NativeSession> {
    let api = sys::profiler_api().ok_or_else(|| {
        mlua::Error::runtime("this LuaJIT has no profiler API (luaJIT_profile_start needs LuaJIT 2.1 or later)")
    })?;
    if OWNER.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return Err(mlua::Error::runtime(
            "a sampling session is already running in this process (LuaJIT has one profiler per process; \
             stop the other session, which may belong to another Lua state or thread, first)",
        ));
    }
    #[cfg(target_os = "linux")]
    let foreign = sys::posix::foreign_sampler_active();
    #[cfg(not(target_os = "linux"))]
    let foreign = false;
    if foreign {
        // A sampler of this VM (jit.p, jit.profile): stop it now, as LuaJIT's
        // start would, but before SIGPROF's disposition is chosen below, so
        // that LuaJIT saves "ignore" rather than "default" and a later stop by
        // that sampler's owner cannot leave our timer's signals fatal.
        let _ = sys::stop_profiler(&api, lua);
        #[cfg(target_os = "linux")]
        if sys::posix::foreign_sampler_active() {
            OWNER.store(false, Ordering::Release);
            return Err(mlua::Error::runtime(
                "LuaJIT's profiler is in use by another Lua state or library (SIGPROF has a handler or \
                 ITIMER_PROF is armed): stop jit.p/jit.profile there first",
            ));
        }
    }
    let result = start_owned(lua, api, o).map(|mut s| {
        if foreign {
            s.start_warning = Some(
                "another sampler (jit.p or jit.profile) was running when this session started; \
                 LuaJIT has one profiler per process and this session took it over"
                    .into(),
            );
        }
        s
    });
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
    let functions = FunctionAnchor::new(lua, MAX_CALL_SITES)?;
    let sampler = SamplerBox::new(Sampler::new(zones, functions, o.filter, o.depth, o.max_stacks, o.precision));
    let vm = VmHandle::of(lua)?;

    // SIGPROF carries LuaJIT's own timer when no per-thread source can run.
    let mut unblocked = Vec::new();
    #[cfg(target_os = "linux")]
    if sys::posix::unblock_signal(libc::SIGPROF) {
        unblocked.push(libc::SIGPROF);
    }

    let ms = ((o.interval_ns as f64) / 1e6).round().max(1.0) as u64;
    let mode = sys::cstring(&format!("{}i{}", o.precision.mode(), ms));
    if let Err(e) = sampler.start(&api, lua, &mode) {
        // Leave nothing half-started: signal mask and registry anchors back.
        reblock(&unblocked);
        sampler.with(|s| {
            s.functions.release(lua);
            if let Some(z) = s.zones_mut() {
                z.release(lua);
            }
        });
        return Err(e);
    }
    let ticks = if o.precise {
        per_thread_ticks(&api, &sampler, vm, o.clock, o.interval_ns, &mut unblocked)
    } else {
        TickSource::luajit(None)
    };
    Ok(NativeSession {
        api,
        sampler,
        ticks,
        interval_ns: o.interval_ns,
        running: true,
        timing: Timing::start(),
        ffnames: o.ffnames,
        resolve_c: o.resolve_c,
        unblocked,
        refused_at_stop: 0,
        precision: o.precision,
        call_site: o.call_site,
        call_sites_checked: HashSet::new(),
        call_site_lines: HashMap::new(),
        vm,
        start_warning: None,
    })
}

/// Replaces LuaJIT's ITIMER_PROF with a per-thread tick source (see
/// `timer`), or keeps LuaJIT's timer and says why.
#[cfg(target_os = "linux")]
fn per_thread_ticks(
    api: &ProfilerApi,
    sampler: &SamplerBox<Sampler>,
    vm: VmHandle,
    clock: ClockKind,
    interval_ns: u64,
    unblocked: &mut Vec<i32>,
) -> TickSource {
    use sys::posix;
    let Some(sig) = posix::tick_signal() else {
        return TickSource::luajit(Some("no free real-time signal for the tick source".into()));
    };
    let (cb, data) = sampler.callback_words();
    let Some(profiler) = posix::find_luajit_profiler(api.start_addr(), vm.addr(), cb, data) else {
        return TickSource::luajit(Some("LuaJIT's profiler state could not be located in this build".into()));
    };
    posix::arm_ticks(&profiler);
    for s in [sig, libc::SIGTRAP] {
        if posix::unblock_signal(s) {
            unblocked.push(s);
        }
    }
    match TickSource::start(clock, interval_ns, sig) {
        Ok(t) => {
            posix::disarm_itimer_prof();
            t
        }
        Err(why) => {
            posix::disarm_ticks();
            TickSource::luajit(Some(why))
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn per_thread_ticks(
    _api: &ProfilerApi,
    _sampler: &SamplerBox<Sampler>,
    _vm: VmHandle,
    _clock: ClockKind,
    _interval_ns: u64,
    _unblocked: &mut Vec<i32>,
) -> TickSource {
    TickSource::luajit(None)
}

/// Blocks again the signals a session unblocked.
fn reblock(signals: &[i32]) {
    #[cfg(target_os = "linux")]
    for &sig in signals {
        sys::posix::block_signal(sig);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = signals;
}

/// Ticks refused by the handler since this session armed it.
fn refused_ticks(kind: TickKind) -> u64 {
    #[cfg(target_os = "linux")]
    if kind != TickKind::LuaJit {
        return sys::posix::tick_counts().1;
    }
    let _ = kind;
    0
}

impl NativeSession {
    fn stop_sampling(&mut self, lua: Option<&Lua>) {
        if !self.running {
            return;
        }
        self.ticks.stop();
        self.refused_at_stop = refused_ticks(self.ticks.kind());
        #[cfg(target_os = "linux")]
        if self.ticks.kind() != TickKind::LuaJit {
            sys::posix::disarm_ticks();
        }
        match lua {
            Some(lua) => {
                let _ = self.sampler.stop(&self.api, lua);
            }
            None => self.vm.stop_profiler(&self.api),
        }
        reblock(&self.unblocked);
        if let Some(lua) = lua {
            self.resolve_call_sites(lua);
            self.sampler.with(|s| {
                s.functions.release(lua);
                if let Some(z) = s.zones_mut() {
                    z.release(lua);
                }
            });
        }
        self.timing.finish();
        self.running = false;
        OWNER.store(false, Ordering::Release);
    }

    /// Why this session's data may be incomplete, if it can tell.
    fn warning(&self) -> Option<String> {
        let stalled = if self.running { refused_ticks(self.ticks.kind()) } else { self.refused_at_stop };
        let mut parts: Vec<String> = self.start_warning.iter().cloned().collect();
        if stalled >= STALL_TICKS && stalled.saturating_mul(self.interval_ns) >= STALL_NS {
            parts.push(format!(
                "{} ticks (about {:.2} s) found LuaJIT's profiler no longer ours: another sampler \
                 (jit.p or jit.profile.start) took it over or stopped it",
                stalled,
                stalled as f64 * self.interval_ns as f64 / 1e9
            ));
        }
        if parts.is_empty() {
            None
        } else {
            Some(parts.join("; "))
        }
    }

    /// Asks the Lua resolver for the call line of every C-state leaf not
    /// checked yet. Runs Lua code, so never inside `sampler.with`.
    fn resolve_call_sites(&mut self, lua: &Lua) {
        let Some(resolver) = self.call_site.clone() else { return };
        let checked = &self.call_sites_checked;
        let pending: Vec<(Vec<u8>, i32)> = self.sampler.with(|s| {
            s.call_sites.iter().filter(|(k, _)| !checked.contains(*k)).map(|(k, &v)| (k.clone(), v)).collect()
        });
        for (site, slot) in pending {
            self.call_sites_checked.insert(site.clone());
            let (state, leaf) = (site[0], &site[1..]);
            let Some(colon) = leaf.iter().rposition(|&b| b == b':') else { continue };
            let Some(line) = std::str::from_utf8(&leaf[colon + 1..]).ok().and_then(|t| t.parse::<i64>().ok()) else {
                continue;
            };
            let Ok(func) = self.sampler.with(|s| s.functions.slots()).get(lua, slot) else { continue };
            let state = (state as char).to_string();
            if let Ok(Some(fixed_line)) = resolver.call::<Option<i64>>((func, line, state)) {
                if fixed_line > 0 && fixed_line != line {
                    let mut fixed = leaf[..=colon].to_vec();
                    fixed.extend_from_slice(fixed_line.to_string().as_bytes());
                    self.call_site_lines.insert(site, fixed);
                }
            }
        }
    }

    /// Runs `f` on the stack table with the call-site correction applied.
    fn with_table<R>(&self, f: impl FnOnce(&crate::record::stack_table::StackTable) -> R) -> R {
        self.sampler.with(|s| {
            if self.call_site_lines.is_empty() {
                f(&s.table)
            } else {
                f(&s.table.with_leaves_replaced(&self.call_site_lines))
            }
        })
    }

    fn collapsed_text(&self) -> String {
        collapsed::write(&self.profile())
    }

    fn profile(&self) -> Profile {
        let mut namer = FrameNamer::new(&self.ffnames, self.resolve_c);
        self.with_table(|t| Profile::from_table(t, &mut namer))
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
        let kind = self.ticks.kind();
        t.set("clock", kind.describe())?;
        t.set("signal", signal_name(self.ticks.signal()))?;
        if let Some(note) = &self.ticks.note {
            t.set("clockNote", note.as_str())?;
        }
        t.set("interruptsWaits", kind.interrupts_waits())?;
        #[cfg(target_os = "linux")]
        if kind == TickKind::WallTaskClock {
            t.set("blockedSamples", sys::posix::blocked_ticks())?;
        }
        t.set("precision", if self.precision == Precision::Line { "line" } else { "function" })?;
        t.set("linesCorrected", self.call_site_lines.len())?;
        t.set("intervalMs", self.interval_ns as f64 / 1e6)?;
        t.set("requestedRate", 1e9 / self.interval_ns as f64)?;
        let basis = if kind.is_wall() { wall } else { cpu.unwrap_or(wall) };
        t.set("rate", if basis > 0.0 { st.samples as f64 / basis } else { 0.0 })?;
        t.set("running", self.running)?;
        if let Some(w) = self.warning() {
            t.set("warning", w)?;
        }
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
        methods.add_method_mut("collapsed", |lua, this, ()| {
            this.resolve_call_sites(lua);
            let text = this.collapsed_text();
            lua.create_string(text)
        });
        methods.add_method("stats", |lua, this, ()| this.stats_table(lua));
        methods.add_method_mut("profile", |lua, this, ()| {
            this.resolve_call_sites(lua);
            Ok(crate::lua_api::views::ProfileData(this.profile()))
        });
    }
}

/// `SIGRTMIN+n` for a real-time tick signal, `SIGPROF` for LuaJIT's timer.
fn signal_name(sig: i32) -> String {
    #[cfg(target_os = "linux")]
    if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) {
        return format!("SIGRTMIN+{}", sig - libc::SIGRTMIN());
    }
    match sig {
        libc::SIGTRAP => "SIGTRAP".into(),
        _ => "SIGPROF".into(),
    }
}

fn available(_: &Lua, (): ()) -> mlua::Result<(bool, Option<String>)> {
    Ok(match sys::profiler_api() {
        Some(_) => (true, None),
        None => {
            (false, Some("this LuaJIT has no profiler API (luaJIT_profile_start needs LuaJIT 2.1 or later)".into()))
        }
    })
}

fn parse_collapsed(lua: &Lua, text: Value) -> mlua::Result<Outcome> {
    let Value::String(text) = text else {
        return failure(lua, format!("bad argument #1 'text' (string expected, got {})", describe(&text)));
    };
    let text = text.to_string_lossy();
    match collapsed::parse(&text) {
        Ok(p) => {
            let t = lua.create_table()?;
            t.set("rows", p.rows.len())?;
            t.set("samples", p.total())?;
            Ok((true, Value::Table(t)))
        }
        Err(e) => failure(lua, e.to_string()),
    }
}

/// Wraps a raw function returning an [`Outcome`] so that failures are raised
/// as plain string errors at the caller's level, prefixed with `name`.
fn raising(lua: &Lua, name: &str, raw: mlua::Function) -> mlua::Result<mlua::Function> {
    lua.load(
        "local raw, name = ...\n\
         return function(...)\n\
           local ok, r = raw(...)\n\
           if not ok then error(name .. ': ' .. r, 2) end\n\
           return r\n\
         end",
    )
    .set_name("=tecs.profile.native")
    .call((raw, name))
}

pub fn exports(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("start", raising(lua, "tecs.profile.native.start", lua.create_function(start_export)?)?)?;
    t.set("available", lua.create_function(available)?)?;
    t.set(
        "parse_collapsed",
        raising(lua, "tecs.profile.native.parse_collapsed", lua.create_function(parse_collapsed)?)?,
    )?;
    t.set("default_max_stacks", DEFAULT_MAX_STACKS)?;
    t.set("parse_profile", lua.create_function(crate::lua_api::views::parse_profile)?)?;
    t.set("version", env!("CARGO_PKG_VERSION"))?;
    Ok(t)
}
