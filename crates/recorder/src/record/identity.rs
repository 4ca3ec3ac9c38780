//! Which function each recorded frame ran in, read from the running VM.
//!
//! A frame of the stack table is text (`file:line`); the function it ran in
//! is known only while the stack is live. So when the sampler stores a stack
//! it has not seen before, it asks the VM (`lua_getinfo`) for the function
//! at each level and keeps it here, by frame text: the chunk's short name,
//! the lines the function spans and the name its caller used. Stacks seen
//! before are not walked again, so the common path stays one hash lookup.
//! The views prefer this to reading the source files later, which may have
//! changed, moved, or never been files (`.love` archives, `load(string)`).

use std::collections::HashMap;

use hashbrown::HashTable;

use crate::sys::FrameFunction;
use tecs_profile_format::profile::frames::FrameIdentity;

/// Frames whose function is kept; later new frames go unrecorded (counted).
pub const MAX_FRAME_IDENTITIES: usize = 32768;
/// Bytes of frame text and names kept, for the same reason.
const MAX_BYTES: usize = 4 << 20;
/// Room reserved when a session starts, so that the first stacks of a
/// session store their frames without allocating inside the callback.
const INITIAL_ENTRIES: usize = 1024;
const INITIAL_BYTES: usize = 64 * 1024;

/// A stored identity: offsets into the byte store.
#[derive(Clone, Copy)]
struct Entry {
    text: (u32, u32),
    source: (u32, u32),
    name: Option<(u32, u32)>,
    first: u32,
    last: u32,
    ambiguous: bool,
}

/// Frame text -> function, bounded. Texts and names live in one byte store
/// with room reserved up front: recording allocates only when that room is
/// used up, not for each new frame.
pub struct FrameIdentities {
    hasher: ahash::RandomState,
    index: HashTable<u32>,
    entries: Vec<Entry>,
    bytes: Vec<u8>,
    /// New frames not recorded because the store was full.
    pub dropped: u64,
    /// Stacks whose levels did not line up with the dumped frames.
    pub misaligned: u64,
}

impl Default for FrameIdentities {
    fn default() -> Self {
        FrameIdentities {
            // Fixed seeds: hashing needs no randomness source inside the callback.
            hasher: ahash::RandomState::with_seeds(0x1d3, 0x7f1, 0x5eed, 0xf00d),
            index: HashTable::with_capacity(INITIAL_ENTRIES),
            entries: Vec::with_capacity(INITIAL_ENTRIES),
            bytes: Vec::with_capacity(INITIAL_BYTES),
            dropped: 0,
            misaligned: 0,
        }
    }
}

fn slice(bytes: &[u8], (start, len): (u32, u32)) -> &[u8] {
    &bytes[start as usize..(start + len) as usize]
}

impl FrameIdentities {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held, for the session's memory count.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.capacity() + self.entries.capacity() * std::mem::size_of::<Entry>() + self.index.capacity() * 4
    }

    fn store(&mut self, b: &[u8]) -> (u32, u32) {
        let start = self.bytes.len() as u32;
        self.bytes.extend_from_slice(b);
        (start, b.len() as u32)
    }

    /// Records what the VM says of the frame `text` (one frame of a dumped
    /// stack). Returns false when `f` cannot be the function of `text`: the
    /// line the frame shows is not the one the VM reports, so the stack
    /// levels and the dumped frames no longer correspond.
    pub fn record(&mut self, text: &[u8], f: &FrameFunction<'_>) -> bool {
        if !f.lua {
            return true;
        }
        if !shows(text, f) {
            self.misaligned += 1;
            return false;
        }
        let (first, last) = (f.first.max(0) as u32, f.last.max(f.first).max(0) as u32);
        let hash = self.hasher.hash_one(text);
        let (bytes, entries) = (&self.bytes, &self.entries);
        if let Some(&i) = self.index.find(hash, |&i| slice(bytes, entries[i as usize].text) == text) {
            let e = self.entries[i as usize];
            let same_chunk = slice(&self.bytes, e.source) == f.source();
            if same_chunk && (e.first, e.last) == (first, last) {
                if let (None, Some(name)) = (e.name, f.name) {
                    if self.bytes.len() + name.len() <= MAX_BYTES {
                        self.entries[i as usize].name = Some(self.store(name));
                    }
                }
            } else if same_chunk && first >= e.first && last <= e.last {
                // A function defined on the line that calls it (a one-line
                // closure): the line is both's; the inner one is kept, as
                // the samples on the line are mostly its own.
                let name = f.name.filter(|n| self.bytes.len() + n.len() <= MAX_BYTES).map(|n| self.store(n));
                let e = &mut self.entries[i as usize];
                (e.first, e.last, e.name) = (first, last, name);
            } else if !(same_chunk && e.first >= first && e.last <= last) {
                self.entries[i as usize].ambiguous = true;
            }
            return true;
        }
        let need = text.len() + f.source().len() + f.name.map_or(0, <[u8]>::len);
        if self.entries.len() >= MAX_FRAME_IDENTITIES || self.bytes.len() + need > MAX_BYTES {
            self.dropped += 1;
            return true;
        }
        let e = Entry {
            text: self.store(text),
            source: self.store(f.source()),
            name: f.name.map(|n| self.store(n)),
            first,
            last,
            ambiguous: false,
        };
        let idx = self.entries.len() as u32;
        self.entries.push(e);
        let (bytes, entries, hasher) = (&self.bytes, &self.entries, &self.hasher);
        self.index.insert_unique(hash, idx, |&i| hasher.hash_one(slice(bytes, entries[i as usize].text)));
        true
    }

    /// A copy by frame text, for a finished profile's views.
    pub fn snapshot(&self) -> HashMap<String, FrameIdentity> {
        let text = |r| String::from_utf8_lossy(slice(&self.bytes, r)).into_owned();
        self.entries
            .iter()
            .map(|e| {
                let id = FrameIdentity {
                    first: e.first,
                    last: e.last,
                    name: e.name.map(text),
                    source: text(e.source),
                    ambiguous: e.ambiguous,
                    label: None,
                };
                (text(e.text), id)
            })
            .collect()
    }
}

