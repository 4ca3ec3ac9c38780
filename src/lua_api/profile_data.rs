//! The profile object Lua holds, `ProfileData` (a finished profile, from a
//! session or parsed from collapsed text) and its renderers: text reports,
//! hot aborts, and the file formats of the registry (`output::REGISTRY`)
//! written from a profile.
//!
//! Options arrive validated by `tecs.profile.report`; this layer converts
//! them and re-checks only what it relies on.

use std::collections::HashMap;
use std::sync::Arc;

use mlua::{Lua, Table, UserData, UserDataMethods, Value};

use crate::output::timed::{rank_by_function, NO_STACK};
use crate::output::{FileFormat, RenderMeta, Source};
use crate::profile::collapsed;
use crate::profile::frames::FrameIdentity;
use crate::profile::frames::{FuncRange, FunctionMap};
use crate::profile::Profile;
use crate::views::{self, AbortSite, ReportOptions};

/// A profile, and the function of each frame as the VM knew it while
/// sampling (empty for profiles read from collapsed text).
pub struct ProfileData(pub Profile, pub Arc<HashMap<String, FrameIdentity>>);

impl ProfileData {
    pub fn new(p: Profile) -> Self {
        ProfileData(p, Arc::default())
    }

    /// The frames that occur in the profile's rows.
    fn used_frames(&self) -> Vec<&str> {
        let p = &self.0;
        let mut used = vec![false; p.names.len()];
        for row in &p.rows {
            for &f in p.stack(row) {
                used[f as usize] = true;
            }
        }
        (0..p.names.len() as u32).filter(|&id| used[id as usize]).map(|id| p.name(id)).collect()
    }

    /// The function map the views use: the one read from the sources
    /// (`funcs`; None leaves frames as lines), checked against the functions
    /// recorded while sampling, or against the frames when none were.
    fn function_map(&self, funcs: Option<Table>) -> mlua::Result<FunctionMap> {
        if funcs.is_none() {
            return Ok(FunctionMap::default());
        }
        let mut m = read_funcmap(funcs)?;
        m.apply_identities(&self.1);
        m.check_sources(self.used_frames().into_iter());
        Ok(m)
    }
}

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

/// `{ [file] = { main = label, lines = n, { first, last, label }, ... } }`;
/// a file that could not be read is `{ missing = reason }`.
pub(super) fn read_funcmap(t: Option<Table>) -> mlua::Result<FunctionMap> {
    let mut m = FunctionMap::default();
    let Some(t) = t else { return Ok(m) };
    for pair in t.pairs::<String, Table>() {
        let (file, ft) = pair?;
        if let Some(why) = ft.get::<Option<String>>("missing")? {
            m.unreadable.push((file, why));
            continue;
        }
        if let Some(n) = ft.get::<Option<u32>>("lines")? {
            m.line_counts.insert(file.clone(), n);
        }
        if let Some(code) = ft.get::<Option<Vec<u32>>>("code")? {
            let mut code = code;
            code.sort_unstable();
            m.code_lines.insert(file.clone(), code);
        }
        let main: Option<String> = ft.get("main")?;
        let mut ranges = Vec::new();
        for r in ft.sequence_values::<Table>() {
            let r = r?;
            let first: u32 = r.get(1)?;
            let last: u32 = r.get(2)?;
            let label: String = r.get(3)?;
            ranges.push(FuncRange { first, last: last.max(first), label });
        }
        let main = main.unwrap_or_else(|| format!("(main chunk) {}", file));
        m.add_file(&file, ranges, main);
    }
    Ok(m)
}

/// Options declared and read in `report_options`.
fn read_report_options(t: Option<Table>) -> mlua::Result<ReportOptions> {
    super::report_options::read(t)
}

/// The annotated source's notes from the report options: `trace`, a
/// TraceReport (`sites` and its trace counts), and `counts`, a coverage
/// session's `files()` table.
fn read_line_notes(opts: Option<&Table>) -> mlua::Result<views::LineNotes> {
    let Some(opts) = opts else { return Ok(views::LineNotes::default()) };
    let trace = match opts.get::<Option<Table>>("trace")? {
        Some(t) => Some(read_trace_notes(t)?),
        None => None,
    };
    let counts = match opts.get::<Option<Table>>("counts")? {
        Some(t) => Some(read_hit_counts(t)?),
        None => None,
    };
    Ok(views::LineNotes { trace, counts })
}

