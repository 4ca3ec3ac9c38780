//! The Firefox Profiler's processed profile format
//! (profiler.firefox.com, "Load a profile from file"): one thread whose
//! tables hold the profile's stacks as the profiler keeps them in memory,
//! so it loads the file without a processing step.
//!
//! Each stack of the profile becomes one sample per VM state it was seen
//! in, weighted by its count (`weightType` "samples", or "bytes" for an
//! allocation profile). Functions are the frames of the collapsed text as
//! they are written there (zone frames first, then the stack, caller
//! first); a Lua line's function carries its file and line. The VM state is
//! the category of the leaf frame (compiled, interpreted, C code, GC, JIT
//! compiler), zones have a category of their own, and the other frames are
//! "Lua". Samples are laid end to end in time, each as long as its count
//! times the interval (1 ms when the interval is not known), so the track
//! graph shows the shares.
//!
//! The tables are those of processed profile version
//! [`PROCESSED_PROFILE_VERSION`] (with `meta.version`, the Gecko profile
//! version of the same releases, [`GECKO_PROFILE_VERSION`]); the profiler
//! upgrades older versions as it loads them. Columns a Lua profile has no
//! use for (addresses, native symbols, markers, libraries) are present and
//! empty or null, as the format requires.

use std::collections::HashMap;

use serde::Serialize;

use super::{RenderMeta, Source, Writer};
use crate::profile::frames;
use crate::profile::Profile;

/// `meta.preprocessedProfileVersion`: the layout of the tables below.
pub const PROCESSED_PROFILE_VERSION: u32 = 49;
/// `meta.version`: the Gecko profile format of the same releases.
pub const GECKO_PROFILE_VERSION: u32 = 24;

/// The registry's writer.
pub struct Firefox;

impl Writer for Firefox {
    fn write(&self, source: Source<'_>) -> Result<Vec<u8>, String> {
        let Source::Profile(p, meta) = source else { return Err(super::wrong_source("firefox", false)) };
        Ok(render(p, meta).into_bytes())
    }
}

/// The categories, by index: the profiler requires a grey one, which it
/// takes as the default.
const CATEGORIES: [(&str, &str); 8] = [
    ("Other", "grey"),
    ("Zone", "lightblue"),
    ("Lua", "blue"),
    ("Compiled", "green"),
    ("Interpreted", "yellow"),
    ("C code", "orange"),
    ("GC", "red"),
    ("JIT compiler", "purple"),
];
const ZONE_CATEGORY: usize = 1;
const LUA_CATEGORY: usize = 2;
/// The category of a leaf in VM state `VM_STATES[i]` is `STATE_CATEGORY + i`.
const STATE_CATEGORY: usize = 3;

/// The frame of an empty stack, as the collapsed text writes it.
const ROOT_FRAME: &str = "<root>";

// Field names are the format's (camelCase); columns are in the order the
// profiler's own writer puts them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct File<'a> {
    meta: Meta<'a>,
    libs: [(); 0],
    threads: [Thread; 1],
    pages: [(); 0],
    profiler_overhead: [(); 0],
    counters: [(); 0],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Meta<'a> {
    version: u32,
    preprocessed_profile_version: u32,
    /// Milliseconds.
    interval: f64,
    /// Milliseconds since the Unix epoch.
    start_time: f64,
    process_type: u32,
    product: &'a str,
    categories: Vec<Category>,
    marker_schema: [(); 0],
    extensions: Extensions,
    paused_ranges: [(); 0],
    symbolicated: bool,
    debug: bool,
    uses_only_one_stack_type: bool,
    does_not_use_frame_implementation: bool,
    source_code_is_not_on_searchfox: bool,
}

