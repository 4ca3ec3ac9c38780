//! tecs-profile's profiles, views and file formats, independent of Lua and
//! of the running process (no `unsafe` code: what a profile needs from the
//! process, `profile::host` asks the recorder for).
//!
//! * [`profile`]: the stack table samples are counted into
//!   (`stack_table`), the finished profile built from it or read from text
//!   (a name table and rows of name ids), its frames (`frames`: kinds and
//!   function identity) and collapsed text (`collapsed`: the writer
//!   `stop()` uses and the reader).
//! * [`output`]: the other file formats written from a profile: the SVG
//!   flamegraph, speedscope JSON, Chrome trace events, pprof, Firefox
//!   profiles (some behind cargo features).
//! * [`views`]: the text views (top, tree, annotate, hot aborts).

#![forbid(unsafe_code)]

pub mod output;
pub mod profile;
pub mod views;
