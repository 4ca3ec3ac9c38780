//! tecs-profile: a native sampling profiler for LuaJIT.
//!
//! The cdylib is loaded by `require("tecs.profile.native")`; the Lua package
//! under `lua/tecs/` wraps it in the session API (`profile.sample`,
//! `profile.trace`).
//!
//! The layout follows the data:
//!
//! * [`sys`]: every FFI declaration: LuaJIT's profiler API and stacks, and
//!   in `sys::posix` the tick handler (`ticks`) and the tick sources
//!   (`sources`); `sys::signal_context` lists what runs in signal handlers.
//! * [`record`]: what runs while a session records: the per-sample
//!   callback (`sampler`, the hot path), the stack table it counts into
//!   (`stack_table`) and the allocator wrapper of allocation sessions
//!   (`alloc_hook`).
//! * [`session`]: a session's start and stop, and their order: the guards
//!   that undo each step, the tick source and its fallbacks
//!   (`tick_source`), and what differs between platforms (`platform`).
//! * [`profile`]: the finished profile (a name table and rows of name ids,
//!   built from the stack table or read from text), its frames (`frames`:
//!   kinds and function identity) and collapsed text (`collapsed`: the
//!   writer `stop()` uses and the reader).
//! * [`output`]: the other file formats written from a profile: the SVG
//!   flamegraph and speedscope JSON (cargo features).
//! * [`views`]: the text views (top, tree, annotate, hot aborts).
//! * [`lua_api`]: the mlua bindings: the functions and session object Lua
//!   sees, their options (`lua_api::options`) and the views' Lua side
//!   (`lua_api::profile_data`).
//!
//! Each layer uses only the ones listed before it (`tests/layers.rs`).

#[cfg(unix)]
pub mod control;
pub mod lua_api;
pub mod output;
pub mod profile;
pub mod record;
pub mod rewrite;
pub mod session;
pub mod sys;
pub mod views;

// The loadable module's heap: large blocks on huge-page boundaries, which
// `stop()` needs (`sys::large_pages` says why, with the measurement). Tests
// and benchmarks declare counting allocators that forward to it.
#[cfg(all(feature = "module", target_os = "linux", not(test)))]
#[global_allocator]
static HEAP: sys::large_pages::LargePages = sys::large_pages::LargePages;

#[cfg(feature = "module")]
#[mlua::lua_module(name = "tecs_profile_native")]
fn tecs_profile_native(lua: &mlua::Lua) -> mlua::Result<mlua::Table> {
    lua_api::exports(lua)
}
