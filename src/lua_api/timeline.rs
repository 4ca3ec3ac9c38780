//! The session's time axis on the Lua side: frame marks, the frames with
//! their samples, the profile of one frame, and the self samples of a
//! profile by function (what `SampleSession:hitches` ranks).

use mlua::{Lua, Table, UserDataMethods};

use super::views::ProfileData;
use super::{runtime, NativeSession};
use crate::profile::frames::FunctionMap;
use crate::profile::{FrameNamer, Profile};
use crate::record::stack_table::StackTable;
use crate::record::timeline::OVERFLOW_ENTRY;
use crate::sys;

/// Milliseconds between two times of the monotonic clock.
fn ms_between(from_ns: u64, to_ns: u64) -> f64 {
    to_ns.saturating_sub(from_ns) as f64 / 1e6
}

impl NativeSession {
    /// The time line's counters, added to `stats()`.
    pub(super) fn timeline_stats(&self, t: &Table) -> mlua::Result<()> {
        let (kept, dropped, bytes) =
            self.sampler.with(|s| (s.timeline.kept_samples, s.timeline.dropped_samples, s.timeline.memory_bytes()));
        t.set("timelineSamples", kept)?;
        t.set("timelineDroppedSamples", dropped)?;
        t.set("timelineBytes", bytes)?;
        t.set("frames", self.frame_marks.len())?;
        t.set("droppedFrames", self.frame_marks.dropped)?;
        Ok(())
    }

    /// The profile of the samples the time line holds in `[from_ns, to_ns)`.
    fn window_profile(&self, from_ns: u64, to_ns: u64) -> Profile {
        let table = self.sampler.with(|s| {
            // No entry bound: every key already fit the session's table.
            let mut out = StackTable::new(u32::MAX as usize);
            for ts in s.timeline.window(from_ns, to_ns) {
                let (state, count) = (ts.state(), ts.count());
                if ts.entry == OVERFLOW_ENTRY || ts.entry as usize >= s.table.len() {
                    out.overflow[state] += count as u64;
                } else {
                    out.add(s.table.get(ts.entry as usize).0, state, count);
                }
            }
            out
        });
        let table =
            if self.call_site_lines.is_empty() { table } else { table.with_leaves_replaced(&self.call_site_lines) };
        let mut namer = FrameNamer::new(&self.ffnames, self.resolve_c).with_c_paths(&self.c_paths);
        Profile::from_table(&table, &mut namer)
    }

    /// `frames()`: `{ index, startMs, ms, samples, gcSamples }` per kept
    /// frame, `startMs` from the session's start.
    fn frames_table(&self, lua: &Lua) -> mlua::Result<Table> {
        let spans = self.sampler.with(|s| self.frame_marks.spans(&s.timeline, sys::monotonic_ns()));
        let start = self.frame_marks.start_ns;
        let list = lua.create_table_with_capacity(spans.len(), 0)?;
        for (i, f) in spans.iter().enumerate() {
            let r = lua.create_table_with_capacity(0, 5)?;
            r.set("index", f.index)?;
            r.set("startMs", ms_between(start, f.start_ns))?;
            r.set("ms", ms_between(f.start_ns, f.end_ns))?;
            r.set("samples", f.samples)?;
            r.set("gcSamples", f.gc_samples)?;
            list.raw_set(i + 1, r)?;
        }
        Ok(list)
    }
}

/// The session methods of the time axis.
pub(super) fn add_methods<M: UserDataMethods<NativeSession>>(methods: &mut M) {
    methods.add_method_mut("frame", |_, this, ()| {
        this.frame_marks.mark(sys::monotonic_ns());
        Ok(())
    });
    methods.add_method("frames", |lua, this, ()| this.frames_table(lua));
    methods.add_method_mut("frameProfile", |lua, this, index: u64| {
        this.resolve_call_sites(lua);
        let (from, to) = this
            .frame_marks
            .span(index, sys::monotonic_ns())
            .ok_or_else(|| runtime(format!("no frame {} (frames are dropped past the oldest kept)", index)))?;
        let ids = this.frame_identities();
        Ok(ProfileData(this.window_profile(from, to), std::sync::Arc::new(ids)))
    });
}

/// Self samples by function: the leaf frame of every row named as the
/// by-function views name it, largest first (ties by name).
pub(super) fn self_by_function(p: &Profile, funcs: &FunctionMap) -> Vec<(String, u64)> {
    let mut by_name: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for row in &p.rows {
        let name = match p.stack(row).last() {
            Some(&leaf) => funcs.function_of(p.name(leaf)),
            None => "[no stack]",
        };
        *by_name.entry(name).or_default() += row.total();
    }
    let mut out: Vec<(String, u64)> = by_name.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// `selfByFunction(funcs)` as a Lua list of `{ name, samples }`.
pub(super) fn self_by_function_table(lua: &Lua, p: &Profile, m: &FunctionMap) -> mlua::Result<Table> {
    let ranked = self_by_function(p, m);
    let list = lua.create_table_with_capacity(ranked.len(), 0)?;
    for (i, (name, samples)) in ranked.into_iter().enumerate() {
        let r = lua.create_table_with_capacity(0, 2)?;
        r.set("name", name)?;
        r.set("samples", samples)?;
        list.raw_set(i + 1, r)?;
    }
    Ok(list)
}
