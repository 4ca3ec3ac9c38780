//! The Lua-facing native module `tecs.profile.native`.
//!
//! One error convention for every native function and method: Rust code
//! fails with `mlua::Error::RuntimeError` carrying a plain message (no
//! function name), and failures reach Lua as values only through [`call`]
//! (`native.call(f, ...)` returns `true, results...` or `false, message`).
//! The Lua layer raises `error(name .. ": " .. message, 2)` under its public
//! name; the module's own functions (`native.start`, ...) are wrapped the
//! same way under their own names (see [`raising`]); the unwrapped ones are
//! in `native.raw`. Nothing has a prefix to strip.
//!
//! Options are declared once, in `options` and [`report_options`], under
//! their public names; `profile.sample` passes the user's table through.
//! The session's lifecycle (owner flag, signal mask, tick handler, LuaJIT's
//! profiler) is a set of guards in `lifecycle`.

use std::sync::atomic::Ordering;

use mlua::{Lua, MultiValue, Table, UserData, UserDataMethods, Value};

use crate::output::{FileFormat, FormatWriter};
use crate::profile::collapsed;
use crate::profile::Profile;
use crate::record::sampler::{Precision, Sampler};
use crate::record::stack_table::CountsMark;
use crate::record::tick_source::{TickKind, TickSource};
use crate::sys::{self, SamplerBox};
use std::collections::{HashMap, HashSet};

mod alloc;
mod autosave;
#[cfg(unix)]
mod control;
mod coverage;
mod frame_names;
mod json;
mod lifecycle;
mod options;
pub mod report_options;
mod start;
mod stats;
mod timeline;
pub mod views;

use lifecycle::Running;
use options::describe;
pub use options::{check_start_options, format_names, DEFAULT_MAX_STACKS, SAMPLE_OPTIONS};
use stats::Timing;

/// The names of `profile.sample`'s options, sorted.
pub fn start_option_names() -> Vec<&'static str> {
    options::names(SAMPLE_OPTIONS)
}

const NO_PROFILER_API: &str = "this LuaJIT has no profiler API (luaJIT_profile_start needs LuaJIT 2.1 or later)";

pub struct NativeSession {
    sampler: SamplerBox<Sampler>,
    ticks: TickSource,
    interval_ns: u64,
    /// The guards of a running session; None once stopped.
    run: Option<Running>,
    timing: Timing,
    ffnames: Vec<Option<String>>,
    resolve_c: bool,
    /// C function addresses -> Lua paths, None where a walk found none
    /// (see `frame_names`).
    c_paths: HashMap<usize, Option<String>>,
    /// Addresses several C functions share, which no path names.
    c_shared: HashSet<usize>,
    /// Lua functions by (chunk short name, first line, last line) -> Lua
    /// paths, None where a walk found none: names for the recorded
    /// functions.
    lua_paths: HashMap<(String, u32, u32), Option<String>>,
    /// The profile of the stopped session, built once for every output.
    finished: Option<Profile>,
    /// Ticks passed on and refused, read at the stop.
    ticks_at_stop: (u64, u64),
    precision: Precision,
    /// Why compiled code is not read in the tick handler (Ok: it is).
    compiled: Result<(), &'static str>,
    /// Lua function (function, line, state) -> the line the time of samples
    /// charged to `line` in that VM state belongs to, or nil; see
    /// `Sampler::call_sites`.
    call_site: Option<mlua::Function>,
    call_sites_checked: HashSet<Vec<u8>>,
    /// State letter and leaf frame -> the corrected leaf frame.
    call_site_lines: HashMap<Vec<u8>, Vec<u8>>,
    start_warning: Option<String>,
    /// The stack table's counts when `delta` last handed out samples, and
    /// (allocation sessions) the objects estimated per entry then.
    delta_mark: CountsMark,
    delta_objects_mark: Vec<[f64; 5]>,
    /// Where frames begin (`profile.frame()`), on the time line's clock.
    frame_marks: crate::record::timeline::FrameMarks,
    /// Events on the time line (trace aborts), on its clock.
    timeline_events: crate::record::timeline::Events,
    /// Allocation sessions: the allocator wrapper, the bytes each sample
    /// stands for, and how the stop left the VM's allocator.
    alloc: Option<sys::alloc_hook::AllocHook>,
    bytes_per_sample: Option<u64>,
    alloc_restored: Option<sys::alloc_hook::Restored>,
    /// Whether the tick handler notes the C function a tick lands in (the
    /// leaf of samples in state C), or why not.
    running_c: Result<(), &'static str>,
    /// Whether the tick handler sets a profiler hook LuaJIT lost again, or
    /// why not; and how many it had set again when the session stopped.
    lost_hook: Result<(), &'static str>,
    hooks_rearmed_at_stop: u64,
    /// An allocation session attached to the running sampling session (its
    /// samples come through that session's callback), until it stops.
    attached: bool,
}

