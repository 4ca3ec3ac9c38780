//! The session's time axis on the Lua side: frame marks, the frames with
//! their samples, the profile of one frame, and the self samples of a
//! profile by function (what `SampleSession:hitches` ranks).

use mlua::{Lua, Table, UserDataMethods};

use super::profile_data::{ranked_table, read_funcmap, ProfileData};
use super::{runtime, NativeSession};
use crate::output::timed::{rank_by_function, TimedProfile};
use crate::profile::frames::FunctionMap;
use crate::record::timeline::FrameSpan;
use crate::session::state::frames_window;
use crate::session::timed::SessionView;
use crate::sys;

/// Milliseconds between two times of the monotonic clock.
fn ms_between(from_ns: u64, to_ns: u64) -> f64 {
    to_ns.saturating_sub(from_ns) as f64 / 1e6
}

impl NativeSession {
    /// The timeline's counters, added to `stats()`.
    pub(super) fn timeline_stats(&self, t: &Table) -> mlua::Result<()> {
        let (kept, dropped, fast, bytes) = self.session.sampler().with(|s| {
            let tl = &s.timeline;
            (tl.kept_samples, tl.dropped_samples, tl.fast_frame_samples, tl.memory_bytes())
        });
        t.set("timelineSamples", kept)?;
        t.set("timelineDroppedSamples", dropped)?;
        t.set("timelineFastFrameSamples", fast)?;
        t.set("timelineBytes", bytes)?;
        t.set("frames", self.state.frame_marks.len())?;
        t.set("droppedFrames", self.state.frame_marks.dropped)?;
        t.set("timelineEvents", self.state.timeline_events.list.len())?;
        t.set("droppedTimelineEvents", self.state.timeline_events.dropped)?;
        Ok(())
    }

    /// `framesWindow(last, slowest)`: the last `last` kept frames in order,
    /// the `slowest` slowest (the longest first, the earlier of two equal),
    /// each as `frames()` gives it, and how many frames are kept: what a
    /// view of a running session needs, without a table per frame.
    fn frames_window(&self, lua: &Lua, last: usize, slowest: usize) -> mlua::Result<(Table, Table, usize)> {
        let spans = self.state.frame_spans(&self.session);
        let start = self.state.frame_marks.start_ns;
        let record = |f: &FrameSpan| frame_record(lua, start, f);
        let (recent_spans, slow_spans) = frames_window(&spans, last, slowest);
        let recent = lua.create_table_with_capacity(recent_spans.len(), 0)?;
        for (i, f) in recent_spans.iter().enumerate() {
            recent.raw_set(i + 1, record(f)?)?;
        }
        let slow = lua.create_table_with_capacity(slow_spans.len(), 0)?;
        for (i, f) in slow_spans.into_iter().enumerate() {
            slow.raw_set(i + 1, record(f)?)?;
        }
        Ok((recent, slow, spans.len()))
    }

    /// `frames()`: `{ index, startMs, ms, samples, gcSamples }` per kept
    /// frame, `startMs` from the session's start.
    fn frames_table(&self, lua: &Lua, alloc: Option<&NativeSession>) -> mlua::Result<Table> {
        let spans = self.state.frame_spans(&self.session);
        let start = self.state.frame_marks.start_ns;
        let allocated = alloc.map(|a| {
            let windows: Vec<(u64, u64)> = spans.iter().map(|f| (f.start_ns, f.end_ns)).collect();
            SessionView::allocated_in(&a.view().allocation_points().0, &windows)
        });
        let list = lua.create_table_with_capacity(spans.len(), 0)?;
        for (i, f) in spans.iter().enumerate() {
            let r = frame_record(lua, start, f)?;
            if let Some(a) = &allocated {
                r.set("allocatedBytes", a[i])?;
            }
            list.raw_set(i + 1, r)?;
        }
        Ok(list)
    }
}

/// A frame as `frames()` gives it: `{ index, startMs, ms, samples,
/// gcSamples, cpuMs }`, `startMs` from `start` (the session's start),
/// `cpuMs` where the frame's CPU time is known.
fn frame_record(lua: &Lua, start: u64, f: &FrameSpan) -> mlua::Result<Table> {
    let r = lua.create_table_with_capacity(0, 6)?;
    r.set("index", f.index)?;
    r.set("startMs", ms_between(start, f.start_ns))?;
    r.set("ms", f.ns() as f64 / 1e6)?;
    r.set("samples", f.samples)?;
    r.set("gcSamples", f.gc_samples)?;
    if let Some(cpu) = f.cpu_ns {
        r.set("cpuMs", cpu as f64 / 1e6)?;
    }
    Ok(r)
}

impl NativeSession {
    /// Names the function of each stack of `tp`'s leaf, and of each of its
    /// Lua frames, as the by-function views of this session name them: `funcs` (the sources' functions, as
    /// `selfByFunction` takes them; nil leaves frames as lines) checked
    /// against the functions recorded while sampling, and against the
    /// timeline's frames.
    fn name_stack_functions(&self, tp: &mut TimedProfile, funcs: Option<Table>) -> mlua::Result<()> {
        let mut m = FunctionMap::default();
        if funcs.is_some() {
            m = read_funcmap(funcs)?;
            m.apply_identities(&self.frame_identities());
            m.check_sources(tp.stacks.iter().flat_map(|s| s.frames.iter().map(String::as_str)));
        }
        tp.name_functions(&m);
        Ok(())
    }
}