/// Whether a frame's text can show function `f`: `file:line` with the line
/// the VM reports, `file:first-last` with its span (a compiled leaf), or
/// `file:@0xADDR` for a function of bytecode without lines (defined at
/// line 0, with no line to report).
fn shows(text: &[u8], f: &FrameFunction<'_>) -> bool {
    let Some(colon) = memchr::memrchr(b':', text) else { return false };
    let tail = &text[colon + 1..];
    if tail.starts_with(b"@0x") {
        return f.first == 0 && f.last <= 0 && f.line <= 0;
    }
    let num = |t: &[u8]| std::str::from_utf8(t).ok().and_then(|s| s.parse::<i64>().ok());
    match memchr::memchr(b'-', tail) {
        Some(dash) => {
            num(&tail[..dash]) == Some(f.first as i64) && num(&tail[dash + 1..]) == Some(f.last.max(f.first) as i64)
        }
        None => num(tail).is_some_and(|line| line == f.line as i64 || (f.line < 0 && line == f.first as i64)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn func(first: i32, last: i32, line: i32, name: Option<&'static str>) -> FrameFunction<'static> {
        FrameFunction::new(first, last, line, name.map(str::as_bytes), b"a.lua")
    }

    #[test]
    fn a_prototype_frame_shows_only_a_function_without_lines() {
        assert!(shows(b"m.lua:@0x7f10", &func(0, 0, -1, None)));
        assert!(shows(b"m.lua:@0x7f10", &func(0, 0, 0, None)));
        assert!(!shows(b"m.lua:@0x7f10", &func(3, 9, 5, None)));
        assert!(!shows(b"m.lua:0", &func(3, 9, 5, None)));
    }

    #[test]
    fn records_once_and_flags_a_frame_seen_in_two_functions() {
        let mut ids = FrameIdentities::default();
        assert!(ids.record(b"a.lua:5", &func(3, 9, 5, Some("f"))));
        assert!(ids.record(b"a.lua:5", &func(3, 9, 5, Some("g"))));
        assert_eq!(ids.snapshot()["a.lua:5"].name.as_deref(), Some("f"), "the first name seen is kept");
        assert!(!ids.snapshot()["a.lua:5"].ambiguous);
        assert!(ids.record(b"a.lua:5", &func(1, 12, 5, Some("outer"))));
        assert!(!ids.snapshot()["a.lua:5"].ambiguous, "an enclosing function on the same line");
        assert!(ids.record(b"a.lua:5", &func(5, 5, 5, Some("inner"))));
        assert_eq!(ids.snapshot()["a.lua:5"].name.as_deref(), Some("inner"), "the innermost function is kept");
        assert_eq!((ids.snapshot()["a.lua:5"].first, ids.snapshot()["a.lua:5"].last), (5, 5));
        assert!(ids.record(b"a.lua:5", &func(4, 8, 5, Some("f"))));
        assert!(!ids.snapshot()["a.lua:5"].ambiguous);
        assert!(ids.record(b"a.lua:5", &func(5, 9, 5, Some("g"))));
        assert!(!ids.snapshot()["a.lua:5"].ambiguous);
        assert!(ids.record(b"a.lua:5", &func(2, 5, 5, Some("h"))));
        assert!(!ids.snapshot()["a.lua:5"].ambiguous, "5-5 lies in 2-5");
        assert!(ids.record(b"a.lua:6", &func(4, 8, 6, None)));
        assert!(ids.record(b"a.lua:6", &func(6, 9, 6, None)));
        assert!(ids.snapshot()["a.lua:6"].ambiguous, "overlapping spans: a chunk reloaded");
        let other = FrameFunction::new(4, 8, 7, None, b"b.lua");
        assert!(ids.record(b"a.lua:7", &func(4, 8, 7, None)));
        assert!(ids.record(b"a.lua:7", &other));
        assert!(ids.snapshot()["a.lua:7"].ambiguous, "another chunk with the same frame text");
    }

    #[test]
    fn refuses_a_function_the_frame_cannot_show() {
        let mut ids = FrameIdentities::default();
        assert!(!ids.record(b"a.lua:7", &func(3, 9, 5, None)));
        assert!(ids.record(b"a.lua:3-9", &func(3, 9, 5, None)), "a span frame matches its function");
        assert!(!ids.record(b"a.lua:3-8", &func(3, 9, 5, None)));
        assert_eq!(ids.misaligned, 2);
        let mut c = func(-1, -1, -1, None);
        c.lua = false;
        assert!(ids.record(b"[builtin#3]", &c), "C frames are skipped, not misaligned");
        assert_eq!(ids.len(), 1);
    }
}
