//! The per-sample hot path: what runs inside LuaJIT's profiler callback.
//!
//! One callback = read the zone path, dump the stack, one hash lookup; and,
//! only for a stack not seen before, the function of each of its frames
//! (`identity`). No Lua code runs and nothing is allocated on the Lua heap,
//! so a sample taken while the JIT is recording a trace does not abort it.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::record::alloc_objects::ObjectTable;
use crate::record::capture::{CapturedStack, FrameFunctions, ReadFrames};
use crate::record::identity::FrameIdentities;
use crate::record::timeline::{TimedSample, Timeline};
use crate::sys::{FunctionAnchor, RunningC, SampleSink, TickOrigin, VmStack, ZoneAnchor, NOTE_SLOTS};
use std::collections::HashMap;
use tecs_profile_format::profile::stack_table::{Key, StackTable, FRAME_SEP};
use tecs_profile_format::profile::{state_index, VM_STATES};

/// Root frame of a stack cut at the depth limit: the frames above it are
/// the innermost `depth` ones, and what called them is not known.
pub const TRUNCATED_FRAME: &[u8] = b"[truncated stack]";

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
    /// Samples given the C function they were taken in as their leaf.
    pub c_leaves: u64,
    /// Samples whose stack the tick handler read (compiled code, C
    /// functions, interpreted code).
    pub compiled: u64,
    /// Of those, the samples read in interpreted code.
    pub interp: u64,
    /// Of those, the samples read in the collector or the compiler.
    pub states: u64,
}

/// How compiled code is attributed (docs/sampling.md, "Where a sample is charged").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// The option's default: `Exact` where this build's traces can be read
    /// in the tick handler, else `Function`. Resolved when a session starts.
    Auto,
    /// Compiled code's stacks are read in the tick handler, at the tick
    /// (`trace_decoder`); LuaJIT's profiler runs without checks in
    /// traces, and its hook takes every other sample.
    Exact,
    /// LuaJIT's function mode: compiled code is interrupted only where it
    /// enters or leaves a function, so the callback of a sample taken in
    /// compiled code, in a C function or in the GC can run several lines
    /// later. Such a leaf is reported as its function (`file:first-last`),
    /// never as a line it may not be on; interpreted samples keep their line.
    Function,
    /// LuaJIT's line mode: a check at every new source line of compiled
    /// code, at a cost to the compiled code itself.
    Line,
}

impl Precision {
    pub fn parse(s: &str) -> Option<Precision> {
        match s {
            "auto" => Some(Precision::Auto),
            "function" => Some(Precision::Function),
            "line" => Some(Precision::Line),
            _ => None,
        }
    }

    /// The name `stats()` reports.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Auto => "auto",
            Precision::Exact => "exact",
            Precision::Function => "function",
            Precision::Line => "line",
        }
    }

    /// The mode letters for `luaJIT_profile_start`: none when the handler
    /// reads compiled code (no checks in traces, no flush at start).
    pub fn mode(self) -> &'static str {
        match self {
            Precision::Exact => "",
            Precision::Function | Precision::Auto => "f",
            Precision::Line => "l",
        }
    }
}

/// Index of state C in the stack table's counts.
const C_STATE: usize = state_index(b'C');

/// Call sites kept per session: distinct Lua lines seen right after a C
/// function returned (see `Sampler::call_sites`).
pub const MAX_CALL_SITES: i32 = 4096;

pub struct Sampler {
    pub table: StackTable,
    precision: Precision,
    /// Functions whose lines need a correction, by VM state letter and leaf
    /// frame: LuaJIT runs the callback at the next bytecode it dispatches,
    /// so the time of a C function shows on the instruction after the call.
    /// The slot is where `functions` keeps the function; the Lua side reads
    /// its bytecode to find the call the time belongs to.
    pub call_sites: HashMap<Vec<u8>, i32>,
    pub functions: FunctionAnchor,
    /// The function of each frame, asked of the VM when a stack is new.
    pub identities: FrameIdentities,
    pub stats: SampleStats,
    zones: Option<ZoneAnchor>,
    /// Zone prefix filter, without a trailing `/`.
    filter: Option<Vec<u8>>,
    depth: i32,
    fmt: CString,
    scratch: Vec<u8>,
    /// Key space for the stacks the handler read.
    taken: Vec<u8>,
    /// Set by pause()/resume(); read by the callback.
    pub paused: AtomicBool,
    /// The Lua thread whose samples are not recorded (`skipStartingThread`:
    /// the command line's launcher runs there, the program on a coroutine).
    pub skipped_thread: Option<usize>,
    /// When each recorded sample was taken (`timelineSamples`; empty
    /// unless the session sets a capacity).
    pub timeline: Timeline,
    /// Allocation sessions: estimated objects per stack (see `alloc_objects`).
    pub objects: Option<ObjectTable>,
    /// Whose tick note the callback takes: the timer's, or the allocator
    /// wrapper's for allocation sessions.
    pub ticks_from: TickOrigin,
}