/// Ticks refused (LuaJIT's profiler no longer ours) after which the session
/// reports that it lost LuaJIT's profiler: at least this many, standing for
/// at least 250 ms of its clock at the rate its ticks came (a source on the
/// kernel's tick comes slower than the interval asked).
const STALL_TICKS: u64 = 20;
const STALL_SECONDS: f64 = 0.25;

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

/// The message of an error without mlua's wrapping and traceback.
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        other => other.to_string(),
    }
}

fn runtime(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

/// Ticks passed on and refused by the handler since this session armed it.
fn tick_counts(kind: TickKind) -> (u64, u64) {
    #[cfg(target_os = "linux")]
    if kind != TickKind::LuaJit {
        return sys::posix::tick_counts();
    }
    let _ = kind;
    (0, 0)
}

impl NativeSession {
    /// The one stop path (`stop`, and `Drop` without a `Lua`): stops the tick
    /// source, reads its counters, then drops the session's guards; with a
    /// `Lua`, also resolves call sites and releases the registry anchors.
    fn stop_sampling(&mut self, lua: Option<&Lua>) {
        self.lost_hook = self.lost_hook_state();
        let run = self.run.take();
        if run.is_none() && !self.attached {
            return;
        }
        self.attached = false;
        if let Some(hook) = &self.alloc {
            self.alloc_restored = Some(hook.uninstall());
        }
        self.ticks.stop();
        self.ticks_at_stop = tick_counts(self.ticks.kind());
        self.hooks_rearmed_at_stop = self.hooks_rearmed();
        match run {
            Some(run) => run.finish(lua, &self.sampler),
            None => self.sampler.detach(),
        }
        if let Some(lua) = lua {
            self.resolve_call_sites(lua);
            lifecycle::release_anchors(lua, &self.sampler);
        }
        self.forget_unnamed();
        self.timing.finish();
        let marks = &mut self.frame_marks;
        self.sampler.with(|s| marks.finish(sys::monotonic_ns(), &mut s.timeline));
    }

    /// Whether the tick handler sets lost hooks again, or why not: the
    /// check at start, then the first callback's (which may turn it off).
    fn lost_hook_state(&self) -> Result<(), &'static str> {
        #[cfg(target_os = "linux")]
        if self.lost_hook.is_ok() && self.run.is_some() {
            if let Some(why) = sys::posix::lost_hook::refused_by_callback() {
                return Err(why);
            }
        }
        self.lost_hook
    }

    /// Pending profiler hooks the tick handler set again, in case LuaJIT
    /// lost them, while this session armed it (see `sys::posix::lost_hook`).
    fn hooks_rearmed(&self) -> u64 {
        #[cfg(target_os = "linux")]
        if self.lost_hook_state().is_ok() {
            return if self.run.is_some() {
                sys::posix::lost_hook::hooks_rearmed()
            } else {
                self.hooks_rearmed_at_stop
            };
        }
        0
    }

    fn running(&self) -> bool {
        self.run.is_some() || self.attached
    }

    /// Why this session's data may be incomplete, if it can tell.
    fn warning(&self) -> Option<String> {
        let (passed, stalled) = if self.running() { tick_counts(self.ticks.kind()) } else { self.ticks_at_stop };
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

    /// What every view of the session needs before it is built, running or
    /// stopped: the call lines of C-call leaves, and the Lua paths of the
    /// functions recorded (`frame_names`), so that every view names a
    /// frame the same way. Runs Lua code, so never inside `sampler.with`.
    fn prepare_view(&mut self, lua: &Lua) {
        self.resolve_call_sites(lua);
        self.name_new_functions(lua);
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
                    self.finished = None;
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

    /// The collapsed text (valid UTF-8: every name is), written from the
    /// kept profile once the session has stopped, without copying it.
    fn collapsed_text(&mut self) -> Vec<u8> {
        if self.running() {
            return collapsed::write_bytes(&self.build_profile());
        }
        if self.finished.is_none() {
            self.finished = Some(self.build_profile());
        }
        collapsed::write_bytes(self.finished.as_ref().expect("kept just above"))
    }

    /// The profile of the samples so far. Once the session has stopped it
    /// is built once and kept: a command that writes several outputs and
    /// reports reads the same profile.
    fn profile(&mut self) -> Profile {
        if let Some(p) = &self.finished {
            return p.clone();
        }
        let p = self.build_profile();
        if !self.running() {
            self.finished = Some(p.clone());
        }
        p
    }

    /// The profile of the samples recorded since the previous call (since
    /// the start for the first), without stopping: the table is read in
    /// place, so no trace is flushed and no sample is lost between calls.
    fn delta_profile(&mut self) -> Profile {
        let (since, mark) = self.sampler.with(|s| (s.table.since(&self.delta_mark), s.table.counts_mark()));
        self.delta_mark = mark;
        let since =
            if self.call_site_lines.is_empty() { since } else { since.with_leaves_replaced(&self.call_site_lines) };
        self.weighed(Profile::from_table(&since, &mut self.namer()))
    }

    /// `p` in the session's unit: bytes for an allocation session.
    fn weighed(&self, p: Profile) -> Profile {
        match self.bytes_per_sample {
            Some(n) => alloc::in_bytes(p, n),
            None => p,
        }
    }

    /// The profile of every sample so far, named and sorted.
    fn build_profile(&self) -> Profile {
        self.weighed(self.with_table(|t| Profile::from_table(t, &mut self.namer())))
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
        methods.add_method("running", |_, this, ()| Ok(this.running()));
        // `autosave(path, seconds)` and `finishAutosave()`: see `autosave`.
        methods.add_method_mut("autosave", |lua, this, (path, seconds): (String, f64)| {
            this.start_autosave(lua, path, seconds)
        });
        methods.add_method("finishAutosave", |_, _, ()| {
            autosave::finish();
            Ok(())
        });
        // Whether this allocation session runs attached to a sampling session.
        methods.add_method("isAttached", |_, this, ()| Ok(this.attached));
        methods.add_method_mut("collapsed", |lua, this, ()| {
            this.prepare_view(lua);
            let text = this.collapsed_text();
            lua.create_string(text)
        });
        methods.add_method("stats", |lua, this, ()| this.stats_table(lua));
        methods.add_method("allocStats", |lua, this, ()| this.alloc_stats(lua));
        methods.add_method_mut("objectProfile", |lua, this, ()| {
            this.prepare_view(lua);
            Ok(this.object_profile().map(crate::lua_api::views::ProfileData::new))
        });
        methods.add_method_mut("liveProfiles", |lua, this, ()| {
            this.prepare_view(lua);
            let ids = std::sync::Arc::new(this.frame_identities());
            let data = |p| crate::lua_api::views::ProfileData(p, ids.clone());
            Ok(match this.live_profiles() {
                Some((bytes, objects, points)) => (Some(data(bytes)), Some(data(objects)), Some(data(points))),
                None => (None, None, None),
            })
        });
        methods.add_method("frameFunctions", |lua, this, ()| this.frame_functions_table(lua));
        // `delta()`: the samples since the previous call, and for an
        // allocation session the objects estimated for them.
        methods.add_method_mut("delta", |lua, this, ()| {
            this.prepare_view(lua);
            let ids = std::sync::Arc::new(this.frame_identities());
            let objects = this.objects_since(&this.delta_objects_mark).map(|(p, mark)| {
                this.delta_objects_mark = mark;
                crate::lua_api::views::ProfileData(p, ids.clone())
            });
            Ok((crate::lua_api::views::ProfileData(this.delta_profile(), ids), objects))
        });
        methods.add_method_mut("profile", |lua, this, ()| {
            this.prepare_view(lua);
            let ids = this.frame_identities();
            Ok(crate::lua_api::views::ProfileData(this.profile(), std::sync::Arc::new(ids)))
        });
        methods.add_method_mut("sampleProfile", |lua, this, ()| {
            this.prepare_view(lua);
            let ids = this.frame_identities();
            Ok(crate::lua_api::views::ProfileData(this.sample_profile(), std::sync::Arc::new(ids)))
        });
        timeline::add_methods(methods);
    }
}

fn available(_: &Lua, (): ()) -> mlua::Result<(bool, Option<String>)> {
    Ok(match sys::profiler_api() {
        Some(_) => (true, None),
        None => (false, Some(NO_PROFILER_API.into())),
    })
}

/// `native.raw.parse_collapsed(text)`: row and sample counts of collapsed text.
fn parse_collapsed(lua: &Lua, text: Value) -> mlua::Result<Table> {
    let Value::String(text) = text else {
        return Err(runtime(format!("bad argument #1 'text' (string expected, got {})", describe(&text))));
    };
    let p = collapsed::parse(&text.to_string_lossy()).map_err(|e| runtime(e.to_string()))?;
    let t = lua.create_table()?;
    t.set("rows", p.rows.len())?;
    t.set("samples", p.total())?;
    Ok(t)
}

/// `native.raw.check_options(function, opts)`: checks the options table of
/// a public function (`"sample"`, `"report"`, `"hotAborts"`, `"flamegraph"`,
/// `"speedscope"`) against its declaration.
fn check_options(_: &Lua, (function, opts): (String, Value)) -> mlua::Result<()> {
    let decls = report_options::declared(&function)
        .ok_or_else(|| runtime(format!("bad argument #1 'function' (no options declared for {:?})", function)))?;
    options::check_table(decls, &opts).map_err(runtime)
}

/// `native.call(f, ...)`: `true, results...` when `f(...)` succeeds, else
/// `false` and the plain message of its error (the boundary's one error
/// convention: see the module documentation).
pub fn call(lua: &Lua, (f, args): (mlua::Function, MultiValue)) -> mlua::Result<MultiValue> {
    let mut out = match f.call::<MultiValue>(args) {
        Ok(results) => results,
        Err(e) => {
            let mut out = MultiValue::new();
            out.push_back(Value::String(lua.create_string(error_text(&e))?));
            out.push_front(Value::Boolean(false));
            return Ok(out);
        }
    };
    out.push_front(Value::Boolean(true));
    Ok(out)
}

/// Wraps a raw function so that its failures are raised as plain string
/// errors at the caller's level, prefixed with `name`.
fn raising(lua: &Lua, call: &mlua::Function, name: &str, raw: &mlua::Function) -> mlua::Result<mlua::Function> {
    lua.load(
        "local call, raw, name = ...\n\
         local function pack(...) return { n = select('#', ...), ... } end\n\
         return function(...)\n\
           local r = pack(call(raw, ...))\n\
           if not r[1] then error(name .. ': ' .. r[2], 2) end\n\
           return unpack(r, 2, r.n)\n\
         end",
    )
    .set_name("=tecs.profile.native")
    .call((call.clone(), raw.clone(), name))
}

/// `native.formatTable`: the format registry, one table per format in its
/// order: `name`, `endings` (a list), `timeLine` (written from a session's
/// time line), `native` (written by this module) or else `luaWriter` (the
/// Lua module whose `render(session)` makes it),
/// `readsSources`, `groupsFunctions`, `help`, and `withoutInterval` when there is one (see
/// `output::Declaration`).
fn format_table(lua: &Lua) -> mlua::Result<Table> {
    let list = lua.create_table()?;
    for (i, d) in crate::output::REGISTRY.iter().enumerate() {
        let t = lua.create_table()?;
        t.set("name", d.name)?;
        t.set("endings", lua.create_sequence_from(d.endings.iter().copied())?)?;
        t.set("timeLine", d.time_line)?;
        match d.writer {
            FormatWriter::Native(_) => t.set("native", true)?,
            FormatWriter::Lua(module) => {
                t.set("native", false)?;
                t.set("luaWriter", module)?
            }
        }
        t.set("readsSources", d.reads_sources)?;
        t.set("groupsFunctions", d.groups_functions)?;
        t.set("help", d.help)?;
        t.set("withoutInterval", d.without_interval)?;
        list.raw_set(i + 1, t)?;
    }
    Ok(list)
}

/// `native.formatExtensions`: `{ {ending, format}, ... }`, longest ending
/// first, so that the first that matches a file name is the one
/// `FileFormat::for_path` takes.
fn format_extensions(lua: &Lua) -> mlua::Result<Table> {
    let mut pairs: Vec<(&str, &str)> =
        crate::output::REGISTRY.iter().flat_map(|d| d.endings.iter().map(move |e| (*e, d.name))).collect();
    pairs.sort_by_key(|(e, _)| std::cmp::Reverse(e.len()));
    let t = lua.create_table()?;
    for (i, (ending, format)) in pairs.into_iter().enumerate() {
        t.raw_set(i + 1, lua.create_sequence_from([ending, format])?)?;
    }
    Ok(t)
}

pub fn exports(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let call = lua.create_function(call)?;
    let raw = lua.create_table()?;
    raw.set("start", lua.create_function(start::start_raw)?)?;
    raw.set("parse_collapsed", lua.create_function(parse_collapsed)?)?;
    raw.set("parse_profile", lua.create_function(views::parse_profile)?)?;
    raw.set("is_profile", lua.create_function(views::is_profile)?)?;
    raw.set("read_chrome_trace", lua.create_function(timeline::read_chrome_trace)?)?;
    raw.set("check_options", lua.create_function(check_options)?)?;
    raw.set("start_allocations", lua.create_function(alloc::start_raw)?)?;
    raw.set("set_function_paths", lua.create_function(frame_names::set_function_paths)?)?;
    raw.set("_test_wrap_allocator", lua.create_function(alloc::test_wrap_allocator)?)?;
    raw.set("_test_allocator_wrapped", lua.create_function(alloc::test_allocator_wrapped)?)?;
    for name in ["start", "parse_collapsed", "parse_profile", "check_options"] {
        let f: mlua::Function = raw.get(name)?;
        t.set(name, raising(lua, &call, &format!("tecs.profile.native.{}", name), &f)?)?;
    }
    #[cfg(unix)]
    control::register(lua, &raw)?;
    t.set("raw", raw)?;
    t.set("call", call)?;
    t.set("available", lua.create_function(available)?)?;
    t.set("options", report_options::option_tables(lua)?)?;
    t.set("formats", lua.create_sequence_from(format_names())?)?;
    let time_line = crate::output::REGISTRY.iter().filter(|d| d.time_line).map(|d| d.name);
    t.set("timelineFormats", lua.create_sequence_from(time_line)?)?;
    t.set("formatExtensions", format_extensions(lua)?)?;
    t.set("formatTable", format_table(lua)?)?;
    t.set("formatFor", lua.create_function(|_, path: String| Ok(FileFormat::for_path(&path).declaration().name))?)?;
    t.set("json", lua.create_function(json::json)?)?;
    t.set("hitchesText", lua.create_function(timeline::hitches_text)?)?;
    t.set("framesText", lua.create_function(timeline::frames_text)?)?;
    t.set("json_decode", lua.create_function(json::json_decode)?)?;
    // JSON's null where a Lua table cannot hold nil (`native.json` writes
    // any light userdata as null).
    t.set("null", mlua::Value::LightUserData(mlua::LightUserData(std::ptr::null_mut())))?;
    t.set("functionsFileEnding", crate::profile::sidecar::ENDING)?;
    t.set("noZone", crate::views::NO_ZONE)?;
    t.set("describe", lua.create_function(|_, v: mlua::Value| Ok(options::describe(&v)))?)?;
    t.set("default_max_stacks", DEFAULT_MAX_STACKS)?;
    let alloc_names = lua.create_sequence_from(options::names(alloc::ALLOCATION_OPTIONS))?;
    t.set("allocation_option_names", alloc_names)?;
    t.set("version", env!("CARGO_PKG_VERSION"))?;
    coverage::register(lua, &t)?;
    Ok(t)
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod lifecycle_tests;