/// The session methods of the time axis.
pub(super) fn add_methods<M: UserDataMethods<NativeSession>>(methods: &mut M) {
    // `ownWork(seconds)`: the profiler's own work took that long in the
    // frame that runs (the session was paused meanwhile): left out of it.
    methods.add_method_mut("ownWork", |_, this, seconds: f64| {
        this.state.own_work(seconds);
        Ok(())
    });
    methods.add_method_mut("frame", |_, this, ()| {
        this.state.mark_frame(&this.session);
        Ok(())
    });
    // `frames(alloc)`: with the handle of an allocation session attached
    // to this one, each frame's allocated bytes too.
    methods.add_method("frames", |lua, this, alloc: Option<mlua::AnyUserData>| {
        let alloc = alloc.map(|a| a.borrow::<NativeSession>()).transpose()?;
        this.frames_table(lua, alloc.as_deref())
    });
    methods.add_method("framesWindow", |lua, this, (last, slowest): (usize, usize)| {
        this.frames_window(lua, last, slowest)
    });
    // `events()`: `{ tMs, name, details = { ... } }` per event, in order.
    methods.add_method("events", |lua, this, ()| {
        let list = lua.create_table_with_capacity(this.state.timeline_events.list.len(), 0)?;
        for (i, e) in this.state.timeline_events.list.iter().enumerate() {
            let r = lua.create_table_with_capacity(0, 3)?;
            r.set("tMs", ms_between(this.state.frame_marks.start_ns, e.t_ns))?;
            r.set("name", e.name.as_str())?;
            let details = lua.create_table_with_capacity(0, e.args.len())?;
            for (k, v) in &e.args {
                details.set(k.as_str(), v.as_str())?;
            }
            r.set("details", details)?;
            list.raw_set(i + 1, r)?;
        }
        Ok(list)
    });
    // `event(name, details)`: an event at this moment (a trace abort), with
    // its details (string keys and values; others are skipped).
    methods.add_method_mut("event", |_, this, (name, details): (String, Option<Table>)| {
        if !this.running() {
            return Ok(());
        }
        let mut args = Vec::new();
        if let Some(t) = details {
            for (k, v) in t.pairs::<mlua::Value, mlua::Value>().flatten() {
                if let (mlua::Value::String(k), mlua::Value::String(v)) = (k, v) {
                    args.push((k.to_string_lossy(), v.to_string_lossy()));
                }
            }
        }
        this.state.add_event(sys::monotonic_ns(), name, args);
        Ok(())
    });
    // `timeline(format, name)`: the timeline rendered in a timeline
    // format of the registry that this module writes.
    // With the handle of an allocation session attached to this one, GC
    // runs name what allocated before them, and frames their bytes.
    methods.add_method_mut(
        "timeline",
        |lua,
         this,
         (format, name, alloc, funcs): (String, Option<String>, Option<mlua::AnyUserData>, Option<Table>)|
         -> mlua::Result<mlua::LuaString> {
            this.prepare_view(lua);
            let name = name.unwrap_or_else(|| "tecs-profile".into());
            let alloc = alloc.map(|a| a.borrow::<NativeSession>()).transpose()?;
            let writes_timeline = |d: &&crate::output::Declaration| {
                d.timeline && matches!(d.writer, crate::output::FormatWriter::Native(_))
            };
            let Some(d) = crate::output::REGISTRY.iter().filter(writes_timeline).find(|d| d.name == format) else {
                let names: Vec<String> =
                    crate::output::REGISTRY.iter().filter(writes_timeline).map(|d| format!("{:?}", d.name)).collect();
                return Err(runtime(format!(
                    "bad argument #1 'format' ({} expected, got {:?})",
                    names.join(" or "),
                    format
                )));
            };
            let mut tp = this.view().timed_profile(name, alloc.as_deref().map(|a| a.view()).as_ref());
            // The frames are named by function as `hitches` and the
            // by-function views name them (`name_stack_functions`).
            if funcs.is_some() {
                this.name_stack_functions(&mut tp, funcs)?;
            }
            let bytes = d.format.write(crate::output::Source::Timeline(&tp));
            lua.create_string(bytes.map_err(runtime)?)
        },
    );
    // `functionsInFrames(indices, funcs)`: `{ [index] = { { name, samples
    // }, ... } }`, what ran in each of these frames by function, ranked as
    // a timeline file's frames are read back (`readChromeTrace`): the
    // stacks of the timeline, their leaves named by `funcs` as the
    // `timeline` writer names them.
    methods.add_method_mut("functionsInFrames", |lua, this, (indices, funcs): (Vec<u64>, Option<Table>)| {
        this.prepare_view(lua);
        let mut tp = this.view().timed_profile(String::new(), None);
        this.name_stack_functions(&mut tp, funcs)?;
        let by_frame = tp.frame_stack_samples();
        let out = lua.create_table()?;
        for (f, stacks) in tp.frames.iter().zip(&by_frame) {
            if !indices.contains(&f.index) {
                continue;
            }
            let ranked = rank_by_function(stacks.iter().map(|&(s, n)| (tp.stack_functions[s as usize].as_str(), n)));
            out.raw_set(f.index, ranked_table(lua, ranked)?)?;
        }
        Ok(out)
    });
    methods.add_method_mut("frameProfile", |lua, this, index: u64| {
        this.prepare_view(lua);
        let (from, to) = this
            .state
            .frame_marks
            .span(index, sys::monotonic_ns())
            .ok_or_else(|| runtime(format!("no frame {} (frames are dropped past the oldest kept)", index)))?;
        let ids = this.frame_identities();
        Ok(ProfileData(this.view().window_profile(from, to), std::sync::Arc::new(ids)))
    });
}

