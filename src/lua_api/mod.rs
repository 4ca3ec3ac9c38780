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
//! Starting and stopping a session (owner flag, signal mask, tick handler,
//! LuaJIT's profiler, in their order) is `crate::session`'s: this module
//! turns the Lua options into its typed plan and the session into a Lua
//! value.

use std::sync::atomic::Ordering;

use mlua::{Lua, MultiValue, Table, UserData, UserDataMethods, Value};

use crate::output::{FileFormat, FormatWriter};
use crate::profile::collapsed;
use crate::profile::Profile;
use crate::session::state::SessionState;
use crate::session::timed::SessionView;
use crate::session::{Session, NO_PROFILER_API};
use crate::sys;
use call_sites::CallSites;

mod alloc;
mod autosave;
mod call_sites;
#[cfg(unix)]
mod control;
mod coverage;
mod frame_names;
mod json;
mod lazy;
mod options;
pub mod profile_data;
pub mod report_options;
mod start;
mod stats;
mod timeline;

use options::describe;
pub use options::{check_start_options, format_names, DEFAULT_MAX_STACKS, SAMPLE_OPTIONS};

/// The names of `profile.sample`'s options, sorted.
pub fn start_option_names() -> Vec<&'static str> {
    options::names(SAMPLE_OPTIONS)
}

/// A session as Lua sees it: the running [`Session`], what turns its
/// samples into profiles (names, call-site lines, frame marks: the
/// recorder's [`SessionState`]), and the Lua resolver of call sites.
pub struct NativeSession {
    session: Session,
    state: SessionState,
    /// Lua function (function, line, state) -> the line the time of samples
    /// charged to `line` in that VM state belongs to, or nil; see
    /// `Sampler::call_sites`.
    call_site: Option<mlua::Function>,
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

impl NativeSession {
    /// Stops the session (`stop`, and `Drop` without a `Lua`; see
    /// `Session::stop`), resolving call sites while their functions are
    /// still anchored; forgets the functions no walk named (see
    /// `frame_names`) and ends the timeline's last frame.
    fn stop_sampling(&mut self, lua: Option<&Lua>) {
        let call_sites = CallSites { resolver: &self.call_site, fixes: &mut self.state.call_sites };
        let mut renamed = false;
        if !self.session.stop(lua, |lua, sampler| renamed = call_sites.resolve(lua, sampler)) {
            return;
        }
        if renamed {
            self.state.names_changed();
        }
        self.state.paths.forget_unnamed();
        self.state.end_frames(&self.session);
    }

    fn running(&self) -> bool {
        self.session.running()
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
        let call_sites = CallSites { resolver: &self.call_site, fixes: &mut self.state.call_sites };
        if call_sites.resolve(lua, self.session.sampler()) {
            self.state.names_changed();
        }
    }

    /// The collapsed text (see `SessionState::collapsed_text`).
    fn collapsed_text(&mut self) -> Vec<u8> {
        self.state.collapsed_text(&self.session)
    }

    /// The profile of the samples so far (see `SessionState::profile`).
    fn profile(&mut self) -> Profile {
        self.state.profile(&self.session)
    }

    /// The profile of the samples recorded since the previous call (see
    /// `SessionState::delta_profile`).
    fn delta_profile(&mut self) -> Profile {
        self.state.delta_profile(&self.session)
    }

