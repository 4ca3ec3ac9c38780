//! tecs-profile: a native sampling profiler for LuaJIT.
//!
//! The cdylib is loaded by `require("tecs.profile.native")`; the Lua package
//! under `lua/tecs/` wraps it in the session API (`profile.sample`,
//! `profile.trace`).
//!
//! * [`sys`]: every FFI declaration and `unsafe` block: LuaJIT's profiler
//!   API and stacks (`sys`), and in `sys::posix` the tick handler
//!   (`ticks`) and the tick sources (`sources`).
//! * [`timer`]: which tick source a session runs on, and why.
//! * [`profiler`]: the per-sample callback (hot path).
//! * [`collector`]: the stack table the callback counts into.
//! * [`profile_data`], [`collapsed`]: the finished profile and its text form.
//! * [`frames`], [`report`]: frame kinds, function identity, text views.
//! * `flamegraph`, `speedscope`: SVG and speedscope output (cargo features).
//! * [`collapsed_table`]: the same text straight from the stack table (stop()).
//! * [`lua_api`]: the functions and session object Lua sees (its options
//!   in `lua_api::options`), [`lua_views`]: the views' Lua side.

pub mod collapsed;
pub mod collapsed_table;
pub mod collector;
#[cfg(feature = "flamegraph")]
pub mod flamegraph;
pub mod frames;
pub mod lua_api;
pub mod lua_views;
pub mod profile_data;
pub mod profiler;
pub mod report;
#[cfg(feature = "speedscope")]
pub mod speedscope;
pub mod sys;
pub mod timer;

#[cfg(feature = "module")]
#[mlua::lua_module(name = "tecs_profile_native")]
fn tecs_profile_native(lua: &mlua::Lua) -> mlua::Result<mlua::Table> {
    lua_api::exports(lua)
}
