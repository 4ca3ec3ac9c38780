//! Collapsed-stack text: one line per (zone path, stack), frames `;`-joined
//! root first, one space, an integer count. The leaf frame carries `_[X]`,
//! the dominant VM state. Also the strict reader used by reports.

use super::{state_index, VM_STATES};
use crate::profile::Profile;

/// Renders a profile as collapsed text (rows in the profile's order).
pub fn write(profile: &Profile) -> String {
    // Every name is valid UTF-8, and so is the text made of them.
    String::from_utf8(write_bytes(profile)).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// [`write`] as bytes, which are valid UTF-8 (what `stop()` hands to Lua:
/// checking tens of MB of text again costs milliseconds).
///
/// Every row knows the length of its stack's text, so each line's place in
/// the text is known before anything is written. The rows' stacks and the
/// names they use lie in memory in the order the rows were made, which
/// after sorting is not the order of the text; so the lines are written in
/// the order their stacks are stored, each to its place: frames and names
/// are then read front to back (writing in text order, they are read from
/// scattered places, and that took twice as long). Stacks stored next to each other usually
/// start with the same frames; those are copied as one piece from the line
/// written before.
pub fn write_bytes(profile: &Profile) -> Vec<u8> {
    let names = &profile.names;
    let rows = &profile.rows;
    let zone_prefixes: Vec<String> = (0..profile.zone_path_count() as u32)
        .map(|z| {
            let mut s = String::new();
            for &id in profile.zone_path(z) {
                s.push_str(profile.name(id));
                s.push(';');
            }
            s
        })
        .collect();
    let mut ranks = StorageRanks::new(profile);
    // The rows in storage order, with what writing a line needs of each
    // and where the line goes: the rows are read front to back (they are
    // in text order), each stored to its rank (stores do not wait for
    // memory as loads from scattered rows would).
    let mut lines: Vec<Line> = crate::profile::large_vec(rows.len());
    lines.resize(rows.len(), Line::default());
    let mut size = 0usize;
    for r in rows {
        let k = ranks.rank(r);
        let frames = if r.len == 0 { "<root>".len() } else { r.text };
        let total = r.total();
        let line_len = zone_prefixes[r.zone as usize].len() + frames + "_[X] ".len() + digits(total) + 1;
        lines[k as usize] =
            Line { start: r.start, len: r.len, zone: r.zone, state: r.dominant_state(), total, place: size };
        size += line_len;
    }
    drop(ranks);

    let mut out = vec![0u8; size];
    super::host::advise_huge_pages(&mut out);
    let mut number = [0u8; 20];
    let mut prev: &[u32] = &[];
    // Where each frame of the previous line ends, from where its frames
    // start in `out` (cut to the frames a line shares with it, the list
    // becomes the line's own).
    let mut ends: Vec<usize> = Vec::new();
    let mut prev_frames_at = 0usize;
    for row in &lines {
        let stack = &profile.frames[row.start..row.start + row.len as usize];
        let zone = zone_prefixes[row.zone as usize].as_bytes();
        let start = row.place;
        out[start..start + zone.len()].copy_from_slice(zone);
        let frames_at = start + zone.len();
        let mut at = frames_at;
        let shared = stack.iter().zip(prev).take_while(|(a, b)| a == b).count();
        ends.truncate(shared);
        if shared > 0 {
            let n = ends[shared - 1];
            out.copy_within(prev_frames_at..prev_frames_at + n, at);
            at += n;
        }
        for (k, &f) in stack.iter().enumerate().skip(shared) {
            if k > 0 {
                out[at] = b';';
                at += 1;
            }
            let name = names.bytes(f);
            out[at..at + name.len()].copy_from_slice(name);
            at += name.len();
            ends.push(at - frames_at);
        }
        if stack.is_empty() {
            out[at..at + 6].copy_from_slice(b"<root>");
            at += 6;
        }
        let count = format_u64(row.total, &mut number);
        let tail = &mut out[at..at + 6 + count.len()];
        tail[..2].copy_from_slice(b"_[");
        tail[2] = row.state;
        tail[3..5].copy_from_slice(b"] ");
        tail[5..5 + count.len()].copy_from_slice(count);
        tail[5 + count.len()] = b'\n';
        prev = stack;
        prev_frames_at = frames_at;
    }
    out
}

/// Each row's place in storage order (the order of where their stacks
/// start). Rows' stacks do not overlap, so the place of a row with frames
/// is the number of such rows whose stack starts before its own: one bit
/// per frame marks where stacks start, and a count of the bits before each
/// 64-bit word gives those numbers. That is a few hundred KB that stay in
/// the cache, where sorting (start, row) pairs took MBs of fresh memory.
/// Rows without frames read nothing and come last, in their order.
struct StorageRanks {
    starts: Vec<u64>,
    before: Vec<u32>,
    next_empty: u32,
}

impl StorageRanks {
    fn new(profile: &Profile) -> StorageRanks {
        let mut starts = vec![0u64; profile.frames.len() / 64 + 1];
        for r in profile.rows.iter().filter(|r| r.len > 0) {
            starts[r.start / 64] |= 1 << (r.start % 64);
        }
        let mut before = Vec::with_capacity(starts.len());
        let mut sum = 0u32;
        for w in &starts {
            before.push(sum);
            sum += w.count_ones();
        }
        StorageRanks { starts, before, next_empty: sum }
    }

    /// The place of `row`; rows without frames are asked for in order.
    #[inline]
    fn rank(&mut self, row: &super::Row) -> u32 {
        if row.len > 0 {
            let (word, bit) = (row.start / 64, row.start % 64);
            self.before[word] + (self.starts[word] & ((1u64 << bit) - 1)).count_ones()
        } else {
            self.next_empty += 1;
            self.next_empty - 1
        }
    }
}

/// A row as [`write_bytes`] reads it, in storage order.
#[derive(Clone, Default)]
struct Line {
    start: usize,
    len: u32,
    zone: u32,
    state: u8,
    total: u64,
    /// Where its line starts in the text.
    place: usize,
}

fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// `n` in decimal, written into `buf`.
fn format_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[at..]
}

