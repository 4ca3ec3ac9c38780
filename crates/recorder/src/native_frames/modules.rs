//! The process's loaded objects, read outside any handler: each one's
//! executable range, and its unwind tables (`.eh_frame_hdr`, `.eh_frame`)
//! copied into memory of ours, so that an object unloaded while a session
//! runs leaves the handler's copy intact.

use std::ffi::{c_int, c_void, CStr};
use std::ops::Range;

/// One loaded object.
pub(super) struct Object {
    /// Its path as the loader has it (empty for the main program).
    pub(super) path: String,
    /// The load bias: an address in the file plus this is its address in
    /// memory.
    pub(super) bias: usize,
    /// Its executable segments, in memory.
    pub(super) text: Range<usize>,
    /// The copied tables and their addresses in the file, if it has them.
    pub(super) eh_frame_hdr: Option<(Range<usize>, Vec<u8>)>,
    pub(super) eh_frame: Option<(Range<usize>, Vec<u8>)>,
}

/// Every object loaded now, with its unwind tables.
pub(super) fn loaded_objects() -> Vec<Object> {
    let mut out: Vec<Object> = Vec::new();
    // SAFETY: the callback gets `out` back as its data, a live Vec of the
    // type it casts to, and dl_iterate_phdr calls it on this thread only.
    unsafe { libc::dl_iterate_phdr(Some(on_object), &mut out as *mut Vec<Object> as *mut c_void) };
    out
}

unsafe extern "C" fn on_object(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
    // SAFETY: `data` is the Vec `loaded_objects` passed; `info` is the
    // loader's record of one object, valid during the call.
    let (out, info) = unsafe { (&mut *(data as *mut Vec<Object>), &*info) };
    if let Some(o) = read_object(info) {
        out.push(o);
    }
    0
}

/// One object's record.
fn read_object(info: &libc::dl_phdr_info) -> Option<Object> {
    let bias = info.dlpi_addr as usize;
    let path = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: the loader's name of the object, a C string.
        unsafe { CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
    };
    if info.dlpi_phdr.is_null() {
        return None;
    }
    // SAFETY: the loader's program headers of the object, `dlpi_phnum` long.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let mut text: Option<Range<usize>> = None;
    let mut loads = Vec::new();
    let mut hdr = None;
    for h in headers {
        let r = bias + h.p_vaddr as usize..bias + (h.p_vaddr + h.p_memsz) as usize;
        if h.p_type == libc::PT_LOAD {
            if h.p_flags & libc::PF_X != 0 {
                text = Some(match text {
                    None => r.clone(),
                    Some(t) => t.start.min(r.start)..t.end.max(r.end),
                });
            }
            // The part of a segment backed by the file, which is mapped
            // readable: the tables lie in it.
            loads.push(bias + h.p_vaddr as usize..bias + (h.p_vaddr + h.p_filesz) as usize);
        } else if h.p_type == libc::PT_GNU_EH_FRAME {
            hdr = Some(r);
        }
    }
    let text = text?;
    let mut o = Object { path, bias, text, eh_frame_hdr: None, eh_frame: None };
    if let Some(h) = hdr.filter(|h| h.len() >= 8 && loads.iter().any(|l| l.start <= h.start && h.end <= l.end)) {
        // SAFETY: the header lies inside a loaded segment's file-backed
        // part (checked above), mapped readable while the object is loaded.
        let header = unsafe { std::slice::from_raw_parts(h.start as *const u8, h.len()) };
        if let Some(at) = eh_frame_address(header, h.start) {
            if let Some(seg) = loads.iter().find(|l| l.contains(&at)) {
                // SAFETY: `at..seg.end` lies in the same mapped segment.
                let rest = unsafe { std::slice::from_raw_parts(at as *const u8, seg.end - at) };
                let len = eh_frame_length(rest);
                o.eh_frame = Some((at - bias..at - bias + len, rest[..len].to_vec()));
                o.eh_frame_hdr = Some((h.start - bias..h.end - bias, header.to_vec()));
            }
        }
    }
    Some(o)
}

/// Where `.eh_frame` is, from its header (version 1, the pointer encoded
/// as the header says; `at` is the header's address).
fn eh_frame_address(header: &[u8], at: usize) -> Option<usize> {
    if header[0] != 1 {
        return None;
    }
    let enc = header[1];
    let field = &header[4..];
    let value: i64 = match enc & 0x0f {
        0x00 | 0x04 | 0x0c => i64::from_le_bytes(field.get(..8)?.try_into().ok()?),
        0x03 => u32::from_le_bytes(field.get(..4)?.try_into().ok()?) as i64,
        0x0b => i32::from_le_bytes(field.get(..4)?.try_into().ok()?) as i64,
        _ => return None,
    };
    let base = match enc & 0x70 {
        0x00 => 0,
        0x10 => at + 4, // relative to the field itself
        0x30 => at,     // relative to the header
        _ => return None,
    };
    Some((base as i64).wrapping_add(value) as usize)
}

/// The length of `.eh_frame` at the start of `bytes`: its records up to
/// and including the zero terminator, within `bytes`.
fn eh_frame_length(bytes: &[u8]) -> usize {
    let mut at = 0usize;
    while at + 4 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 {
            return at + 4;
        }
        let next = if len == 0xffff_ffff {
            match bytes.get(at + 4..at + 12) {
                Some(b) => (at + 12).saturating_add(u64::from_le_bytes(b.try_into().unwrap()) as usize),
                None => break,
            }
        } else {
            at + 4 + len
        };
        if next > bytes.len() {
            break;
        }
        at = next;
    }
    at.min(bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_object_with_code_is_found_and_this_one_has_unwind_tables() {
        let objects = loaded_objects();
        let here = loaded_objects as *const () as usize;
        let own = objects.iter().find(|o| o.text.contains(&here)).expect("the object of this code");
        let (range, bytes) = own.eh_frame.as_ref().expect("its .eh_frame");
        assert_eq!(range.len(), bytes.len());
        assert!(bytes.len() > 1000, "{} bytes of .eh_frame", bytes.len());
        assert!(own.eh_frame_hdr.is_some());
        assert!(objects.iter().any(|o| o.path.contains("libc.so")), "libc is loaded");
    }

    #[test]
    fn the_length_of_eh_frame_stops_at_its_terminator() {
        let mut b = Vec::new();
        b.extend_from_slice(&8u32.to_le_bytes());
        b.extend_from_slice(&[1; 8]);
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&[9; 20]); // the next section
        assert_eq!(eh_frame_length(&b), 16);
        assert_eq!(eh_frame_length(&b[..10]), 0, "a record past the end is not counted");
    }
}
