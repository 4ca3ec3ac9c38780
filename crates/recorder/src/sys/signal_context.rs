//! Every function that runs in a signal handler, and what arms each
//! handler.
//!
//! A signal interrupts the VM thread anywhere: inside `malloc`, inside
//! LuaJIT's allocator, halfway through a trace or a stack resize. Code that
//! runs in a handler therefore allocates nothing, takes no lock, calls only
//! async-signal-safe functions (`sigaction`, `clock_gettime`,
//! `process_vm_readv`), keeps `errno`, and reads the VM's memory only where
//! it has proved the memory is there. Each function below says why it
//! holds to that.
//!
//! `tests/signal_context.rs` reads the crate's source, follows every
//! handler's calls by name, and fails when a handler reaches a function
//! that is not listed here, or when a listed one is no longer reached:
//! a function added to a handler's path is added here, one line, with its
//! reason. Calls through function pointers are not followed; the handlers
//! make two, to LuaJIT's SIGPROF handler (`pass_ticks`) and to the SIGTRAP
//! disposition they replaced (`on_trap`), both outside this crate.

/// A signal handler of the crate.
pub struct Handler {
    /// The handler, as `file: function` (the file under `src/`).
    pub entry: &'static str,
    /// The signals it is installed for.
    pub signals: &'static str,
    /// What installs it, and what lets it act.
    pub armed_by: &'static str,
}

/// A function that runs inside a signal handler.
pub struct Entry {
    /// `file: function`, or `file: Type::method` (the file under `src/`).
    pub function: &'static str,
    /// Why it may run there.
    pub why_safe: &'static str,
}

const fn entry(function: &'static str, why_safe: &'static str) -> Entry {
    Entry { function, why_safe }
}

/// The crate's signal handlers.
pub const HANDLERS: &[Handler] = &[
    Handler {
        entry: "sys/posix/ticks.rs: on_tick",
        signals: "a free real-time signal, sent by a session's POSIX timer",
        armed_by: "installed once per process by `tick_signal` (session::tick_source::start) and never removed; \
                   passes ticks on only while `arm_ticks` (session::guards::ArmedHandler::arm) has armed it, until \
                   the guard's drop disarms it",
    },
    Handler {
        entry: "sys/posix/ticks.rs: on_trap",
        signals: "SIGTRAP, sent by a session's task-clock and context-switch perf events",
        armed_by: "installed once per process by `trap_handler_installed` when the first perf event opens, never \
                   removed; acts as `on_tick` while armed, and hands any other SIGTRAP to the disposition it replaced",
    },
    Handler {
        entry: "sys/wake.rs: on_sigio",
        signals: "SIGIO, sent when the control channel's socket becomes readable",
        armed_by: "installed by `wake::arm` when a program's control channel opens without polling \
                   (lua_api::control), removed by `wake::disarm`",
    },
    Handler {
        entry: "sys/stop_signals.rs: on_stop",
        signals: "SIGINT, SIGTERM, SIGHUP in the `tecs-profile live` client",
        armed_by: "installed by `stop_signals::catch`, the previous handlers put back by `stop_signals::release`",
    },
];

