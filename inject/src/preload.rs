//! `luaL_openlibs` wrapped, the boot chunk run (see the crate's documentation).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::Write;
use std::sync::OnceLock;

/// The variable naming the boot chunk; without it the library does nothing.
const BOOT: &CStr = c"TECS_PROFILE_LOVE_BOOT";
/// The package's Lua directory (`.../share/lua/5.1` or the source's `lua/`).
const LUADIR: &CStr = c"TECS_PROFILE_LOVE_LUADIR";
/// The directory of `tecs/profile/native.so`.
const LIBDIR: &CStr = c"TECS_PROFILE_LOVE_LIBDIR";
/// The user's `LD_PRELOAD`; absent when the user had none.
const USER_PRELOAD: &CStr = c"TECS_PROFILE_LOVE_PRELOAD";
/// What the command line's options ask of the boot chunk (words joined by
/// commas), handed to it as it is.
const OPTIONS: &CStr = c"TECS_PROFILE_LOVE_OPTIONS";
const LD_PRELOAD: &CStr = c"LD_PRELOAD";

/// What the command line asked for, read once.
struct Boot {
    chunk: CString,
    luadir: CString,
    libdir: CString,
    options: CString,
}

type LuaState = c_void;
type OpenLibs = unsafe extern "C" fn(*mut LuaState);
type LoadFile = unsafe extern "C" fn(*mut LuaState, *const c_char) -> c_int;
type PCall = unsafe extern "C" fn(*mut LuaState, c_int, c_int, c_int) -> c_int;
type PushString = unsafe extern "C" fn(*mut LuaState, *const c_char);
type GetTop = unsafe extern "C" fn(*mut LuaState) -> c_int;
type SetTop = unsafe extern "C" fn(*mut LuaState, c_int);
type ToLString = unsafe extern "C" fn(*mut LuaState, c_int, *mut usize) -> *const c_char;

/// The Lua C functions the boot calls, from the LuaJIT `love` links.
struct LuaApi {
    loadfile: LoadFile,
    pcall: PCall,
    pushstring: PushString,
    gettop: GetTop,
    settop: SetTop,
    tolstring: ToLString,
}

static BOOT_REQUEST: OnceLock<Option<Boot>> = OnceLock::new();
static API: OnceLock<Option<LuaApi>> = OnceLock::new();
static OPENLIBS: OnceLock<Option<OpenLibs>> = OnceLock::new();

fn say(message: &str) {
    let _ = writeln!(std::io::stderr(), "tecs-profile: {message}");
}

/// The value of the environment variable `name`, copied.
fn getenv(name: &CStr) -> Option<CString> {
    // SAFETY: `name` is NUL-terminated; getenv returns NULL or a
    // NUL-terminated string owned by the environment, copied at once, before
    // anything can change the environment (the caller holds the OnceLock).
    unsafe {
        let value = libc::getenv(name.as_ptr());
        if value.is_null() {
            None
        } else {
            Some(CStr::from_ptr(value).to_owned())
        }
    }
}

fn unsetenv(name: &CStr) {
    // SAFETY: `name` is NUL-terminated. The environment is changed while the
    // game's main thread is in luaL_openlibs, before LÖVE starts threads of
    // its own (its Lua state does not exist yet).
    unsafe { libc::unsetenv(name.as_ptr()) };
}

fn setenv(name: &CStr, value: &CStr) {
    // SAFETY: as in `unsetenv`; both strings are NUL-terminated.
    unsafe { libc::setenv(name.as_ptr(), value.as_ptr(), 1) };
}

/// Reads the command line's variables and gives the environment back as
/// the user had it. None when this process was not started by
/// `tecs-profile love` (then nothing is changed).
fn take_request() -> Option<Boot> {
    let chunk = getenv(BOOT)?;
    let luadir = getenv(LUADIR).unwrap_or_default();
    let libdir = getenv(LIBDIR).unwrap_or_default();
    let options = getenv(OPTIONS).unwrap_or_default();
    match getenv(USER_PRELOAD) {
        Some(user) => setenv(LD_PRELOAD, &user),
        None => unsetenv(LD_PRELOAD),
    }
    for name in [BOOT, LUADIR, LIBDIR, USER_PRELOAD, OPTIONS] {
        unsetenv(name);
    }
    Some(Boot { chunk, luadir, libdir, options })
}

/// The next definition of `name` after this library (LuaJIT's).
fn next_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: RTLD_NEXT with a NUL-terminated name only searches the objects
    // loaded after this one; the result is NULL or the symbol's address.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

