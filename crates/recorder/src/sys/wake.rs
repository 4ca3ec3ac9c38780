//! Waking the VM's thread when a command reaches the control channel of a
//! program that never polls (`tecs-profile run --listen`): the kernel sends
//! SIGIO to the VM's thread when the listening socket (or the connected
//! client's) becomes readable; the handler sets a one-shot count hook, as
//! luajit's own SIGINT handler does (`laction` in luajit.c); the hook, on
//! the VM's thread at its next interpreted instruction, takes itself off
//! and calls the poll function. No hook stands while no command waits, so
//! the JIT keeps compiling. A host with a hook of its own set, or a SIGIO
//! handler of its own, is not woken.
//!
//! LuaJIT can drop a count hook set from a signal handler: its profiler
//! runs each sample's callback with the hook mask replaced by its own flag
//! and then writes back the mask it read before the callback
//! (`lj_profile_interpreter`), so a SIGIO that lands in a callback leaves
//! `one_shot` as the hook function with no count bit in the mask. Nothing
//! then calls the hook, and a SIGIO that finds its own hook set again used
//! to return without setting it: the program was never woken again. So a
//! SIGIO that finds `one_shot` sets it again, and while a wake waits a
//! session's tick handler ([`tend_pending`], on the VM thread) sets a lost
//! count bit again and leaves the tick to LuaJIT's hook, whose setting
//! rewrites the whole dispatch table (a table left without the count
//! hook by a dispatch update the SIGIO interrupted is mended that way).

use std::ffi::{c_int, CStr};
use std::os::unix::io::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

use mlua::{ffi, Lua};

/// Registry keys: the function the hook calls, and the thread whose state
/// the handler hands to `lua_sethook` (anchored so that it stays alive).
const POLL_KEY: &CStr = c"tecs.profile.wake.poll";
const THREAD_KEY: &CStr = c"tecs.profile.wake.thread";

static VM: AtomicPtr<ffi::lua_State> = AtomicPtr::new(ptr::null_mut());
/// The VM's thread id, which SIGIO is sent to.
static VM_TID: AtomicI32 = AtomicI32::new(0);

/// Set once a SIGIO has set the one-shot hook, cleared when it runs (or
/// when the hook found is no longer ours).
static PENDING: AtomicBool = AtomicBool::new(false);

/// `F_SETOWN_EX` and its argument (linux/fcntl.h; not in the libc crate
/// for glibc targets).
const F_SETOWN_EX: c_int = 15;
const F_OWNER_TID: c_int = 0;
#[repr(C)]
struct FOwnerEx {
    kind: c_int,
    pid: libc::pid_t,
}

extern "C" fn on_sigio(_: c_int) {
    let l = VM.load(Ordering::Acquire);
    if l.is_null() {
        return;
    }
    // SAFETY: `l` is a thread of the VM anchored in its registry until
    // `disarm` clears `VM` first. Reading the hook and setting a count hook
    // from a signal handler is what luajit.c's SIGINT handler does: LuaJIT
    // only sets the hook fields and its dispatch mode.
    unsafe {
        if ffi::lua_gethook(l).is_some_and(|h| !is_ours(h)) {
            return;
        }
        ffi::lua_sethook(l, Some(one_shot), ffi::LUA_MASKCOUNT, 1);
    }
    PENDING.store(true, Ordering::Release);
}

/// Whether `h` is the wake's own hook.
fn is_ours(h: ffi::lua_Hook) -> bool {
    h as usize == one_shot as ffi::lua_Hook as usize
}

/// Called by a session's tick handler: whether a wake waits on this thread
/// (the VM's), in which case the tick is left to LuaJIT's hook. A count
/// bit the hook mask lost while the wake waited (see the module) is set
/// again.
pub fn tend_pending() -> bool {
    if !PENDING.load(Ordering::Acquire) {
        return false;
    }
    let l = VM.load(Ordering::Acquire);
    // SAFETY: gettid has no preconditions.
    if l.is_null() || unsafe { libc::gettid() } != VM_TID.load(Ordering::Acquire) {
        return false;
    }
    // SAFETY: `l` is anchored in the registry until `disarm` clears `VM`,
    // and this runs on its VM's thread; reading the hook and setting it
    // again is what `on_sigio` does from the same kind of handler.
    unsafe {
        if !ffi::lua_gethook(l).is_some_and(is_ours) {
            PENDING.store(false, Ordering::Release);
            return false;
        }
        if ffi::lua_gethookmask(l) & ffi::LUA_MASKCOUNT == 0 {
            ffi::lua_sethook(l, Some(one_shot), ffi::LUA_MASKCOUNT, 1);
        }
    }
    true
}

