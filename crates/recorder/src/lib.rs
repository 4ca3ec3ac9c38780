//! tecs-profile's recorder: everything that touches the running VM.
//!
//! * [`sys`]: the FFI layer: LuaJIT's profiler API and stacks, and in
//!   `sys::posix` the tick handler (`ticks`) and the tick sources
//!   (`sources`); `sys::signal_context` lists what runs in signal handlers.
//! * [`trace_decoder`] (x86-64 Linux): reads the stack of a compiled trace
//!   at the tick, from LuaJIT's trace and snapshot structures (offsets
//!   proved by a probe at session start), and the fine map that places
//!   machine code between two snapshots.
//! * [`native_frames`] (x86-64 Linux): the native frames below a C
//!   function, walked in the tick handler with the loaded objects' unwind
//!   tables, and their names.
//! * [`record`]: what runs while a session records: the per-sample
//!   callback (`sampler`, the hot path), counting into the format crate's
//!   stack table, and the allocator wrapper of allocation sessions
//!   (`alloc_hook`).
//! * [`session`]: a session's start and stop, and their order: the guards
//!   that undo each step, the tick source and its fallbacks
//!   (`tick_source`), and what differs between platforms (`platform`).
//!
//! It builds on `tecs-profile-format` (the stack table and the finished
//! profile); it knows nothing of Lua bindings or output formats.

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod native_frames;
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
#[path = "native_frames_elsewhere.rs"]
pub mod native_frames;
pub mod record;
pub mod session;
pub mod sys;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod trace_decoder;
#[cfg(all(target_os = "linux", not(target_arch = "x86_64")))]
#[path = "trace_decoder_elsewhere.rs"]
pub mod trace_decoder;
