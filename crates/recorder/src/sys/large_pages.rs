//! The crate's heap allocator: the system allocator, except that blocks of
//! [`LARGE`] bytes or more get a mapping of their own that starts on a 2 MiB
//! boundary and runs to one.
//!
//! Why: `stop()` fills tens of MB of fresh buffers (the profile's names,
//! rows and sort keys, the collapsed text). The kernel backs a buffer with
//! 2 MiB pages (asked for with [`advise_huge_pages`]) only where whole,
//! aligned 2 MiB pages lie inside it; the system allocator's large blocks
//! start 16 bytes past a 4 KiB page, so their first and last MiB or two
//! were faulted in 4 KiB at a time, at about a sixth of the speed. Aligned
//! blocks are huge-paged from end to end.
//!
//! Nothing is asked of the kernel here beyond the alignment: a large block
//! that is touched sparsely (a hash index of a session that is recording)
//! still takes 4 KiB pages, unless its owner asks otherwise.
//!
//! Why the whole module's heap, in a module that lives inside games and
//! nginx: the buffers that gain are the profile's (names, their index, the
//! frame list, rows, sort keys, the collapsed text), built by `stop()` from
//! the stack table, not the stack table's own arena, and aligning them
//! alone would need a buffer type of its own in place of `Vec` for each
//! (stable Rust has no allocator parameter on `Vec`). What everything else
//! pays is one size test per allocation; a block of 1 MiB or more gets a
//! mapping of its own, as glibc already gives one past its mmap threshold.
//! Measured with the system allocator in its place (`cargo bench
//! --no-default-features --bench stop`, 100k stacks, the two builds run in
//! turn five times each at a load average of 5 to 9): `stop()` took 11% more
//! CPU for long paths and 25% more for short ones (medians 62.5 against
//! 69.4 ms and 51.6 against 64.5 ms); see BENCHMARKS.md, "stop()".

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// The size of the pages asked for, and the alignment of large blocks.
pub const HUGE_PAGE: usize = 2 << 20;

/// Blocks from this size up get an aligned mapping of their own. Below it the
/// rounding up to a whole huge page would waste more than it saves.
pub const LARGE: usize = 1 << 20;

/// The heap allocator of the loadable module (`lib.rs`), and the one the
/// counting allocators of the tests and benchmarks forward to.
pub struct LargePages;

/// Set once a large block has been mapped: from then on a buffer of
/// [`LARGE`] bytes or more that starts on a huge-page boundary is known to
/// be one (this allocator serves the process's heap), and its mapping runs
/// to the next boundary. Until then (a program whose heap is glibc's, such
/// as an integration test) nothing past a buffer's end is assumed.
static SERVES_LARGE: AtomicBool = AtomicBool::new(false);

/// Blocks copied because the kernel would not move them (tests).
#[cfg(test)]
static COPIED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The mapping that holds a large block of `size` bytes: whole huge pages.
fn mapping_len(size: usize) -> usize {
    size.div_ceil(HUGE_PAGE) * HUGE_PAGE
}

/// Whether a block of `layout` comes from a mapping of its own. Alignments
/// above a 4 KiB page stay with the system allocator (a moved mapping is
/// only page-aligned).
fn is_large(layout: &Layout) -> bool {
    layout.size() >= LARGE && layout.align() <= 4096
}

/// A fresh mapping of `len` bytes (a multiple of [`HUGE_PAGE`]) starting on a
/// huge-page boundary, or null.
fn map_aligned(len: usize) -> *mut u8 {
    let Some(over) = len.checked_add(HUGE_PAGE) else {
        return std::ptr::null_mut();
    };
    // SAFETY: a private anonymous mapping at an address the kernel picks;
    // nothing else refers to it yet.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    let start = raw as usize;
    let aligned = (start + HUGE_PAGE - 1) & !(HUGE_PAGE - 1);
    let head = aligned - start;
    let tail = over - head - len;
    // SAFETY: both ranges are page-aligned parts of the mapping just made,
    // outside the aligned block that is returned.
    unsafe {
        if head > 0 {
            libc::munmap(raw, head);
        }
        if tail > 0 {
            libc::munmap((aligned + len) as *mut libc::c_void, tail);
        }
    }
    SERVES_LARGE.store(true, Ordering::Relaxed);
    aligned as *mut u8
}

