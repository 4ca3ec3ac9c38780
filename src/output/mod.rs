//! File formats written from a finished profile.

#[cfg(feature = "flamegraph")]
pub mod flamegraph;
#[cfg(feature = "speedscope")]
pub mod speedscope;
