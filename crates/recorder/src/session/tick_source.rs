//! Where sampling ticks come from.
//!
//! LuaJIT's own timer is `setitimer(ITIMER_PROF)`: process CPU time, fired on
//! the kernel's scheduler tick (250 Hz on many kernels, so `intervalMs = 1`
//! yields about 250 samples per second). Where it can, a session replaces it
//! with a per-thread source that delivers its signal on the profiled thread's
//! own CPU while that thread runs, so that a sample lands where the thread
//! was (not at its next system call) and a sleeping thread is neither
//! sampled nor woken:
//!
//! * `TaskClock`: the kernel's task-clock perf event (high resolution, user
//!   and kernel time of the thread), which sends SIGTRAP as the thread
//!   returns to user mode, so it never cuts a system call short. Needs Linux
//!   5.13 and perf events with kernel time (root, CAP_PERFMON, or
//!   `kernel.perf_event_paranoid` <= 1).
//! * `ThreadCpuTimer`: a POSIX timer on the thread's CPU clock; fired on the
//!   scheduler tick, so its rate is capped by the kernel's tick rate.
//! * `WallTaskClock` (`clock = "wall"`): the task-clock event for time on
//!   the CPU, plus the context-switch event, whose trap arrives when the
//!   thread returns to user mode after being switched out: the time it was
//!   off the CPU is then charged, as ticks, where it resumes (where it
//!   blocked). Nothing interrupts the blocked call. Needs the same perf
//!   permissions as `TaskClock`.
//! * `WallTimer` (`clock = "wall"` without perf events): a POSIX timer on
//!   the monotonic clock. It also fires while the thread is blocked, and a
//!   signal ends a blocking call early (`EINTR`): see docs/sampling.md, "Wall clock".
//! * `LuaJit`: LuaJIT's own ITIMER_PROF, when none of the above can run
//!   safely (no free real-time signal, or LuaJIT's profiler state could not
//!   be located).
//!
//! [`start`] is the one ladder down these sources, with the reason for each
//! step down. The POSIX timers send a real-time signal of ours. Both
//! handlers (in `crate::sys::posix`) pass the tick to LuaJIT only while
//! LuaJIT's profiler is still ours. No thread of ours ever exists.

use super::platform::{self, SourceHandle};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockKind {
    Cpu,
    Wall,
}

impl ClockKind {
    pub fn parse(s: &str) -> Option<ClockKind> {
        match s {
            "cpu" => Some(ClockKind::Cpu),
            "wall" => Some(ClockKind::Wall),
            _ => None,
        }
    }
}

/// The per-thread sources a clock tries, best first; LuaJIT's own timer is
/// the last resort of both.
pub fn preference(clock: ClockKind) -> [TickKind; 2] {
    match clock {
        ClockKind::Cpu => [TickKind::TaskClock, TickKind::ThreadCpuTimer],
        ClockKind::Wall => [TickKind::WallTaskClock, TickKind::WallTimer],
    }
}

/// Why the second source of [`preference`] runs instead of the first
/// (`stats().clockNote`), given the system's reason.
pub fn fallback_note(clock: ClockKind, reason: &str) -> String {
    match clock {
        ClockKind::Cpu => format!(
            "the task-clock perf event is not available ({}), so the rate is capped by the kernel's tick",
            reason
        ),
        ClockKind::Wall => format!(
            "perf events are not available ({}): a wall-clock timer is used, and its signals end blocking \
             calls early (EINTR)",
            reason
        ),
    }
}

/// Which source a session's ticks come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TickKind {
    TaskClock,
    WallTaskClock,
    ThreadCpuTimer,
    WallTimer,
    LuaJit,
}

impl TickKind {
    /// The name `stats().clock` reports.
    pub fn describe(self) -> &'static str {
        match self {
            TickKind::TaskClock => "thread-cpu",
            TickKind::WallTaskClock => "wall",
            TickKind::ThreadCpuTimer => "thread-cpu-tick",
            TickKind::WallTimer => "wall-timer",
            TickKind::LuaJit => "process-cpu-itimer",
        }
    }

    /// Whether the source measures real time (blocked time included).
    pub fn is_wall(self) -> bool {
        matches!(self, TickKind::WallTimer | TickKind::WallTaskClock)
    }

    /// Whether its signals end blocking calls early (`EINTR`).
    pub fn interrupts_waits(self) -> bool {
        self == TickKind::WallTimer
    }
}

/// A running tick source: one of ours, or LuaJIT's own timer.
pub struct TickSource {
    kind: TickKind,
    handle: Option<SourceHandle>,
    signal: i32,
    /// Why a better source was not used, when one was not.
    pub note: Option<String>,
}

impl TickSource {
    /// LuaJIT's own timer (nothing of ours to run or stop).
    pub fn luajit(note: Option<String>) -> TickSource {
        TickSource { kind: TickKind::LuaJit, handle: None, signal: 0, note }
    }

    pub fn kind(&self) -> TickKind {
        self.kind
    }

    /// The signal the ticks arrive with.
    pub fn signal(&self) -> i32 {
        match self.kind {
            TickKind::TaskClock | TickKind::WallTaskClock => platform::TRAP_SIGNAL,
            TickKind::LuaJit => platform::LUAJIT_TIMER_SIGNAL,
            _ => self.signal,
        }
    }

    /// The name `stats().signal` reports: `SIGRTMIN+n` for a real-time
    /// tick signal, `SIGTRAP` for perf events, `SIGPROF` for LuaJIT's timer.
    pub fn signal_name(&self) -> String {
        let sig = self.signal();
        if let Some((lo, hi)) = platform::realtime_signals() {
            if (lo..=hi).contains(&sig) {
                return format!("SIGRTMIN+{}", sig - lo);
            }
        }
        if cfg!(windows) {
            return "none (LuaJIT's timer thread)".into();
        }
        if sig == platform::TRAP_SIGNAL {
            "SIGTRAP".into()
        } else {
            "SIGPROF".into()
        }
    }