impl Sampler {
    pub fn new(
        zones: Option<ZoneAnchor>,
        functions: FunctionAnchor,
        filter: Option<Vec<u8>>,
        depth: i32,
        max_stacks: usize,
        precision: Precision,
    ) -> Self {
        // `p` keeps the chunk name's path, `l` writes file:line, `Z` drops the
        // separator after the last frame; a negative depth gives caller first.
        let fmt = CString::new(vec![b'p', b'l', b'Z', FRAME_SEP]).expect("no NUL in format");
        Sampler {
            table: StackTable::new(max_stacks),
            precision,
            call_sites: HashMap::new(),
            functions,
            identities: FrameIdentities::default(),
            stats: SampleStats::default(),
            zones,
            filter,
            depth: depth.max(1),
            fmt,
            scratch: Vec::with_capacity(4096),
            taken: Vec::with_capacity(4096),
            paused: AtomicBool::new(false),
            skipped_thread: None,
            timeline: Timeline::new(0),
            objects: None,
            ticks_from: TickOrigin::Timer,
        }
    }

    /// A sample not recorded: its objects are charged to no stack.
    #[inline]
    fn drop_objects(&mut self) {
        if let Some(o) = &mut self.objects {
            o.charge(None, 0);
        }
    }

    pub fn zones_mut(&mut self) -> Option<&mut ZoneAnchor> {
        self.zones.as_mut()
    }

    /// Counts one captured stack in the table and the timeline and, for a
    /// stack new to the table, records the function of each of its frames.
    /// Every sample counted goes through here, however its stack was read;
    /// returns its table entry.
    #[inline]
    fn count(&mut self, c: &CapturedStack<'_>, names: &dyn FrameFunctions) -> Option<u32> {
        let state = state_index(c.state);
        let stacks = self.table.len();
        let e = self.table.add(c.key, state, c.ticks);
        if self.timeline.enabled() {
            self.timeline.push(TimedSample::new(c.at_ns, e, state, c.ticks));
        }
        if c.c_leaf {
            self.stats.c_leaves += c.ticks as u64;
        }
        if self.table.len() > stacks {
            record_identities(&mut self.identities, names, &c.key[c.stack_start..c.named_end]);
        }
        e
    }

    /// Whether `path` is the filter or lies below it (whole components).
    #[inline]
    fn path_matches(filter: &[u8], path: &[u8]) -> bool {
        path.starts_with(filter) && (path.len() == filter.len() || path[filter.len()] == b'/')
    }
}

impl SampleSink for Sampler {
    /// Counts the stacks the tick handler read in compiled code since the
    /// last call (state N, as LuaJIT names compiled code).
    fn absorb(&mut self) {
        if self.ticks_from != TickOrigin::Timer || self.precision != Precision::Exact {
            return;
        }
        let paused = self.paused.load(Ordering::Relaxed);
        let mut key = std::mem::take(&mut self.taken);
        crate::sys::take_compiled_stacks(|t| {
            self.stats.samples += t.count as u64;
            self.stats.compiled += t.count as u64;
            match t.state {
                b'I' => self.stats.interp += t.count as u64,
                b'G' | b'J' => self.stats.states += t.count as u64,
                _ => {}
            }
            if paused {
                self.stats.paused += t.count as u64;
                return;
            }
            if self.skipped_thread == Some(t.thread)
                || self.filter.as_ref().is_some_and(|f| !Self::path_matches(f, t.zone))
            {
                self.stats.filtered += t.count as u64;
                return;
            }
            Key::begin(&mut key);
            key.extend_from_slice(t.zone);
            Key::end_path(&mut key);
            let stack_start = key.len();
            key.extend_from_slice(t.stack);
            mark_truncated(&mut key, stack_start, self.depth);
            let named_end = key.len();
            key.extend_from_slice(t.native);
            let captured = CapturedStack {
                key: &key,
                stack_start,
                named_end,
                state: t.state,
                ticks: t.count,
                at_ns: t.last_ns,
                c_leaf: t.state == b'C',
            };
            self.count(&captured, &ReadFrames::new(t.facts));
        });
        self.taken = key;
    }