// SAFETY: small blocks are the system allocator's, unchanged. A large block
// is a mapping of exactly `mapping_len(size)` bytes at the returned address,
// private to its owner, readable and writable, zero-filled when fresh, and
// at least page-aligned (the layouts taken here ask no more); it is unmapped
// by `dealloc` with the same length, and `realloc` keeps that invariant.
unsafe impl GlobalAlloc for LargePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(&layout) {
            return map_aligned(mapping_len(layout.size()));
        }
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(&layout) {
            // Fresh anonymous pages are zero.
            return map_aligned(mapping_len(layout.size()));
        }
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(&layout) {
            // SAFETY: a large block is exactly this mapping (invariant above).
            unsafe { libc::munmap(ptr as *mut libc::c_void, mapping_len(layout.size())) };
            return;
        }
        // SAFETY: a small block came from the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        match (is_large(&layout), is_large(&new_layout)) {
            // SAFETY: a small block of the system allocator, staying small.
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            (true, true) => {
                let (old_len, new_len) = (mapping_len(layout.size()), mapping_len(new_size));
                if new_len == old_len {
                    return ptr;
                }
                // SAFETY: the block's own mapping, resized where it is (the
                // start, and so the alignment, is kept); nothing else moves.
                let same = unsafe { libc::mremap(ptr as *mut libc::c_void, old_len, new_len, 0) };
                if same != libc::MAP_FAILED {
                    return ptr;
                }
                // No room after it: a new aligned mapping, the block's pages
                // moved onto it (no copy), or copied where the kernel will not
                // move them (the block spans regions with different flags).
                let fresh = map_aligned(new_len);
                if fresh.is_null() {
                    return fresh;
                }
                // SAFETY: the block's mapping moved onto `fresh`, a mapping
                // of exactly `new_len` bytes that nothing else refers to.
                let moved = unsafe {
                    libc::mremap(
                        ptr as *mut libc::c_void,
                        old_len,
                        new_len,
                        libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                        fresh as *mut libc::c_void,
                    )
                };
                #[cfg(test)]
                COPIED.fetch_add((moved == libc::MAP_FAILED) as usize, Ordering::Relaxed);
                if moved == libc::MAP_FAILED {
                    // SAFETY: the caller's live block and a fresh one of
                    // `new_size` bytes.
                    unsafe { self.copy_and_release(ptr, layout, fresh, new_size) };
                }
                fresh
            }
            // Crossing the threshold: a new block, the contents copied.
            _ => {
                // SAFETY: a valid layout of non-zero size (the old or the
                // new size is at least LARGE).
                let fresh = unsafe { self.alloc(new_layout) };
                if !fresh.is_null() {
                    // SAFETY: the caller's live block and a fresh one of
                    // `new_size` bytes.
                    unsafe { self.copy_and_release(ptr, layout, fresh, new_size) };
                }
                fresh
            }
        }
    }
}

impl LargePages {
    /// Copies what `ptr` holds into `fresh` and releases `ptr`.
    ///
    /// # Safety
    /// `ptr` is a live block of this allocator with `layout`; `fresh` is a
    /// distinct block of at least `new_size` bytes.
    unsafe fn copy_and_release(&self, ptr: *mut u8, layout: Layout, fresh: *mut u8, new_size: usize) {
        // SAFETY: both blocks hold at least the smaller size and are
        // distinct; the old one is released with its own layout.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr, fresh, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
    }
}

/// The range of `bytes` bytes at `start` that can be backed with huge pages:
/// the whole mapping for a large block of this allocator (it starts on a
/// huge-page boundary and runs to one), else the whole huge pages inside
/// the range.
pub fn huge_page_span(start: usize, bytes: usize) -> Option<(usize, usize)> {
    huge_page_span_of(start, bytes, SERVES_LARGE.load(Ordering::Relaxed))
}

fn huge_page_span_of(start: usize, bytes: usize, ours: bool) -> Option<(usize, usize)> {
    if ours && bytes >= LARGE && start % HUGE_PAGE == 0 {
        return Some((start, mapping_len(bytes)));
    }
    let end = start + bytes;
    let aligned = (start + HUGE_PAGE - 1) & !(HUGE_PAGE - 1);
    (end >= aligned + HUGE_PAGE).then(|| (aligned, (end - aligned) & !(HUGE_PAGE - 1)))
}

/// Asks the kernel to back the spare capacity of `buf` with huge pages when
/// it is first touched: a large buffer then takes hundreds of times fewer
/// page faults. Only a hint; nothing changes if it is refused.
pub fn advise_huge_pages<T>(buf: &mut Vec<T>) {
    advise_huge_pages_at(buf.as_mut_ptr() as usize, buf.capacity() * std::mem::size_of::<T>());
}

