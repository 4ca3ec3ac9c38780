//! A profiler hook LuaJIT lost, set again.
//!
//! LuaJIT's SIGPROF handler takes a sample by setting `HOOK_PROFILE` in the
//! global state's hook mask and rewriting the instruction dispatch table
//! (`lj_dispatch_update`). The VM thread rewrites that table too, whenever
//! trace recording starts or stops or a debug hook is set or cleared, and
//! the handler runs on that same thread, in the middle of whatever it
//! interrupted. A tick that lands after the interrupted rewrite has stored
//! its new mode but before it has stored the table leaves the mask and the
//! mode saying "profile hook pending" while the rest of the rewrite puts
//! back a table that never calls the hook. LuaJIT sets the hook only when
//! it is not already pending, so every later tick is dropped: sampling
//! stops for good, and compiled code, which checks the pending flag, exits
//! its trace at every check and runs many times slower, as if hung. Every
//! LuaJIT 2.1 build with the SIGPROF profiler does this (`jit.p` and
//! `jit.profile` included); a loop that sets and clears a line hook under
//! `jit.profile` loses its hook within a few hundred samples.
//!
//! While the interpreter runs bytecode, a hook set at an earlier tick has
//! been called by the time of the next one: the interpreter calls it at the
//! next bytecode. So a tick that finds the hook pending while the VM state
//! is "interpreted" may have found it lost. The tick handler then clears
//! the pending bit and the profile bit of the dispatch mode before it calls
//! LuaJIT's handler, which sets both again and, seeing the mode change,
//! rewrites the whole table with the hook. That is exactly what LuaJIT's
//! handler does for a hook that is not pending, on the thread and at the
//! moment where it would run anyway. The interpreter's own C helpers (a
//! large table's rehash) also run in the interpreted state, and a hook
//! pending through one is set again too: needlessly, and with no effect but
//! the rewrite, since the hook stays pending and the ticks are counted
//! alike. So the count is of hooks set again, not of hooks known lost.
//!
//! The hook mask has no API. It is found by construction: the interned
//! empty string is the global state's own `strempty`, whose terminating
//! byte is followed by `hookmask` and `dispatchmode` in every LuaJIT 2.x.
//! The string's header and the debug hook mask LuaJIT reports are checked
//! when a session starts, and the first callback checks that the byte
//! holds `HOOK_VMEVENT`, as LuaJIT sets it around every callback.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use mlua::ffi;
use mlua::Lua;

/// `HOOK_EVENTMASK`: the debug hook bits of the mask.
const HOOK_EVENTMASK: u8 = 0x0f;
/// Set by LuaJIT around every profiler callback.
const HOOK_VMEVENT: u8 = 0x20;
/// Set while a `__gc` finalizer runs; LuaJIT takes no sample then.
const HOOK_GC: u8 = 0x40;
/// A sample is pending: the next bytecode calls the profiler hook.
const HOOK_PROFILE: u8 = 0x80;
/// `DISPMODE_PROF` of the dispatch mode: the table calls the profiler hook.
const DISPMODE_PROF: u8 = 0x40;
/// `~LJ_VMST_INTERP`: the interpreter runs bytecode.
const VMSTATE_INTERP: i32 = -1;
/// `~LJ_TSTR` as stored in a GC object's `gct` byte.
const GCT_STR: u8 = 4;
/// Bytes of the global state the empty string may lie in.
const GLOBAL_SCAN: usize = 1024;

/// Address of the armed VM's `hookmask` (`dispatchmode` is the next byte);
/// 0 means off.
static HOOK_MASK: AtomicUsize = AtomicUsize::new(0);
/// The first callback has still to check the byte.
static UNCHECKED: AtomicBool = AtomicBool::new(false);
/// Why the guard is off, if the first callback found a wrong byte.
static REFUSED_BY_CALLBACK: AtomicBool = AtomicBool::new(false);
/// Pending hooks set again since the last arm.
static REARMED: AtomicU64 = AtomicU64::new(0);

