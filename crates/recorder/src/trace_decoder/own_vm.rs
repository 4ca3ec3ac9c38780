//! A VM of our own, made by the LuaJIT the program runs on, where the probe
//! runs.
//!
//! The probe needs LuaJIT's FFI (to call a function of ours from a trace)
//! and a chunk of Lua: in the program's VM they would stay there, the FFI's
//! hundred-odd type names interned in its string table for good (which
//! doubles the table of a program with a small live set and makes its
//! collector slower), the FFI in `package.loaded`, its keys in the
//! registry. The layout the probe proves is the build's, not the VM's, so
//! the probe runs in a VM of its own, made for it and closed after it:
//!
//! - the VM is made by `luaL_newstate` of the loaded object that holds the
//!   `lua_*` functions this module calls on the program's VM (resolved from
//!   the process, so a LuaJIT linked into the executable, which exports its
//!   API to let C modules load, serves as well as a shared library);
//! - the program's VM is of that same build, loaded at the same place:
//!   past both global states, at the same offsets, the interpreter's
//!   dispatch table holds the same addresses into that object's code
//!   (`shared_code_words`). A program's VM made by another copy of LuaJIT
//!   shares none, and the reader stays off.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use mlua::ffi;

use super::walk::le;
use crate::sys::posix::running_c::self_read;

/// Words at the same offsets past two global states of one build that hold
/// the same address into LuaJIT's code, at least: the static half of the
/// dispatch table alone holds one per bytecode (about 90).
pub(super) const SAME_BUILD_WORDS: usize = 64;
/// Bytes past a global state compared (the global state, the JIT's state,
/// the hot counters and the dispatch table: 4 to 5 KB in LuaJIT 2.1).
const GG_SCAN: usize = 8192;
const CHUNK: usize = 512;

/// `luaL_openlibs` of the object, for `open_libs` (a C function run under
/// `lua_cpcall`, so that an error there is caught).
static OPEN_LIBS: AtomicUsize = AtomicUsize::new(0);

/// A VM of our own, closed when dropped.
pub(super) struct OwnVm {
    l: *mut ffi::lua_State,
    /// LuaJIT's loaded object (start, end).
    pub(super) code: (usize, usize),
}

/// The address of `name` in the process's global scope.
fn symbol(name: &CStr) -> Option<usize> {
    // SAFETY: `name` is NUL-terminated; RTLD_DEFAULT searches the objects
    // loaded in the global scope and only returns an address.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p as usize)
}

unsafe extern "C-unwind" fn open_libs(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: OPEN_LIBS holds `luaL_openlibs` of the object that made `l`
    // (checked by `OwnVm::new` before this runs).
    let open: unsafe extern "C-unwind" fn(*mut ffi::lua_State) =
        unsafe { std::mem::transmute::<usize, _>(OPEN_LIBS.load(Ordering::Relaxed)) };
    // SAFETY: `l` is the VM `lua_cpcall` runs this on.
    unsafe { open(l) };
    0
}

impl OwnVm {
    /// A new VM with the standard libraries (the JIT on, the FFI
    /// loadable), made by the LuaJIT whose `lua_*` functions this module
    /// calls.
    pub(super) fn new() -> Result<OwnVm, &'static str> {
        let (Some(new_state), Some(openlibs)) = (symbol(c"luaL_newstate"), symbol(c"luaL_openlibs")) else {
            return Err("the host does not export luaL_newstate (a VM of the profiler's own proves the layout)");
        };
        let ours = object_range(ffi::lua_gettop as *const () as usize);
        let code = ours.ok_or("the LuaJIT this module calls could not be located")?;
        if object_range(new_state) != ours || object_range(openlibs) != ours {
            return Err("the host's luaL_newstate is not in the LuaJIT this module calls");
        }
        // SAFETY: `new_state` is `luaL_newstate` of that LuaJIT (its
        // signature is the API's).
        let new: unsafe extern "C-unwind" fn() -> *mut ffi::lua_State = unsafe { std::mem::transmute(new_state) };
        // SAFETY: no precondition; returns null when out of memory.
        let l = unsafe { new() };
        if l.is_null() {
            return Err("a VM of the profiler's own could not be made (out of memory)");
        }
        let vm = OwnVm { l, code };
        OPEN_LIBS.store(openlibs, Ordering::Relaxed);
        // SAFETY: `l` is live; `open_libs` is a C function.
        if unsafe { ffi::lua_cpcall(l, open_libs, std::ptr::null_mut()) } != 0 {
            return Err("the libraries of the profiler's own VM could not be opened");
        }
        Ok(vm)
    }

    /// The VM's global state (a GC64 thread header keeps it at offset 16).
    pub(super) fn global(&self) -> usize {
        let mut w = [0u8; 8];
        if self_read(self.l as usize + 16, &mut w) {
            u64::from_le_bytes(w) as usize
        } else {
            0
        }
    }

    /// Runs `chunk` (named `name`) with `arg` as its one argument; whether
    /// it ran without error.
    pub(super) fn run(&self, chunk: &str, name: &CStr, arg: *mut c_void) -> bool {
        let l = self.l;
        // SAFETY: `l` is live and its stack empty (nothing else runs in
        // it); the chunk and its argument are pushed, `lua_pcall` pops
        // them and pushes nothing or an error value, then the stack is
        // emptied again.
        unsafe {
            let ok = ffi::luaL_loadbuffer(l, chunk.as_ptr() as *const _, chunk.len(), name.as_ptr()) == 0 && {
                ffi::lua_pushlightuserdata(l, arg);
                ffi::lua_pcall(l, 1, 0, 0) == 0
            };
            ffi::lua_settop(l, 0);
            ok
        }
    }
}

