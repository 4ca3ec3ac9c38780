//! File formats written from a finished profile, and from a session's time
//! line ([`timed`]), and their registry: each format is declared once in
//! [`REGISTRY`] (its name, the file-name endings that choose it, whether it
//! is written from the timeline, its writer, what the command line's help
//! says of it). The Lua API (`native.formats`, `native.formatTable`), the
//! `format` option, the command line's allow-lists and help, and the choice
//! of a format by file name all read it.
//!
//! A new format is a module here with a [`Writer`], one [`FileFormat`]
//! variant and one entry of [`REGISTRY`].

use std::collections::HashMap;

use crate::profile::Profile;

#[cfg(feature = "speedscope")]
pub mod chrome_trace;
#[cfg(feature = "speedscope")]
pub mod chrome_trace_read;
pub mod collapsed;
#[cfg(feature = "speedscope")]
pub mod firefox;
#[cfg(feature = "flamegraph")]
pub mod flamegraph;
pub mod pprof;
#[cfg(feature = "speedscope")]
pub mod speedscope;
pub mod timed;

/// Every file format, in the order the registry lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileFormat {
    Collapsed,
    Svg,
    Speedscope,
    Pprof,
    Firefox,
    SpeedscopeTimeline,
    ChromeTrace,
    Html,
}

/// What a writer is given.
pub enum Source<'a> {
    /// A finished profile (aggregated rows) and what is known of how it was
    /// taken.
    Profile(&'a Profile, &'a RenderMeta<'a>),
    /// A session's timeline: samples in the order they were taken.
    Timeline(&'a timed::TimedProfile),
}

/// Writes one format. A writer of profiles refuses a timeline and the
/// other way round (the registry says which it takes: [`Declaration::timeline`]).
pub trait Writer: Sync {
    fn write(&self, source: Source<'_>) -> Result<Vec<u8>, String>;
}

/// What the profile formats may use besides the rows. Every field has the
/// value a caller that knows nothing gives it ([`RenderMeta::new`]).
pub struct RenderMeta<'a> {
    /// The document's title or name.
    pub title: String,
    /// What the counts are, on an SVG's tooltips ("samples").
    pub count_name: String,
    /// SVG: roots at the top.
    pub inverted: bool,
    /// The sampling interval, when known (for allocation profiles, the
    /// bytes per sample over 1e6: see `clock`).
    pub interval_ms: Option<f64>,
    /// `cpu`, `wall`, or for an allocation profile (counts are bytes)
    /// `alloc_space` or `inuse_space`.
    pub clock: String,
    /// Wall-clock start (seconds since the Unix epoch) and length of the
    /// profile, when known.
    pub start_sec: Option<f64>,
    pub duration_sec: Option<f64>,
    /// An allocation profile's objects per stack (pprof's `alloc_objects`),
    /// keyed by [`pprof::stack_key`].
    pub objects: HashMap<String, [u64; 5]>,
    /// An allocation profile's live bytes and objects.
    pub inuse: Option<pprof::InUse>,
    /// The function a Lua frame belongs to, where its source was read.
    pub function_of: &'a dyn Fn(&str) -> Option<String>,
}

impl RenderMeta<'_> {
    pub fn new() -> RenderMeta<'static> {
        RenderMeta {
            title: "tecs-profile".into(),
            count_name: "samples".into(),
            inverted: false,
            interval_ms: None,
            clock: "cpu".into(),
            start_sec: None,
            duration_sec: None,
            objects: HashMap::new(),
            inuse: None,
            function_of: &|_| None,
        }
    }

    /// Whether the counts are bytes (an allocation profile).
    pub fn counts_bytes(&self) -> bool {
        self.clock == pprof::ALLOC_SPACE || self.clock == pprof::INUSE_SPACE
    }
}

/// One format: everything the rest of the program knows of it.
pub struct Declaration {
    pub format: FileFormat,
    /// The name the `format` option, `write(path, format)` and `-f` take.
    pub name: &'static str,
    /// File-name endings (lower case) that choose it under "auto".
    pub endings: &'static [&'static str],
    /// Written from a session's timeline (a profile object has none).
    pub timeline: bool,
    /// What writes it.
    pub writer: FormatWriter,
    /// Its writer names Lua functions from their sources (given through
    /// [`RenderMeta::function_of`], or the timeline's function names).
    pub reads_sources: bool,
    /// Its readers group a function's lines themselves (pprof's functions,
    /// the Firefox Profiler's call tree), so frames by function leave its
    /// frames as lines.
    pub groups_functions: bool,
    /// What the command line's help calls it.
    pub help: &'static str,
    /// What its numbers are when the profile does not say its sampling
    /// interval (a collapsed file), for the command line's note; None where
    /// the interval changes nothing.
    pub without_interval: Option<&'static str>,
}