    /// The session as the timeline's readers take it (`session::timed`).
    pub(super) fn view(&self) -> SessionView<'_> {
        self.state.view(&self.session)
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
            this.session.sampler().with(|s| s.paused.store(true, Ordering::Relaxed));
            Ok(())
        });
        methods.add_method("resume", |_, this, ()| {
            this.session.sampler().with(|s| s.paused.store(false, Ordering::Relaxed));
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
        methods.add_method("isAttached", |_, this, ()| Ok(this.session.attached()));
        methods.add_method_mut("collapsed", |lua, this, ()| {
            this.prepare_view(lua);
            let text = this.collapsed_text();
            lua.create_string(text)
        });
        methods.add_method("stats", |lua, this, ()| this.stats_table(lua));
        methods.add_method("allocStats", |lua, this, ()| this.alloc_stats(lua));
        methods.add_method_mut("objectProfile", |lua, this, ()| {
            this.prepare_view(lua);
            Ok(this.object_profile().map(profile_data::ProfileData::new))
        });
        methods.add_method_mut("liveProfiles", |lua, this, ()| {
            this.prepare_view(lua);
            let ids = std::sync::Arc::new(this.frame_identities());
            let data = |p| profile_data::ProfileData(p, ids.clone());
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
            let objects = this.objects_since(&this.state.delta.objects).map(|(p, mark)| {
                this.state.delta.objects = mark;
                profile_data::ProfileData(p, ids.clone())
            });
            Ok((profile_data::ProfileData(this.delta_profile(), ids), objects))
        });
        methods.add_method_mut("profile", |lua, this, ()| {
            this.prepare_view(lua);
            let ids = this.frame_identities();
            Ok(profile_data::ProfileData(this.profile(), std::sync::Arc::new(ids)))
        });
        methods.add_method_mut("sampleProfile", |lua, this, ()| {
            this.prepare_view(lua);
            let ids = this.frame_identities();
            Ok(profile_data::ProfileData(this.sample_profile(), std::sync::Arc::new(ids)))
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

/// `native.raw.parseCollapsed(text)`: row and sample counts of collapsed text.
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

/// `native.raw.checkOptions(function, opts)`: checks the options table of
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
/// timeline), `native` (written by this module) or else `luaWriter` (the
/// Lua module whose `render(session)` makes it),
/// `readsSources`, `groupsFunctions`, `help`, and `withoutInterval` when there is one (see
/// `output::Declaration`).
fn format_table(lua: &Lua) -> mlua::Result<Table> {
    let list = lua.create_table()?;
    for (i, d) in crate::output::REGISTRY.iter().enumerate() {
        let t = lua.create_table()?;
        t.set("name", d.name)?;
        t.set("endings", lua.create_sequence_from(d.endings.iter().copied())?)?;
        // `timeLine`: the native API's field name, which the Lua side reads.
        t.set("timeLine", d.timeline)?;
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

/// A field built from a Rust function of the module.
macro_rules! function {
    ($f:expr) => {
        |lua: &Lua, _: &Table| Ok(Value::Function(lua.create_function($f)?))
    };
}

/// A field holding a plain value.
macro_rules! value {
    ($v:expr) => {
        |lua: &Lua, _: &Table| mlua::IntoLua::into_lua($v, lua)
    };
}

/// A function of `native.raw` wrapped by [`raising`] under the module's name.
macro_rules! raising {
    ($name:literal) => {
        |lua: &Lua, t: &Table| {
            let raw: Table = t.get("raw")?;
            let call: mlua::Function = t.get("call")?;
            let f: mlua::Function = raw.get($name)?;
            Ok(Value::Function(raising(lua, &call, concat!("tecs.profile.native.", $name), &f)?))
        }
    };
}

/// `native.raw`: the functions that fail with a plain message, for
/// [`call`]; the control channel's register themselves on first use.
const RAW: &[(&str, lazy::Build)] = &[
    ("start", function!(start::start_raw)),
    ("parseCollapsed", function!(parse_collapsed)),
    ("parseProfile", function!(profile_data::parse_profile)),
    ("isProfile", function!(profile_data::is_profile)),
    ("readChromeTrace", function!(timeline::read_chrome_trace)),
    ("checkOptions", function!(check_options)),
    ("startAllocations", function!(alloc::start_raw)),
    ("setFunctionPaths", function!(frame_names::set_function_paths)),
    // The running Lua thread, the main thread included (which
    // `coroutine.running()` does not give in Lua 5.1): for `skipThread`.
    ("currentThread", function!(|lua, ()| Ok(lua.current_thread()))),
    ("_testWrapAllocator", function!(alloc::test_wrap_allocator)),
    ("_testAllocatorWrapped", function!(alloc::test_allocator_wrapped)),
];

#[cfg(unix)]
const RAW_REST: Option<lazy::Register> = Some(control::register);
#[cfg(not(unix))]
const RAW_REST: Option<lazy::Register> = None;

/// The module's table, field by field; each is built when first read (see
/// [`lazy`]), so that loading the module leaves next to nothing on the Lua
/// heap.
const EXPORTS: &[(&str, lazy::Build)] = &[
    ("raw", |lua, _| Ok(Value::Table(lazy::table(lua, RAW, RAW_REST)?))),
    ("call", function!(call)),
    ("start", raising!("start")),
    ("parseCollapsed", raising!("parseCollapsed")),
    ("parseProfile", raising!("parseProfile")),
    ("checkOptions", raising!("checkOptions")),
    ("available", function!(available)),
    // Seconds on the monotonic clock (`tecs.profile.clock`): the clock of
    // the timeline, without loading the FFI into the program.
    ("monotonic", function!(|_, ()| Ok(sys::monotonic_ns() as f64 * 1e-9))),
    ("options", |lua, _| Ok(Value::Table(report_options::option_tables(lua)?))),
    ("formats", |lua, _| Ok(Value::Table(lua.create_sequence_from(format_names())?))),
    ("timelineFormats", |lua, _| {
        let timeline = crate::output::REGISTRY.iter().filter(|d| d.timeline).map(|d| d.name);
        Ok(Value::Table(lua.create_sequence_from(timeline)?))
    }),
    ("formatExtensions", |lua, _| Ok(Value::Table(format_extensions(lua)?))),
    ("formatTable", |lua, _| Ok(Value::Table(format_table(lua)?))),
    ("formatFor", function!(|_, path: String| Ok(FileFormat::for_path(&path).declaration().name))),
    ("json", function!(json::json)),
    ("hitchesText", function!(timeline::hitches_text)),
    ("framesText", function!(timeline::frames_text)),
    ("jsonDecode", function!(json::json_decode)),
    // JSON's null where a Lua table cannot hold nil (`native.json` writes
    // any light userdata as null).
    ("null", |_, _| Ok(Value::LightUserData(mlua::LightUserData(std::ptr::null_mut())))),
    ("functionsFileEnding", value!(crate::profile::sidecar::ENDING)),
    ("noZone", value!(crate::views::NO_ZONE)),
    // Below this many samples the views say the profile is too small to
    // rank (`errorNote`); reports made in Lua say it the same way.
    ("fewSamples", value!(crate::views::FEW_SAMPLES)),
    ("errorNote", function!(|_, samples: u64| Ok(crate::views::error_note(samples)))),
    // Whether a frame (`file:line`) is the profiler's own, as no profile
    // shows it; the trace-abort tracker leaves out aborts there too.
    ("isOwnFrame", function!(|_, name: mlua::LuaString| Ok(crate::profile::is_own_frame(&name.as_bytes())))),
    ("describe", function!(|_, v: mlua::Value| Ok(options::describe(&v)))),
    ("defaultMaxStacks", value!(DEFAULT_MAX_STACKS)),
    ("allocationOptionNames", |lua, _| {
        Ok(Value::Table(lua.create_sequence_from(options::names(alloc::ALLOCATION_OPTIONS))?))
    }),
    ("version", value!(env!("CARGO_PKG_VERSION"))),
    ("coverRewrite", function!(coverage::cover_rewrite)),
    ("coverGlobal", value!(crate::rewrite::COUNTERS_GLOBAL)),
    ("coverKey", value!(crate::rewrite::COUNTER_KEY)),
];

pub fn exports(lua: &Lua) -> mlua::Result<Table> {
    crate::sys::install_profile_host();
    lazy::table(lua, EXPORTS, None)
}

#[cfg(test)]
mod names_tests {
    use mlua::{Lua, Table, Value};

    /// Lower camelCase, as the Lua API's names are (`_` first for the
    /// suite's own hooks).
    fn lower_camel(name: &str) -> bool {
        let name = name.strip_prefix('_').unwrap_or(name);
        name.starts_with(|c: char| c.is_ascii_lowercase()) && name.chars().all(|c| c.is_ascii_alphanumeric())
    }

    /// Every name `table` declares is lower camelCase and reads as a value.
    fn check(table: &Table, what: &str, declared: &[String]) {
        for name in declared {
            assert!(lower_camel(name), "{what}.{name} is not lower camelCase");
            assert!(!table.get::<Value>(name.as_str()).unwrap().is_nil(), "{what}.{name} is nil");
        }
    }

    #[test]
    fn every_export_is_lower_camel_case() {
        let lua = Lua::new();
        let native = super::exports(&lua).unwrap();
        let exports: Vec<String> = super::EXPORTS.iter().map(|(n, _)| n.to_string()).collect();
        check(&native, "native", &exports);
        #[allow(unused_mut)]
        let mut raw_names: Vec<String> = super::RAW.iter().map(|(n, _)| n.to_string()).collect();
        // The control channel's functions register themselves: listed by
        // registering them in a table of their own.
        #[cfg(unix)]
        {
            let registered = lua.create_table().unwrap();
            super::control::register(&lua, &registered).unwrap();
            for pair in registered.pairs::<String, Value>() {
                raw_names.push(pair.unwrap().0);
            }
        }
        let raw: Table = native.get("raw").unwrap();
        check(&raw, "native.raw", &raw_names);
        assert!(raw_names.len() > super::RAW.len() || cfg!(not(unix)), "no control functions listed");
    }
}

#[cfg(test)]
#[path = "start_tests.rs"]
mod start_tests;
