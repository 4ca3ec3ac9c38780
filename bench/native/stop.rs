//! stop(): time and peak memory to turn a full stack table into collapsed
//! text, for 10k and 100k unique stacks.
//!
//! The table is filled with generated keys shaped like real ones (a zone
//! path, then 16 `path:line` frames as LuaJIT's dumpstack writes them), then
//! the same code `SampleSession:stop()` runs produces the text (as the bytes
//! handed to Lua). A counting
//! allocator records the peak of live heap bytes above what the table
//! already held. Runs are repeated; medians are printed.
//!
//!   cargo bench --no-default-features --bench stop [-- counts... [long|short]]

use std::alloc::{GlobalAlloc, Layout};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tecs_profile::sys::large_pages::LargePages as Heap;

use tecs_profile::profile::collapsed;
use tecs_profile::profile::stack_table::{Key, StackTable, FRAME_SEP};
use tecs_profile::profile::{FrameNamer, Profile};

// Unused with the `module` feature (see the declaration below).
#[cfg_attr(feature = "module", allow(dead_code))]
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the module's own allocator and only adds bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = Heap.alloc(l);
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    // Forwarded too (the default would allocate and then write zeros):
    // zeroed buffers come from the allocator as fresh zero pages, as they
    // do in the library.
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = Heap.alloc_zeroed(l);
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        Heap.dealloc(p, l);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = Heap.realloc(p, l, new);
        if !q.is_null() {
            if new >= l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + (new - l.size());
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

// With the `module` feature the library declares the heap itself (and the
// benchmark does not link: run it with `--no-default-features`); the
// declaration is left out then so that checks of every target still compile.
#[cfg(not(feature = "module"))]
#[global_allocator]
static ALLOC: Counting = Counting;

const ZONES: [&str; 4] = ["", "update", "update/physics", "draw/ui"];

/// Unique stack number `i`: 16 frames; the leaf frame's line is `i`, the
/// frames above it vary over many files and lines, one in ten is a builtin.
fn fill(table: &mut StackTable, n: usize, dir: &str) {
    let mut key = Vec::with_capacity(1024);
    for i in 0..n {
        Key::begin(&mut key);
        key.extend_from_slice(ZONES[i % ZONES.len()].as_bytes());
        Key::end_path(&mut key);
        for d in 0..16usize {
            if d > 0 {
                key.push(FRAME_SEP);
            }
            let frame = if d == 15 {
                format!("{}module_{}.lua:{}", dir, (i / 97) % 400, i)
            } else if d == 14 && i % 10 == 0 {
                format!("[builtin#{}]", 30 + i % 50)
            } else if d < 12 {
                format!("{}module_{}.lua:{}", dir, d, 10 + d * 7)
            } else {
                format!("{}module_{}.lua:{}", dir, (i / 31 + d) % 400, (i * 31 + d * 13) % 5000)
            };
            key.extend_from_slice(frame.as_bytes());
        }
        table.add(&key, i % 5, 1 + (i % 7) as u32);
    }
}

fn thread_cpu_ns() -> u64 {
    tecs_profile::sys::posix::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or(0)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// One way to turn a stack table into collapsed text.
type Render<'a> = dyn Fn(&mut FrameNamer) -> Vec<u8> + 'a;

fn main() {
    // What the module does when it is opened: profiles get huge-page advice.
    tecs_profile::sys::install_profile_host();
    let counts: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let counts = if counts.is_empty() { vec![10_000, 100_000] } else { counts };
    let reps: usize = std::env::var("BENCH_REPS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let ffnames: Vec<Option<String>> = (0..200).map(|i| Some(format!("lib.func{}", i))).collect();
    println!("| unique stacks | code | CPU ms (median of {}) | wall ms | text bytes/stack | table bytes/stack | table minus text | peak transient bytes/stack |", reps);
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    // Full paths as the `p` dumpstack flag keeps them, and short ones.
    let shapes = [("/home/dev/game/src/", "long paths"), ("src/", "short paths")];
    let only: Vec<String> = std::env::args().skip(1).filter(|a| a == "long" || a == "short").collect();
    let shapes =
        shapes.into_iter().filter(|(_, shape)| only.is_empty() || only.iter().any(|o| shape.starts_with(o.as_str())));
    for (dir, shape) in shapes {
        for &n in &counts {
            let mut table = StackTable::new(n);
            fill(&mut table, n, dir);
            assert_eq!(table.len(), n, "generated keys must be unique");
            let table_bytes = table.memory_bytes();
            let ways: [(&str, &Render); 1] = [("stop(): Profile::from_table + collapsed::write_bytes", &|namer| {
                collapsed::write_bytes(&Profile::from_table(&table, namer))
            })];
            let mut reference: Option<Vec<u8>> = None;
            for (label, way) in ways {
                let (mut ms, mut cpu_ms, mut peaks, mut text_len) = (vec![], vec![], vec![], 0usize);
                for _ in 0..reps {
                    let base = LIVE.load(Ordering::Relaxed);
                    PEAK.store(base, Ordering::Relaxed);
                    let t0 = Instant::now();
                    let c0 = thread_cpu_ns();
                    let mut namer = FrameNamer::new(&ffnames, false);
                    let text = way(&mut namer);
                    ms.push(t0.elapsed().as_secs_f64() * 1e3);
                    cpu_ms.push((thread_cpu_ns() - c0) as f64 / 1e6);
                    peaks.push((PEAK.load(Ordering::Relaxed) - base) as f64);
                    text_len = text.len();
                    assert_eq!(text.iter().filter(|&&b| b == b'\n').count(), n);
                    match &reference {
                        None => reference = Some(text),
                        Some(r) => assert!(*r == text, "every run must give the same text"),
                    }
                }
                let per = |x: f64| x / n as f64;
                let peak = median(&mut peaks);
                println!(
                    "| {} | {}, {} | {:.1} | {:.1} | {:.0} | {:.0} | {:+.0} | {:.0} |",
                    n,
                    label,
                    shape,
                    median(&mut cpu_ms),
                    median(&mut ms),
                    per(text_len as f64),
                    per(table_bytes as f64),
                    per(table_bytes as f64) - per(text_len as f64),
                    per(peak),
                );
            }
        }
    }
}
