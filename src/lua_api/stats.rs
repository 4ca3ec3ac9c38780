//! What `stats()` reports of a session: the sampler's counters, the time
//! and CPU time it ran (the profiled thread's and the whole process's), the
//! tick source and its signal.

use std::time::Instant;

use mlua::{Lua, Table};

use super::NativeSession;
#[cfg(target_os = "linux")]
use crate::record::tick_source::TickKind;
#[cfg(target_os = "linux")]
use crate::sys;

/// When a session ran, in wall time and in CPU time.
pub(super) struct Timing {
    started: Instant,
    ended: Option<Instant>,
    cpu_clock: Option<libc::clockid_t>,
    cpu_start: u64,
    cpu_end: Option<u64>,
    /// The whole process's CPU time (every thread), beside the profiled
    /// thread's: a game whose render threads do the work shows it here.
    process_start: Option<u64>,
    process_end: Option<u64>,
}

impl Timing {
    pub(super) fn start() -> Timing {
        #[cfg(target_os = "linux")]
        let cpu_clock = sys::posix::thread_cpu_clock();
        #[cfg(not(target_os = "linux"))]
        let cpu_clock = None;
        let cpu_start = cpu_clock.and_then(cpu_now).unwrap_or(0);
        let process_start = cpu_now(libc::CLOCK_PROCESS_CPUTIME_ID);
        Timing {
            started: Instant::now(),
            ended: None,
            cpu_clock,
            cpu_start,
            cpu_end: None,
            process_start,
            process_end: None,
        }
    }

    pub(super) fn finish(&mut self) {
        self.ended = Some(Instant::now());
        self.cpu_end = self.cpu_clock.and_then(cpu_now);
        self.process_end = cpu_now(libc::CLOCK_PROCESS_CPUTIME_ID);
    }

    pub(super) fn process_cpu_sec(&self) -> Option<f64> {
        let start = self.process_start?;
        let end = self.process_end.or_else(|| cpu_now(libc::CLOCK_PROCESS_CPUTIME_ID))?;
        Some(end.saturating_sub(start) as f64 / 1e9)
    }

    pub(super) fn wall_sec(&self) -> f64 {
        self.ended.unwrap_or_else(Instant::now).duration_since(self.started).as_secs_f64()
    }

    pub(super) fn cpu_sec(&self) -> Option<f64> {
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

impl NativeSession {
    pub(super) fn stats_table(&self, lua: &Lua) -> mlua::Result<Table> {
        // Copy first: building the Lua table may run the GC (and so Lua code).
        let (st, stacks, overflow, mem) = self.sampler.with(|s| {
            (s.stats, s.table.len(), s.table.overflow_total(), s.table.memory_bytes() + s.identities.memory_bytes())
        });
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
        self.timeline_stats(&t)?;
        t.set("durationSec", wall)?;
        if let Some(c) = cpu {
            t.set("cpuSec", c)?;
        }
        if let Some(p) = self.timing.process_cpu_sec() {
            t.set("processCpuSec", p)?;
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
        t.set("precision", self.precision.name())?;
        t.set("compiledSamples", st.compiled)?;
        // Every other sample was taken by LuaJIT's hook at its next safe point.
        t.set("hookSamples", st.samples - st.compiled)?;
        match self.compiled {
            Ok(()) => {
                #[cfg(target_os = "linux")]
                {
                    let (_, misses) = sys::posix::compiled::counts();
                    let m = lua.create_table()?;
                    for (name, n) in sys::posix::compiled::MISS_NAMES.iter().zip(misses) {
                        m.set(*name, n)?;
                    }
                    t.set("compiledMisses", m)?;
                }
            }
            Err(why) => t.set("compiledNote", why)?,
        }
        // Where ticks in traces went between two snapshots (see
        // `record::fine_map`).
        match self.fine_map {
            #[cfg(target_os = "linux")]
            Ok(()) => {
                let [mapped, unmapped, placed, at_snapshot, no_map] = sys::posix::compiled::map_counts();
                let m = lua.create_table()?;
                m.set("tracesMapped", mapped)?;
                m.set("tracesUnmapped", unmapped)?;
                m.set("placed", placed)?;
                m.set("atSnapshot", at_snapshot)?;
                m.set("noMap", no_map)?;
                t.set("traceMap", m)?;
            }
            #[cfg(not(target_os = "linux"))]
            Ok(()) => {}
            Err(why) => t.set("traceMapNote", why)?,
        }
        t.set("linesCorrected", self.call_site_lines.len())?;
        t.set("cFunctionLeaves", st.c_leaves)?;
        if let Err(why) = self.running_c {
            t.set("cFunctionLeavesNote", why)?;
        }
        t.set("hooksRearmed", self.hooks_rearmed())?;
        if let Err(why) = self.lost_hook_state() {
            t.set("hooksRearmedNote", why)?;
        }
        t.set("intervalMs", self.interval_ns as f64 / 1e6)?;
        t.set("requestedRate", 1e9 / self.interval_ns as f64)?;
        let basis = if kind.is_wall() { wall } else { cpu.unwrap_or(wall) };
        t.set("rate", if basis > 0.0 { st.samples as f64 / basis } else { 0.0 })?;
        t.set("running", self.running())?;
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
