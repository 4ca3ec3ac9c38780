//! What the tick handler saw between two profiler callbacks: every tick's
//! VM state and the C functions ticks found running. Written on Linux by
//! `posix::running_c`; elsewhere always empty.

/// Where ticks come from. Each source has a note of its own: an allocation
/// session attached to a sampling session shares its profiler callback, and
/// each session reads the ticks it triggered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TickOrigin {
    /// The session's timer (a signal, or LuaJIT's own timer).
    #[default]
    Timer,
    /// The allocator wrapper's sample points.
    Allocator,
}

/// C functions noted per callback; more are counted as C ticks with no
/// function.
pub const NOTE_SLOTS: usize = 4;

/// A C function a tick found running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunningC {
    /// A builtin (fast function), by its id in `jit.vmdef.ffnames`.
    Builtin(u8),
    /// Any other C function, by its address.
    Function(usize),
}

/// What the ticks since the last callback found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickNote {
    /// Ticks by VM state, indexed by [`state_index`]. All
    /// zero when the handler notes nothing.
    pub states: [u32; 5],
    /// The C functions C ticks found, and how many ticks found each.
    pub running_c: [Option<(RunningC, u32)>; NOTE_SLOTS],
}