/// The `luaL_openlibs` this library stands in front of: whatever else the
/// process has, the caller always gets its libraries opened.
fn real_openlibs() -> Option<OpenLibs> {
    *OPENLIBS.get_or_init(|| {
        let f = next_symbol(c"luaL_openlibs");
        if f.is_null() {
            say("found no other luaL_openlibs in this process");
            return None;
        }
        // SAFETY: the address is the Lua C API's `luaL_openlibs` (lauxlib.h)
        // of the library after this one, of the type transmuted to.
        Some(unsafe { std::mem::transmute::<*mut c_void, OpenLibs>(f) })
    })
}

/// The functions the boot calls; None (and the boot skipped, never the
/// libraries) where the process's Lua lacks one, as a Lua 5.2+ `lua_pcall`
/// (a macro there).
fn lua_api() -> Option<&'static LuaApi> {
    API.get_or_init(|| {
        let names: [&CStr; 6] =
            [c"luaL_loadfile", c"lua_pcall", c"lua_pushstring", c"lua_gettop", c"lua_settop", c"lua_tolstring"];
        let mut found = [std::ptr::null_mut(); 6];
        for (slot, name) in found.iter_mut().zip(names) {
            *slot = next_symbol(name);
            if slot.is_null() {
                say(&format!("the LÖVE boot found no {} in this process", name.to_string_lossy()));
                return None;
            }
        }
        // SAFETY: each address is the Lua C API function of that name in
        // the LuaJIT this process links, whose signatures (lua.h, lauxlib.h)
        // are the types transmuted to.
        unsafe {
            Some(LuaApi {
                loadfile: std::mem::transmute::<*mut c_void, LoadFile>(found[0]),
                pcall: std::mem::transmute::<*mut c_void, PCall>(found[1]),
                pushstring: std::mem::transmute::<*mut c_void, PushString>(found[2]),
                gettop: std::mem::transmute::<*mut c_void, GetTop>(found[3]),
                settop: std::mem::transmute::<*mut c_void, SetTop>(found[4]),
                tolstring: std::mem::transmute::<*mut c_void, ToLString>(found[5]),
            })
        }
    })
    .as_ref()
}

/// Whether the caller runs on the process's main thread (LÖVE's game loop),
/// not on a `love.thread` worker.
fn on_main_thread() -> bool {
    // SAFETY: gettid and getpid take no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t == libc::getpid() }
}

/// The string at the top of the stack of `state` (an error message).
fn top_message(api: &LuaApi, state: *mut LuaState) -> String {
    let mut len = 0usize;
    // SAFETY: `state` is the live state the caller got; lua_tolstring returns
    // NULL (not a string) or `len` bytes owned by the state, copied here
    // before the stack changes.
    unsafe {
        let text = (api.tolstring)(state, -1, &mut len);
        if text.is_null() {
            return "(error object is not a string)".to_string();
        }
        String::from_utf8_lossy(std::slice::from_raw_parts(text.cast::<u8>(), len)).into_owned()
    }
}

/// Loads the boot chunk and calls it with the package's directories and the
/// command line's options; the stack is left as found.
fn run_boot(api: &LuaApi, state: *mut LuaState, boot: &Boot) {
    // SAFETY: `state` is the state LÖVE just opened its libraries in, on this
    // thread; every call keeps to the stack the state has (four pushes onto
    // a fresh state's minimum of LUA_MINSTACK slots) and a protected call, so
    // no Lua error unwinds through this frame. The stack goes back to `top`.
    unsafe {
        let top = (api.gettop)(state);
        if (api.loadfile)(state, boot.chunk.as_ptr()) != 0 {
            say(&format!("the LÖVE boot did not load: {}", top_message(api, state)));
        } else {
            (api.pushstring)(state, boot.luadir.as_ptr());
            (api.pushstring)(state, boot.libdir.as_ptr());
            (api.pushstring)(state, boot.options.as_ptr());
            if (api.pcall)(state, 3, 0, 0) != 0 {
                say(&format!("the LÖVE boot failed: {}", top_message(api, state)));
            }
        }
        (api.settop)(state, top);
    }
}

/// LuaJIT's `luaL_openlibs`, then the boot chunk in states of the main
/// thread when `tecs-profile love` started this process.
///
/// # Safety
/// As LuaJIT's: `state` is a valid Lua state the caller owns.
#[no_mangle]
pub unsafe extern "C" fn luaL_openlibs(state: *mut LuaState) {
    let request = BOOT_REQUEST.get_or_init(take_request);
    let Some(openlibs) = real_openlibs() else {
        return;
    };
    // SAFETY: the caller's contract is LuaJIT's own, which this forwards.
    unsafe { openlibs(state) };
    if let Some(boot) = request {
        if on_main_thread() {
            if let Some(api) = lua_api() {
                run_boot(api, state, boot);
            }
        }
    }
}
