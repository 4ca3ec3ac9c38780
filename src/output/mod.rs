//! File formats written from a finished profile, and from a session's time
//! line ([`timed`]).

#[cfg(feature = "speedscope")]
pub mod chrome_trace;
#[cfg(feature = "speedscope")]
pub mod chrome_trace_read;
#[cfg(feature = "flamegraph")]
pub mod flamegraph;
pub mod pprof;
#[cfg(feature = "speedscope")]
pub mod speedscope;
pub mod timed;