#[derive(Serialize)]
struct Category {
    name: &'static str,
    color: &'static str,
    subcategories: [&'static str; 1],
}

#[derive(Serialize)]
struct Extensions {
    length: usize,
    #[serde(rename = "baseURL")]
    base_url: [(); 0],
    id: [(); 0],
    name: [(); 0],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Thread {
    name: &'static str,
    is_main_thread: bool,
    process_type: &'static str,
    process_name: String,
    process_startup_time: f64,
    process_shutdown_time: Option<f64>,
    register_time: f64,
    unregister_time: Option<f64>,
    paused_ranges: [(); 0],
    pid: &'static str,
    tid: u32,
    samples: Samples,
    markers: Markers,
    stack_table: StackTable,
    frame_table: FrameTable,
    func_table: FuncTable,
    resource_table: ResourceTable,
    native_symbols: NativeSymbols,
    string_array: Vec<String>,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Samples {
    length: usize,
    stack: Vec<usize>,
    time: Vec<f64>,
    weight: Vec<u64>,
    weight_type: &'static str,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Markers {
    length: usize,
    data: [(); 0],
    name: [(); 0],
    start_time: [(); 0],
    end_time: [(); 0],
    phase: [(); 0],
    category: [(); 0],
}

#[derive(Serialize, Default)]
struct StackTable {
    length: usize,
    prefix: Vec<Option<usize>>,
    frame: Vec<usize>,
    category: Vec<usize>,
    subcategory: Vec<usize>,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct FrameTable {
    length: usize,
    /// -1: no address.
    address: Vec<i64>,
    inline_depth: Vec<u32>,
    category: Vec<Option<usize>>,
    subcategory: Vec<Option<usize>>,
    func: Vec<usize>,
    native_symbol: Vec<Option<usize>>,
    #[serde(rename = "innerWindowID")]
    inner_window_id: Vec<Option<u64>>,
    implementation: Vec<Option<usize>>,
    line: Vec<Option<u32>>,
    column: Vec<Option<u32>>,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct FuncTable {
    length: usize,
    name: Vec<usize>,
    #[serde(rename = "isJS")]
    is_js: Vec<bool>,
    #[serde(rename = "relevantForJS")]
    relevant_for_js: Vec<bool>,
    /// -1: no resource.
    resource: Vec<i64>,
    file_name: Vec<Option<usize>>,
    line_number: Vec<Option<u32>>,
    column_number: Vec<Option<u32>>,
}

#[derive(Serialize, Default)]
struct ResourceTable {
    length: usize,
    lib: Vec<Option<usize>>,
    name: Vec<usize>,
    host: Vec<Option<usize>>,
    /// 0: a resource of unknown type (a source file here).
    #[serde(rename = "type")]
    kind: Vec<u32>,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct NativeSymbols {
    length: usize,
    address: [(); 0],
    lib_index: [(); 0],
    name: [(); 0],
    function_size: [(); 0],
}

/// The thread's tables as they fill, each string, function, frame and
/// stack once.
#[derive(Default)]
struct Tables {
    strings: Vec<String>,
    string_index: HashMap<String, usize>,
    funcs: FuncTable,
    func_index: HashMap<String, usize>,
    resources: ResourceTable,
    resource_index: HashMap<String, usize>,
    frames: FrameTable,
    frame_index: HashMap<(usize, Option<u32>, usize), usize>,
    stacks: StackTable,
    stack_index: HashMap<(Option<usize>, usize), usize>,
}

impl Tables {
    fn string(&mut self, s: &str) -> usize {
        if let Some(&i) = self.string_index.get(s) {
            return i;
        }
        self.strings.push(s.to_string());
        self.string_index.insert(s.to_string(), self.strings.len() - 1);
        self.strings.len() - 1
    }

    fn resource(&mut self, file: &str) -> usize {
        if let Some(&i) = self.resource_index.get(file) {
            return i;
        }
        let name = self.string(file);
        let r = &mut self.resources;
        r.lib.push(None);
        r.name.push(name);
        r.host.push(None);
        r.kind.push(0);
        r.length += 1;
        self.resource_index.insert(file.to_string(), r.length - 1);
        r.length - 1
    }

    /// The function of a frame text and the line the frame is at. A Lua
    /// line or function frame has its file (also its resource); the
    /// function is the one `function_of` names (its line where it starts),
    /// else the frame text itself (its first line).
    fn func(&mut self, frame: &str, function_of: &dyn Fn(&str) -> Option<String>) -> (usize, Option<u32>) {
        let place = frames::file_line(frame).or_else(|| frames::file_span(frame).map(|(f, first, _)| (f, first)));
        let named = place.and_then(|_| function_of(frame));
        let key = named.as_deref().unwrap_or(frame);
        if let Some(&i) = self.func_index.get(key) {
            return (i, place.map(|p| p.1));
        }
        let key = key.to_string();
        let name = self.string(&key);
        let (file, line, resource) = match place {
            Some((file, line)) => {
                let first = match &named {
                    Some(label) => defined_at(label),
                    None => Some(line),
                };
                (Some(self.string(file)), first, self.resource(file) as i64)
            }
            None => (None, None, -1),
        };
        let f = &mut self.funcs;
        f.name.push(name);
        f.is_js.push(false);
        f.relevant_for_js.push(false);
        f.resource.push(resource);
        f.file_name.push(file);
        f.line_number.push(line);
        f.column_number.push(None);
        f.length += 1;
        self.func_index.insert(key, f.length - 1);
        (f.length - 1, place.map(|p| p.1))
    }

    fn frame(&mut self, text: &str, category: usize, function_of: &dyn Fn(&str) -> Option<String>) -> usize {
        let (func, line) = self.func(text, function_of);
        if let Some(&i) = self.frame_index.get(&(func, line, category)) {
            return i;
        }
        let t = &mut self.frames;
        t.address.push(-1);
        t.inline_depth.push(0);
        t.category.push(Some(category));
        t.subcategory.push(Some(0));
        t.func.push(func);
        t.native_symbol.push(None);
        t.inner_window_id.push(None);
        t.implementation.push(None);
        t.line.push(line);
        t.column.push(None);
        t.length += 1;
        self.frame_index.insert((func, line, category), t.length - 1);
        t.length - 1
    }

    fn stack(&mut self, prefix: Option<usize>, frame: usize) -> usize {
        if let Some(&i) = self.stack_index.get(&(prefix, frame)) {
            return i;
        }
        let category = self.frames.category[frame].unwrap_or(0);
        let s = &mut self.stacks;
        s.prefix.push(prefix);
        s.frame.push(frame);
        s.category.push(category);
        s.subcategory.push(0);
        s.length += 1;
        self.stack_index.insert((prefix, frame), s.length - 1);
        s.length - 1
    }

    /// The stack of zones and frames (caller first) whose leaf was in VM
    /// state `VM_STATES[state]`.
    fn sample_stack(
        &mut self,
        zones: &[&str],
        stack: &[&str],
        state: usize,
        function_of: &dyn Fn(&str) -> Option<String>,
    ) -> usize {
        let mut prefix = None;
        for z in zones {
            let f = self.frame(z, ZONE_CATEGORY, &|_| None);
            prefix = Some(self.stack(prefix, f));
        }
        let stack: &[&str] = if stack.is_empty() { &[ROOT_FRAME] } else { stack };
        for (i, text) in stack.iter().enumerate() {
            let category = if i + 1 == stack.len() { STATE_CATEGORY + state } else { LUA_CATEGORY };
            let f = self.frame(text, category, function_of);
            prefix = Some(self.stack(prefix, f));
        }
        prefix.expect("a sample has at least one frame")
    }
}

/// The line a function label (`name (file:line)`) says the function
/// starts at.
fn defined_at(label: &str) -> Option<u32> {
    let inner = label.strip_suffix(')')?.rsplit_once(" (")?.1;
    frames::file_line(inner).map(|(_, line)| line)
}

/// Renders `profile` as a processed profile (JSON), Lua functions named by
/// `meta`'s `function_of`, each frame at the line it sampled.
pub fn render(profile: &Profile, meta: &RenderMeta) -> String {
    let bytes = meta.counts_bytes();
    // Each sample is drawn as long as the time it stands for; bytes stand
    // for no time, so each sample of an allocation profile is one step.
    let interval_ms = meta.interval_ms.filter(|ms| *ms > 0.0 && !bytes).unwrap_or(1.0);
    let mut tables = Tables::default();
    let mut samples = Samples { weight_type: if bytes { "bytes" } else { "samples" }, ..Samples::default() };
    let mut now = 0.0;
    for row in profile.named_rows() {
        for (state, &count) in row.counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            samples.stack.push(tables.sample_stack(&row.zones, &row.stack, state, meta.function_of));
            samples.time.push(now);
            samples.weight.push(count);
            now += if bytes { 1.0 } else { count as f64 * interval_ms };
        }
    }
    samples.length = samples.stack.len();
    let end = meta.duration_sec.map(|s| s * 1000.0).unwrap_or(now);
    let thread = Thread {
        name: "Lua",
        is_main_thread: true,
        process_type: "default",
        process_name: meta.title.clone(),
        process_startup_time: 0.0,
        process_shutdown_time: Some(end),
        register_time: 0.0,
        unregister_time: Some(end),
        paused_ranges: [],
        pid: "0",
        tid: 0,
        samples,
        markers: Markers::default(),
        stack_table: tables.stacks,
        frame_table: tables.frames,
        func_table: tables.funcs,
        resource_table: tables.resources,
        native_symbols: NativeSymbols::default(),
        string_array: tables.strings,
    };
    let file = File {
        meta: Meta {
            version: GECKO_PROFILE_VERSION,
            preprocessed_profile_version: PROCESSED_PROFILE_VERSION,
            interval: interval_ms,
            start_time: meta.start_sec.map_or(0.0, |s| s * 1000.0),
            process_type: 0,
            product: &meta.title,
            categories: CATEGORIES
                .iter()
                .map(|&(name, color)| Category { name, color, subcategories: ["Other"] })
                .collect(),
            marker_schema: [],
            extensions: Extensions { length: 0, base_url: [], id: [], name: [] },
            paused_ranges: [],
            symbolicated: true,
            debug: false,
            uses_only_one_stack_type: true,
            does_not_use_frame_implementation: true,
            source_code_is_not_on_searchfox: true,
        },
        libs: [],
        threads: [thread],
        pages: [],
        profiler_overhead: [],
        counters: [],
    };
    let mut s = serde_json::to_string(&file).expect("a processed profile always serialises");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests;