/// What writes a format.
#[derive(Clone, Copy)]
pub enum FormatWriter {
    /// This module.
    Native(&'static dyn Writer),
    /// A Lua module, whose `render(session)` makes the file (the report
    /// page needs the Lua views).
    Lua(&'static str),
}

/// A writer for a format left out of this build.
#[cfg(any(not(feature = "flamegraph"), not(feature = "speedscope")))]
struct Unavailable(&'static str);

#[cfg(any(not(feature = "flamegraph"), not(feature = "speedscope")))]
impl Writer for Unavailable {
    fn write(&self, _: Source<'_>) -> Result<Vec<u8>, String> {
        Err(self.0.to_string())
    }
}

#[cfg(feature = "flamegraph")]
const SVG: &dyn Writer = &flamegraph::Svg;
#[cfg(not(feature = "flamegraph"))]
const SVG: &dyn Writer =
    &Unavailable("SVG output is not available: tecs.profile.native was built without the `flamegraph` feature");

#[cfg(feature = "speedscope")]
mod json_writers {
    use super::Writer;
    pub const SPEEDSCOPE: &dyn Writer = &super::speedscope::Speedscope;
    pub const SPEEDSCOPE_TIMELINE: &dyn Writer = &super::speedscope::SpeedscopeTimeline;
    pub const CHROME_TRACE: &dyn Writer = &super::chrome_trace::ChromeTrace;
    pub const FIREFOX: &dyn Writer = &super::firefox::Firefox;
}
// The JSON formats are written with serde_json, which the `speedscope`
// feature brings in.
#[cfg(not(feature = "speedscope"))]
mod json_writers {
    use super::{Unavailable, Writer};
    pub const SPEEDSCOPE: &dyn Writer = &Unavailable(
        "speedscope output is not available: tecs.profile.native was built without the `speedscope` feature",
    );
    pub const SPEEDSCOPE_TIMELINE: &dyn Writer = SPEEDSCOPE;
    pub const CHROME_TRACE: &dyn Writer = &Unavailable(
        "Chrome trace output is not available: tecs.profile.native was built without the `speedscope` feature",
    );
    pub const FIREFOX: &dyn Writer = &Unavailable(
        "Firefox Profiler output is not available: tecs.profile.native was built without the `speedscope` feature",
    );
}

/// Every format, one declaration each.
pub static REGISTRY: &[Declaration] = &[
    Declaration {
        format: FileFormat::Collapsed,
        name: "collapsed",
        endings: &[],
        timeline: false,
        writer: FormatWriter::Native(&collapsed::Collapsed),
        reads_sources: false,
        groups_functions: false,
        help: "collapsed stacks (any other name)",
        without_interval: None,
    },
    Declaration {
        format: FileFormat::Svg,
        name: "svg",
        endings: &[".svg"],
        timeline: false,
        writer: FormatWriter::Native(SVG),
        reads_sources: false,
        groups_functions: false,
        help: "SVG flamegraph",
        without_interval: None,
    },
    Declaration {
        format: FileFormat::Speedscope,
        name: "speedscope",
        endings: &[".speedscope.json"],
        timeline: false,
        writer: FormatWriter::Native(json_writers::SPEEDSCOPE),
        reads_sources: true,
        groups_functions: false,
        help: "speedscope",
        without_interval: Some("the speedscope weights are sample counts (unit \"none\")"),
    },
    Declaration {
        format: FileFormat::Pprof,
        name: "pprof",
        endings: &[".pb.gz"],
        timeline: false,
        writer: FormatWriter::Native(&pprof::Pprof),
        reads_sources: true,
        groups_functions: true,
        help: "gzipped pprof",
        without_interval: Some("the pprof time values are sample counts (1 ns per sample)"),
    },
    Declaration {
        format: FileFormat::Firefox,
        name: "firefox",
        endings: &[".firefox.json"],
        timeline: false,
        writer: FormatWriter::Native(json_writers::FIREFOX),
        reads_sources: true,
        groups_functions: true,
        help: "Firefox Profiler",
        without_interval: Some("the Firefox Profiler's time axis gives each sample 1 ms"),
    },
    Declaration {
        format: FileFormat::SpeedscopeTimeline,
        name: "speedscope-timeline",
        endings: &[".timeline.speedscope.json"],
        timeline: true,
        writer: FormatWriter::Native(json_writers::SPEEDSCOPE_TIMELINE),
        reads_sources: true,
        groups_functions: false,
        help: "speedscope in time order",
        without_interval: None,
    },
    Declaration {
        format: FileFormat::ChromeTrace,
        name: "chrome-trace",
        endings: &[".trace.json"],
        timeline: true,
        writer: FormatWriter::Native(json_writers::CHROME_TRACE),
        reads_sources: true,
        groups_functions: false,
        help: "Chrome trace events (Perfetto, chrome://tracing)",
        without_interval: None,
    },
    Declaration {
        format: FileFormat::Html,
        name: "html",
        endings: &[".html"],
        timeline: true,
        writer: FormatWriter::Lua("tecs.profile.page"),
        reads_sources: false,
        groups_functions: false,
        help: "the report page",
        without_interval: None,
    },
];

impl FileFormat {
    /// Its declaration in [`REGISTRY`].
    pub fn declaration(self) -> &'static Declaration {
        REGISTRY.iter().find(|d| d.format == self).expect("every format is declared")
    }

    /// The format named `name`, if any ("auto" is none: see [`FileFormat::for_path`]).
    pub fn from_name(name: &str) -> Option<FileFormat> {
        REGISTRY.iter().find(|d| d.name == name).map(|d| d.format)
    }

    /// The format a file name chooses: the longest ending it has (so that
    /// `.timeline.speedscope.json` wins over `.speedscope.json`), in any
    /// case; collapsed text when none.
    pub fn for_path(path: &str) -> FileFormat {
        let lower = path.to_ascii_lowercase();
        REGISTRY
            .iter()
            .flat_map(|d| d.endings.iter().map(move |e| (d.format, *e)))
            .filter(|(_, e)| lower.ends_with(e))
            .max_by_key(|(_, e)| e.len())
            .map_or(FileFormat::Collapsed, |(f, _)| f)
    }

    /// Renders `source` in this format.
    pub fn write(self, source: Source<'_>) -> Result<Vec<u8>, String> {
        let d = self.declaration();
        match d.writer {
            FormatWriter::Native(w) => w.write(source),
            FormatWriter::Lua(module) => Err(format!("the {} format is made by {}", d.name, module)),
        }
    }
}

/// What a writer says when handed the wrong kind of source.
pub fn wrong_source(name: &str, timeline: bool) -> String {
    if timeline {
        format!("the {} format is written from a session's timeline, not from a profile", name)
    } else {
        format!("the {} format is written from a profile, not from a timeline", name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_is_declared_once_under_a_name_of_its_own() {
        let mut names: Vec<&str> = REGISTRY.iter().map(|d| d.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
        for d in REGISTRY {
            assert!(std::ptr::eq(d.format.declaration(), d));
            assert_eq!(FileFormat::from_name(d.name), Some(d.format));
        }
        assert_eq!(FileFormat::from_name("auto"), None);
    }

    #[test]
    fn a_file_name_chooses_by_its_longest_ending() {
        let cases = [
            ("p.svg", FileFormat::Svg),
            ("P.SVG", FileFormat::Svg),
            ("p.speedscope.json", FileFormat::Speedscope),
            ("p.timeline.speedscope.json", FileFormat::SpeedscopeTimeline),
            ("p.pb.gz", FileFormat::Pprof),
            ("p.firefox.json", FileFormat::Firefox),
            ("p.trace.json", FileFormat::ChromeTrace),
            ("p.html", FileFormat::Html),
            ("p.json", FileFormat::Collapsed),
            ("p.collapsed", FileFormat::Collapsed),
        ];
        for (path, format) in cases {
            assert_eq!(FileFormat::for_path(path), format, "{}", path);
        }
    }

    #[test]
    fn no_ending_is_claimed_twice() {
        let mut endings: Vec<&str> = REGISTRY.iter().flat_map(|d| d.endings.iter().copied()).collect();
        let n = endings.len();
        endings.sort_unstable();
        endings.dedup();
        assert_eq!(endings.len(), n);
        assert!(endings.iter().all(|e| e.starts_with('.') && *e == e.to_ascii_lowercase()));
    }
}
