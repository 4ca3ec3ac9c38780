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
//! The POSIX timers send a real-time signal of ours. Both handlers (in
//! [`crate::sys::posix`]) pass the tick to LuaJIT only while LuaJIT's
//! profiler is still ours. No thread of ours ever exists.

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

/// A running per-thread tick source.
pub struct TickSource {
    kind: TickKind,
    handle: Handle,
    signal: i32,
    /// Why a better source was not used, when one was not.
    pub note: Option<String>,
}

enum Handle {
    None,
    #[cfg(target_os = "linux")]
    Fd(std::ffi::c_int),
    #[cfg(target_os = "linux")]
    Fds(std::ffi::c_int, std::ffi::c_int),
    #[cfg(target_os = "linux")]
    Timer(usize),
}

impl TickSource {
    /// LuaJIT's own timer (nothing of ours to run or stop).
    pub fn luajit(note: Option<String>) -> TickSource {
        TickSource { kind: TickKind::LuaJit, handle: Handle::None, signal: 0, note }
    }

    pub fn kind(&self) -> TickKind {
        self.kind
    }

    /// The signal the ticks arrive with.
    pub fn signal(&self) -> i32 {
        match self.kind {
            TickKind::TaskClock | TickKind::WallTaskClock => libc::SIGTRAP,
            TickKind::LuaJit => libc::SIGPROF,
            _ => self.signal,
        }
    }

    /// Starts a per-thread source for the calling thread that sends `signal`
    /// every `interval_ns`, trying the sources of [`preference`] in order.
    /// Returns why when none of them can run.
    #[cfg(target_os = "linux")]
    pub fn start(clock: ClockKind, interval_ns: u64, signal: i32) -> Result<TickSource, String> {
        use crate::sys::posix;
        let source = |kind, handle, note| TickSource { kind, handle, signal, note };
        match clock {
            ClockKind::Wall => {
                posix::arm_blocked_ticks(interval_ns);
                let perf = posix::open_task_clock(interval_ns).and_then(|cpu| match posix::open_switch_trap() {
                    Ok(switches) => Ok((cpu, switches)),
                    Err(e) => {
                        posix::close_fd(cpu);
                        Err(e)
                    }
                });
                match perf {
                    Ok((cpu, switches)) => Ok(source(TickKind::WallTaskClock, Handle::Fds(cpu, switches), None)),
                    Err(errno) => {
                        let why = fallback_note(clock, &std::io::Error::from_raw_os_error(errno).to_string());
                        posix::create_thread_timer(posix::MONOTONIC, signal, interval_ns)
                            .map(|t| source(TickKind::WallTimer, Handle::Timer(t), Some(why)))
                            .ok_or_else(|| "could not create a wall-clock timer".to_string())
                    }
                }
            }
            ClockKind::Cpu => match posix::open_task_clock(interval_ns) {
                Ok(fd) => Ok(source(TickKind::TaskClock, Handle::Fd(fd), None)),
                Err(errno) => {
                    let why = fallback_note(clock, &std::io::Error::from_raw_os_error(errno).to_string());
                    posix::create_thread_timer(posix::THREAD_CPU, signal, interval_ns)
                        .map(|t| source(TickKind::ThreadCpuTimer, Handle::Timer(t), Some(why)))
                        .ok_or_else(|| "could not create a thread CPU-time timer".to_string())
                }
            },
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub fn start(_clock: ClockKind, _interval_ns: u64, _signal: i32) -> Result<TickSource, String> {
        Err("per-thread tick sources need Linux".into())
    }

    /// Stops the source: no tick is generated afterwards (a tick already
    /// queued is ignored by the disarmed handler).
    pub fn stop(&mut self) {
        match std::mem::replace(&mut self.handle, Handle::None) {
            Handle::None => {}
            #[cfg(target_os = "linux")]
            Handle::Fd(fd) => crate::sys::posix::close_fd(fd),
            #[cfg(target_os = "linux")]
            Handle::Fds(a, b) => {
                crate::sys::posix::close_fd(b);
                crate::sys::posix::close_fd(a);
            }
            #[cfg(target_os = "linux")]
            Handle::Timer(t) => crate::sys::posix::delete_timer(t),
        }
    }
}

impl Drop for TickSource {
    fn drop(&mut self) {
        self.stop();
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
            match TickSource::start(clock, 60_000_000_000, sig) {
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
