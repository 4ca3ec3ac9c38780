//! Collapsed-stack text: one line per (zone path, stack), frames `;`-joined
//! root first, one space, an integer count. The leaf frame carries `_[X]`,
//! the dominant VM state. Also the strict reader used by reports.

use crate::profile::{Profile, Row};
use crate::record::stack_table::VM_STATES;

/// Renders a profile as collapsed text (rows in the profile's order).
pub fn write(profile: &Profile) -> String {
    let mut out = String::with_capacity(profile.rows.len() * 96);
    for row in &profile.rows {
        write_row(row, &mut out);
    }
    out
}

fn write_row(row: &Row, out: &mut String) {
    let mut first = true;
    for z in &row.zones {
        if !first {
            out.push(';');
        }
        out.push_str(z);
        first = false;
    }
    if !first {
        out.push(';');
    }
    if row.stack.is_empty() {
        out.push_str("<root>");
    } else {
        out.push_str(&row.stack.join(";"));
    }
    out.push_str("_[");
    out.push(row.dominant_state() as char);
    out.push_str("] ");
    out.push_str(itoa_u64(row.total()).as_str());
    out.push('\n');
}

fn itoa_u64(n: u64) -> String {
    n.to_string()
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
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
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
    let mut rows = Vec::new();
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
        let mut parts: Vec<String> = frames.split(';').map(str::to_string).collect();
        let mut state = b'N';
        if let Some(leaf) = parts.last_mut() {
            let b = leaf.as_bytes();
            if b.len() >= 4 && b[b.len() - 4] == b'_' && b[b.len() - 3] == b'[' && b[b.len() - 1] == b']' {
                let s = b[b.len() - 2];
                if VM_STATES.contains(&s) {
                    state = s;
                    leaf.truncate(leaf.len() - 4);
                }
            }
        }
        let nz = parts.iter().take_while(|f| !looks_like_code(f)).count();
        let nz = if nz == parts.len() { 0 } else { nz };
        let stack = parts.split_off(nz);
        let stack = if stack.len() == 1 && stack[0] == "<root>" { Vec::new() } else { stack };
        let mut counts = [0u64; 5];
        counts[crate::record::stack_table::state_index(state)] = count;
        rows.push(Row { zones: parts, stack, counts });
    }
    Ok(Profile { rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(z: &[&str], s: &[&str], counts: [u64; 5]) -> Row {
        Row {
            zones: z.iter().map(|x| x.to_string()).collect(),
            stack: s.iter().map(|x| x.to_string()).collect(),
            counts,
        }
    }

    #[test]
    fn writes_zones_frames_and_marker() {
        let p = Profile {
            rows: vec![
                row(&["update", "ai"], &["main.lua:10", "ai.lua:3"], [5, 2, 0, 0, 0]),
                row(&[], &[], [0, 0, 1, 0, 0]),
                row(&["z"], &[], [0, 0, 0, 1, 0]),
            ],
        };
        assert_eq!(write(&p), "update;ai;main.lua:10;ai.lua:3_[N] 7\n<root>_[C] 1\nz;<root>_[G] 1\n");
    }

    #[test]
    fn round_trips_through_the_reader() {
        let text = "update;ai;main.lua:10;ai.lua:3_[N] 7\nmain.lua:1;string.format_[I] 2\n<root>_[C] 1\n";
        let p = parse(text).unwrap();
        assert_eq!(p.rows[0].zones, vec!["update", "ai"]);
        assert_eq!(p.rows[0].stack, vec!["main.lua:10", "ai.lua:3"]);
        assert_eq!(p.rows[1].zones, Vec::<String>::new());
        assert_eq!(p.rows[1].counts, [0, 2, 0, 0, 0]);
        assert_eq!(p.rows[2].stack, Vec::<String>::new());
        assert_eq!(write(&p), text);
    }

    #[test]
    fn a_cut_stack_starting_with_a_builtin_has_no_zone() {
        let p = parse("pcall;a.lua:3_[N] 4\nrender;hud;xpcall;a.lua:3_[I] 2\ngfx.sprite;a.lua:1_[N] 1\n").unwrap();
        assert!(p.rows[0].zones.is_empty());
        assert_eq!(p.rows[0].stack, vec!["pcall", "a.lua:3"]);
        assert_eq!(p.rows[1].zones, vec!["render", "hud"]);
        assert_eq!(p.rows[2].zones, vec!["gfx.sprite"]);
    }

    #[test]
    fn rejects_malformed_lines() {
        assert_eq!(parse("a;b\n").unwrap_err().line, 1);
        assert!(parse("ok 1\na;b x\n").unwrap_err().message.contains("not a non-negative integer"));
        assert!(parse("ok 1\n 3\n").is_err());
    }
}
