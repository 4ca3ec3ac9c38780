//! Waking the VM's thread when a command reaches the control channel of a
//! program that never polls (`tecs-profile run --listen`): the kernel sends
//! SIGIO to the VM's thread when the listening socket (or the connected
//! client's) becomes readable; the handler sets a one-shot count hook, as
//! luajit's own SIGINT handler does (`laction` in luajit.c); the hook, on
//! the VM's thread at its next interpreted instruction, takes itself off
//! and calls the poll function. No hook stands while no command waits, so
//! the JIT keeps compiling. A host with a hook of its own set, or a SIGIO
//! handler of its own, is not woken.

use std::ffi::{c_int, CStr};
use std::os::unix::io::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use mlua::{ffi, Lua};

/// Registry keys: the function the hook calls, and the thread whose state
/// the handler hands to `lua_sethook` (anchored so that it stays alive).
const POLL_KEY: &CStr = c"tecs.profile.wake.poll";
const THREAD_KEY: &CStr = c"tecs.profile.wake.thread";

static VM: AtomicPtr<ffi::lua_State> = AtomicPtr::new(ptr::null_mut());
/// The VM's thread id, which SIGIO is sent to.
static VM_TID: AtomicI32 = AtomicI32::new(0);

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
        if ffi::lua_gethook(l).is_some() {
            return;
        }
        ffi::lua_sethook(l, Some(one_shot), ffi::LUA_MASKCOUNT, 1);
    }
}

unsafe extern "C-unwind" fn one_shot(l: *mut ffi::lua_State, _: *mut ffi::lua_Debug) {
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
