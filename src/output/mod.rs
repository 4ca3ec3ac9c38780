//! File formats written from a finished profile.

#[cfg(feature = "flamegraph")]
pub mod flamegraph;
pub mod pprof;
#[cfg(feature = "speedscope")]
pub mod speedscope;