fn read_trace_notes(trace: Table) -> mlua::Result<views::TraceNotes> {
    let sites = match trace.get::<Value>("sites")? {
        Value::Table(t) => read_sites(t)?,
        _ => return Err(err("option 'trace' must be a TraceReport from profile.trace (no 'sites' list)")),
    };
    let count =
        |name: &str| -> mlua::Result<Option<u64>> { Ok(trace.get::<Option<f64>>(name)?.map(|n| n.max(0.0) as u64)) };
    let counts = match (count("tracesStarted")?, count("tracesCompleted")?, count("tracesAborted")?) {
        (Some(started), Some(completed), Some(aborted)) => Some(views::TraceCounts {
            started,
            completed,
            aborted,
            blacklistings: count("blacklistings")?.unwrap_or(0),
        }),
        _ => None,
    };
    let lines = match trace.get::<Value>("lines")? {
        Value::Table(t) => Some(read_trace_lines(t)?),
        Value::Nil => None,
        _ => return Err(err("option 'trace' must be a TraceReport from profile.trace ('lines' is not a table)")),
    };
    let mut notes = views::TraceNotes { sites, counts, lines, starts: Vec::new() };
    if let Value::Table(list) = trace.get::<Value>("traces")? {
        for x in list.sequence_values::<Table>() {
            let x = x?;
            let whole = |name: &str| -> mlua::Result<Option<u32>> {
                Ok(x.get::<Option<f64>>(name)?.filter(|n| *n >= 0.0 && *n <= f64::from(u32::MAX)).map(|n| n as u32))
            };
            let Some(number) = whole("number")? else { continue };
            let start = x.get::<Option<String>>("start")?.unwrap_or_default();
            let link = x.get::<Option<String>>("link")?.unwrap_or_default();
            notes.add_start(number, start, link, whole("linkTo")?.unwrap_or(0), whole("parent")?);
        }
    }
    Ok(notes)
}

/// A TraceReport's `lines`: `{ [file] = { [line] = { trace numbers } } }`.
fn read_trace_lines(t: Table) -> mlua::Result<HashMap<String, HashMap<u32, Vec<u32>>>> {
    const EXPECTED: &str =
        "option 'trace' must be a TraceReport from profile.trace ('lines' maps files to { [line] = { trace numbers } })";
    let mut out = HashMap::new();
    for pair in t.pairs::<Value, Value>() {
        let (Value::String(file), Value::Table(by_line)) = pair? else { return Err(err(EXPECTED)) };
        let mut per_line = HashMap::new();
        for l in by_line.pairs::<Value, Value>() {
            let (line, Value::Table(list)) = l? else { return Err(err(EXPECTED)) };
            let Some(line) = number(&line) else { return Err(err(EXPECTED)) };
            let mut traces = Vec::new();
            for tr in list.sequence_values::<Value>() {
                match number(&tr?) {
                    Some(n) if n >= 0.0 && n <= f64::from(u32::MAX) => traces.push(n as u32),
                    _ => return Err(err(EXPECTED)),
                }
            }
            traces.sort_unstable();
            traces.dedup();
            if line >= 1.0 && line <= f64::from(u32::MAX) && !traces.is_empty() {
                per_line.insert(line as u32, traces);
            }
        }
        out.insert(file.to_string_lossy().to_string(), per_line);
    }
    Ok(out)
}

