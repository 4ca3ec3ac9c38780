//! When a session ran, in wall time and in CPU time (the profiled thread's
//! and the whole process's).

use std::time::Instant;

use super::platform;

/// When a session ran, in wall time and in CPU time.
pub struct Timing {
    started: Instant,
    ended: Option<Instant>,
    cpu_clock: Option<platform::CpuClock>,
    cpu_start: u64,
    cpu_end: Option<u64>,
    /// The whole process's CPU time (every thread), beside the profiled
    /// thread's: a game whose render threads do the work shows it here.
    process_start: Option<u64>,
    process_end: Option<u64>,
}

impl Timing {
    pub fn start() -> Timing {
        let cpu_clock = platform::thread_cpu_clock();
        let cpu_start = cpu_clock.and_then(platform::clock_ns).unwrap_or(0);
        let process_start = platform::clock_ns(platform::PROCESS_CPU_CLOCK);
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

    pub fn finish(&mut self) {
        self.ended = Some(Instant::now());
        self.cpu_end = self.cpu_clock.and_then(platform::clock_ns);
        self.process_end = platform::clock_ns(platform::PROCESS_CPU_CLOCK);
    }

    pub fn process_cpu_sec(&self) -> Option<f64> {
        let start = self.process_start?;
        let end = self.process_end.or_else(|| platform::clock_ns(platform::PROCESS_CPU_CLOCK))?;
        Some(end.saturating_sub(start) as f64 / 1e9)
    }

    pub fn wall_sec(&self) -> f64 {
        self.ended.unwrap_or_else(Instant::now).duration_since(self.started).as_secs_f64()
    }

    pub fn cpu_sec(&self) -> Option<f64> {
        let end = self.cpu_end.or_else(|| self.cpu_clock.and_then(platform::clock_ns))?;
        Some(end.saturating_sub(self.cpu_start) as f64 / 1e9)
    }
}