    #[inline]
    fn on_sample(&mut self, vm: &VmStack, samples: u32, vmstate: u8) {
        #[cfg(any(test, feature = "test-support"))]
        let _probe = crate::sys::alloc_probe::InSample::enter();
        // Taken from every callback, so a note never outlives its sample.
        let note = crate::sys::take_tick_note(self.ticks_from);
        self.stats.callbacks += 1;
        self.stats.samples += samples as u64;
        if self.paused.load(Ordering::Relaxed) {
            self.stats.paused += samples as u64;
            self.drop_objects();
            return;
        }
        if self.skipped_thread.is_some_and(|t| t == vm.thread_id()) {
            self.stats.filtered += samples as u64;
            self.drop_objects();
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
                self.drop_objects();
                return;
            }
        }
        #[cfg(feature = "bench-timing")]
        let dump_started = std::time::Instant::now();
        let stack_start = key.len();
        // LuaJIT gives every tick of a callback the VM state of the first:
        // compiled code can run on, and call C functions, before it reaches
        // a safe point. The tick handler counted each tick's own state; when
        // it saw every tick, the counts are used instead. Ticks that found a
        // C function running get it as their leaf.
        let mut states = [0u32; 5];
        if note.states.iter().map(|&n| n as u64).sum::<u64>() == samples as u64 {
            states = note.states;
        } else {
            states[state_index(vmstate)] = samples;
        }
        // A callback whose first tick was interpreted can still come late:
        // the next bytecode may enter a compiled loop that reaches no
        // check, and calls C functions, until it ends. Its C ticks get
        // their functions as any other callback's.
        let running_c = if states[C_STATE] == 0 { Default::default() } else { note.running_c };
        // One frame more than kept: its presence says the stack was cut.
        vm.dump(&self.fmt, -(self.depth + 1), key);
        mark_truncated(key, stack_start, self.depth);
        name_stripped_frames(key, stack_start, vm);
        let leaf = leaf_start(key, stack_start);
        if vmstate != b'I' && self.precision != Precision::Line {
            if let Some((first, last)) = vm.leaf_span() {
                replace_line_with_span(key, leaf, first, last);
            }
        } else if self.precision == Precision::Line && states[C_STATE] > 0 {
            // The site key is the state letter (C) followed by the leaf
            // frame; it goes in the scratch space after the key and out again.
            let end = key.len();
            key.push(b'C');
            key.extend_from_within(leaf..end);
            if !self.call_sites.contains_key(&key[end..]) {
                if let Some(slot) = vm.capture_leaf(&mut self.functions) {
                    self.call_sites.insert(key[end..].to_vec(), slot);
                }
            }
            key.truncate(end);
        }
        // The stack as the VM has it; each C function ticks found goes after
        // it, for those ticks.
        let lua_end = key.len();
        #[cfg(feature = "bench-timing")]
        {
            self.stats.dump_ns += dump_started.elapsed().as_nanos() as u64;
        }
        // Which C functions ticks found are leaves: a C function that called
        // Lua is still on the stack, below the Lua frame the callback ran
        // in; the time was its own, but it is not a leaf above that frame,
        // and such ticks keep the stack as dumped.
        let mut leaves: [Option<(RunningC, u32)>; NOTE_SLOTS] = Default::default();
        for (out, (c, ticks)) in leaves.iter_mut().zip(running_c.into_iter().flatten()) {
            let in_c = ticks.min(states[C_STATE]);
            if in_c == 0 {
                continue;
            }
            push_c_frame(&mut self.scratch, lua_end > stack_start, c);
            let key = &self.scratch;
            let leaf = leaf_start(key, stack_start);
            let on_stack = lua_end > stack_start
                && memchr::memmem::find_iter(&key[stack_start..lua_end], &key[leaf..])
                    .any(|at| is_whole_frame(&key[stack_start..lua_end], at, key.len() - leaf));
            self.scratch.truncate(lua_end);
            if !on_stack {
                *out = Some((c, in_c));
                states[C_STATE] -= in_c;
            }
        }
        // The entry and state the allocation objects of this sample go to:
        // those of the first tick.
        let first = state_index(vmstate);
        let mut entry = None;
        let at_ns = if self.timeline.enabled() { crate::sys::monotonic_ns() } else { 0 };
        let mut key = std::mem::take(&mut self.scratch);
        for (state, &n) in states.iter().enumerate() {
            if n > 0 {
                let captured = CapturedStack {
                    key: &key,
                    stack_start,
                    named_end: lua_end,
                    state: VM_STATES[state],
                    ticks: n,
                    at_ns,
                    c_leaf: false,
                };
                let e = self.count(&captured, vm);
                if state == first {
                    entry = e;
                }
            }
        }
        if leaves.iter().any(Option::is_some) {
            // The C function is a frame of the stack too, and counts
            // against the depth: one Lua frame makes room for it.
            make_room_for_leaf(&mut key, stack_start, self.depth);
            let lua_end = key.len();
            let mut first_leaf = None;
            for (c, in_c) in leaves.into_iter().flatten() {
                push_c_frame(&mut key, lua_end > stack_start, c);
                let captured = CapturedStack {
                    key: &key,
                    stack_start,
                    named_end: lua_end,
                    state: b'C',
                    ticks: in_c,
                    at_ns,
                    c_leaf: true,
                };
                let e = self.count(&captured, vm);
                first_leaf = first_leaf.or(Some(e));
                key.truncate(lua_end);
            }
            if first == C_STATE {
                if let Some(e) = first_leaf {
                    entry = e;
                }
            }
        }
        self.scratch = key;
        if let Some(o) = &mut self.objects {
            o.charge(entry, first);
        }
        #[cfg(feature = "bench-timing")]
        {
            self.stats.callback_ns += callback_started.elapsed().as_nanos() as u64;
        }
    }
}

