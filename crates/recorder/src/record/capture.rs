//! The capture boundary: the one record every way of reading a sample's
//! stack hands the recorder.
//!
//! Two captures read stacks. The tick handler reads compiled code and C
//! functions where the tick found them (`trace_decoder`, drained as
//! [`crate::sys::TakenStack`]); LuaJIT's profiler hook reads everything else
//! at its next safe point ([`crate::sys::VmStack`], in the sample callback).
//! Each writes a [`CapturedStack`] and passes it to the sampler's `count`,
//! with a [`FrameFunctions`] that names the frames of a stack the table has
//! not seen. The stack table, the timeline and the frame identities, and
//! every view and output built on them, see only what is counted there.

use crate::sys::{FrameFact, FrameFacts, FrameFunction, VmStack};
use smallvec::SmallVec;

/// One stack, as a capture read it.
pub struct CapturedStack<'a> {
    /// The stack table's key: the zone path, then the frames, root first,
    /// as LuaJIT's stack dump writes them (see `stack_table::Key`).
    pub key: &'a [u8],
    /// Where the frames start in `key`.
    pub stack_start: usize,
    /// Where the frames the [`FrameFunctions`] can name end: a C function
    /// the tick handler saw running may follow, which the VM's stack, read
    /// later at a safe point, no longer holds.
    pub named_end: usize,
    /// The VM state letter (`N`, `I`, `C`, `G`, `J`).
    pub state: u8,
    /// Ticks that found this stack.
    pub ticks: u32,
    /// When the last of them was taken (monotonic nanoseconds).
    pub at_ns: u64,
    /// Whether the leaf is the C function the ticks were taken in.
    pub c_leaf: bool,
}

/// The function of each frame of a captured stack, asked only when the
/// stack is new to the table; `level` 0 is the leaf. None ends the walk.
pub trait FrameFunctions {
    fn function(&self, level: usize) -> Option<FrameFunction<'_>>;
}

/// The hook's capture: the VM's own stack, while the callback runs.
impl FrameFunctions for VmStack {
    fn function(&self, level: usize) -> Option<FrameFunction<'_>> {
        self.frame_function(level as i32)
    }
}

/// The handler's capture: what it read of each frame as it walked them.
pub struct ReadFrames<'a>(SmallVec<[Option<FrameFact<'a>>; 32]>);

impl<'a> ReadFrames<'a> {
    pub fn new(facts: FrameFacts<'a>) -> Self {
        ReadFrames(facts.collect())
    }
}

impl FrameFunctions for ReadFrames<'_> {
    fn function(&self, level: usize) -> Option<FrameFunction<'_>> {
        let at = self.0.len().checked_sub(level + 1)?;
        Some(match &self.0[at] {
            Some(f) => FrameFunction::new(f.first, f.last, f.line, f.name, f.source),
            None => FrameFunction::not_lua(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One frame's record as the tick handler writes it.
    fn fact(out: &mut Vec<u8>, first: i32, last: i32, line: i32, source: &str, name: &str) {
        out.push(1);
        for v in [first, last, line] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.push(source.len() as u8);
        out.extend_from_slice(source.as_bytes());
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
    }

    #[test]
    fn frames_read_in_the_handler_are_named_from_the_leaf() {
        let mut bytes = Vec::new();
        fact(&mut bytes, 0, 0, 12, "main.lua", "");
        fact(&mut bytes, 3, 9, 5, "lib.lua", "step");
        bytes.push(0); // a C function, the leaf
        let frames = ReadFrames::new(FrameFacts(&bytes));
        let leaf = frames.function(0).expect("the leaf");
        assert!(!leaf.lua, "the C leaf is not a Lua function");
        let step = frames.function(1).expect("its caller");
        assert!(step.lua);
        assert_eq!(
            (step.first, step.last, step.line, step.name, step.source()),
            (3, 9, 5, Some(&b"step"[..]), &b"lib.lua"[..])
        );
        let main = frames.function(2).expect("the root");
        assert_eq!((main.line, main.name, main.source()), (12, None, &b"main.lua"[..]));
        assert!(frames.function(3).is_none(), "no frame past the root");
    }
}
