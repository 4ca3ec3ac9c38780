//! pprof's `profile.proto`, gzipped: the format Go's `pprof`, Pyroscope and
//! Parca read.
//!
//! Each stack of the profile becomes one pprof sample per VM state it was
//! seen in, with two values (`samples`/count and time in nanoseconds, the
//! count times the sampling interval), the leaf first as the format wants,
//! and two string labels: `zone` (the `jit.zone` path, `/`-joined) and
//! `vmstate` (`N` native, `I` interpreted, `C` C code, `G` GC, `J` JIT
//! compiler; the same letters as the collapsed text's `_[X]` markers).
//!
//! Every frame is one location with one line. A Lua frame's function is
//! named by the caller's naming function (the function view's label) when it
//! knows the frame, and by the frame text otherwise; builtins and C functions
//! are their own functions with no file.
//!
//! The message is written by hand: it is a few varint and length-delimited
//! fields (field numbers from `profile.proto`), far less than a protobuf
//! code generator would bring in.

use std::collections::HashMap;
use std::io::Write;

use crate::profile::frames;
use crate::profile::VM_STATES;

/// One stack with its counts per VM state (in `VM_STATES` order).
pub struct StackCounts<'a> {
    /// `jit.zone` path, outermost first.
    pub zones: Vec<&'a str>,
    /// Frames, caller (root) first.
    pub stack: Vec<&'a str>,
    pub counts: [u64; 5],
}

/// The `clock` of an allocation profile, whose counts are bytes: its
/// sample types are `alloc_objects` (a count, from [`PprofMeta::objects`])
/// and `alloc_space` in bytes, the default; the period is in bytes.
pub const ALLOC_SPACE: &str = "alloc_space";
/// The object count sample type of an allocation profile.
pub const ALLOC_OBJECTS: &str = "alloc_objects";
/// The `clock` of a profile of live bytes (what was allocated and not
/// freed): sample types `inuse_objects` and `inuse_space`, the default. An
/// allocation profile carries these two as well when its
/// [`PprofMeta::inuse`] is given.
pub const INUSE_SPACE: &str = "inuse_space";
pub const INUSE_OBJECTS: &str = "inuse_objects";

/// The key of a stack in [`PprofMeta::objects`].
pub fn stack_key(zones: &[&str], stack: &[&str]) -> String {
    let mut k = zones.join("\u{1}");
    k.push('\u{2}');
    k.push_str(&stack.join("\u{1}"));
    k
}

/// What the profile as a whole says about how it was taken.
#[derive(Clone, Debug, Default)]
pub struct PprofMeta {
    /// Sampling interval in nanoseconds (0 when unknown: the time value is
    /// then the count).
    pub interval_ns: u64,
    /// `cpu` or `wall`: names the time value and the period type.
    pub clock: String,
    /// Wall-clock start of the profile, nanoseconds since the Unix epoch (0: unknown).
    pub time_nanos: i64,
    /// Length of the profile in nanoseconds (0: unknown).
    pub duration_nanos: i64,
    /// An allocation profile's objects per stack ([`stack_key`]) and VM
    /// state; a stack not in it counts none.
    pub objects: HashMap<String, [u64; 5]>,
    /// An allocation profile's live bytes and objects per stack, for its
    /// `inuse_space` and `inuse_objects` values.
    pub inuse: Option<InUse>,
}

/// Live bytes and objects per stack ([`stack_key`]) and VM state.
#[derive(Clone, Debug, Default)]
pub struct InUse {
    pub space: HashMap<String, [u64; 5]>,
    pub objects: HashMap<String, [u64; 5]>,
}