/// Asks `names` for the function of each frame of a new stack (caller
/// first, as dumped): level 0 is the last frame. Runs only when the stack
/// table stores a new stack, never for a stack seen before.
fn record_identities(ids: &mut FrameIdentities, names: &dyn FrameFunctions, stack: &[u8]) {
    for (level, text) in stack.rsplit(|&b| b == FRAME_SEP).enumerate() {
        if text == TRUNCATED_FRAME || text.is_empty() {
            continue;
        }
        let Some(f) = names.function(level) else { return };
        if !ids.record(text, &f) {
            return;
        }
    }
}

/// Whether `stack[at..at + len]` is one whole frame of `stack`.
#[inline]
fn is_whole_frame(stack: &[u8], at: usize, len: usize) -> bool {
    (at == 0 || stack[at - 1] == FRAME_SEP) && (at + len == stack.len() || stack[at + len] == FRAME_SEP)
}

/// Appends the C function a sample was taken in, written as LuaJIT's stack
/// dump writes a C frame (`[builtin#N]`, `@0x...`), so that it is named as
/// every C frame is.
#[inline]
fn push_c_frame(key: &mut Vec<u8>, after_frame: bool, c: RunningC) {
    if after_frame {
        key.push(FRAME_SEP);
    }
    match c {
        RunningC::Builtin(id) => {
            key.extend_from_slice(b"[builtin#");
            push_int(key, id as i32);
            key.push(b']');
        }
        RunningC::Function(addr) => {
            let mut buf = [0u8; 19];
            let n = crate::sys::address_text(addr, &mut buf);
            key.extend_from_slice(&buf[..n]);
        }
    }
}

/// Where the leaf (last) frame starts in `key`, whose stack part starts at
/// `stack_start`.
#[inline]
fn leaf_start(key: &[u8], stack_start: usize) -> usize {
    match memchr::memrchr(FRAME_SEP, &key[stack_start..]) {
        Some(i) => stack_start + i + 1,
        None => stack_start,
    }
}

