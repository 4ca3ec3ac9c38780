//! The precise sampling clock.
//!
//! LuaJIT's own timer is `setitimer(ITIMER_PROF)`, which the kernel only fires
//! on its scheduler tick: on a 250 Hz kernel a 1 ms request yields about 250
//! samples per second. On Linux we disarm that timer and run a small thread
//! that sleeps on CLOCK_MONOTONIC (a high-resolution timer) and sends SIGPROF
//! to the profiled thread with `tgkill`. LuaJIT's own signal handler receives
//! it, so the sample path inside LuaJIT is unchanged.
//!
//! * `Cpu`: a signal is sent each time the profiled thread has used another
//!   interval of CPU time (read from its per-thread CPU clock), so idle or
//!   blocked time is not sampled and sleeping threads are not woken.
//! * `Wall`: a signal every interval of real time. Time blocked inside a C
//!   call (vsync, sleep, I/O) is then charged to the Lua frame that made the
//!   call, with the `C` VM state.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

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

/// Which timer a session actually runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerSource {
    /// Our thread, per-thread CPU clock.
    PreciseCpu,
    /// Our thread, monotonic wall clock.
    PreciseWall,
    /// LuaJIT's setitimer(ITIMER_PROF): process CPU time, tick resolution.
    LuaJit,
}

impl TimerSource {
    pub fn describe(self) -> &'static str {
        match self {
            TimerSource::PreciseCpu => "thread-cpu",
            TimerSource::PreciseWall => "wall",
            TimerSource::LuaJit => "process-cpu-itimer",
        }
    }
}

pub struct PreciseTimer {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    handle: Option<JoinHandle<()>>,
}

impl PreciseTimer {
    /// Starts signalling the calling thread every `interval_ns`.
    #[cfg(target_os = "linux")]
    pub fn start(kind: ClockKind, interval_ns: u64) -> Option<PreciseTimer> {
        use crate::sys::posix;
        let tid = posix::gettid();
        let cpu_clock = match kind {
            ClockKind::Cpu => Some(posix::thread_cpu_clock()?),
            ClockKind::Wall => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (stop2, sent2) = (stop.clone(), sent.clone());
        let handle = std::thread::Builder::new()
            .name("tecs-profile-timer".into())
            .spawn(move || {
                posix::tight_timer_slack();
                let interval = interval_ns.max(10_000);
                let mut wake = posix::clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0);
                let mut cpu_due = cpu_clock.and_then(posix::clock_ns).map(|c| c + interval);
                while !stop2.load(Ordering::Acquire) {
                    wake += interval;
                    posix::sleep_until(wake);
                    let now = posix::clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(wake);
                    if now > wake + 50 * interval {
                        // We were descheduled for a long time: resynchronise
                        // instead of firing a burst.
                        wake = now;
                    }
                    if stop2.load(Ordering::Acquire) {
                        break;
                    }
                    let fire = match (cpu_clock, cpu_due.as_mut()) {
                        (Some(clock), Some(due)) => match posix::clock_ns(clock) {
                            Some(cpu) if cpu >= *due => {
                                *due = if cpu - *due > 4 * interval { cpu + interval } else { *due + interval };
                                true
                            }
                            Some(_) => false,
                            None => break, // the thread is gone
                        },
                        _ => true,
                    };
                    if fire {
                        // Someone else stopped LuaJIT's profiler and restored the
                        // default disposition: a signal now would kill the process.
                        if posix::sigprof_is_default() {
                            continue;
                        }
                        if !posix::send_sigprof(tid) {
                            break;
                        }
                        sent2.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .ok()?;
        Some(PreciseTimer { stop, sent, handle: Some(handle) })
    }

    #[cfg(not(target_os = "linux"))]
    pub fn start(_kind: ClockKind, _interval_ns: u64) -> Option<PreciseTimer> {
        None
    }

    /// The shared count of signals sent, for the sampler to compare against
    /// the callbacks it receives (a stalled count means someone else owns
    /// LuaJIT's profiler now).
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.sent.clone()
    }

    /// Signals sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Stops the thread and waits for it, so no signal is sent afterwards.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for PreciseTimer {
    fn drop(&mut self) {
        self.stop();
    }
}
