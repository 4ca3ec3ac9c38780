//! A finished profile: rows of (zone path, stack, counts per VM state), with
//! frames already named and sanitised and every distinct name stored once
//! ([`Names`]). Every output format and view is built from this one
//! structure, and `stop()` writes its text from it.

pub mod collapsed;
pub mod frames;
mod from_table;
pub mod function_ids;
pub mod host;
pub mod names;
pub mod sidecar;
mod sort;
pub mod stack_table;

use std::collections::HashMap;

use hashbrown::HashTable;

pub use names::Names;

/// VM states, as the letters LuaJIT's callback gets, in tie-break order:
/// the first of equal counts wins. A row counts samples in each, in this
/// order ([`Row::counts`]).
pub const VM_STATES: [u8; 5] = [b'N', b'I', b'C', b'G', b'J'];

/// Index of a LuaJIT vmstate character in [`VM_STATES`].
#[inline]
pub const fn state_index(vmstate: u8) -> usize {
    match vmstate {
        b'N' => 0,
        b'I' => 1,
        b'C' => 2,
        b'G' => 3,
        _ => 4,
    }
}

/// An empty vector with room for `n` items, whose memory the kernel is asked
/// to back with huge pages: a profile of many stacks fills tens of MB of
/// fresh memory, and taking it 4 KiB page fault by page fault costs about as
/// much as the work done in it.
pub(crate) fn large_vec<T>(n: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    host::advise_huge_pages(&mut v);
    v
}

/// The name of a C function of the profiler's own native module: no
/// profile keeps such a frame ([`Profile::drop_host_and_own_frames`]).
pub const OWN_C_FRAME: &str = "[C:tecs.profile.native]";

/// Frame name given to samples that arrived once the stack table was full.
pub const OVERFLOW_FRAME: &str = "[overflow: stack table full]";

/// Sum of sample counts, saturating at `u64::MAX`: counts read from a file
/// can be as large as a u64 holds. Every count sum in the views and outputs
/// goes through this (or [`add_counts`]).
pub fn sum_counts(counts: impl IntoIterator<Item = u64>) -> u64 {
    counts.into_iter().fold(0u64, u64::saturating_add)
}

/// Adds `counts` into `acc`, state by state, saturating.
pub fn add_counts(acc: &mut [u64; 5], counts: [u64; 5]) {
    for (a, c) in acc.iter_mut().zip(counts) {
        *a = a.saturating_add(c);
    }
}

/// The VM state seen most often; ties go to the earlier of N I C G J.
pub fn dominant_state(counts: &[u64; 5]) -> u8 {
    let mut best = 0;
    for i in 1..5 {
        if counts[i] > counts[best] {
            best = i;
        }
    }
    VM_STATES[best]
}

/// One (zone path, stack) of a profile. The frames live in the profile
/// ([`Profile::stack`]), as name ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// Zone path id ([`Profile::zones`]).
    pub zone: u32,
    /// Where the stack lies in the profile's frame list.
    start: usize,
    len: u32,
    /// Bytes of the stack's names joined by `;` (its collapsed text without
    /// the zone path and the count), known when the row is made so that the
    /// text's size is known without reading every name again.
    text: usize,
    /// Samples per VM state, in [`VM_STATES`] order.
    pub counts: [u64; 5],
}

impl Row {
    /// Samples of the row (saturating, see [`sum_counts`]).
    pub fn total(&self) -> u64 {
        sum_counts(self.counts)
    }

    /// The VM state seen most often; ties go to the earlier of N I C G J.
    pub fn dominant_state(&self) -> u8 {
        dominant_state(&self.counts)
    }
}

/// A row with its names looked up, for the views.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedRow<'a> {
    /// Zone path components, root first.
    pub zones: Vec<&'a str>,
    /// Stack frames, caller first.
    pub stack: Vec<&'a str>,
    pub counts: [u64; 5],
}

impl NamedRow<'_> {
    pub fn total(&self) -> u64 {
        sum_counts(self.counts)
    }

    pub fn dominant_state(&self) -> u8 {
        dominant_state(&self.counts)
    }
}