/// Finds the hook mask of the VM whose global state is `g` and lets the
/// tick handler set lost hooks again; returns why not when a check fails.
/// `gc64` is the build's object layout.
pub fn arm(lua: &Lua, g: usize, gc64: bool) -> Result<(), &'static str> {
    disarm();
    REARMED.store(0, Ordering::Relaxed);
    REFUSED_BY_CALLBACK.store(false, Ordering::Relaxed);
    let mut found: Result<usize, &'static str> = Err("the empty string could not be read");
    let out = &mut found;
    // SAFETY: exec_raw gives a live state with room for a few slots; the
    // pushed string is popped again. The interned empty string is never
    // collected (it is part of the global state), so its bytes stay valid.
    let ran = unsafe {
        lua.exec_raw::<()>((), |l| {
            ffi::lua_pushlstring(l, c"".as_ptr(), 0);
            let p = ffi::lua_tolstring(l, -1, std::ptr::null_mut()) as usize;
            ffi::lua_pop(l, 1);
            *out = check_layout(p, g, gc64, ffi::lua_gethookmask(l) as u8);
        })
    };
    let at = ran.map_err(|_| "the empty string could not be read").and(found)?;
    UNCHECKED.store(true, Ordering::Relaxed);
    HOOK_MASK.store(at, Ordering::Release);
    Ok(())
}

/// The hook mask's address, if the bytes around the empty string `p` are
/// the global state's `strempty`, `stremptyz` and `hookmask`.
fn check_layout(p: usize, g: usize, gc64: bool, debug_mask: u8) -> Result<usize, &'static str> {
    // The string header's size (the string's bytes follow it): 24 bytes in
    // GC64 builds; 16, or 20 since strings got an id (2020), otherwise. Its
    // type byte follows the 8- or 4-byte link to the next object.
    let (sizes, gct): (&[usize], usize) = if gc64 { (&[24], 9) } else { (&[16, 20], 5) };
    if p < g + 24 || p + 3 > g + GLOBAL_SCAN {
        return Err("the empty string is not inside the global state");
    }
    // SAFETY: [p - 24, p + 3) lies inside the first GLOBAL_SCAN bytes of
    // the live global state (checked above), which are readable.
    let (tagged, len, zero, mask) = unsafe {
        (
            sizes.iter().any(|&size| *((p - size + gct) as *const u8) == GCT_STR),
            std::ptr::read_unaligned((p - 4) as *const u32),
            *(p as *const u8),
            *((p + 1) as *const u8),
        )
    };
    if !tagged || len != 0 || zero != 0 {
        return Err("the empty string's header is not the expected one");
    }
    if mask & HOOK_EVENTMASK != debug_mask & HOOK_EVENTMASK {
        return Err("the byte after the empty string is not the hook mask");
    }
    Ok(p + 1)
}

/// From now on lost hooks are left alone.
pub fn disarm() {
    HOOK_MASK.store(0, Ordering::Release);
    UNCHECKED.store(false, Ordering::Relaxed);
}

/// The armed VM's hook mask, for [`without_trace_flush`] (read before the
/// handler is disarmed).
pub fn mask_address() -> Option<usize> {
    Some(HOOK_MASK.load(Ordering::Acquire)).filter(|&at| at != 0)
}

/// Runs `stop` (LuaJIT's profiler stop) so that it flushes no trace.
///
/// `luaJIT_profile_stop` flushes every trace, whatever the mode it ran
/// in; a session whose profiler ran in plain `i` mode compiled nothing
/// that needs it (only `f` and `l` put profiler checks in traces), and the
/// flush would make the program compile everything again after the
/// session. LuaJIT's flush does nothing while `HOOK_GC` is set in the hook
/// mask (as during a finaliser); the stop touches no other use of that bit
/// (it clears `HOOK_PROFILE` and recomputes the dispatch mode, which
/// `HOOK_GC` is no part of). So the bit is set around the stop and cleared
/// again after it, unless it was set already.
pub fn without_trace_flush(mask_at: usize, stop: impl FnOnce()) {
    // SAFETY: `mask_at` is the hook mask `arm` checked inside the live
    // global state of the VM being stopped, a byte that lives as long as
    // the VM; this runs on the VM thread (the stop's caller), with the
    // tick handler disarmed. The control channel's SIGIO handler
    // (`sys::wake`) can still set a count hook in the same byte: each
    // change here is an atomic read-modify-write (a locked instruction, or
    // a compare-exchange that retries when the byte changed), so a bit a
    // signal sets in between is never written over.
    let mask = unsafe { std::sync::atomic::AtomicU8::from_ptr(mask_at as *mut u8) };
    let had_gc = mask.fetch_or(HOOK_GC, Ordering::SeqCst) & HOOK_GC != 0;
    stop();
    if !had_gc {
        mask.fetch_and(!HOOK_GC, Ordering::SeqCst);
    }
}

