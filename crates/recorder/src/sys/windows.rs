//! Windows: the loader and the CPU clocks, through `windows-sys`. What
//! `dlsym`, `dladdr` and `clock_gettime` give on Unix.

use std::ffi::{c_void, CStr};

use windows_sys::Win32::Foundation::{CloseHandle, FILETIME, HMODULE};
use windows_sys::Win32::System::LibraryLoader::{
    GetModuleFileNameW, GetModuleHandleExW, GetProcAddress, GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS,
    GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
};
use windows_sys::Win32::System::ProcessStatus::EnumProcessModules;
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, GetCurrentThreadId, GetProcessTimes, GetThreadTimes, OpenThread,
    THREAD_QUERY_LIMITED_INFORMATION,
};

/// The most modules searched for a symbol; a game loads a few dozen.
const MAX_MODULES: usize = 1024;

/// The address of `name` exported by any module of the process (the host's
/// `lua51.dll`, or an executable that exports LuaJIT's API), or null.
pub fn lookup(name: &CStr) -> *mut c_void {
    let mut modules: Vec<HMODULE> = vec![std::ptr::null_mut(); MAX_MODULES];
    let mut needed = 0u32;
    let bytes = (modules.len() * std::mem::size_of::<HMODULE>()) as u32;
    // SAFETY: the buffer holds `bytes` bytes of module handles; the process
    // pseudo-handle needs no closing.
    let ok = unsafe { EnumProcessModules(GetCurrentProcess(), modules.as_mut_ptr(), bytes, &mut needed) } != 0;
    if !ok {
        return std::ptr::null_mut();
    }
    let count = (needed as usize / std::mem::size_of::<HMODULE>()).min(MAX_MODULES);
    for &module in &modules[..count] {
        // SAFETY: `module` is a loaded module's handle; `name` is
        // NUL-terminated.
        if let Some(f) = unsafe { GetProcAddress(module, name.as_ptr().cast()) } {
            return f as *mut c_void;
        }
    }
    std::ptr::null_mut()
}

/// The module holding `addr`, or None.
pub fn module_of(addr: usize) -> Option<HMODULE> {
    let mut module: HMODULE = std::ptr::null_mut();
    let flags = GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT;
    // SAFETY: with FROM_ADDRESS the name argument is read as an address
    // only; the reference count is left as it is, so nothing needs freeing.
    let ok = unsafe { GetModuleHandleExW(flags, addr as *const u16, &mut module) } != 0;
    ok.then_some(module)
}

/// `module.dll+0xOFFSET` for an address in a loaded module: Windows keeps
/// no symbol names for a loader query to return.
pub fn module_offset_name(addr: usize) -> Option<String> {
    let module = module_of(addr)?;
    let mut buf = [0u16; 520];
    // SAFETY: the buffer's length is passed; the module is loaded.
    let n = unsafe { GetModuleFileNameW(module, buf.as_mut_ptr(), buf.len() as u32) } as usize;
    if n == 0 {
        return None;
    }
    let path = String::from_utf16_lossy(&buf[..n.min(buf.len())]);
    let base = path.rsplit(['\\', '/']).next().unwrap_or(&path).to_string();
    Some(format!("{}+0x{:x}", base, addr - module as usize))
}

/// The calling thread's id: the CPU clock of that thread.
pub fn current_thread_id() -> u32 {
    // SAFETY: no arguments, no failure.
    unsafe { GetCurrentThreadId() }
}

fn ns(user: FILETIME, kernel: FILETIME) -> u64 {
    let t = |f: FILETIME| ((f.dwHighDateTime as u64) << 32) | f.dwLowDateTime as u64;
    (t(user) + t(kernel)) * 100
}

/// CPU time in nanoseconds (user and kernel) of thread `id`, or of the
/// whole process for 0.
pub fn cpu_ns(id: u32) -> Option<u64> {
    let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    if id == 0 {
        // SAFETY: four FILETIMEs to fill; the pseudo-handle needs no closing.
        let ok = unsafe { GetProcessTimes(GetCurrentProcess(), &mut created, &mut exited, &mut kernel, &mut user) };
        return (ok != 0).then(|| ns(user, kernel));
    }
    // SAFETY: opening a thread of this process for a query; closed below.
    let thread = unsafe { OpenThread(THREAD_QUERY_LIMITED_INFORMATION, 0, id) };
    if thread.is_null() {
        return None;
    }
    // SAFETY: `thread` is open; four FILETIMEs to fill.
    let ok = unsafe { GetThreadTimes(thread, &mut created, &mut exited, &mut kernel, &mut user) };
    // SAFETY: the handle was opened above and is closed once.
    unsafe { CloseHandle(thread) };
    (ok != 0).then(|| ns(user, kernel))
}