/// A finished profile: a name table, zone paths and stacks as lists of name
/// ids, and rows of (zone path, stack, counts).
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Every frame and zone name.
    pub names: Names,
    /// Zone path `id`: its components, root first.
    zone_paths: Vec<Box<[u32]>>,
    zone_index: HashMap<Box<[u32]>, u32, ahash::RandomState>,
    /// Every row's stack, back to back.
    frames: Vec<u32>,
    pub rows: Vec<Row>,
}
/// Names `[builtin#N]` and `@0x...` frames.
pub struct FrameNamer<'a> {
    ffnames: &'a [Option<String>],
    c_cache: HashMap<usize, String>,
    native_cache: HashMap<usize, String>,
    resolve_c: bool,
    /// C functions of loaded modules by address, named by their Lua path
    /// (`love.graphics.present`); tried before the dynamic symbol. An
    /// address looked for and not found maps to `None`.
    c_paths: Option<&'a HashMap<usize, Option<String>>>,
}

/// The address of a C function frame (`@0x55d0c4a1b2c0`), or None for any
/// other frame.
pub fn c_address(raw: &[u8]) -> Option<usize> {
    let hex = raw.strip_prefix(b"@0x").or_else(|| raw.strip_prefix(b"@"))?;
    std::str::from_utf8(hex).ok().and_then(|s| usize::from_str_radix(s.trim_start_matches("0x"), 16).ok())
}

/// How a native frame's key text begins: `[native@0x7f3a9c1b2c40]`, the
/// address of its code (the tick handler's, `nativeFrames`), named
/// `[native:function]` in every output.
pub const NATIVE_PREFIX: &[u8] = b"[native@0x";

/// The address of a native frame, or None for any other frame.
pub fn native_address(raw: &[u8]) -> Option<usize> {
    let hex = raw.strip_prefix(NATIVE_PREFIX)?.strip_suffix(b"]")?;
    std::str::from_utf8(hex).ok().and_then(|s| usize::from_str_radix(s, 16).ok())
}

impl<'a> FrameNamer<'a> {
    pub fn new(ffnames: &'a [Option<String>], resolve_c: bool) -> Self {
        FrameNamer { ffnames, c_cache: HashMap::new(), native_cache: HashMap::new(), resolve_c, c_paths: None }
    }

    /// Names C functions found at these addresses by their Lua paths.
    pub fn with_c_paths(mut self, c_paths: &'a HashMap<usize, Option<String>>) -> Self {
        self.c_paths = Some(c_paths);
        self
    }

    pub fn name(&mut self, raw: &[u8]) -> String {
        if let Some(rest) = raw.strip_prefix(b"[builtin#") {
            if let Some(num) = rest.strip_suffix(b"]") {
                if let Some(id) = std::str::from_utf8(num).ok().and_then(|s| s.parse::<usize>().ok()) {
                    if let Some(Some(name)) = self.ffnames.get(id) {
                        return sanitize(name.as_bytes());
                    }
                }
            }
        }
        if let Some(addr) = native_address(raw) {
            let name = self.native_cache.entry(addr).or_insert_with(|| match (host::get().native_symbol_name)(addr) {
                Some(s) => format!("[native:{}]", sanitize(s.as_bytes())),
                None => format!("[native:0x{:x}]", addr),
            });
            return name.clone();
        }
        if let Some(addr) = c_address(raw) {
            let (resolve_c, c_paths) = (self.resolve_c, self.c_paths);
            let name = self.c_cache.entry(addr).or_insert_with(|| {
                if let Some(Some(path)) = c_paths.and_then(|m| m.get(&addr)) {
                    return sanitize(path.as_bytes());
                }
                if resolve_c && (host::get().is_own_code)(addr) {
                    return OWN_C_FRAME.to_string();
                }
                let sym = if resolve_c { (host::get().c_symbol_name)(addr) } else { None };
                match sym {
                    Some(s) => format!("[C:{}]", sanitize(s.as_bytes())),
                    None => format!("[C:0x{:x}]", addr),
                }
            });
            return name.clone();
        }
        sanitize(raw)
    }
}