/// Called at the start of every profiler callback: the first one checks
/// that the byte holds `HOOK_VMEVENT`, as LuaJIT sets it around callbacks,
/// and turns the guard off if not.
#[inline]
pub fn check_in_callback() {
    if !UNCHECKED.load(Ordering::Relaxed) {
        return;
    }
    UNCHECKED.store(false, Ordering::Relaxed);
    let at = HOOK_MASK.load(Ordering::Acquire);
    if at == 0 {
        return;
    }
    // SAFETY: `at` was checked by `arm` to lie inside the live global state.
    if unsafe { std::ptr::read_volatile(at as *const u8) } != HOOK_VMEVENT {
        REFUSED_BY_CALLBACK.store(true, Ordering::Relaxed);
        disarm();
    }
}

/// Called by the tick handler on the VM thread, right before LuaJIT's
/// handler, with the VM state the tick found: if the interpreter runs with
/// a sample still pending, the hook may be lost; clear it, so that LuaJIT's
/// handler sets it and rewrites the dispatch table.
pub fn rearm_if_lost(vmstate: Option<i32>) {
    if vmstate != Some(VMSTATE_INTERP) {
        return;
    }
    let at = HOOK_MASK.load(Ordering::Acquire);
    if at == 0 {
        return;
    }
    let (mask_at, mode_at) = (at as *mut u8, (at + 1) as *mut u8);
    // SAFETY: `at` and the next byte are the armed VM's hookmask and
    // dispatchmode (checked by `arm`); the handler runs on the VM thread,
    // which is interrupted, and LuaJIT's handler is about to write both.
    unsafe {
        let mask = std::ptr::read_volatile(mask_at);
        if mask & (HOOK_PROFILE | HOOK_VMEVENT | HOOK_GC) != HOOK_PROFILE {
            return;
        }
        let mode = std::ptr::read_volatile(mode_at);
        std::ptr::write_volatile(mode_at, mode & !DISPMODE_PROF);
        std::ptr::write_volatile(mask_at, mask & !HOOK_PROFILE);
    }
    REARMED.fetch_add(1, Ordering::Relaxed);
}

/// Pending hooks set again since the last arm.
pub fn hooks_rearmed() -> u64 {
    REARMED.load(Ordering::Relaxed)
}

/// Why the first callback turned the guard off, if it did.
pub fn refused_by_callback() -> Option<&'static str> {
    REFUSED_BY_CALLBACK
        .load(Ordering::Relaxed)
        .then_some("the first callback found another byte where the hook mask should be")
}

