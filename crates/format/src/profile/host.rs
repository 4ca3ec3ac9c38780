//! What a profile asks of the process it is built in, which this crate
//! cannot do without `unsafe` code: huge pages for its large buffers
//! (`madvise`) and the names of C functions (`dladdr`) and native frames. The recorder
//! supplies both ([`install`], done when the native module is opened);
//! until then a buffer gets no advice and a C address stays an address.

use std::sync::OnceLock;

/// The process's side of a profile.
#[derive(Clone, Copy, Debug)]
pub struct Host {
    /// Asks the kernel to back `bytes` bytes from `start`, a buffer's
    /// allocation, with huge pages; only a hint.
    pub advise_huge_pages: fn(start: usize, bytes: usize),
    /// Whether `addr` lies in the profiler's own library.
    pub is_own_code: fn(addr: usize) -> bool,
    /// The name of the C function at `addr`, if the loader knows it.
    pub c_symbol_name: fn(addr: usize) -> Option<String>,
    /// The name of the function whose code holds `addr`, a native frame's
    /// address, from the object's symbol tables.
    pub native_symbol_name: fn(addr: usize) -> Option<String>,
}

/// What a profile gets before [`install`]: nothing is asked of the process.
const NONE: Host = Host {
    advise_huge_pages: |_, _| {},
    is_own_code: |_| false,
    c_symbol_name: |_| None,
    native_symbol_name: |_| None,
};

static HOST: OnceLock<Host> = OnceLock::new();

/// Sets the process's side, once; later calls keep the first.
pub fn install(host: Host) {
    let _ = HOST.set(host);
}

/// The process's side ([`install`]ed, or one that asks nothing).
pub fn get() -> &'static Host {
    HOST.get().unwrap_or(&NONE)
}

/// Asks for huge pages for the spare capacity of `buf` (see
/// [`Host::advise_huge_pages`]).
pub fn advise_huge_pages<T>(buf: &mut Vec<T>) {
    (get().advise_huge_pages)(buf.as_mut_ptr() as usize, buf.capacity() * std::mem::size_of::<T>());
}