/// [`advise_huge_pages`] for the `bytes` bytes at `start`, which belong to
/// one allocation (a buffer's).
pub fn advise_huge_pages_at(start: usize, bytes: usize) {
    if let Some((start, len)) = huge_page_span(start, bytes) {
        // SAFETY: the range lies inside the allocation the caller names (for
        // a large block, its mapping) and MADV_HUGEPAGE does not change its
        // contents or mapping rights.
        unsafe {
            libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_aligned_zeroed_and_keep_contents_when_resized() {
        let a = LargePages;
        let layout = Layout::from_size_align(3 * LARGE + 5, 8).unwrap();
        // SAFETY: valid layouts; every block is written within its size and
        // released with the layout it has.
        unsafe {
            let p = a.alloc_zeroed(layout);
            assert!(!p.is_null());
            assert_eq!(p as usize % HUGE_PAGE, 0);
            assert!(std::slice::from_raw_parts(p, layout.size()).iter().all(|&b| b == 0));
            for i in 0..layout.size() {
                *p.add(i) = (i % 251) as u8;
            }
            let grown = a.realloc(p, layout, 9 * LARGE);
            assert!(!grown.is_null());
            assert!((0..layout.size()).all(|i| *grown.add(i) == (i % 251) as u8));
            let big = Layout::from_size_align(9 * LARGE, 8).unwrap();
            let small = a.realloc(grown, big, 1000);
            assert!((0..1000).all(|i| *small.add(i) == (i % 251) as u8));
            let back = a.realloc(small, Layout::from_size_align(1000, 8).unwrap(), 2 * LARGE);
            assert_eq!(back as usize % HUGE_PAGE, 0);
            assert!((0..1000).all(|i| *back.add(i) == (i % 251) as u8));
            // Advice on part of a block splits its mapping into regions the
            // kernel will not resize as one: the block is copied instead.
            libc::madvise(back as *mut libc::c_void, 4096, libc::MADV_NOHUGEPAGE);
            let copies = COPIED.load(Ordering::Relaxed);
            let copied = a.realloc(back, Layout::from_size_align(2 * LARGE, 8).unwrap(), 7 * LARGE);
            assert!(!copied.is_null());
            assert!(COPIED.load(Ordering::Relaxed) > copies, "the split block was not copied");
            assert_eq!(copied as usize % HUGE_PAGE, 0);
            assert!((0..1000).all(|i| *copied.add(i) == (i % 251) as u8));
            a.dealloc(copied, Layout::from_size_align(7 * LARGE, 8).unwrap());
        }
    }

    #[test]
    fn huge_page_spans() {
        // A large aligned block of this allocator: its whole mapping.
        assert_eq!(huge_page_span_of(HUGE_PAGE * 3, LARGE + 1, true), Some((HUGE_PAGE * 3, HUGE_PAGE)));
        // The same range where the heap is another allocator's: only the
        // whole pages inside it (none here).
        assert_eq!(huge_page_span_of(HUGE_PAGE * 3, LARGE + 1, false), None);
        assert_eq!(huge_page_span_of(HUGE_PAGE * 3, 2 * HUGE_PAGE, false), Some((HUGE_PAGE * 3, 2 * HUGE_PAGE)));
        // A block from the system allocator: the whole pages inside it.
        assert_eq!(huge_page_span_of(HUGE_PAGE + 16, 5 * HUGE_PAGE, true), Some((2 * HUGE_PAGE, 4 * HUGE_PAGE)));
        assert_eq!(huge_page_span_of(HUGE_PAGE + 16, HUGE_PAGE, true), None);
    }

    /// Grows and shrinks blocks around the threshold in a fixed pseudo-random
    /// order, each filled with a pattern of its own, and checks every byte
    /// kept; blocks are grown while another mapping sits right after them,
    /// so some grow in place and some move.
    #[test]
    fn resizing_keeps_contents_and_alignment() {
        let a = LargePages;
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut blocks: Vec<(*mut u8, usize, u8)> = Vec::new();
        let fill = |p: *mut u8, from: usize, to: usize, tag: u8| {
            for i in (from.div_ceil(509) * 509..to).step_by(509) {
                // SAFETY: inside the block, which holds `to` bytes.
                unsafe { *p.add(i) = tag.wrapping_add(i as u8) };
            }
        };
        let check = |p: *mut u8, size: usize, tag: u8| {
            for i in (0..size).step_by(509) {
                // SAFETY: inside the block, which holds `size` bytes.
                assert_eq!(unsafe { *p.add(i) }, tag.wrapping_add(i as u8));
            }
        };
        for step in 0..400 {
            let size = LARGE / 2 + next(5 * LARGE);
            let tag = step as u8;
            if blocks.len() < 8 || next(3) == 0 {
                let l = Layout::from_size_align(size, 8).unwrap();
                // SAFETY: a valid layout; freed below with the same one.
                let p = unsafe { a.alloc(l) };
                assert!(!p.is_null());
                fill(p, 0, size, tag);
                blocks.push((p, size, tag));
                continue;
            }
            let k = next(blocks.len());
            let (p, old, t) = blocks[k];
            if next(4) == 0 {
                // SAFETY: the block's own layout.
                unsafe { a.dealloc(p, Layout::from_size_align(old, 8).unwrap()) };
                blocks.swap_remove(k);
                continue;
            }
            // SAFETY: the block's own layout, a valid new size.
            let q = unsafe { a.realloc(p, Layout::from_size_align(old, 8).unwrap(), size) };
            assert!(!q.is_null());
            check(q, old.min(size), t);
            if size >= LARGE {
                assert_eq!(q as usize % HUGE_PAGE, 0, "a large block must stay aligned");
            }
            fill(q, old.min(size), size, t);
            blocks[k] = (q, size, t);
        }
        for (p, size, t) in blocks {
            check(p, size, t);
            // SAFETY: the block's own layout.
            unsafe { a.dealloc(p, Layout::from_size_align(size, 8).unwrap()) };
        }
    }
}
