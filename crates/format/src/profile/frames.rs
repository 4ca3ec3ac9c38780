//! What a frame of a finished profile is: a Lua source line (`file:line`),
//! a builtin (`pcall`, `string.format`), a C function (`[C:symbol]`), or a
//! marker such as the overflow line. Also the function identity of a line.
//!
//! Frames are recorded as `file:line`, where the line is the line the
//! function was executing. A function is identified by the range of lines
//! its prototype spans, which the Lua side reads from the compiled chunk
//! (`loadfile` + `jit.util.funcinfo`, see `tecs.profile.funcmap`). A line in
//! a file with no known ranges stays its own function: views then fall back
//! to line granularity for that file, and say so by showing `file:line`.

use std::collections::HashMap;

/// The function a frame ran in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameIdentity {
    /// First and last line of the function's definition; 0 for a main chunk.
    pub first: u32,
    pub last: u32,
    /// The name its caller used (first one seen), if the VM could tell.
    pub name: Option<String>,
    /// The chunk's short name (`game.lua`, `[string "..."]`).
    pub source: String,
    /// The same frame text was seen in two functions neither of which lies
    /// in the other (a chunk loaded again after its source changed, or two
    /// chunks with one name): the frame stays a line. Nested functions on
    /// one line (a closure defined where it is called) keep the inner one.
    pub ambiguous: bool,
    /// How the views named the function when the profile was written (read
    /// back from a functions file, [`super::sidecar`]); it then wins over
    /// every other name.
    pub label: Option<String>,
}

/// The kind of a frame, for grouping and labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// A Lua source line: `file:line`.
    Lua,
    /// A C function, `[C:...]`.
    C,
    /// A builtin (fast function) named by `jit.vmdef`, or `[builtin#N]`.
    Builtin,
    /// Anything else (`<root>`, the overflow line).
    Other,
}

/// Splits `file:line`; None for frames that are not Lua source lines.
pub fn file_line(frame: &str) -> Option<(&str, u32)> {
    if frame.starts_with('[') || frame.starts_with('<') {
        return None;
    }
    let i = frame.rfind(':')?;
    let (file, line) = (&frame[..i], &frame[i + 1..]);
    if file.is_empty() || line.is_empty() || !line.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((file, line.parse().ok()?))
}

/// Splits a function frame `file:first-last` (a sample known only to its
/// function, see `Precision::Function`); the main chunk starts at line 0.
pub fn file_span(frame: &str) -> Option<(&str, u32, u32)> {
    if frame.starts_with('[') || frame.starts_with('<') {
        return None;
    }
    let i = frame.rfind(':')?;
    let (file, span) = (&frame[..i], &frame[i + 1..]);
    let (a, b) = span.split_once('-')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
    if file.is_empty() || !digits(a) || !digits(b) {
        return None;
    }
    Some((file, a.parse().ok()?, b.parse().ok()?))
}

/// Splits the frame of a function whose bytecode has no lines
/// (`file:@0xADDR`, see `trace_decoder::text::write_frame`): its file and
/// the address of its prototype, which tells it from the chunk's others.
pub fn file_proto(frame: &str) -> Option<(&str, u64)> {
    if frame.starts_with('[') || frame.starts_with('<') {
        return None;
    }
    let i = frame.rfind(':')?;
    let (file, hex) = (&frame[..i], frame[i + 1..].strip_prefix("@0x")?);
    if file.is_empty() || hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((file, u64::from_str_radix(hex, 16).ok()?))
}

/// The source file of a line or function frame.
pub fn file_of(frame: &str) -> Option<&str> {
    file_line(frame)
        .map(|(f, _)| f)
        .or_else(|| file_span(frame).map(|(f, _, _)| f))
        .or_else(|| file_proto(frame).map(|(f, _)| f))
}

pub fn kind(frame: &str) -> FrameKind {
    if frame.starts_with("[C:") || frame.starts_with('@') {
        FrameKind::C
    } else if frame.starts_with("[builtin") {
        FrameKind::Builtin
    } else if frame.starts_with('[') || frame.starts_with('<') {
        FrameKind::Other
    } else if file_of(frame).is_some() {
        FrameKind::Lua
    } else {
        FrameKind::Builtin
    }
}

/// The frame a sample's time belongs to at source-line level: the leaf,
/// or, when the leaf is the C function a Lua line was calling, that line
/// (a line's own time includes the C functions it calls, as in `jit.p`).
pub fn line_leaf(stack: &[&str]) -> usize {
    let n = stack.len();
    if n >= 2 && matches!(kind(stack[n - 1]), FrameKind::C | FrameKind::Builtin) && kind(stack[n - 2]) == FrameKind::Lua
    {
        n - 2
    } else {
        n.saturating_sub(1)
    }
}