/// Field numbers of `profile.proto` used here.
mod field {
    pub const PROFILE_SAMPLE_TYPE: u32 = 1;
    pub const PROFILE_SAMPLE: u32 = 2;
    pub const PROFILE_MAPPING: u32 = 3;
    pub const PROFILE_LOCATION: u32 = 4;
    pub const PROFILE_FUNCTION: u32 = 5;
    pub const PROFILE_STRING_TABLE: u32 = 6;
    pub const PROFILE_TIME_NANOS: u32 = 9;
    pub const PROFILE_DURATION_NANOS: u32 = 10;
    pub const PROFILE_PERIOD_TYPE: u32 = 11;
    pub const PROFILE_PERIOD: u32 = 12;
    pub const PROFILE_DEFAULT_SAMPLE_TYPE: u32 = 14;
    pub const VALUE_TYPE_TYPE: u32 = 1;
    pub const VALUE_TYPE_UNIT: u32 = 2;
    pub const SAMPLE_LOCATION_ID: u32 = 1;
    pub const SAMPLE_VALUE: u32 = 2;
    pub const SAMPLE_LABEL: u32 = 3;
    pub const LABEL_KEY: u32 = 1;
    pub const LABEL_STR: u32 = 2;
    pub const MAPPING_ID: u32 = 1;
    pub const MAPPING_FILENAME: u32 = 5;
    pub const MAPPING_HAS_FUNCTIONS: u32 = 7;
    pub const MAPPING_HAS_FILENAMES: u32 = 8;
    pub const MAPPING_HAS_LINE_NUMBERS: u32 = 9;
    pub const LOCATION_ID: u32 = 1;
    pub const LOCATION_MAPPING_ID: u32 = 2;
    pub const LOCATION_LINE: u32 = 4;
    pub const LINE_FUNCTION_ID: u32 = 1;
    pub const LINE_LINE: u32 = 2;
    pub const FUNCTION_ID: u32 = 1;
    pub const FUNCTION_NAME: u32 = 2;
    pub const FUNCTION_SYSTEM_NAME: u32 = 3;
    pub const FUNCTION_FILENAME: u32 = 4;
    pub const FUNCTION_START_LINE: u32 = 5;
}

/// The id of the one mapping every location belongs to.
const MAPPING: u64 = 1;

const WIRE_VARINT: u32 = 0;
const WIRE_LEN: u32 = 2;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, field: u32, wire: u32) {
    put_varint(out, u64::from(field << 3 | wire));
}

fn put_uint(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        put_key(out, field, WIRE_VARINT);
        put_varint(out, v);
    }
}

fn put_int(out: &mut Vec<u8>, field: u32, v: i64) {
    put_uint(out, field, v as u64);
}

fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, WIRE_LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A packed repeated varint field.
fn put_packed(out: &mut Vec<u8>, field: u32, values: impl Iterator<Item = u64>) {
    let mut body = Vec::new();
    for v in values {
        put_varint(&mut body, v);
    }
    put_bytes(out, field, &body);
}

/// The string table: index 0 is the empty string, as the format requires.
struct Strings {
    index: HashMap<String, u64>,
    list: Vec<String>,
}

impl Strings {
    fn new() -> Self {
        Strings { index: HashMap::from([(String::new(), 0)]), list: vec![String::new()] }
    }