/// If the stack part of `key` (from `stack_start`, caller first) has more
/// than `depth` frames, replaces the outermost one with `TRUNCATED_FRAME`.
/// Works in place: no allocation while the key fits its capacity.
#[inline]
fn mark_truncated(key: &mut Vec<u8>, stack_start: usize, depth: i32) {
    let frames = memchr::memchr_iter(FRAME_SEP, &key[stack_start..]).count() + 1;
    if key.len() == stack_start || frames <= depth.max(1) as usize {
        return;
    }
    let Some(sep) = memchr::memchr(FRAME_SEP, &key[stack_start..]) else { return };
    let cut = stack_start + sep; // the outermost frame is key[stack_start..cut]
    let (old, new) = (cut - stack_start, TRUNCATED_FRAME.len());
    let len = key.len();
    if new > old {
        key.resize(len + (new - old), 0);
        key.copy_within(cut..len, cut + (new - old));
    } else {
        key.copy_within(cut..len, cut - (old - new));
        key.truncate(len - (old - new));
    }
    key[stack_start..stack_start + new].copy_from_slice(TRUNCATED_FRAME);
}

/// Makes room for a C function leaf in the stack part of `key` (from
/// `stack_start`, as `mark_truncated` left it for `depth`): a stack of
/// `depth` Lua frames loses its outermost one, which the truncation marker
/// stands for. In place: no allocation.
#[inline]
fn make_room_for_leaf(key: &mut Vec<u8>, stack_start: usize, depth: i32) {
    if depth <= 1 || key.len() == stack_start {
        return;
    }
    let stack = &key[stack_start..];
    let frames = memchr::memchr_iter(FRAME_SEP, stack).count() + 1;
    let marked = stack.starts_with(TRUNCATED_FRAME)
        && (stack.len() == TRUNCATED_FRAME.len() || stack[TRUNCATED_FRAME.len()] == FRAME_SEP);
    if frames - (marked as usize) < depth as usize {
        return;
    }
    if marked {
        // Drop the frame after the marker.
        let from = stack_start + TRUNCATED_FRAME.len() + 1;
        let to = match memchr::memchr(FRAME_SEP, &key[from..]) {
            Some(i) => from + i + 1,
            None => return,
        };
        key.drain(from..to);
    } else {
        mark_truncated(key, stack_start, depth - 1);
    }
}

/// Rewrites each frame of the dumped stack (from `stack_start`, caller
/// first) that LuaJIT wrote as `file:0` and that runs bytecode without
/// lines as the tick handler writes it, `file:@0xADDR` (its prototype):
/// else every function of such a chunk would be one frame. Asks the VM
/// only about frames at line 0, which a chunk with lines rarely shows.
fn name_stripped_frames(key: &mut Vec<u8>, stack_start: usize, vm: &VmStack) {
    let ends_at_zero = |key: &[u8], end: usize| key[..end].ends_with(b":0");
    let stack = &key[stack_start..];
    if !memchr::memmem::find_iter(stack, b":0").any(|at| at + 2 == stack.len() || stack[at + 2] == FRAME_SEP) {
        return;
    }
    let frames = memchr::memchr_iter(FRAME_SEP, stack).count() + 1;
    // From the root (level frames - 1) to the leaf (level 0); a rewrite
    // moves only what follows it.
    let mut start = stack_start;
    for level in (0..frames).rev() {
        let end = memchr::memchr(FRAME_SEP, &key[start..]).map_or(key.len(), |i| start + i);
        let mut next = end + 1;
        if ends_at_zero(key, end) {
            if let Some(pt) = vm.stripped_proto(level as i32) {
                let mut with = [0u8; 19];
                let n = crate::sys::address_text(pt, &mut with);
                key.splice(end - 1..end, with[..n].iter().copied());
                next += n - 1;
            }
        }
        start = next;
    }
}

/// Rewrites a `file:line` leaf starting at `leaf` as `file:first-last`.
#[inline]
fn replace_line_with_span(key: &mut Vec<u8>, leaf: usize, first: i32, last: i32) {
    let Some(colon) = memchr::memrchr(b':', &key[leaf..]) else { return };
    let digits = &key[leaf + colon + 1..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return;
    }
    key.truncate(leaf + colon + 1);
    push_int(key, first);
    key.push(b'-');
    push_int(key, last.max(first));
}

#[inline]
fn push_int(out: &mut Vec<u8>, n: i32) {
    let mut buf = [0u8; 20];
    let i = crate::sys::decimal_digits(n.unsigned_abs() as u64, &mut buf);
    out.extend_from_slice(&buf[i..]);
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