/// The module of a frame: a Lua line's source file; a builtin or a C
/// function named by its Lua path, the library that path is in
/// (`string.format` in `string`, `love.graphics.present` in
/// `love.graphics`, `Image:getWidth` in `Image`); the base library's
/// functions (`pcall`, `print`) under `[builtin]`, and C functions known
/// only by their symbol or address under `[C]`.
pub fn module(frame: &str) -> &str {
    match kind(frame) {
        FrameKind::Lua => file_of(frame).unwrap_or(frame),
        FrameKind::C => "[C]",
        FrameKind::Builtin => match (frame.find(':'), frame.rfind('.')) {
            (Some(colon), _) if colon > 0 => &frame[..colon],
            (None, Some(dot)) if dot > 0 => &frame[..dot],
            _ => "[builtin]",
        },
        // A function of a chunk loaded from a string (`load`, `:lua`, an
        // editor's `-c`): the chunk has no file to name it by.
        FrameKind::Other if frame.starts_with("[string") => "[string]",
        FrameKind::Other => frame,
    }
}

/// One Lua function prototype: the lines it spans and a display name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncRange {
    pub first: u32,
    pub last: u32,
    /// How the function is shown, e.g. `update (game.lua:12)`.
    pub label: String,
}

/// The function of one frame, known by its text (see `identity`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownFrame {
    pub label: String,
    /// File and line span of the function; None for a main chunk, and for
    /// a frame whose function is not known for certain (it then stays a line).
    pub range: Option<(String, u32, u32)>,
}

/// Line-to-function map per source file.
#[derive(Clone, Debug, Default)]
pub struct FunctionMap {
    files: HashMap<String, Vec<FuncRange>>,
    main: HashMap<String, String>,
    /// Functions by frame text, recorded from the VM while sampling; they
    /// come before the files' ranges.
    pub(crate) frames: HashMap<String, KnownFrame>,
    /// Source line counts by file, when the map was read from sources.
    pub line_counts: HashMap<String, u32>,
    /// Lines with bytecode by file (sorted), when read from sources: a
    /// sampled line always has some.
    pub code_lines: HashMap<String, Vec<u32>>,
    /// Files the map could not read, with the reason.
    pub unreadable: Vec<(String, String)>,
    /// Files whose source is not the one that ran (their names come from
    /// the VM, or their lines stay lines), for the annotated source.
    pub changed_files: Vec<String>,
    /// What the views say about how functions were named (sources changed
    /// or unreadable, names unknown), one sentence each.
    pub notes: Vec<String>,
}

impl FunctionMap {
    /// Adds the functions of one file. `main_label` names lines outside every
    /// function (the main chunk).
    pub fn add_file(&mut self, file: &str, mut ranges: Vec<FuncRange>, main_label: String) {
        // Innermost first: a line inside nested functions belongs to the
        // narrowest one that contains it.
        ranges.sort_by_key(|r| (r.last - r.first.min(r.last), r.first));
        self.files.insert(file.to_string(), ranges);
        self.main.insert(file.to_string(), main_label);
    }

    /// The functions known for `file`, innermost first, and its main label.
    pub fn file_functions(&self, file: &str) -> Option<(&[FuncRange], Option<&str>)> {
        self.files.get(file).map(|r| (r.as_slice(), self.main.get(file).map(String::as_str)))
    }

    /// Forgets the main chunk of `file`: its lines outside every known
    /// function stay lines.
    pub fn forget_main(&mut self, file: &str) {
        self.main.remove(file);
    }

    /// Forgets what the sources said of `file` (its frames stay lines).
    pub fn remove_file(&mut self, file: &str) {
        self.files.remove(file);
        self.main.remove(file);
    }

    /// The function a frame belongs to: the innermost known function of a Lua
    /// line, the main chunk when the file is known but no function spans the
    /// line, and the frame itself otherwise (builtins, C, unknown files).
    pub fn function_of<'a>(&'a self, frame: &'a str) -> &'a str {
        if let Some(k) = self.frames.get(frame) {
            return &k.label;
        }
        if let Some((file, first, last)) = file_span(frame) {
            let Some(ranges) = self.files.get(file) else { return frame };
            if first == 0 {
                return self.main.get(file).map(String::as_str).unwrap_or(frame);
            }
            let exact = ranges.iter().find(|r| r.first == first && r.last == last);
            return exact
                .or_else(|| ranges.iter().find(|r| r.first == first))
                .map(|r| r.label.as_str())
                .unwrap_or(frame);
        }
        let Some((file, line)) = file_line(frame) else { return frame };
        let Some(ranges) = self.files.get(file) else { return frame };
        for r in ranges {
            if r.first <= line && line <= r.last {
                return &r.label;
            }
        }
        self.main.get(file).map(String::as_str).unwrap_or(frame)
    }