/// Makes a frame safe for collapsed-stack text: `;`, CR and LF become `_`,
/// invalid UTF-8 becomes U+FFFD, an empty name becomes `?`.
pub fn sanitize(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    let mut out: String = s.chars().map(|c| if c == ';' || c == '\r' || c == '\n' { '_' } else { c }).collect();
    if out.is_empty() {
        out.push('?');
    }
    out
}

/// Whether a frame is the profiler's own: its native module's C functions,
/// or a line of its Lua files (`.../tecs/profile.lua:N`,
/// `.../tecs/profile/<module>.lua:N`, as any path the package was loaded
/// from writes them).
/// Whether a frame is a line or a span of Lua code (`file:N`,
/// `file:N-M`, `[string "..."]:N`): its name ends in a line number; or a
/// function of bytecode without lines (`file:@0xADDR`).
fn is_lua_frame(name: &[u8]) -> bool {
    let Some(colon) = memchr::memrchr(b':', name) else { return false };
    let tail = &name[colon + 1..];
    if let Some(hex) = tail.strip_prefix(b"@0x") {
        return colon > 0 && !hex.is_empty() && hex.iter().all(u8::is_ascii_hexdigit);
    }
    let mut parts = tail.splitn(2, |&b| b == b'-');
    let number = |p: Option<&[u8]>| p.is_some_and(|p| !p.is_empty() && p.iter().all(u8::is_ascii_digit));
    let first = parts.next();
    match parts.next() {
        None => number(first),
        last => number(first) && number(last),
    }
}

/// Whether the frame `name` (`file:line`, or a C function's name) is the
/// profiler's own: a line of its Lua files (`tecs/profile.lua`, a file
/// under `tecs/profile/`) or its native module. The trace-abort tracker
/// leaves out aborts at such a location by the same rule (`native.isOwnFrame`).
pub fn is_own_frame(name: &[u8]) -> bool {
    if name == OWN_C_FRAME.as_bytes() {
        return true;
    }
    let Some(colon) = memchr::memrchr(b':', name) else { return false };
    let file = &name[..colon];
    if !file.ends_with(b".lua") {
        return false;
    }
    let package = |at: usize| at == 0 || file[at - 1] == b'/';
    if file.ends_with(b"tecs/profile.lua") && package(file.len() - b"tecs/profile.lua".len()) {
        return true;
    }
    memchr::memmem::find_iter(file, b"tecs/profile/").any(package)
}

impl Profile {
    /// An empty profile with room for `rows` rows of `frames` frames in all.
    pub fn with_capacity(rows: usize, frames: usize, names: Names) -> Profile {
        Profile { names, rows: large_vec(rows), frames: large_vec(frames), ..Default::default() }
    }

    /// The id of a zone path (a list of name ids), added when new.
    pub fn zone_path_id(&mut self, zones: &[u32]) -> u32 {
        if let Some(&id) = self.zone_index.get(zones) {
            return id;
        }
        let id = self.zone_paths.len() as u32;
        self.zone_paths.push(zones.into());
        self.zone_index.insert(zones.into(), id);
        id
    }

    /// Appends a row (not merged with an equal one; see [`Profile::merge_equal_rows`]).
    pub fn push_row(&mut self, zone: u32, stack: &[u32], counts: [u64; 5]) {
        let start = self.frames.len();
        self.frames.extend_from_slice(stack);
        self.push_row_from(zone, start, counts);
    }

    /// Appends a row whose stack is already at the end of the frame list,
    /// from `start` on.
    fn push_row_from(&mut self, zone: u32, start: usize, counts: [u64; 5]) {
        let stack = &self.frames[start..];
        let text = stack.iter().map(|&f| self.names.bytes(f).len() + 1).sum::<usize>().saturating_sub(1);
        self.push_row_with_text(zone, start, text, counts);
    }

    /// [`Profile::push_row_from`] when the length of the stack's text
    /// (see [`Row`]) is known.
    fn push_row_with_text(&mut self, zone: u32, start: usize, text: usize, counts: [u64; 5]) {
        let len = (self.frames.len() - start) as u32;
        debug_assert_eq!(
            text,
            self.frames[start..].iter().map(|&f| self.names.bytes(f).len() + 1).sum::<usize>().saturating_sub(1)
        );
        self.rows.push(Row { zone, start, len, text, counts });
    }

