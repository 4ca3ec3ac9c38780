//! File formats written from a finished profile.

pub mod collapsed_table;
#[cfg(feature = "flamegraph")]
pub mod flamegraph;
pub mod pprof;
#[cfg(feature = "speedscope")]
pub mod speedscope;