    /// Starts a per-thread source for the calling thread that sends `signal`
    /// every `interval_ns`: the first two rungs of the ladder (see
    /// [`start`]). Returns why when neither can run.
    fn start_per_thread(clock: ClockKind, interval_ns: u64, signal: i32) -> Result<TickSource, String> {
        let [best, fallback] = preference(clock);
        let wall = clock == ClockKind::Wall;
        let source = |kind, handle, note| TickSource { kind, handle: Some(handle), signal, note };
        match platform::open_perf(wall, interval_ns) {
            Ok(h) => Ok(source(best, h, None)),
            Err(errno) => {
                let why = fallback_note(clock, &std::io::Error::from_raw_os_error(errno).to_string());
                platform::open_timer(wall, signal, interval_ns).map(|h| source(fallback, h, Some(why))).ok_or_else(
                    || match clock {
                        ClockKind::Wall => "could not create a wall-clock timer".to_string(),
                        ClockKind::Cpu => "could not create a thread CPU-time timer".to_string(),
                    },
                )
            }
        }
    }

    /// Stops the source: no tick is generated afterwards (a tick already
    /// queued is ignored by the disarmed handler).
    pub fn stop(&mut self) {
        if let Some(h) = self.handle.take() {
            platform::close_source(h);
        }
    }
}

impl Drop for TickSource {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Why LuaJIT's own timer runs when the tick handler has no free signal.
pub(super) const NO_FREE_SIGNAL: &str = "no free real-time signal for the tick source";

/// The one fallback ladder of a session that asked for ticks of its own,
/// LuaJIT's profiler started with its quiet timer: a perf event, else a
/// POSIX timer (the reason in [`fallback_note`]), else LuaJIT's own timer
/// at the session's interval with the reason none of ours could run: no
/// free signal, `arm` failed (it arms the tick handler for `signal`), or
/// neither source could be created. Returns the source, and what `arm`
/// gave when a source of ours runs (dropped, so disarmed, otherwise).
pub(super) fn start<A>(
    clock: ClockKind,
    interval_ns: u64,
    arm: impl FnOnce(i32) -> Result<A, &'static str>,
) -> (TickSource, Option<A>) {
    let luajit_timer = |why: String| {
        platform::arm_luajit_timer(super::interval_ms(interval_ns));
        TickSource::luajit(Some(why))
    };
    let Some(signal) = platform::tick_signal() else {
        return (luajit_timer(NO_FREE_SIGNAL.into()), None);
    };
    let armed = match arm(signal) {
        Ok(a) => a,
        Err(why) => return (luajit_timer(why.into()), None),
    };
    match TickSource::start_per_thread(clock, interval_ns, signal) {
        Ok(t) => {
            platform::disarm_luajit_timer();
            (t, Some(armed))
        }
        Err(why) => (luajit_timer(why), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_clock_prefers_perf_events_and_keeps_its_kind_of_time() {
        for clock in [ClockKind::Cpu, ClockKind::Wall] {
            let [best, fallback] = preference(clock);
            assert!(matches!(best, TickKind::TaskClock | TickKind::WallTaskClock));
            assert_eq!(best.is_wall(), clock == ClockKind::Wall);
            assert_eq!(fallback.is_wall(), clock == ClockKind::Wall);
            assert_ne!(best, fallback);
            assert!(!best.interrupts_waits(), "perf traps never cut a system call short");
            assert!(fallback_note(clock, "EACCES").contains("(EACCES)"));
        }
        assert!(preference(ClockKind::Wall)[1].interrupts_waits());
        assert!(!preference(ClockKind::Cpu)[1].interrupts_waits());
    }

    #[test]
    fn clock_names_and_descriptions() {
        assert_eq!(ClockKind::parse("cpu"), Some(ClockKind::Cpu));
        assert_eq!(ClockKind::parse("wall"), Some(ClockKind::Wall));
        assert_eq!(ClockKind::parse("CPU"), None);
        let kinds = [
            TickKind::TaskClock,
            TickKind::WallTaskClock,
            TickKind::ThreadCpuTimer,
            TickKind::WallTimer,
            TickKind::LuaJit,
        ];
        let mut names: Vec<&str> = kinds.iter().map(|k| k.describe()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), kinds.len(), "stats().clock tells every source apart");
    }

    #[test]
    fn luajit_timer_has_nothing_to_stop() {
        let mut t = TickSource::luajit(Some("why".into()));
        assert_eq!(t.kind(), TickKind::LuaJit);
        assert_eq!(t.signal(), libc::SIGPROF);
        t.stop();
        t.stop();
        assert_eq!(t.note.as_deref(), Some("why"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_started_source_is_one_the_clock_prefers_and_stops_twice() {
        // Without a free real-time signal of the tick handler, use one no
        // handler waits for: the source is created and stopped, never fired
        // (an interval of one minute). The CPU clock only: a wall source
        // resets the blocked-time accounting other tests' sessions read.
        let sig = libc::SIGRTMAX();
        for clock in [ClockKind::Cpu] {
            match TickSource::start_per_thread(clock, 60_000_000_000, sig) {
                Ok(mut t) => {
                    assert!(preference(clock).contains(&t.kind()), "{:?} ran {:?}", clock, t.kind());
                    t.stop();
                    t.stop();
                }
                Err(why) => assert!(why.starts_with("could not create"), "{}", why),
            }
        }
    }
}