    /// The frames of `row`, caller first, as name ids.
    #[inline]
    pub fn stack(&self, row: &Row) -> &[u32] {
        &self.frames[row.start..row.start + row.len as usize]
    }

    /// The zone path of `row`, root first, as name ids.
    #[inline]
    pub fn zones(&self, row: &Row) -> &[u32] {
        &self.zone_paths[row.zone as usize]
    }

    /// Zone path `id`, root first, as name ids.
    pub fn zone_path(&self, id: u32) -> &[u32] {
        &self.zone_paths[id as usize]
    }

    /// Number of distinct zone paths.
    pub fn zone_path_count(&self) -> usize {
        self.zone_paths.len()
    }

    #[inline]
    pub fn name(&self, id: u32) -> &str {
        self.names.get(id)
    }

    /// The rows with their names looked up, in order.
    pub fn named_rows(&self) -> impl Iterator<Item = NamedRow<'_>> + '_ {
        self.rows.iter().map(move |r| NamedRow {
            zones: self.zones(r).iter().map(|&z| self.name(z)).collect(),
            stack: self.stack(r).iter().map(|&f| self.name(f)).collect(),
            counts: r.counts,
        })
    }

    /// Samples of the profile (saturating, see [`sum_counts`]).
    pub fn total(&self) -> u64 {
        sum_counts(self.rows.iter().map(Row::total))
    }

    /// Drops the frames no profile shows, and merges the rows that become
    /// equal: the profiler's own (its Lua files, its native module, and the
    /// C functions its code called with no program code above them), where
    /// a sample interrupted a call into it, so that the time goes to the
    /// line that called it; and the C frames below a stack's first other
    /// frame, the host's entry (`pmain` of the `luajit` executable, the C
    /// function an embedding program runs Lua from), which only say how
    /// the program was started. A stack of nothing else keeps its frames.
    pub fn drop_host_and_own_frames(&mut self) {
        // One vectorised search per name: most names are not the package's.
        let package = memchr::memmem::Finder::new(b"tecs/profile");
        let own: Vec<bool> = (0..self.names.len() as u32)
            .map(|id| {
                let name = self.names.bytes(id);
                name == OWN_C_FRAME.as_bytes() || package.find(name).is_some() && is_own_frame(name)
            })
            .collect();
        let host_c = |id: u32| self.names.bytes(id).starts_with(b"[C:");
        let droppable = |row: &Row| {
            let stack = self.stack(row);
            stack.len() > 1 && (host_c(stack[0]) || stack.iter().any(|&f| own[f as usize]))
        };
        if !self.rows.iter().any(droppable) {
            return;
        }
        let lua: Vec<bool> = (0..self.names.len() as u32).map(|id| is_lua_frame(self.names.bytes(id))).collect();
        let mut frames: Vec<u32> = large_vec(self.frames.len());
        let mut rows = Vec::with_capacity(self.rows.len());
        let mut kept: Vec<u32> = Vec::new();
        for row in &self.rows {
            let full = self.stack(row);
            let start = frames.len();
            // The functions the profiler's own code calls (`pcall`,
            // `loadstring` around a control command, its native module) are
            // its own work too, up to the program's next Lua frame (a
            // callback the profiler called), which is the program's again.
            let mut in_own = false;
            kept.clear();
            for &f in full {
                if own[f as usize] {
                    in_own = true;
                } else if lua[f as usize] {
                    in_own = false;
                    kept.push(f);
                } else if !in_own {
                    kept.push(f);
                }
            }
            // The host's C frames: those before the first kept frame that is
            // not one (a stack cut at its depth starts with its marker).
            let entry = kept.iter().take_while(|&&f| host_c(f)).count();
            let entry = if kept.len() > entry { entry } else { 0 };
            frames.extend_from_slice(&kept[entry..]);
            if frames.len() == start {
                frames.extend_from_slice(full);
            }
            let text = frames[start..].iter().map(|&f| self.names.bytes(f).len() + 1).sum::<usize>().saturating_sub(1);
            rows.push(Row { zone: row.zone, start, len: (frames.len() - start) as u32, text, counts: row.counts });
        }
        self.frames = frames;
        self.rows = rows;
        self.merge_equal_rows();
    }