    /// The file and line range of the innermost known function of a frame.
    pub fn range_of<'a>(&'a self, frame: &'a str) -> Option<(&'a str, u32, u32)> {
        if let Some(k) = self.frames.get(frame) {
            return k.range.as_ref().map(|(f, a, b)| (f.as_str(), *a, *b));
        }
        if let Some((file, first, last)) = file_span(frame) {
            return (first > 0).then_some((file, first, last));
        }
        let (file, line) = file_line(frame)?;
        let ranges = self.files.get(file)?;
        ranges.iter().find(|r| r.first <= line && line <= r.last).map(|r| (file, r.first, r.last))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_c_leaf_belongs_to_its_calling_line() {
        assert_eq!(line_leaf(&["a.lua:1", "b.lua:2", "table.sort"]), 1);
        assert_eq!(line_leaf(&["a.lua:1", "[C:liblove.so+0x10]"]), 0);
        assert_eq!(line_leaf(&["a.lua:1", "b.lua:2"]), 1, "a Lua leaf is its own line");
        assert_eq!(line_leaf(&["pcall", "table.sort"]), 1, "no Lua line to give it to");
        assert_eq!(line_leaf(&["table.sort"]), 0);
        assert_eq!(line_leaf(&[]), 0);
    }
    use super::*;

    #[test]
    fn classifies_frames() {
        assert_eq!(file_line("a/b.lua:12"), Some(("a/b.lua", 12)));
        assert_eq!(file_line("C:/x.lua:3"), Some(("C:/x.lua", 3)));
        assert_eq!(file_line("pcall"), None);
        assert_eq!(file_line("[C:0x10]"), None);
        assert_eq!(kind("[C:write]"), FrameKind::C);
        assert_eq!(kind("string.format"), FrameKind::Builtin);
        assert_eq!(kind("[builtin#3]"), FrameKind::Builtin);
        assert_eq!(kind("<root>"), FrameKind::Other);
        assert_eq!(module("a.lua:3"), "a.lua");
        assert_eq!(module("pcall"), "[builtin]");
        assert_eq!(module("string.format"), "string");
        assert_eq!(module("love.graphics.present"), "love.graphics");
        assert_eq!(module("love.graphics.Image:getWidth"), "love.graphics.Image");
        assert_eq!(module("Image:getWidth"), "Image");
        assert_eq!(module("[builtin#12]"), "[builtin]");
        assert_eq!(module("[string]:0-1"), "[string]", "code loaded from a string");
        assert_eq!(module("[C:x]"), "[C]");
        assert_eq!(file_span("a/b.lua:12-40"), Some(("a/b.lua", 12, 40)));
        assert_eq!(file_span("a/b.lua:12"), None);
        assert_eq!(kind("a/b.lua:0-9"), FrameKind::Lua);
        assert_eq!(file_proto("vim/shared.lua:@0x7f60a0"), Some(("vim/shared.lua", 0x7f60a0)));
        assert_eq!(file_proto("vim/shared.lua:0"), None);
        assert_eq!(file_proto("@0x7f60a0"), None);
        assert_eq!(kind("vim/shared.lua:@0x7f60a0"), FrameKind::Lua);
        assert_eq!(module("vim/shared.lua:@0x7f60a0"), "vim/shared.lua");
        assert_eq!(kind("@0x7f60a0"), FrameKind::C);
        assert_eq!(module("a/b.lua:3-5"), "a/b.lua");
    }

    #[test]
    fn maps_lines_to_innermost_function() {
        let mut m = FunctionMap::default();
        m.add_file(
            "a.lua",
            vec![
                FuncRange { first: 1, last: 20, label: "outer (a.lua:1)".into() },
                FuncRange { first: 5, last: 8, label: "inner (a.lua:5)".into() },
            ],
            "(main chunk) a.lua".into(),
        );
        assert_eq!(m.function_of("a.lua:6"), "inner (a.lua:5)");
        assert_eq!(m.function_of("a.lua:9"), "outer (a.lua:1)");
        assert_eq!(m.function_of("a.lua:30"), "(main chunk) a.lua");
        assert_eq!(m.function_of("b.lua:3"), "b.lua:3");
        assert_eq!(m.function_of("pcall"), "pcall");
        assert_eq!(m.function_of("a.lua:5-8"), "inner (a.lua:5)");
        assert_eq!(m.function_of("a.lua:0-30"), "(main chunk) a.lua");
        assert_eq!(m.function_of("b.lua:5-8"), "b.lua:5-8");
    }
}