unsafe extern "C-unwind" fn one_shot(l: *mut ffi::lua_State, _: *mut ffi::lua_Debug) {
    PENDING.store(false, Ordering::Release);
    // SAFETY: called by the VM on its own thread with a valid state; the
    // stack is checked before the pushes and left as it was found.
    unsafe {
        ffi::lua_sethook(l, None, 0, 0);
        if ffi::lua_checkstack(l, 2) == 0 {
            return;
        }
        ffi::lua_getfield(l, ffi::LUA_REGISTRYINDEX, POLL_KEY.as_ptr());
        if ffi::lua_type(l, -1) != ffi::LUA_TFUNCTION {
            ffi::lua_settop(l, -2);
            return;
        }
        if ffi::lua_pcall(l, 0, 0, 0) != 0 {
            ffi::lua_settop(l, -2);
        }
    }
}

/// Makes SIGIO call `poll` on this VM's thread (the calling one). Fails
/// when the host has a SIGIO handler of its own.
pub fn arm(lua: &Lua, poll: mlua::Function) -> Result<(), String> {
    // SAFETY: sigaction with a null new action only reads the current one
    // into `old`, a zeroed struct of the right type.
    let old = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGIO, ptr::null(), &mut old);
        old
    };
    let ours = on_sigio as extern "C" fn(c_int) as libc::sighandler_t;
    if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != ours {
        return Err("SIGIO has a handler of the host's: the program must call profile.poll()".into());
    }
    // SAFETY: exec_raw hands a valid state with `poll` pushed; the
    // function and the running thread are stored in the registry (popped
    // by lua_setfield), so the stack is left as it was.
    let anchored = unsafe {
        lua.exec_raw::<()>(poll, |l| {
            ffi::lua_setfield(l, ffi::LUA_REGISTRYINDEX, POLL_KEY.as_ptr());
            ffi::lua_pushthread(l);
            ffi::lua_setfield(l, ffi::LUA_REGISTRYINDEX, THREAD_KEY.as_ptr());
            VM.store(l, Ordering::Release);
        })
    };
    anchored.map_err(|e| e.to_string())?;
    // SAFETY: gettid has no preconditions.
    VM_TID.store(unsafe { libc::gettid() }, Ordering::Release);
    // SAFETY: `sa` is a zeroed sigaction given a valid handler and an
    // emptied mask; SA_RESTART keeps the program's interrupted system
    // calls going.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = ours;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGIO, &sa, ptr::null_mut()) != 0 {
            VM.store(ptr::null_mut(), Ordering::Release);
            return Err(format!("cannot set a SIGIO handler: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Has the kernel send SIGIO to the VM's thread when `fd` becomes
/// readable (nothing before `arm`).
pub fn watch(fd: RawFd) {
    let tid = VM_TID.load(Ordering::Acquire);
    if tid == 0 || VM.load(Ordering::Acquire).is_null() {
        return;
    }
    let owner = FOwnerEx { kind: F_OWNER_TID, pid: tid };
    // SAFETY: `fd` is an open descriptor of the caller's; F_SETOWN_EX reads
    // `owner`, valid for the call; F_GETFL/F_SETFL take integers.
    unsafe {
        if libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) != 0 {
            return;
        }
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_ASYNC);
        }
    }
}

/// Stops waking (the sockets watched are closed by now): the handler finds
/// no state, SIGIO gets its default action back and, given the state
/// (not while it closes), the registry lets the function and thread go.
pub fn disarm(lua: Option<&Lua>) {
    if VM.swap(ptr::null_mut(), Ordering::AcqRel).is_null() {
        return;
    }
    VM_TID.store(0, Ordering::Release);
    PENDING.store(false, Ordering::Release);
    // SAFETY: the default action back for SIGIO, whose sources are closed.
    unsafe { libc::signal(libc::SIGIO, libc::SIG_DFL) };
    let Some(lua) = lua else { return };
    // SAFETY: pushes nil twice, each popped by lua_setfield.
    let _ = unsafe {
        lua.exec_raw::<()>((), |l| {
            ffi::lua_pushnil(l);
            ffi::lua_setfield(l, ffi::LUA_REGISTRYINDEX, POLL_KEY.as_ptr());
            ffi::lua_pushnil(l);
            ffi::lua_setfield(l, ffi::LUA_REGISTRYINDEX, THREAD_KEY.as_ptr());
        })
    };
}
