//! tecs-profile: a native sampling profiler for LuaJIT.
//!
//! The cdylib is loaded by `require("tecs.profile.native")`; the Lua package
//! under `lua/tecs/` wraps it in the session API (`profile.sample`,
//! `profile.trace`).
//!
//! This crate is the thin layer between Lua and the others: the mlua
//! bindings ([`lua_api`]: the functions and session object Lua sees, their
//! options and the views' Lua side) and the rewriter of Lua sources that
//! call counting and coverage load ([`rewrite`]). The layers below are
//! crates of their own, each using only the ones before it:
//!
//! * `tecs-profile-format` ([`profile`], [`views`], [`output`]): the stack
//!   table, the finished profile, the text views and the file formats; no
//!   Lua and no `unsafe`.
//! * `tecs-profile-recorder` ([`sys`], [`record`], [`session`] and the
//!   compiled-trace decoder): the FFI layer, the sample path and sessions.
//! * `tecs-profile-control` ([`control`]): the control channel.
//!
//! They are re-exported under their module names, the paths the bindings,
//! the tests and the benchmarks use.

#[cfg(unix)]
pub use tecs_profile_control as control;
pub use tecs_profile_format::{output, profile, views};
pub use tecs_profile_recorder::{record, session, sys};

pub mod lua_api;
pub mod rewrite;

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
