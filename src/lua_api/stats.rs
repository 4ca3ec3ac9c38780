//! What `stats()` reports of a session: the sampler's counters, the time
//! and CPU time it ran (the profiled thread's and the whole process's), the
//! tick source and its signal.

use mlua::{Lua, Table};

use super::NativeSession;

impl NativeSession {
    pub(super) fn stats_table(&self, lua: &Lua) -> mlua::Result<Table> {
        // Copy first: building the Lua table may run the GC (and so Lua code).
        let session = &self.session;
        let (st, stacks, overflow, mem) = session.sampler().with(|s| {
            (s.stats, s.table.len(), s.table.overflow_total(), s.table.memory_bytes() + s.identities.memory_bytes())
        });
        let t = lua.create_table()?;
        let wall = session.timing().wall_sec();
        let cpu = session.timing().cpu_sec();
        t.set("samples", st.samples)?;
        t.set("callbacks", st.callbacks)?;
        t.set("pausedSamples", st.paused)?;
        t.set("filteredSamples", st.filtered)?;
        t.set("recordedSamples", st.samples - st.paused - st.filtered)?;
        t.set("stacks", stacks)?;
        t.set("overflowSamples", overflow)?;
        t.set("memoryBytes", mem)?;
        self.timeline_stats(&t)?;
        t.set("durationSec", wall)?;
        if let Some(c) = cpu {
            t.set("cpuSec", c)?;
        }
        if let Some(p) = session.timing().process_cpu_sec() {
            t.set("processCpuSec", p)?;
        }
        let kind = session.ticks().kind();
        t.set("clock", kind.describe())?;
        t.set("signal", session.ticks().signal_name())?;
        if let Some(note) = &session.ticks().note {
            t.set("clockNote", note.as_str())?;
        }
        t.set("interruptsWaits", kind.interrupts_waits())?;
        if let Some(n) = session.blocked_ticks() {
            t.set("blockedSamples", n)?;
        }
        t.set("precision", session.precision().name())?;
        t.set("compiledSamples", st.compiled)?;
        // Every other sample was taken by LuaJIT's hook at its next safe point.
        t.set("hookSamples", st.samples - st.compiled)?;
        match session.compiled() {
            Ok(()) => {
                let m = lua.create_table()?;
                for (name, n) in session.compiled_misses() {
                    m.set(name, n)?;
                }
                t.set("compiledMisses", m)?;
                // How the frames of the samples read in traces were named.
                let f = lua.create_table()?;
                for (name, n) in session.compiled_frames() {
                    f.set(name, n)?;
                }
                t.set("compiledFrames", f)?;
                let v = lua.create_table()?;
                for (name, n) in session.state_misses() {
                    v.set(name, n)?;
                }
                t.set("stateMisses", v)?;
            }
            Err(why) => t.set("compiledNote", why)?,
        }
        t.set("interpSamples", st.interp)?;
        t.set("stateSamples", st.states)?;
        match session.interp_reads() {
            Ok([misses, hooked]) => {
                let m = lua.create_table()?;
                for (name, n) in misses {
                    m.set(name, n)?;
                }
                t.set("interpMisses", m)?;
                let h = lua.create_table()?;
                for (name, n) in hooked {
                    h.set(name, n)?;
                }
                t.set("hookTicks", h)?;
            }
            Err(why) => t.set("interpNote", why)?,
        }
        // Where ticks in traces went between two snapshots (see
        // `sys::fine_map`).
        match session.fine_map() {
            Ok(()) => {
                let [mapped, unmapped, placed, at_snapshot, no_map] = session.fine_map_counts();
                let m = lua.create_table()?;
                m.set("tracesMapped", mapped)?;
                m.set("tracesUnmapped", unmapped)?;
                m.set("placed", placed)?;
                m.set("atSnapshot", at_snapshot)?;
                m.set("noMap", no_map)?;
                t.set("traceMap", m)?;
            }
            Err(why) => t.set("traceMapNote", why)?,
        }
        match session.native_frames() {
            Ok(counts) => {
                let m = lua.create_table()?;
                for (name, n) in counts {
                    m.set(name, n)?;
                }
                t.set("nativeFrames", m)?;
            }
            Err(why) if why != "not asked for (nativeFrames)" => t.set("nativeFramesNote", why)?,
            Err(_) => {}
        }
        t.set("linesCorrected", self.state.call_sites.lines.len())?;
        t.set("cFunctionLeaves", st.c_leaves)?;
        if let Err(why) = session.running_c() {
            t.set("cFunctionLeavesNote", why)?;
        }
        t.set("hooksRearmed", session.hooks_rearmed())?;
        if let Err(why) = session.lost_hook_state() {
            t.set("hooksRearmedNote", why)?;
        }
        t.set("intervalMs", session.interval_ns() as f64 / 1e6)?;
        t.set("requestedRate", 1e9 / session.interval_ns() as f64)?;
        let basis = if kind.is_wall() { wall } else { cpu.unwrap_or(wall) };
        t.set("rate", if basis > 0.0 { st.samples as f64 / basis } else { 0.0 })?;
        t.set("running", self.running())?;
        if let Some(w) = session.warning() {
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