/// `{ [name] = { lines = { [line] = count } } }`, as a coverage session's
/// `files()` returns; chunks not named after a file (`file == false`) have
/// no frames to meet and are left out.
fn read_hit_counts(t: Table) -> mlua::Result<views::HitCounts> {
    const EXPECTED: &str = "option 'counts' must be a CoverageSession from profile.coverage or its files() table";
    let mut out = views::HitCounts::new();
    for pair in t.pairs::<Value, Value>() {
        let (name, entry) = pair?;
        let (Value::String(name), Value::Table(entry)) = (&name, &entry) else {
            return Err(err(format!("{} (entries are file name = {{ lines = {{...}} }})", EXPECTED)));
        };
        let name = name.to_string_lossy();
        let Value::Table(lines) = entry.get::<Value>("lines")? else {
            return Err(err(format!("{} (entry '{}' has no 'lines' table)", EXPECTED, name)));
        };
        if entry.get::<Option<bool>>("file")? == Some(false) {
            continue;
        }
        let mut per_line = HashMap::new();
        for l in lines.pairs::<Value, Value>() {
            let (line, count) = l?;
            let (Some(line), Some(count)) = (number(&line), number(&count)) else {
                return Err(err(format!("{} (entry '{}': lines maps line numbers to counts)", EXPECTED, name)));
            };
            if line >= 1.0 && line <= f64::from(u32::MAX) {
                per_line.insert(line as u32, count.max(0.0) as u64);
            }
        }
        out.insert(name.to_string(), per_line);
    }
    Ok(out)
}

/// A Lua number, whichever way mlua holds it.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

fn read_sites(t: Table) -> mlua::Result<Vec<AbortSite>> {
    let mut v = Vec::new();
    for s in t.sequence_values::<Table>() {
        let s = s?;
        v.push(AbortSite {
            severity: s.get::<Option<String>>("severity")?.unwrap_or_default(),
            count: s.get::<Option<f64>>("count")?.unwrap_or(0.0).max(0.0) as u64,
            reason: s.get::<Option<String>>("reason")?.unwrap_or_default(),
            location: s.get::<Option<String>>("location")?.unwrap_or_default(),
            zone: s.get::<Option<String>>("zone")?.unwrap_or_default(),
        });
    }
    Ok(v)
}