impl Drop for OwnVm {
    fn drop(&mut self) {
        // SAFETY: `l` is the main thread of a VM of ours that nothing else
        // holds; LuaJIT's profiler never ran on it, so closing it leaves
        // the program's profiler alone.
        unsafe { ffi::lua_close(self.l) }
    }
}

/// How many words at the same offsets past the global states `a` and `b`
/// are equal and point into LuaJIT's code `code`. Read through the kernel:
/// the scan may run past the end of a VM's allocation.
pub(super) fn shared_code_words(a: usize, b: usize, code: (usize, usize)) -> usize {
    let (mut x, mut y) = ([0u8; CHUNK], [0u8; CHUNK]);
    let mut n = 0;
    for off in (0..GG_SCAN).step_by(CHUNK) {
        if !self_read(a + off, &mut x) || !self_read(b + off, &mut y) {
            break;
        }
        n += (0..CHUNK)
            .step_by(8)
            .map(|i| (le(&x, i, 8) as usize, le(&y, i, 8) as usize))
            .filter(|&(p, q)| p == q && p >= code.0 && p < code.1)
            .count();
    }
    n
}

/// The address range of the loaded object holding `addr`.
pub(super) fn object_range(addr: usize) -> Option<(usize, usize)> {
    struct Find {
        addr: usize,
        range: Option<(usize, usize)>,
    }
    unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid info for each object, and our
        // own `Find` as data.
        let (info, find) = unsafe { (&*info, &mut *(data as *mut Find)) };
        let (mut lo, mut hi, mut holds) = (usize::MAX, 0usize, false);
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: `dlpi_phdr` has `dlpi_phnum` entries.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type != libc::PT_LOAD {
                continue;
            }
            let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
            let end = start + ph.p_memsz as usize;
            lo = lo.min(start);
            hi = hi.max(end);
            holds |= find.addr >= start && find.addr < end;
        }
        if holds {
            find.range = Some((lo, hi));
            return 1;
        }
        0
    }
    let mut find = Find { addr, range: None };
    // SAFETY: `visit` matches the callback type and only reads what the
    // loader hands it; `find` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut find as *mut Find as *mut c_void) };
    find.range
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::posix::running_c;
    use mlua::Lua;

    /// The global state of `lua`'s VM, and the registry's size.
    fn global_and_registry(lua: &Lua) -> (usize, usize) {
        let mut out = (0, 0);
        let slot = &mut out;
        // SAFETY: exec_raw hands a live GC64 state (its global state at
        // offset 16) with room for 3 slots: the registry, a key and a
        // value, popped by the loop.
        unsafe {
            lua.exec_raw::<()>((), |l| {
                slot.0 = std::ptr::read_unaligned((l as usize + 16) as *const usize);
                ffi::lua_pushvalue(l, ffi::LUA_REGISTRYINDEX);
                ffi::lua_pushnil(l);
                while ffi::lua_next(l, -2) != 0 {
                    slot.1 += 1;
                    ffi::lua_settop(l, -2);
                }
                ffi::lua_settop(l, -2);
            })
            .unwrap();
        }
        out
    }

    #[test]
    fn a_vm_of_our_own_is_of_the_program_s_build_and_a_stranger_is_not() {
        let _turn = crate::sys::one_session_at_a_time();
        let lua = Lua::new();
        // Sets up the reads through the kernel.
        running_c::tests::arm_for_test(&lua);
        let (g, _) = global_and_registry(&lua);
        let vm = OwnVm::new().expect("a VM of our own");
        let own = vm.global();
        assert!(own != 0 && own != g);
        let shared = shared_code_words(g, own, vm.code);
        assert!(shared >= SAME_BUILD_WORDS, "{shared} words of code in common");
        // Memory that is no global state shares no code address with one,
        // even where it holds addresses into LuaJIT's code elsewhere.
        let mut stranger = vec![0usize; GG_SCAN / 8];
        for (i, w) in stranger.iter_mut().enumerate() {
            *w = vm.code.0 + 16 * i + 8;
        }
        assert_eq!(shared_code_words(stranger.as_ptr() as usize, own, vm.code), 0);
        drop(vm);
        running_c::disarm();
    }

    #[test]
    fn the_probe_leaves_nothing_in_the_program_s_vm() {
        let _turn = crate::sys::one_session_at_a_time();
        let lua = Lua::new();
        // Bytes on the heap after full collections, registry entries and
        // loaded modules. Taken twice before the probe: what mlua keeps
        // for the calls that take it (its own references) is made by the
        // first.
        let measure = |lua: &Lua| {
            let loaded: mlua::Table = lua.named_registry_value("_LOADED").unwrap();
            let modules = loaded.pairs::<mlua::Value, mlua::Value>().count();
            drop(loaded);
            lua.gc_collect().unwrap();
            lua.gc_collect().unwrap();
            (lua.used_memory(), global_and_registry(lua).1, modules)
        };
        // The program's VM is read by the C-function probe, which runs in
        // it (a C function of ours, called once): a first arming sets up
        // what that leaves.
        running_c::tests::arm_for_test(&lua);
        running_c::disarm();
        measure(&lua);
        let before = measure(&lua);
        assert_eq!(super::super::prove(&lua), Ok(()));
        super::super::disarm();
        running_c::disarm();
        let after = measure(&lua);
        assert_eq!(after.1, before.1, "registry entries added");
        assert_eq!(after.2, before.2, "modules loaded");
        assert_eq!(after.0, before.0, "bytes left on the heap");
    }
}
