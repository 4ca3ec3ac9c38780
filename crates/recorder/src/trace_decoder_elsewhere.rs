//! The trace decoder's interface where there is no decoder: Linux on
//! another architecture than x86-64 (arm64). The tick handler reads no
//! compiled code there: every tick goes to LuaJIT's hook, the session runs
//! at function precision, and `stats().compiledNote` says why.

use std::ffi::c_void;

use mlua::Lua;

use crate::sys::TakenStack;

const WHY: &str = "compiled code is read in the tick handler only on x86-64";

pub const MISS_NAMES: [&str; 5] = ["trace", "address", "frame", "function", "full"];

pub fn prove(_lua: &Lua) -> Result<(), &'static str> {
    Err(WHY)
}
pub fn arm(_depth: usize, _zones: usize) {}
pub fn disarm() {}
pub fn armed() -> bool {
    false
}
pub fn attach_logger(_lua: &Lua, _flush: bool) -> Result<(), &'static str> {
    Err(WHY)
}
pub fn detach_logger(_lua: &Lua) {}
pub fn map_counts() -> [u64; 5] {
    [0; 5]
}
pub fn counts() -> (u64, [u64; 5]) {
    (0, [0; 5])
}
pub fn frame_counts() -> [(&'static str, u64); 2] {
    [("byPrototype", 0), ("atCaller", 0)]
}
pub fn take_ticks(_n: u64, _ctx: *mut c_void) -> bool {
    false
}
pub fn drain(_f: impl FnMut(TakenStack)) {}

pub const INTERP_MISS_NAMES: [&str; 5] = ["helper", "registers", "builtin", "frame", "full"];
pub const HOOK_STATE_NAMES: [&str; 5] = ["compiled", "interpreted", "c", "gc", "jit"];
pub const STATE_MISS_NAMES: [&str; 5] = ["trace", "exit", "cFunction", "frame", "full"];

/// Ticks left to LuaJIT's hook while a control-channel wake waited.
static WAKE_TICKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn count_wake(n: u64) {
    WAKE_TICKS.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
}
pub fn wake_ticks() -> u64 {
    WAKE_TICKS.load(std::sync::atomic::Ordering::Relaxed)
}
pub fn interp_counts() -> ([u64; 5], [u64; 5]) {
    ([0; 5], [0; 5])
}
pub fn reset_interp_counts() {
    WAKE_TICKS.store(0, std::sync::atomic::Ordering::Relaxed);
}
pub fn interp_state() -> Result<(), &'static str> {
    Err(WHY)
}
pub fn learn_interp() -> Result<(), &'static str> {
    Err(WHY)
}
pub fn state_counts() -> [u64; 5] {
    [0; 5]
}
pub fn reset_state_counts() {}

/// No frame is written by its prototype here (see the decoder's).
///
/// # Safety
/// Nothing is read.
pub unsafe fn stripped_proto(_f: *const c_void) -> Option<usize> {
    None
}