    fn id(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.list.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// A function as pprof sees it.
#[derive(Clone, PartialEq, Eq, Hash)]
struct FunctionKey {
    name: String,
    file: String,
    start_line: u32,
}

/// Where a frame points: its function and line.
fn frame_site(frame: &str, name_of: &dyn Fn(&str) -> Option<String>) -> (FunctionKey, u32) {
    if let Some((file, first, _last)) = frames::file_span(frame) {
        let name = name_of(frame).unwrap_or_else(|| frame.to_string());
        return (FunctionKey { name, file: file.to_string(), start_line: first }, first);
    }
    if let Some((file, line)) = frames::file_line(frame) {
        let name = name_of(frame).unwrap_or_else(|| frame.to_string());
        // A named function starts where its label says; the line alone
        // starts at itself.
        return (FunctionKey { name, file: file.to_string(), start_line: 0 }, line);
    }
    (FunctionKey { name: frame.to_string(), file: String::new(), start_line: 0 }, 0)
}

/// Encodes the stacks as an uncompressed `profile.proto` message.
pub fn encode(stacks: &[StackCounts], meta: &PprofMeta, name_of: &dyn Fn(&str) -> Option<String>) -> Vec<u8> {
    let mut strings = Strings::new();
    let mut out = Vec::new();
    let clock = if meta.clock.is_empty() { "cpu" } else { meta.clock.as_str() };
    let value_type = |strings: &mut Strings, ty: &str, unit: &str| {
        let mut m = Vec::new();
        put_uint(&mut m, field::VALUE_TYPE_TYPE, strings.id(ty));
        put_uint(&mut m, field::VALUE_TYPE_UNIT, strings.id(unit));
        m
    };
    // An allocation profile's counts are bytes: two values, objects and
    // `alloc_space` (bytes), then live objects and bytes when known; a live
    // profile's counts are `inuse_space`.
    let bytes = clock == ALLOC_SPACE || clock == INUSE_SPACE;
    let inuse = if clock == ALLOC_SPACE { meta.inuse.as_ref() } else { None };
    if bytes {
        let objects_type = if clock == INUSE_SPACE { INUSE_OBJECTS } else { ALLOC_OBJECTS };
        put_bytes(&mut out, field::PROFILE_SAMPLE_TYPE, &value_type(&mut strings, objects_type, "count"));
        put_bytes(&mut out, field::PROFILE_SAMPLE_TYPE, &value_type(&mut strings, clock, "bytes"));
        if inuse.is_some() {
            put_bytes(&mut out, field::PROFILE_SAMPLE_TYPE, &value_type(&mut strings, INUSE_OBJECTS, "count"));
            put_bytes(&mut out, field::PROFILE_SAMPLE_TYPE, &value_type(&mut strings, INUSE_SPACE, "bytes"));
        }
    } else {
        let samples_type = value_type(&mut strings, "samples", "count");
        let time_type = value_type(&mut strings, clock, "nanoseconds");
        put_bytes(&mut out, field::PROFILE_SAMPLE_TYPE, &samples_type);
        put_bytes(&mut out, field::PROFILE_SAMPLE_TYPE, &time_type);
    }

    let zone_key = strings.id("zone");
    let state_key = strings.id("vmstate");
    let state_names: Vec<u64> = VM_STATES.iter().map(|&s| strings.id(&(s as char).to_string())).collect();

    let mut locations: HashMap<&str, u64> = HashMap::new();
    let mut functions: HashMap<FunctionKey, u64> = HashMap::new();
    let mut location_msgs: Vec<Vec<u8>> = Vec::new();
    let mut function_msgs: Vec<Vec<u8>> = Vec::new();
    let period = meta.interval_ns.max(1);
    for s in stacks {
        let mut ids = Vec::with_capacity(s.stack.len());
        for &frame in s.stack.iter().rev() {
            let id = match locations.get(frame) {
                Some(&id) => id,
                None => {
                    let (fkey, line) = frame_site(frame, name_of);
                    let fid = match functions.get(&fkey) {
                        Some(&fid) => fid,
                        None => {
                            let fid = function_msgs.len() as u64 + 1;
                            let mut m = Vec::new();
                            put_uint(&mut m, field::FUNCTION_ID, fid);
                            let name = strings.id(&fkey.name);
                            put_uint(&mut m, field::FUNCTION_NAME, name);
                            put_uint(&mut m, field::FUNCTION_SYSTEM_NAME, name);
                            put_uint(&mut m, field::FUNCTION_FILENAME, strings.id(&fkey.file));
                            put_uint(&mut m, field::FUNCTION_START_LINE, u64::from(fkey.start_line));
                            function_msgs.push(m);
                            functions.insert(fkey, fid);
                            fid
                        }
                    };
                    let id = location_msgs.len() as u64 + 1;
                    let mut line_msg = Vec::new();
                    put_uint(&mut line_msg, field::LINE_FUNCTION_ID, fid);
                    put_uint(&mut line_msg, field::LINE_LINE, u64::from(line));
                    let mut m = Vec::new();
                    put_uint(&mut m, field::LOCATION_ID, id);
                    put_uint(&mut m, field::LOCATION_MAPPING_ID, MAPPING);
                    put_bytes(&mut m, field::LOCATION_LINE, &line_msg);
                    location_msgs.push(m);
                    locations.insert(frame, id);
                    id
                }
            };
            ids.push(id);
        }
        let zone = s.zones.join("/");
        let key = if bytes { stack_key(&s.zones, &s.stack) } else { String::new() };
        let objects = if bytes { meta.objects.get(&key).copied() } else { None };
        let live = inuse.map(|u| (u.space.get(&key).copied(), u.objects.get(&key).copied()));
        for (state, &count) in s.counts.iter().enumerate() {
            let live_bytes = live.and_then(|l| l.0).map_or(0, |b| b[state]);
            if count == 0 && live_bytes == 0 {
                continue;
            }
            let mut m = Vec::new();
            put_packed(&mut m, field::SAMPLE_LOCATION_ID, ids.iter().copied());
            if bytes {
                let n = objects.map_or(0, |o| o[state]);
                if let Some((_, live_objects)) = live {
                    let k = live_objects.map_or(0, |o| o[state]);
                    put_packed(&mut m, field::SAMPLE_VALUE, [n, count, k, live_bytes].into_iter());
                } else {
                    put_packed(&mut m, field::SAMPLE_VALUE, [n, count].into_iter());
                }
            } else {
                put_packed(&mut m, field::SAMPLE_VALUE, [count, count.saturating_mul(period)].into_iter());
            }
            if !zone.is_empty() {
                let mut label = Vec::new();
                put_uint(&mut label, field::LABEL_KEY, zone_key);
                put_uint(&mut label, field::LABEL_STR, strings.id(&zone));
                put_bytes(&mut m, field::SAMPLE_LABEL, &label);
            }
            let mut label = Vec::new();
            put_uint(&mut label, field::LABEL_KEY, state_key);
            put_uint(&mut label, field::LABEL_STR, state_names[state]);
            put_bytes(&mut m, field::SAMPLE_LABEL, &label);
            put_bytes(&mut out, field::PROFILE_SAMPLE, &m);
        }
    }
    // One mapping that says every location is already symbolised, so that
    // tools do not look for a binary to symbolise addresses from.
    let mut mapping = Vec::new();
    put_uint(&mut mapping, field::MAPPING_ID, MAPPING);
    put_uint(&mut mapping, field::MAPPING_FILENAME, strings.id("[lua]"));
    for f in [field::MAPPING_HAS_FUNCTIONS, field::MAPPING_HAS_FILENAMES, field::MAPPING_HAS_LINE_NUMBERS] {
        put_uint(&mut mapping, f, 1);
    }
    put_bytes(&mut out, field::PROFILE_MAPPING, &mapping);
    for m in &location_msgs {
        put_bytes(&mut out, field::PROFILE_LOCATION, m);
    }
    for m in &function_msgs {
        put_bytes(&mut out, field::PROFILE_FUNCTION, m);
    }
    put_int(&mut out, field::PROFILE_TIME_NANOS, meta.time_nanos);
    put_int(&mut out, field::PROFILE_DURATION_NANOS, meta.duration_nanos);
    let period_type =
        if bytes { value_type(&mut strings, "space", "bytes") } else { value_type(&mut strings, clock, "nanoseconds") };
    put_bytes(&mut out, field::PROFILE_PERIOD_TYPE, &period_type);
    put_int(&mut out, field::PROFILE_PERIOD, meta.interval_ns as i64);
    put_uint(&mut out, field::PROFILE_DEFAULT_SAMPLE_TYPE, strings.id(clock));
    for s in &strings.list {
        put_bytes(&mut out, field::PROFILE_STRING_TABLE, s.as_bytes());
    }
    out
}

/// Encodes and gzips: the bytes of a `.pb.gz` file.
pub fn render(stacks: &[StackCounts], meta: &PprofMeta, name_of: &dyn Fn(&str) -> Option<String>) -> Vec<u8> {
    let raw = encode(stacks, meta, name_of);
    let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(raw.len() / 4 + 64), flate2::Compression::default());
    gz.write_all(&raw).expect("writing to memory cannot fail");
    gz.finish().expect("writing to memory cannot fail")
}

/// The registry's pprof writer ([`render`]): the interval, clock, time
/// window, objects and live values of the caller's
/// [`RenderMeta`](super::RenderMeta), Lua functions named by its
/// `function_of`.
pub struct Pprof;

impl super::Writer for Pprof {
    fn write(&self, source: super::Source<'_>) -> Result<Vec<u8>, String> {
        let super::Source::Profile(p, meta) = source else { return Err(super::wrong_source("pprof", false)) };
        let seconds_to_ns = |s: Option<f64>| s.map_or(0, |s| (s.max(0.0) * 1e9) as i64);
        let pprof_meta = PprofMeta {
            interval_ns: meta.interval_ms.map_or(0, |ms| (ms.max(0.0) * 1e6).round() as u64),
            clock: meta.clock.clone(),
            time_nanos: seconds_to_ns(meta.start_sec),
            duration_nanos: seconds_to_ns(meta.duration_sec),
            objects: meta.objects.clone(),
            inuse: meta.inuse.clone(),
        };
        let stacks: Vec<StackCounts> =
            p.named_rows().map(|r| StackCounts { zones: r.zones, stack: r.stack, counts: r.counts }).collect();
        Ok(render(&stacks, &pprof_meta, meta.function_of))
    }
}

#[cfg(test)]
mod tests;
