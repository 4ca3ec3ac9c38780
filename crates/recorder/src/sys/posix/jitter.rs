//! Tick intervals drawn at random, so that a program that repeats in step
//! with the sampling interval is not always sampled at the same point.
//!
//! A fixed interval and a loop whose iteration takes a whole fraction of it
//! (a step of 250 µs under 1 ms ticks, a game's frame...) meet at the same
//! phase tick after tick: every sample lands in the same part of the
//! iteration and the profile gives that part the whole loop. The handler's
//! own cost makes it worse, since it differs by where the tick lands (a C
//! function is read through the kernel, a trace is not) and so pulls the
//! phase toward a point where it stays. Measured on a step of a compiled loop,
//! `table.sort` and 30 `os.clock` calls taking about a quarter of the 1 ms
//! interval: the Lua part got 50 to 66% of the samples against 56% true.
//!
//! Every fourth tick the source's interval is drawn anew, uniformly between
//! half and one and a half times the asked one, and kept until the next
//! draw: the mean, so the rate, is unchanged, and one draw moves the phase
//! by up to a whole interval, so no loop shorter than the interval stays
//! in step with the ticks for long enough to lock. Both kinds of source
//! take a new interval from the tick handler with one system call: a perf
//! event by `PERF_EVENT_IOC_PERIOD` (the kernel restarts its timer with
//! the new period), a POSIX timer by `timer_settime`. That call costs
//! about 13 µs on a virtual machine (it reprograms the timer), so it is
//! not made at every tick; the kernel's restart also drops the time from
//! the tick to the call, a few per cent of the rate at 0.1 ms.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// `PERF_EVENT_IOC_PERIOD`: `_IOW('$', 4, u64)`.
const PERF_EVENT_IOC_PERIOD: libc::c_ulong = 0x4008_2404;
/// The shortest interval drawn: the kernel's floor for a timer period.
const MIN_NS: u64 = 10_000;

/// What the handler sets the next interval of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retuned {
    /// A perf event's descriptor.
    PerfEvent(i32),
    /// A POSIX timer's id.
    Timer(usize),
}

/// 0: none; 1: a perf event; 2: a POSIX timer.
static KIND: AtomicUsize = AtomicUsize::new(0);
static HANDLE: AtomicUsize = AtomicUsize::new(0);
static MEAN_NS: AtomicU64 = AtomicU64::new(0);
/// Handlers between their read of the source and their system call: a
/// disarm waits for them, so a descriptor is never used once closed.
static IN_USE: AtomicUsize = AtomicUsize::new(0);
/// The draw's state (splitmix64).
static SEED: AtomicU64 = AtomicU64::new(0);
/// Ticks since the last draw.
static SINCE_DRAW: AtomicUsize = AtomicUsize::new(0);
/// A new interval is drawn every this many ticks; the source keeps it
/// between draws, with no system call.
pub const TICKS_PER_DRAW: usize = 4;

/// From now on every tick of `source` draws its next interval around
/// `mean_ns`.
pub fn arm(source: Retuned, mean_ns: u64) {
    disarm();
    let seed = super::clock_ns(libc::CLOCK_MONOTONIC).unwrap_or(0) ^ ((super::gettid() as u64) << 32);
    SEED.store(seed, Ordering::Relaxed);
    MEAN_NS.store(mean_ns.max(2 * MIN_NS), Ordering::Relaxed);
    let (kind, handle) = match source {
        Retuned::PerfEvent(fd) => (1, fd as usize),
        Retuned::Timer(t) => (2, t),
    };
    HANDLE.store(handle, Ordering::SeqCst);
    KIND.store(kind, Ordering::SeqCst);
}

/// No handler touches the source once this returns (call it before the
/// source is closed).
pub fn disarm() {
    KIND.store(0, Ordering::SeqCst);
    while IN_USE.load(Ordering::SeqCst) != 0 {
        std::hint::spin_loop();
    }
}

/// A uniform draw in `[mean / 2, 3 * mean / 2)`.
fn draw(mean: u64) -> u64 {
    let mut z = SEED.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let offset = (((z >> 11) as u128 * mean as u128) >> 53) as u64;
    (mean / 2 + offset).max(MIN_NS)
}

/// Sets the armed source's next interval (in the tick handler:
/// async-signal-safe, one system call).
pub fn next_interval() {
    if SINCE_DRAW.fetch_add(1, Ordering::Relaxed) + 1 < TICKS_PER_DRAW {
        return;
    }
    SINCE_DRAW.store(0, Ordering::Relaxed);
    IN_USE.fetch_add(1, Ordering::SeqCst);
    let kind = KIND.load(Ordering::SeqCst);
    if kind != 0 {
        let handle = HANDLE.load(Ordering::SeqCst);
        let ns = draw(MEAN_NS.load(Ordering::Relaxed));
        match kind {
            1 => {
                // SAFETY: `handle` is the armed perf event's descriptor,
                // open until `disarm` has seen this handler leave; the
                // request reads one u64.
                unsafe {
                    libc::ioctl(handle as i32, PERF_EVENT_IOC_PERIOD, &ns as *const u64);
                }
            }
            _ => {
                let ts =
                    libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as _ };
                let spec = libc::itimerspec { it_interval: ts, it_value: ts };
                // SAFETY: `handle` is the armed POSIX timer, not deleted
                // until `disarm` has seen this handler leave; `spec` is valid.
                unsafe {
                    libc::timer_settime(handle as libc::timer_t, 0, &spec, std::ptr::null_mut());
                }
            }
        }
    }
    IN_USE.fetch_sub(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_uniform_around_the_mean() {
        let mean = 1_000_000;
        let n = 100_000;
        let (mut sum, mut low, mut high) = (0u64, 0, 0);
        let mut bins = [0u32; 10];
        for _ in 0..n {
            let d = draw(mean);
            assert!((mean / 2..mean * 3 / 2).contains(&d), "{}", d);
            sum += d;
            low += (d < mean) as u32;
            high += (d >= mean) as u32;
            bins[((d - mean / 2) * 10 / mean) as usize] += 1;
        }
        let avg = sum as f64 / n as f64;
        // The mean within 0.5% (the sd of a mean of 1e5 uniform draws is 0.09%).
        assert!((avg / mean as f64 - 1.0).abs() < 0.005, "{}", avg);
        assert!((low as i64 - high as i64).abs() < 2000, "{} {}", low, high);
        // Each tenth of the range holds a tenth of the draws (sd ~0.3%).
        for b in bins {
            assert!((b as f64 / n as f64 - 0.1).abs() < 0.01, "{:?}", bins);
        }
    }
}
