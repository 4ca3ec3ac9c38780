//! The floor: what one sample costs when the signal handler does nothing.
//!
//! A fixed CPU-bound loop runs with no signals, then with SIGPROF delivered
//! by the same tgkill timer thread tecs-profile uses, to an empty handler
//! (it only counts deliveries). Runs alternate; medians are printed. The
//! extra CPU time of the loop's thread divided by the signals delivered is
//! the cost of signal delivery on this machine: no profiler can sample for
//! less.
//!
//!   floor [interval_us ...]     (default: 1000 100)
//!
//! FLOOR_METHOD picks how the signal is made: `tgkill` (default: the timer
//! thread tecs-profile uses), `posix-timer` (a CLOCK_MONOTONIC timer_create
//! timer aimed at the thread with SIGEV_THREAD_ID: no helper thread, fires
//! from the kernel's high-resolution timer on the thread's own CPU), or
//! `itimer` (setitimer(ITIMER_PROF), LuaJIT's own timer, tick-bound).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use benchtimer::{clock_ns, thread_cpu_clock_of_self, Timer};

static DELIVERED: AtomicU64 = AtomicU64::new(0);

extern "C" fn empty_handler(_sig: libc::c_int) {
    DELIVERED.fetch_add(1, Ordering::Relaxed);
}

fn install_handler() {
    // SAFETY: a plain handler with an empty mask and SA_RESTART.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = empty_handler as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut());
    }
}

/// About 0.2 s of CPU on a current core; depends on nothing but `n`.
fn work(n: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..n {
        x = black_box(x.rotate_left(7) ^ i).wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    x
}

/// A signal source for one run: started before the loop, stopped after.
enum Source {
    Thread(Timer),
    Posix(libc::timer_t),
    Itimer,
}

fn start_source(method: &str, interval_ns: u64) -> Source {
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: (interval_ns / 1_000_000_000) as _, tv_nsec: (interval_ns % 1_000_000_000) as _ },
        it_value: libc::timespec { tv_sec: (interval_ns / 1_000_000_000) as _, tv_nsec: (interval_ns % 1_000_000_000) as _ },
    };
    match method {
        "posix-timer" => {
            // SAFETY: a zeroed sigevent filled in for SIGEV_THREAD_ID with our
            // own thread id; valid out-pointer for the timer id.
            unsafe {
                let mut sev: libc::sigevent = std::mem::zeroed();
                sev.sigev_notify = libc::SIGEV_THREAD_ID;
                sev.sigev_signo = libc::SIGPROF;
                sev.sigev_notify_thread_id = benchtimer::gettid();
                let mut id: libc::timer_t = std::mem::zeroed();
                assert_eq!(libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id), 0, "timer_create");
                assert_eq!(libc::timer_settime(id, 0, &spec, std::ptr::null_mut()), 0, "timer_settime");
                Source::Posix(id)
            }
        }
        "itimer" => {
            let tv = libc::timeval { tv_sec: (interval_ns / 1_000_000_000) as _, tv_usec: ((interval_ns / 1000) % 1_000_000) as _ };
            let it = libc::itimerval { it_interval: tv, it_value: tv };
            // SAFETY: valid itimerval.
            unsafe { libc::setitimer(libc::ITIMER_PROF, &it, std::ptr::null_mut()) };
            Source::Itimer
        }
        _ => Source::Thread(Timer::start(interval_ns)),
    }
}

/// Stops the source; returns the helper thread's CPU ns per signal sent.
fn stop_source(src: Source) -> f64 {
    match src {
        Source::Thread(mut t) => {
            let (sent, cpu) = t.stop();
            cpu as f64 / sent.max(1) as f64
        }
        // SAFETY: a timer created above, deleted once.
        Source::Posix(id) => unsafe {
            libc::timer_delete(id);
            0.0
        },
        Source::Itimer => {
            let zero = libc::itimerval {
                it_interval: libc::timeval { tv_sec: 0, tv_usec: 0 },
                it_value: libc::timeval { tv_sec: 0, tv_usec: 0 },
            };
            // SAFETY: valid itimerval.
            unsafe { libc::setitimer(libc::ITIMER_PROF, &zero, std::ptr::null_mut()) };
            0.0
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn main() {
    let intervals: Vec<u64> = {
        let a: Vec<u64> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
        if a.is_empty() { vec![1000, 100] } else { a }
    };
    let reps: usize = std::env::var("BENCH_REPS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let n: u64 = std::env::var("FLOOR_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(150_000_000);
    let method = std::env::var("FLOOR_METHOD").unwrap_or_else(|_| "tgkill".into());
    install_handler();
    let cpu = thread_cpu_clock_of_self();
    let _ = work(n / 10); // warm up
    for interval_us in intervals {
        let (mut base, mut with, mut per_sig, mut rate, mut timer_per_sig) = (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..reps {
            let c0 = clock_ns(cpu).unwrap();
            black_box(work(n));
            let b = (clock_ns(cpu).unwrap() - c0) as f64;
            base.push(b);

            DELIVERED.store(0, Ordering::Relaxed);
            let src = start_source(&method, interval_us * 1000);
            let c0 = clock_ns(cpu).unwrap();
            black_box(work(n));
            let w = (clock_ns(cpu).unwrap() - c0) as f64;
            let helper_ns = stop_source(src);
            let got = DELIVERED.load(Ordering::Relaxed).max(1) as f64;
            with.push(w);
            per_sig.push((w - b) / got);
            rate.push(got / (w / 1e9));
            timer_per_sig.push(helper_ns);
        }
        let (b, w) = (median(&mut base), median(&mut with));
        println!(
            "floor method={} interval_us={} reps={} base_ms={:.3} with_ms={:.3} rate={:.1} requested={:.1} signal_ns={:.0} timer_thread_ns_per_signal={:.0}",
            method,
            interval_us,
            reps,
            b / 1e6,
            w / 1e6,
            median(&mut rate),
            1e6 / interval_us as f64,
            median(&mut per_sig),
            median(&mut timer_per_sig)
        );
    }
}