#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Whether a frame looks like code (file:line, [builtin], [C:...], <root>)
/// rather than a zone name. Used to find where zones end in files read back.
pub fn looks_like_code(frame: &str) -> bool {
    if frame.starts_with('[') || frame.starts_with('<') || frame.starts_with('@') {
        return true;
    }
    match frame.rfind(':') {
        Some(i) => {
            let digits = &frame[i + 1..];
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                || crate::profile::frames::file_proto(frame).is_some()
        }
        None => BASE_BUILTINS.contains(&frame) || (!frame.contains(' ') && is_builtin_like(frame)),
    }
}

fn is_builtin_like(frame: &str) -> bool {
    // Library functions named by jit.vmdef: string.format, math.floor, ...
    const LIBS: [&str; 11] =
        ["string.", "table.", "math.", "io.", "os.", "coroutine.", "debug.", "bit.", "jit.", "package.", "ffi."];
    LIBS.iter().any(|l| frame.starts_with(l))
}

/// Base-library builtins, named without a library prefix. A stack cut by the
/// depth limit can start with one of them, where a zone name would be.
const BASE_BUILTINS: [&str; 30] = [
    "assert",
    "collectgarbage",
    "dofile",
    "error",
    "gcinfo",
    "getfenv",
    "getmetatable",
    "ipairs",
    "load",
    "loadfile",
    "loadstring",
    "module",
    "newproxy",
    "next",
    "pairs",
    "pcall",
    "print",
    "rawequal",
    "rawget",
    "rawlen",
    "rawset",
    "require",
    "select",
    "setfenv",
    "setmetatable",
    "tonumber",
    "tostring",
    "type",
    "unpack",
    "xpcall",
];

