//! The per-sample hot path: what runs inside LuaJIT's profiler callback.
//!
//! One callback = read the zone path, dump the stack, one hash lookup. No Lua
//! code runs and nothing is allocated on the Lua heap, so a sample taken while
//! the JIT is recording a trace does not abort it.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::collector::{state_index, Key, StackTable};
use crate::sys::{SampleSink, VmStack, ZoneAnchor};

/// Separator between frames in the raw dumpstack bytes. A control character
/// rather than `;`, so that `;` inside chunk names cannot split a frame.
pub const FRAME_SEP: u8 = 0x1f;

/// Upper bound on zone entries read per sample (a runaway push loop must not
/// make every sample slower without bound).
const MAX_ZONE_ENTRIES: usize = 64;

#[derive(Clone, Copy, Debug, Default)]
pub struct SampleStats {
    /// Timer ticks delivered to callbacks (the `samples` argument, summed).
    pub samples: u64,
    /// Callbacks run.
    pub callbacks: u64,
    /// Ticks that arrived while paused.
    pub paused: u64,
    /// Ticks whose zone path did not match the zone filter.
    pub filtered: u64,
    /// Nanoseconds spent in recorded callbacks, and within them in LuaJIT's
    /// stack dump. Only measured in builds with the `bench-timing` feature
    /// (used by `make bench` to split the per-sample cost); zero otherwise.
    pub callback_ns: u64,
    pub dump_ns: u64,
}

pub struct Sampler {
    pub table: StackTable,
    pub stats: SampleStats,
    zones: Option<ZoneAnchor>,
    /// Zone prefix filter, without a trailing `/`.
    filter: Option<Vec<u8>>,
    depth: i32,
    fmt: CString,
    scratch: Vec<u8>,
    /// Set by pause()/resume(); read by the callback.
    pub paused: AtomicBool,
    /// Signals sent by our timer thread (precise timer only).
    signals: Option<Arc<AtomicU64>>,
    /// Value of `signals` at the last callback: if it falls far behind, our
    /// callback is no longer LuaJIT's profiler callback (see `stalled_signals`).
    signals_at_callback: u64,
}

impl Sampler {
    pub fn new(zones: Option<ZoneAnchor>, filter: Option<Vec<u8>>, depth: i32, max_stacks: usize) -> Self {
        // `p` keeps the chunk name's path, `l` writes file:line, `Z` drops the
        // separator after the last frame; a negative depth gives caller first.
        let fmt = CString::new(vec![b'p', b'l', b'Z', FRAME_SEP]).expect("no NUL in format");
        Sampler {
            table: StackTable::new(max_stacks),
            stats: SampleStats::default(),
            zones,
            filter,
            depth: depth.max(1),
            fmt,
            scratch: Vec::with_capacity(4096),
            paused: AtomicBool::new(false),
            signals: None,
            signals_at_callback: 0,
        }
    }

    pub fn zones_mut(&mut self) -> Option<&mut ZoneAnchor> {
        self.zones.as_mut()
    }

    /// Lets the callback note how many timer signals had been sent when it ran.
    pub fn watch_signals(&mut self, counter: Arc<AtomicU64>) {
        self.signals_at_callback = counter.load(Ordering::Relaxed);
        self.signals = Some(counter);
    }

    /// Timer signals sent since our callback last ran (0 without the precise
    /// timer). Pending ticks are delivered at the next bytecode dispatch, so
    /// when Lua code asks, this is large only if LuaJIT stopped calling us:
    /// `jit.p`/`jit.profile.start` replaced or stopped the profiler.
    pub fn stalled_signals(&self) -> u64 {
        match &self.signals {
            Some(c) => c.load(Ordering::Relaxed).saturating_sub(self.signals_at_callback),
            None => 0,
        }
    }

    /// Whether `path` is the filter or lies below it (whole components).
    #[inline]
    fn path_matches(filter: &[u8], path: &[u8]) -> bool {
        path.starts_with(filter) && (path.len() == filter.len() || path[filter.len()] == b'/')
    }
}

impl SampleSink for Sampler {
    #[inline]
    fn on_sample(&mut self, vm: &VmStack, samples: u32, vmstate: u8) {
        self.stats.callbacks += 1;
        if let Some(c) = &self.signals {
            self.signals_at_callback = c.load(Ordering::Relaxed);
        }
        self.stats.samples += samples as u64;
        if self.paused.load(Ordering::Relaxed) {
            self.stats.paused += samples as u64;
            return;
        }
        #[cfg(feature = "bench-timing")]
        let callback_started = std::time::Instant::now();
        let key = &mut self.scratch;
        Key::begin(key);
        if let Some(z) = &self.zones {
            z.read_path(key, MAX_ZONE_ENTRIES);
        }
        Key::end_path(key);
        if let Some(f) = &self.filter {
            if !Self::path_matches(f, Key::path(key)) {
                self.stats.filtered += samples as u64;
                return;
            }
        }
        #[cfg(feature = "bench-timing")]
        let dump_started = std::time::Instant::now();
        vm.dump(&self.fmt, -self.depth, key);
        #[cfg(feature = "bench-timing")]
        {
            self.stats.dump_ns += dump_started.elapsed().as_nanos() as u64;
        }
        self.table.add(key, state_index(vmstate), samples);
        #[cfg(feature = "bench-timing")]
        {
            self.stats.callback_ns += callback_started.elapsed().as_nanos() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Sampler;

    #[test]
    fn filter_matches_whole_components() {
        assert!(Sampler::path_matches(b"a/Render", b"a/Render"));
        assert!(Sampler::path_matches(b"a/Render", b"a/Render/x"));
        assert!(!Sampler::path_matches(b"a/Render", b"a/Renderer"));
        assert!(!Sampler::path_matches(b"a/Render", b"a"));
        assert!(!Sampler::path_matches(b"a/Render", b""));
    }
}
