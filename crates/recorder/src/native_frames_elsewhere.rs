//! Native frames where the tick handler walks none: every platform but
//! Linux x86-64. `nativeFrames` is refused with the reason.

pub fn arm() -> Result<(), &'static str> {
    Err("native frames are read only on Linux x86-64")
}
pub fn disarm() {}
pub fn armed() -> bool {
    false
}
pub fn counts() -> [(&'static str, u64); 4] {
    [("stacks", 0), ("frames", 0), ("unread", 0), ("objects", 0)]
}
pub mod symbols {
    pub fn name(_addr: usize) -> Option<String> {
        None
    }
    pub fn function_at(_addr: usize) -> Option<String> {
        None
    }
}