impl UserData for ProfileData {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method("samples", |_, this, ()| Ok(this.0.total()));
        methods.add_method("rows", |_, this, ()| Ok(this.0.rows.len()));
        methods.add_method("collapsed", |lua, this, ()| lua.create_string(collapsed::write(&this.0)));
        // Source files named by Lua frames, for building the function map.
        methods.add_method("files", |lua, this, ()| {
            let mut files: Vec<&str> =
                this.used_frames().into_iter().filter_map(crate::profile::frames::file_of).collect();
            files.sort_unstable();
            files.dedup();
            lua.create_sequence_from(files)
        });
        methods.add_method("report", |lua, this, (opts, funcs): (Option<Table>, Option<Table>)| {
            let notes = read_line_notes(opts.as_ref())?;
            let o = read_report_options(opts)?;
            if o.annotate.is_none() {
                for (name, given) in [("trace", notes.trace.is_some()), ("counts", notes.counts.is_some())] {
                    if given {
                        return Err(err(format!(
                            "option '{}' goes with option 'annotate' (\"hot\" or \"full\")",
                            name
                        )));
                    }
                }
            }
            let m = this.function_map(funcs)?;
            lua.create_string(views::render_with(&this.0, &m, &o, &notes))
        });
        methods.add_method("hotAborts", |lua, this, (sites, opts, funcs): (Table, Option<Table>, Option<Table>)| {
            let sites = read_sites(sites)?;
            let raw = match &opts {
                Some(t) => t.get::<Option<bool>>("raw")?.unwrap_or(false),
                None => false,
            };
            let m = this.function_map(funcs)?;
            let text = views::render_hot_aborts(&this.0, &m, &sites, raw);
            let ranked = views::hot_aborts(&this.0, &m, &sites);
            let list = lua.create_table()?;
            for (i, h) in ranked.iter().enumerate() {
                let r = lua.create_table()?;
                r.set("site", h.site + 1)?;
                r.set("lineSelf", h.line_self)?;
                r.set("lineTotal", h.line_total)?;
                r.set("functionSelf", h.func_self)?;
                r.set("functionTotal", h.func_total)?;
                r.set("functionKnown", h.func_known)?;
                list.set(i + 1, r)?;
            }
            Ok((lua.create_string(text)?, list))
        });
        // `render(format, meta, funcs)`: the profile in a format of the
        // registry written from a profile (see `read_render_meta`).
        methods.add_method("render", |lua, this, (format, meta, funcs): (String, Option<Table>, Option<Table>)| {
            let Some(format) = FileFormat::from_name(&format) else {
                return Err(err(format!("unknown format {}", format)));
            };
            let d = format.declaration();
            if d.timeline {
                return Err(err(crate::output::wrong_source(d.name, true)));
            }
            let m = if d.reads_sources { this.function_map(funcs)? } else { FunctionMap::default() };
            let name_of = |frame: &str| {
                let f = m.function_of(frame);
                (f != frame).then(|| f.to_string())
            };
            let meta = read_render_meta(meta, &name_of)?;
            let bytes = format.write(Source::Profile(&this.0, &meta)).map_err(err)?;
            Ok(Value::String(lua.create_string(bytes)?))
        });
        // Frames renamed to the functions they belong to (see `frames`).
        methods.add_method("byFunction", |_, this, funcs: Option<Table>| {
            let m = this.function_map(funcs)?;
            Ok(ProfileData::new(this.0.map_frames(|f| m.function_of(f).to_string())))
        });
        // Every stack under a root frame naming its plugin, `[plugin
        // NAME]` (the `root = "plugin"` option of the written formats);
        // `plugins` is that option's table.
        methods.add_method("withPluginRoot", |_, this, plugins: Option<Table>| {
            let plugins = super::report_options::read_plugins(plugins)?;
            let mut memo = HashMap::new();
            let p = this.0.with_root_frames(|stack| plugins.root_frame(stack, &mut memo));
            Ok(ProfileData(p, this.1.clone()))
        });
        methods.add_method("filterZone", |_, this, prefix: String| {
            let mut p = this.0.clone();
            let parts: Vec<String> = prefix.split('/').filter(|s| !s.is_empty()).map(str::to_string).collect();
            p.filter_zone(&parts);
            Ok(ProfileData(p, this.1.clone()))
        });
        // The functions file (`profile::sidecar`) of the functions recorded
        // for the profile's frames, and of `unit` (what the counts are, when
        // not samples: "bytes"); nil when it would say nothing.
        // `funcs` is the function map of the sources, as for `byFunction`.
        methods.add_method("functionsFile", |_, this, (funcs, unit): (Option<Table>, Option<String>)| {
            if this.1.is_empty() && unit.is_none() {
                return Ok(None);
            }
            let m = this.function_map(funcs)?;
            let used: std::collections::HashSet<&str> = this.used_frames().into_iter().collect();
            let label = |f: &str| used.contains(f).then(|| m.function_of(f)).filter(|l| *l != f).map(str::to_string);
            Ok(Some(crate::profile::sidecar::write(&this.1, label, unit.as_deref())))
        });
        // The same profile with the functions a functions file recorded.
        methods.add_method("withFunctions", |_, this, text: String| {
            let ids = crate::profile::sidecar::read(&text).map_err(err)?;
            Ok(ProfileData(this.0.clone(), Arc::new(ids)))
        });
        // Samples by zone path, largest first (see `timeline`).
        methods.add_method("samplesByZone", |lua, this, ()| samples_by_zone_table(lua, &this.0));
        // Self samples by function, largest first (see `timeline`).
        methods.add_method("selfByFunction", |lua, this, funcs: Option<Table>| {
            let m = this.function_map(funcs)?;
            self_by_function_table(lua, &this.0, &m)
        });
    }
}