/// `native.raw.readChromeTrace(text)`: a Chrome trace event file a
/// session wrote, read back: `{ name, intervalMs, ranges, frames = { {
/// index, startMs, ms, samples, gcSamples, collapsed }, ... } }`, where
/// `collapsed` is what ran in the frame: collapsed stacks of its samples
/// (see `output::chrome_trace_read`).
pub(super) fn read_chrome_trace(lua: &Lua, text: mlua::LuaString) -> mlua::Result<Table> {
    #[cfg(feature = "speedscope")]
    {
        let text = text.to_str().map_err(|_| runtime("not Chrome trace event JSON (not UTF-8 text)"))?;
        let tl = crate::output::chrome_trace_read::read(&text).map_err(runtime)?;
        let t = lua.create_table_with_capacity(0, 4)?;
        t.set("name", tl.name)?;
        t.set("intervalMs", tl.interval_ms)?;
        t.set("ranges", tl.ranges)?;
        let list = lua.create_table_with_capacity(tl.frames.len(), 0)?;
        for (i, f) in tl.frames.into_iter().enumerate() {
            let r = lua.create_table_with_capacity(0, 6)?;
            r.set("index", f.index)?;
            r.set("startMs", f.start_ms)?;
            r.set("ms", f.ms)?;
            r.set("samples", f.samples)?;
            r.set("gcSamples", f.gc_samples)?;
            r.set("cpuMs", f.cpu_ms)?;
            let collapsed: String =
                f.stacks.iter().filter(|(s, _)| !s.is_empty()).map(|(s, n)| format!("{} {}\n", s, n)).collect();
            r.set("collapsed", collapsed)?;
            if let Some(ranked) = f.functions {
                r.set("functions", ranked_table(lua, ranked)?)?;
            }
            list.raw_set(i + 1, r)?;
        }
        t.set("frames", list)?;
        Ok(t)
    }
    #[cfg(not(feature = "speedscope"))]
    {
        let _ = (lua, text);
        Err(runtime("reading Chrome trace events needs a build with the speedscope feature"))
    }
}

/// `native.hitchesText(hitches, frames)`: the hitches (as
/// `SampleSession:hitches` gives them) as text ([`crate::views::timeline`]).
pub(super) fn hitches_text(_: &Lua, (hitches, frames): (Table, u64)) -> mlua::Result<String> {
    let mut list = Vec::new();
    for h in hitches.sequence_values::<Table>() {
        let h = h?;
        let mut top = Vec::new();
        if let Some(t) = h.get::<Option<Table>>("top")? {
            for f in t.sequence_values::<Table>() {
                let f = f?;
                top.push((f.get::<String>("name")?, f.get::<f64>("share")?));
            }
        }
        let mut waits = Vec::new();
        if let Some(t) = h.get::<Option<Table>>("waits")? {
            for w in t.sequence_values::<Table>() {
                let w = w?;
                waits.push((w.get::<String>("kind")?, w.get::<f64>("share")?));
            }
        }
        list.push(crate::views::timeline::Hitch {
            index: h.get::<f64>("index")? as u64,
            ms: h.get("ms")?,
            samples: h.get::<f64>("samples")? as u64,
            gc_samples: h.get::<Option<f64>>("gcSamples")?.unwrap_or(0.0) as u64,
            allocated_bytes: h.get("allocatedBytes")?,
            cpu_ms: h.get("cpuMs")?,
            top,
            waits,
        });
    }
    Ok(crate::views::timeline::hitches_text(&list, frames))
}

/// `native.framesText(frames)`: a timeline's frames (as
/// `SampleSession:frames` gives them) summed up as text.
pub(super) fn frames_text(_: &Lua, frames: Table) -> mlua::Result<String> {
    let mut list = Vec::new();
    for f in frames.sequence_values::<Table>() {
        let f = f?;
        list.push(crate::views::timeline::FrameTime {
            index: f.get::<f64>("index")? as u64,
            ms: f.get("ms")?,
            samples: f.get::<f64>("samples")? as u64,
            gc_samples: f.get::<Option<f64>>("gcSamples")?.unwrap_or(0.0) as u64,
        });
    }
    Ok(crate::views::timeline::frames_text(&list))
}