/// Strictly parses collapsed text. Lines are `frames count`; blank lines are
/// skipped; anything else is an error naming the line. A trailing `_[X]` on
/// the leaf frame is read as the VM state (state `N` when absent).
pub fn parse(text: &str) -> Result<Profile, ParseError> {
    let mut profile = Profile::default();
    let (mut zones, mut stack) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let sp = line
            .rfind(' ')
            .ok_or_else(|| ParseError { line: lineno, message: "expected `frames count`, found no space".into() })?;
        let (frames, count) = (&line[..sp], &line[sp + 1..]);
        let count: u64 = count.parse().map_err(|_| ParseError {
            line: lineno,
            message: format!("count {:?} is not a non-negative integer", count),
        })?;
        if frames.is_empty() {
            return Err(ParseError { line: lineno, message: "empty stack".into() });
        }
        let mut parts: Vec<&str> = frames.split(';').collect();
        let mut state = b'N';
        if let Some(leaf) = parts.last_mut() {
            let b = leaf.as_bytes();
            if b.len() >= 4 && b[b.len() - 4] == b'_' && b[b.len() - 3] == b'[' && b[b.len() - 1] == b']' {
                let s = b[b.len() - 2];
                if VM_STATES.contains(&s) {
                    state = s;
                    *leaf = &leaf[..leaf.len() - 4];
                }
            }
        }
        let nz = parts.iter().take_while(|f| !looks_like_code(f)).count();
        let nz = if nz == parts.len() { 0 } else { nz };
        zones.clear();
        zones.extend(parts[..nz].iter().map(|z| profile.names.intern(z).0));
        let zone = profile.zone_path_id(&zones);
        stack.clear();
        if !(parts.len() == nz + 1 && parts[nz] == "<root>") {
            stack.extend(parts[nz..].iter().map(|f| profile.names.intern(f).0));
        }
        let mut counts = [0u64; 5];
        counts[state_index(state)] = count;
        profile.push_row(zone, &stack, counts);
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(p: &Profile, i: usize) -> crate::profile::NamedRow<'_> {
        p.named_rows().nth(i).unwrap()
    }

    #[test]
    fn writes_zones_frames_and_marker() {
        let mut p = Profile::default();
        let ids: Vec<u32> =
            ["update", "ai", "main.lua:10", "ai.lua:3", "z"].iter().map(|s| p.names.intern(s).0).collect();
        let (update_ai, none, z) = (p.zone_path_id(&ids[..2]), p.zone_path_id(&[]), p.zone_path_id(&ids[4..]));
        p.push_row(update_ai, &ids[2..4], [5, 2, 0, 0, 0]);
        p.push_row(none, &[], [0, 0, 1, 0, 0]);
        p.push_row(z, &[], [0, 0, 0, 1, 0]);
        assert_eq!(write(&p), "update;ai;main.lua:10;ai.lua:3_[N] 7\n<root>_[C] 1\nz;<root>_[G] 1\n");
    }

    #[test]
    fn round_trips_through_the_reader() {
        let text = "update;ai;main.lua:10;ai.lua:3_[N] 7\nmain.lua:1;string.format_[I] 2\n<root>_[C] 1\n";
        let p = parse(text).unwrap();
        assert_eq!(named(&p, 0).zones, vec!["update", "ai"]);
        assert_eq!(named(&p, 0).stack, vec!["main.lua:10", "ai.lua:3"]);
        assert_eq!(named(&p, 1).zones, Vec::<&str>::new());
        assert_eq!(p.rows[1].counts, [0, 2, 0, 0, 0]);
        assert_eq!(named(&p, 2).stack, Vec::<&str>::new());
        assert_eq!(write(&p), text);
    }

    #[test]
    fn counts_as_large_as_a_u64_holds_are_written_whole() {
        let text = "a.lua:1_[J] 18446744073709551615\nb.lua:1_[N] 0\n";
        assert_eq!(write(&parse(text).unwrap()), text);
    }

    #[test]
    fn a_cut_stack_starting_with_a_builtin_has_no_zone() {
        let p = parse("pcall;a.lua:3_[N] 4\nrender;hud;xpcall;a.lua:3_[I] 2\ngfx.sprite;a.lua:1_[N] 1\n").unwrap();
        assert!(named(&p, 0).zones.is_empty());
        assert_eq!(named(&p, 0).stack, vec!["pcall", "a.lua:3"]);
        assert_eq!(named(&p, 1).zones, vec!["render", "hud"]);
        assert_eq!(named(&p, 2).zones, vec!["gfx.sprite"]);
    }

    #[test]
    fn lines_are_placed_by_where_their_stacks_are_stored() {
        // Sorting moves rows away from the order their stacks were stored
        // in; rows without frames (one per zone path here) share a place
        // in the frame list with the row stored after them.
        let text = "a.lua:1;b.lua:2_[N] 1\n<root>_[C] 4\nz;<root>_[G] 9\na.lua:1;b.lua:3_[I] 7\n\
                    z;y;<root>_[N] 2\nz;a.lua:1_[J] 7\na.lua:1_[N] 3\n";
        let mut p = parse(text).unwrap();
        p.sort();
        let want: String = p
            .named_rows()
            .map(|r| {
                let mut parts = r.zones.clone();
                parts.extend(if r.stack.is_empty() { vec!["<root>"] } else { r.stack.clone() });
                format!("{}_[{}] {}\n", parts.join(";"), r.dominant_state() as char, r.total())
            })
            .collect();
        assert_eq!(write(&p), want);
        assert!(want.starts_with("z;<root>_[G] 9\na.lua:1;b.lua:3_[I] 7\nz;a.lua:1_[J] 7\n"), "{}", want);
    }

    #[test]
    fn rejects_malformed_lines() {
        assert_eq!(parse("a;b\n").unwrap_err().line, 1);
        assert!(parse("ok 1\na;b x\n").unwrap_err().message.contains("not a non-negative integer"));
        assert!(parse("ok 1\n 3\n").is_err());
    }
}