    /// Merges rows with the same zone path and stack (the first keeps its
    /// place), adding their counts.
    pub fn merge_equal_rows(&mut self) {
        let hasher = ahash::RandomState::with_seeds(0x6d72, 0x6765, 0x726f, 0x7773);
        let mut index: HashTable<usize> = HashTable::with_capacity(self.rows.len());
        let mut kept: Vec<Row> = Vec::with_capacity(self.rows.len());
        for row in &self.rows {
            let stack = self.stack(row);
            let hash = hasher.hash_one((row.zone, stack));
            let found = index.find(hash, |&k| kept[k].zone == row.zone && self.stack(&kept[k]) == stack).copied();
            match found {
                Some(k) => add_counts(&mut kept[k].counts, row.counts),
                None => {
                    index.insert_unique(hash, kept.len(), |&k| hasher.hash_one((kept[k].zone, self.stack(&kept[k]))));
                    kept.push(*row);
                }
            }
        }
        self.rows = kept;
    }

    /// The same samples with every frame renamed by `rename`; rows that end
    /// up equal are merged, and consecutive equal frames (lines of one
    /// function) become one.
    pub fn map_frames(&self, mut rename: impl FnMut(&str) -> String) -> Profile {
        let mut out = Profile::with_capacity(self.rows.len(), self.frames.len(), Names::default());
        let mut renamed: Vec<Option<u32>> = vec![None; self.names.len()];
        let mut copied: Vec<Option<u32>> = vec![None; self.names.len()];
        let mut zone_ids: Vec<Option<u32>> = vec![None; self.zone_paths.len()];
        let mut zones = Vec::new();
        for row in &self.rows {
            let zone = match zone_ids[row.zone as usize] {
                Some(z) => z,
                None => {
                    zones.clear();
                    for &z in self.zones(row) {
                        let id = *copied[z as usize].get_or_insert_with(|| out.names.intern(self.name(z)).0);
                        zones.push(id);
                    }
                    let z = out.zone_path_id(&zones);
                    zone_ids[row.zone as usize] = Some(z);
                    z
                }
            };
            let start = out.frames.len();
            for &f in self.stack(row) {
                let id = *renamed[f as usize].get_or_insert_with(|| out.names.intern(&rename(self.name(f))).0);
                if out.frames.len() == start || out.frames.last() != Some(&id) {
                    out.frames.push(id);
                }
            }
            out.push_row_from(zone, start, row.counts);
        }
        out.merge_equal_rows();
        out.sort();
        out
    }

    /// The same samples with one more frame at the root of every stack
    /// for which `root(stack)` (its frames, caller first) gives one; rows
    /// that end up equal are merged.
    pub fn with_root_frames<'p>(&'p self, mut root: impl FnMut(&[&'p str]) -> Option<String>) -> Profile {
        let mut out = self.clone();
        out.frames = large_vec(self.frames.len() + self.rows.len());
        out.rows = Vec::with_capacity(self.rows.len());
        let mut names: Vec<&'p str> = Vec::new();
        for row in &self.rows {
            names.clear();
            names.extend(self.stack(row).iter().map(|&f| self.name(f)));
            let start = out.frames.len();
            if let Some(frame) = root(&names) {
                let id = out.names.intern(&frame).0;
                out.frames.push(id);
            }
            out.frames.extend_from_slice(self.stack(row));
            out.push_row_from(row.zone, start, row.counts);
        }
        out.merge_equal_rows();
        out.sort();
        out
    }

    /// Keeps the rows whose zone path is `prefix` or lies below it.
    pub fn filter_zone(&mut self, prefix: &[String]) {
        let keep: Vec<bool> = self
            .zone_paths
            .iter()
            .map(|path| path.len() >= prefix.len() && path.iter().zip(prefix).all(|(&z, p)| self.names.get(z) == p))
            .collect();
        self.rows.retain(|r| keep[r.zone as usize]);
    }
}
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_from_table;