/// A profile's [`RenderMeta`] from a table `{ title, countName, inverted,
/// intervalMs, clock, startSec, durationSec, objects, inuseSpace,
/// inuseObjects }`, every field optional (the last three are profile
/// objects of an allocation session).
fn read_render_meta<'a>(
    t: Option<Table>,
    function_of: &'a dyn Fn(&str) -> Option<String>,
) -> mlua::Result<RenderMeta<'a>> {
    let mut meta = RenderMeta { function_of, ..RenderMeta::new() };
    let Some(t) = t else { return Ok(meta) };
    if let Some(s) = t.get::<Option<String>>("title")? {
        meta.title = s;
    }
    if let Some(s) = t.get::<Option<String>>("countName")? {
        meta.count_name = s;
    }
    meta.inverted = t.get::<Option<bool>>("inverted")?.unwrap_or(false);
    meta.interval_ms = t.get::<Option<f64>>("intervalMs")?;
    if let Some(c) = t.get::<Option<String>>("clock")? {
        meta.clock = c;
    }
    meta.start_sec = t.get::<Option<f64>>("startSec")?;
    meta.duration_sec = t.get::<Option<f64>>("durationSec")?;
    let key = |r: &crate::profile::NamedRow| crate::output::pprof::stack_key(&r.zones, &r.stack);
    if let Some(o) = t.get::<Option<mlua::UserDataRef<ProfileData>>>("objects")? {
        meta.objects.extend(o.0.named_rows().map(|r| (key(&r), r.counts)));
    }
    // An allocation profile's live bytes and objects (`inuse_*`).
    if let Some(space) = t.get::<Option<mlua::UserDataRef<ProfileData>>>("inuseSpace")? {
        let mut inuse = crate::output::pprof::InUse::default();
        inuse.space.extend(space.0.named_rows().map(|r| (key(&r), r.counts)));
        if let Some(o) = t.get::<Option<mlua::UserDataRef<ProfileData>>>("inuseObjects")? {
            inuse.objects.extend(o.0.named_rows().map(|r| (key(&r), r.counts)));
        }
        meta.inuse = Some(inuse);
    }
    Ok(meta)
}

/// `native.isProfile(value)`: whether `value` is a profile object, so the
/// Lua side tells its source arguments apart by type rather than by probing.
pub fn is_profile(_: &Lua, value: mlua::Value) -> mlua::Result<bool> {
    Ok(value.as_userdata().is_some_and(|u| u.is::<ProfileData>()))
}

/// `native.parseProfile(text)`: a ProfileData from collapsed text.
pub fn parse_profile(_: &Lua, text: mlua::LuaString) -> mlua::Result<ProfileData> {
    let text = text.to_string_lossy();
    collapsed::parse(&text).map(ProfileData::new).map_err(|e| err(e.to_string()))
}

/// Self samples by function: the leaf frame of every row named as the
/// by-function views name it, largest first (ties by name).
fn self_by_function(p: &Profile, funcs: &FunctionMap) -> Vec<(String, u64)> {
    rank_by_function(p.rows.iter().map(|row| {
        let name = match p.stack(row).last() {
            Some(&leaf) => funcs.function_of(p.name(leaf)),
            None => NO_STACK,
        };
        (name, row.total())
    }))
}

/// Samples by zone path (`/`-joined; the rows outside any zone under
/// "(no zone)"), largest first, as a Lua list of `{ name, samples }`.
fn samples_by_zone_table(lua: &Lua, p: &Profile) -> mlua::Result<Table> {
    let rows: Vec<(String, u64)> = p
        .named_rows()
        .map(|r| (if r.zones.is_empty() { crate::views::NO_ZONE.to_string() } else { r.zones.join("/") }, r.total()))
        .collect();
    ranked_table(lua, rank_by_function(rows.iter().map(|(z, n)| (z.as_str(), *n))))
}

/// `selfByFunction(funcs)` as a Lua list of `{ name, samples }`.
fn self_by_function_table(lua: &Lua, p: &Profile, m: &FunctionMap) -> mlua::Result<Table> {
    ranked_table(lua, self_by_function(p, m))
}

/// Functions ranked by samples as a Lua list of `{ name, samples }`.
pub(super) fn ranked_table(lua: &Lua, ranked: Vec<(String, u64)>) -> mlua::Result<Table> {
    let list = lua.create_table_with_capacity(ranked.len(), 0)?;
    for (i, (name, samples)) in ranked.into_iter().enumerate() {
        let r = lua.create_table_with_capacity(0, 2)?;
        r.set("name", name)?;
        r.set("samples", samples)?;
        list.raw_set(i + 1, r)?;
    }
    Ok(list)
}