/// Turns the guard off as the first callback does on a wrong byte (tests).
#[cfg(any(test, feature = "test-support"))]
pub fn refuse_for_test() {
    REFUSED_BY_CALLBACK.store(true, Ordering::Relaxed);
    disarm();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::posix::running_c;

    /// Arms the layout and the guard for `lua`; returns its global state.
    fn armed(lua: &Lua) -> usize {
        let g = running_c::tests::arm_for_test(lua);
        assert_eq!(arm(lua, g, running_c::is_gc64()), Ok(()));
        g
    }

    /// Reads (or with `set`, writes) the armed hook mask and dispatch mode.
    fn bytes(set: Option<(u8, u8)>) -> (u8, u8) {
        let at = HOOK_MASK.load(Ordering::Acquire);
        assert_ne!(at, 0, "armed");
        // SAFETY: `at` and the next byte lie inside the test's live global
        // state (checked by `arm`); nothing else runs on that VM now.
        unsafe {
            if let Some((mask, mode)) = set {
                std::ptr::write_volatile(at as *mut u8, mask);
                std::ptr::write_volatile((at + 1) as *mut u8, mode);
            }
            (std::ptr::read_volatile(at as *const u8), std::ptr::read_volatile((at + 1) as *const u8))
        }
    }

    #[test]
    fn the_hook_mask_is_found_next_to_the_empty_string_and_checked() {
        let _turn = crate::sys::one_session_at_a_time();
        // SAFETY: a state with the debug library, used by this test alone.
        let lua = unsafe { Lua::unsafe_new() };
        let g = armed(&lua);
        // No debug hook is set and the JIT compiler is on: the mask is
        // clear and the dispatch mode has only its JIT bit (0x10).
        assert_eq!(bytes(None), (0, 0x10));
        // The mask follows the debug hooks LuaJIT reports.
        lua.load("debug.sethook(function() end, 'c')").exec().unwrap();
        assert_eq!(bytes(None).0 & HOOK_EVENTMASK, 1, "LUA_MASKCALL");
        lua.load("debug.sethook()").exec().unwrap();
        assert_eq!(bytes(None).0, 0);
        // A wrong global state is refused.
        assert!(arm(&lua, g + 512, running_c::is_gc64()).is_err());
        disarm();
        running_c::disarm();
    }

    #[test]
    fn the_bytes_around_the_string_must_be_a_string_header_and_a_hook_mask() {
        // A global state's first bytes: the empty string's data at 64, its
        // header's type byte 15 bytes before it (a 24-byte GC64 header, or a
        // 20-byte 32-bit one).
        let check = |state: &[u8; 128], gc64: bool, debug_mask: u8| {
            let g = state.as_ptr() as usize;
            check_layout(g + 64, g, gc64, debug_mask).map(|at| at - g)
        };
        let mut state = [0u8; 128];
        state[64 - 15] = GCT_STR;
        state[65] = 0x01; // a call hook is set
        assert_eq!(check(&state, true, 1), Ok(65));
        assert_eq!(check(&state, false, 1), Ok(65));
        assert!(check(&state, true, 0).is_err(), "the debug hooks differ");
        assert_eq!(check(&state, true, 1 | HOOK_PROFILE), Ok(65), "only the debug hook bits are compared");
        state[64] = b'x';
        assert!(check(&state, true, 1).is_err(), "not an empty string");
        state[64] = 0;
        state[60] = 1;
        assert!(check(&state, true, 1).is_err(), "a length that is not 0");
        state[60] = 0;
        state[64 - 15] = 5;
        assert!(check(&state, true, 1).is_err(), "not a string");
        // The 16-byte 32-bit header (2.1.0-beta3) puts the type byte 11
        // bytes before the data.
        state[64 - 11] = GCT_STR;
        assert!(check(&state, true, 1).is_err());
        assert_eq!(check(&state, false, 1), Ok(65));
        let g = state.as_ptr() as usize;
        assert!(check_layout(g + 8, g, false, 0).is_err(), "before the global state's start");
    }

    #[test]
    fn only_a_hook_pending_while_the_interpreter_runs_is_cleared_for_luajits_handler() {
        let _turn = crate::sys::one_session_at_a_time();
        let lua = Lua::new();
        armed(&lua);
        let saved = bytes(None);
        let rearmed = hooks_rearmed();
        // Pending while interpreting: both bits are cleared, and counted.
        bytes(Some((HOOK_PROFILE | 0x01, 0x10 | DISPMODE_PROF | 0x04)));
        rearm_if_lost(Some(VMSTATE_INTERP));
        assert_eq!(bytes(None), (0x01, 0x10 | 0x04));
        assert_eq!(hooks_rearmed(), rearmed + 1);
        // Pending in other VM states, or around a callback or finalizer,
        // or with no state known: left alone.
        for (mask, state) in [
            (HOOK_PROFILE, Some(-2)),
            (HOOK_PROFILE, Some(-3)),
            (HOOK_PROFILE, Some(7)),
            (HOOK_PROFILE, None),
            (HOOK_PROFILE | HOOK_VMEVENT, Some(VMSTATE_INTERP)),
            (HOOK_PROFILE | HOOK_GC, Some(VMSTATE_INTERP)),
            (0, Some(VMSTATE_INTERP)),
        ] {
            bytes(Some((mask, 0x10 | DISPMODE_PROF)));
            rearm_if_lost(state);
            assert_eq!(bytes(None), (mask, 0x10 | DISPMODE_PROF), "mask {mask:#x}, state {state:?}");
        }
        assert_eq!(hooks_rearmed(), rearmed + 1);
        bytes(Some(saved));
        // Disarmed, nothing is touched.
        disarm();
        running_c::disarm();
    }

    #[test]
    fn the_first_callback_turns_the_guard_off_if_the_byte_is_not_vmevent() {
        let _turn = crate::sys::one_session_at_a_time();
        let lua = Lua::new();
        let g = armed(&lua);
        let saved = bytes(None);
        bytes(Some((HOOK_VMEVENT, saved.1)));
        check_in_callback();
        assert_ne!(HOOK_MASK.load(Ordering::Acquire), 0, "kept: the byte holds HOOK_VMEVENT");
        bytes(Some(saved));
        assert_eq!(arm(&lua, g, running_c::is_gc64()), Ok(()));
        check_in_callback();
        assert_eq!(HOOK_MASK.load(Ordering::Acquire), 0, "turned off: the byte is not HOOK_VMEVENT");
        assert!(refused_by_callback().is_some());
        running_c::disarm();
    }
}