/// Every function that runs inside one of [`HANDLERS`], by file.
pub const SIGNAL_CONTEXT: &[Entry] = &[
    // The tick handler (sys/posix/ticks.rs).
    entry("sys/posix/ticks.rs: on_tick", "one call; the signal's mask blocks SIGPROF, so LuaJIT's handler cannot nest"),
    entry("sys/posix/ticks.rs: on_trap", "reads the siginfo the kernel passed; a foreign trap goes to its disposition"),
    entry("sys/posix/ticks.rs: pass_tick", "errno saved; one call each to next_interval and pass_ticks"),
    entry("sys/posix/jitter.rs: next_interval", "one ioctl or timer_settime on a source a disarm waits for; atomics"),
    entry("sys/posix/jitter.rs: draw", "arithmetic on one atomic"),
    entry("sys/posix/ticks.rs: pass_ticks", "atomics and one sigaction read; errno saved; LuaJIT's handler is called only while its profiler is the session's"),
    entry("sys/posix/ticks.rs: pass_blocked_ticks", "clock_gettime and relaxed atomics only the VM thread's handler writes"),
    entry("sys/posix/ticks.rs: sigprof_disposition", "one sigaction with no new action, async-signal-safe"),
    entry("sys/posix/ticks.rs: SavedErrno::save", "reads this thread's errno slot"),
    entry("sys/posix/ticks.rs: SavedErrno::drop", "writes this thread's errno slot back"),
    entry("sys/posix/mod.rs: clock_ns", "clock_gettime, async-signal-safe (a vDSO call)"),
    // What the handler notes of the VM (sys/posix/running_c.rs, lost_hook.rs).
    entry("sys/posix/running_c.rs: note_ticks", "a volatile read of the armed VM state, then atomics in fixed slots"),
    entry("sys/posix/running_c.rs: vmstate_now", "one volatile read of the armed global state"),
    entry("sys/posix/running_c.rs: running_now", "past the global state, reads through process_vm_readv, which fails instead of faulting"),
    entry("sys/posix/running_c.rs: function_in_slot", "arithmetic on a word already read"),
    entry("sys/posix/running_c.rs: self_read", "process_vm_readv of this process, which fails instead of faulting"),
    entry("sys/posix/running_c.rs: word", "one read of the armed global state"),
    entry("sys/posix/running_c.rs: field", "reads a field out of a buffer already read"),
    entry("sys/posix/running_c.rs: NoteSet::of", "picks a static set"),
    entry("sys/posix/running_c.rs: NoteSet::new", "a const constructor of atomics (static initialisers)"),
    entry("sys/posix/lost_hook.rs: rearm_if_lost", "one checked byte read and write of the hook mask LuaJIT's own handler writes"),
    // Stacks of compiled code (trace_decoder/).
    entry("trace_decoder/mod.rs: take_ticks", "writes the handler's half of a buffer allocated before arming; no allocation, no lock"),
    entry("trace_decoder/mod.rs: Writing::drop", "one atomic store (a drain on another thread waits for it)"),
    entry("trace_decoder/mod.rs: take_read_ticks", "writes the handler's half of a buffer allocated before arming; no allocation, no lock"),
    entry("trace_decoder/mod.rs: count_missed", "relaxed atomic counters"),
    entry("trace_decoder/interp.rs: count_miss", "a relaxed atomic counter"),
    entry("trace_decoder/interp.rs: count_hook", "a relaxed atomic counter"),
    entry("trace_decoder/interp.rs: ready", "atomic loads of the learned layout"),
    entry("trace_decoder/interp.rs: Regs::of", "reads the interrupted registers from the ucontext the kernel passed"),
    entry(
        "trace_decoder/interp.rs: read_interp_stack",
        "checks the registers against the VM through process_vm_readv before any direct read; fixed frame array",
    ),
    entry("trace_decoder/interp.rs: in_vm_code", "atomic loads of the learned code range"),
    entry("trace_decoder/interp.rs: is_c_call_return", "atomic loads of the learned return addresses"),
    entry("trace_decoder/interp.rs: c_calls_known", "atomic loads of the learned layout"),
    entry("trace_decoder/vm_events.rs: record_event_sent", "one relaxed atomic load"),
    entry(
        "trace_decoder/mod.rs: record_state_back",
        "one checked proof, then one store to the VM state of the thread it interrupted",
    ),
    entry("trace_decoder/interp.rs: read_two", "one process_vm_readv of this process, which fails instead of faulting"),
    entry("trace_decoder/interp.rs: lua_bytecode", "reads fields out of a buffer already read"),
    entry("trace_decoder/interp.rs: in_bytecode", "arithmetic on words already read"),
    entry("trace_decoder/mod.rs: buffers", "one atomic load of a leaked, never freed buffer"),
    entry("trace_decoder/mod.rs: hash", "arithmetic on bytes already read"),
    entry("trace_decoder/mod.rs: count_naming", "relaxed atomics in fixed slots"),
    entry("trace_decoder/walk.rs: at", "a direct read the caller proved readable"),
    entry("trace_decoder/walk.rs: le", "reads bytes out of a buffer already read"),
    entry("trace_decoder/walk.rs: self_word", "process_vm_readv of this process, which fails instead of faulting"),
    entry("trace_decoder/walk.rs: slot_function", "arithmetic on a word already read"),
    entry("trace_decoder/walk.rs: follows_call", "reads code bytes the caller proved readable"),
    entry("trace_decoder/walk.rs: trace_header", "reads through process_vm_readv, which fails instead of faulting"),
    entry("trace_decoder/walk.rs: locate_trace", "checked reads of the trace the VM state names"),
    entry("trace_decoder/walk.rs: entered_trace", "address compares over the handler's cache, then checked reads of the trace array"),
    entry("trace_decoder/walk.rs: code_offset", "checked reads of the trace's code and the C stack"),
    entry("trace_decoder/walk.rs: read_trace_stack", "checked reads into a fixed frame array"),
    entry(
        "trace_decoder/walk.rs: scan_stack",
        "reads the C stack through the kernel into a fixed window, a page at a time",
    ),
    entry(
        "trace_decoder/walk.rs: read_trace_gc_step",
        "reads the thread and its base slot through the kernel, then as read_trace_at",
    ),
    entry(
        "trace_decoder/walk.rs: gc_step_caller",
        "atomic loads of the handler's trace cache; a candidate trace checked before its code is read",
    ),
    entry(
        "trace_decoder/walk.rs: cached_live",
        "direct reads of the VM's trace array, which a collector step does not resize, and of a trace it holds",
    ),
    entry(
        "trace_decoder/vm_events.rs: base_proto",
        "reads a published map, as chain_at: maps are freed only once the handler is disarmed",
    ),
    entry(
        "trace_decoder/walk.rs: read_trace_at",
        "reads the trace this thread runs, which stays as it is while it runs, into a fixed frame array",
    ),
    entry(
        "trace_decoder/walk.rs: snapshot_callee",
        "reads the IR of the trace this thread runs, which stays as it is while it runs",
    ),
    entry(
        "trace_decoder/walk.rs: checked_proto",
        "a bounded scan of the IR of the trace this thread runs; no allocation",
    ),
    entry(
        "trace_decoder/walk.rs: proto_constant",
        "a bounded scan of the running trace's constants, which keep the prototype alive",
    ),
    entry("trace_decoder/walk.rs: vm_call", "reads the thread's header through process_vm_readv"),
    entry(
        "trace_decoder/walk.rs: in_c_call",
        "compares the interrupted address and one word read through process_vm_readv with learned addresses",
    ),
    entry("trace_decoder/walk.rs: read_c_stack", "checked reads into a fixed frame array"),
    entry(
        "trace_decoder/walk.rs: walk_frames",
        "reads live frames below a running frame proved to be this thread's; refuses a link that is no address",
    ),
    entry("trace_decoder/walk.rs: read_zones", "reads the zone table through process_vm_readv into a fixed buffer"),
    entry(
        "trace_decoder/vm_events.rs: chain_at",
        "atomic loads of a published map, freed only once the handler is disarmed; one read of the proved trace",
    ),
    entry("trace_decoder/fine_map.rs: FineMap::at", "a binary search in a published map's arrays; no allocation"),
    entry("trace_decoder/fine_map.rs: FineMap::at_call", "a binary search in a published map's calls; no allocation"),
    entry("trace_decoder/text.rs: Captured::push", "writes a fixed array"),
    entry("trace_decoder/text.rs: Frame::of", "builds a value; no allocation"),
    entry("trace_decoder/text.rs: Frame::by_proto", "builds a value; no allocation"),
    entry("trace_decoder/text.rs: lua_proto", "reads a live function object, or none"),
    entry("trace_decoder/text.rs: Out::bytes", "writes a fixed buffer, refusing past its end"),
    entry("trace_decoder/text.rs: Out::int", "formats into a fixed buffer"),
    entry("trace_decoder/text.rs: write_stack", "writes frames into a fixed buffer"),
    entry("trace_decoder/text.rs: write_native", "writes addresses into a fixed buffer (address_text)"),
    entry("native_frames/mod.rs: armed", "one atomic load"),
    entry("native_frames/mod.rs: walk", "a try-lock (BUSY) keeps the tables alive and the rule cache its own; a tick that finds it held walks nothing; relaxed counters"),
    entry("native_frames/mod.rs: walk_with", "framehop's unwind with fixed storage (MustNotAllocateDuringUnwind) over tables copied at arm; stack words read only in [rsp, the thread's stack top), the live stack; stops at the first address of no loaded object"),
    entry("native_frames/mod.rs: ring_watcher", "an atomic swap and one write(2) to a non-blocking pipe of ours, async-signal-safe"),
    entry("trace_decoder/walk.rs: in_trace_code", "relaxed loads of the handler's own trace cache"),
    entry("native_frames/mod.rs: object_of", "a binary search in a slice built before the tables were published"),
    entry("trace_decoder/text.rs: write_frame", "writes a frame into a fixed buffer"),
    entry("trace_decoder/text.rs: write_identities", "writes frames' identities into a fixed buffer"),
    entry("trace_decoder/text.rs: write_identity", "writes a frame's identity into a fixed buffer"),
    entry("trace_decoder/text.rs: line_of", "reads a live prototype's line table"),
    entry("trace_decoder/text.rs: is_stripped", "reads two fields of a live prototype"),
    entry("trace_decoder/text.rs: uleb128", "reads a live prototype's debug info"),
    entry("trace_decoder/text.rs: cstr", "borrows a string of live VM memory, copies nothing"),
    entry("trace_decoder/text.rs: local_name", "reads a live prototype's debug info"),
    entry("trace_decoder/text.rs: upvalue_name", "reads a live prototype's debug info"),
    entry("trace_decoder/text.rs: string_constant", "reads a live prototype's constants"),
    entry("trace_decoder/text.rs: call_name", "reads a live prototype's bytecode and debug info"),
    entry("trace_decoder/text.rs: short_source", "writes into a fixed array"),
    entry("sys/mod.rs: address_text", "writes into a fixed array"),
    entry("sys/mod.rs: decimal_digits", "writes into a fixed array"),
    // The control channel's wake-up (sys/wake.rs).
    entry("sys/wake.rs: on_sigio", "reads the hook and sets a count hook, as luajit.c's SIGINT handler does"),
    entry("sys/wake.rs: is_ours", "compares two function addresses"),
    entry(
        "sys/wake.rs: tend_pending",
        "atomics, gettid, and on the VM thread the hook read and set again as on_sigio does",
    ),
    entry("trace_decoder/interp.rs: count_wake", "a relaxed atomic counter"),
    entry("trace_decoder/vm_states.rs: is_vm_state", "compares integers"),
    entry("trace_decoder/vm_states.rs: letter", "compares integers"),
    entry("trace_decoder/vm_states.rs: count_state_miss", "a relaxed atomic counter"),
    entry(
        "trace_decoder/vm_states.rs: read_state_stack",
        "checks the saved frame through process_vm_readv before any direct read; fixed frame array",
    ),
    // The live client's stop signals (sys/stop_signals.rs).
    entry("sys/stop_signals.rs: on_stop", "stores the signal in an atomic"),
];
