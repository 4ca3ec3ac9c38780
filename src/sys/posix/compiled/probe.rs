//! Learning the layout for a VM and proving it with a compiled loop that
//! reads its own stack.

use super::*;

/// Whether this build's layout was learned and proved for the VM whose
/// global state is `g`, and why not.
pub(super) static LEARNED_FOR: AtomicUsize = AtomicUsize::new(0);
pub(super) static PROBE_STATE: AtomicUsize = AtomicUsize::new(0);
pub(super) static PROBE_TEXT: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());
pub(super) static PROBE_WHY: std::sync::Mutex<&'static str> = std::sync::Mutex::new("");

/// The probe's chunk: a compiled loop calling, through a function it
/// inlines, the FFI function `probe_from_trace`. Lines 3 and 6 are where
/// the calls are.
pub(super) const PROBE_CHUNK: &str = "local probe = ...\n\
local function leaf(i) return probe(i) end\n\
local function inlined(i) return leaf(i) end\n\
local function run(n)\n\
  local s = 0\n\
  for i = 1, n do s = s + inlined(i) end\n\
  return s\n\
end\n\
return run\n";
pub(super) const PROBE_NAME: &str = "=tecs.profile.probe";

/// Proves, once per VM, that the tick handler can read compiled code's
/// stacks in `lua`'s VM: arms the C-function layout (which finds the VM
/// state), then runs the probe.
pub fn prove(lua: &Lua) -> Result<(), &'static str> {
    let mut g = 0usize;
    let slot = &mut g;
    // SAFETY: exec_raw hands a live state; a GC64 thread header keeps its
    // global state's address at offset 16 (checked by `running_c::arm`).
    unsafe { lua.exec_raw::<()>((), |l| *slot = at::<usize>(l as usize + 16)) }
        .map_err(|_| "the VM's state could not be read")?;
    running_c::arm(lua, g)?;
    learn(lua, g)
}

/// Learns and proves the layout for the VM of `lua` (global state `g`),
/// once per VM. The C-function layout (`running_c`) must be armed.
pub fn learn(lua: &Lua, g: usize) -> Result<(), &'static str> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        return Err("compiled code is read in the handler only on x86-64 Linux");
    }
    if LEARNED_FOR.load(Ordering::Acquire) == g && g != 0 {
        return Ok(());
    }
    let Some((rg, vmstate_off, cur_l_off, gc64)) = running_c::layout() else {
        return Err("the VM state at each tick is unknown (see cFunctionLeavesNote)");
    };
    if !gc64 || rg != g {
        return Err("this LuaJIT build is not a GC64 build");
    }
    G.store(g, Ordering::Relaxed);
    VMSTATE_AT.store(g + vmstate_off, Ordering::Relaxed);
    CUR_L_AT.store(g + cur_l_off, Ordering::Relaxed);
    JIT_BASE_AT.store(g + cur_l_off + 8, Ordering::Relaxed);
    J_AT.store(0, Ordering::Relaxed);
    if BUFFERS.load(Ordering::Acquire).is_null() {
        // Zeroed on the heap: every field of the halves is valid as zeros,
        // and they are too large to build on a stack.
        let layout = std::alloc::Layout::new::<Buffers>();
        // SAFETY: `layout` is non-zero-sized; all-zero bytes are a valid
        // `Buffers` (integers, arrays of them, UnsafeCell around them).
        let b = unsafe { std::alloc::alloc_zeroed(layout) as *mut Buffers };
        if b.is_null() {
            return Err("out of memory");
        }
        BUFFERS.store(b, Ordering::Release);
    }
    let (lo, hi) = object_range(take_ticks as *const () as usize).ok_or("this module's code could not be located")?;
    OWN_CODE[0].store(lo, Ordering::Relaxed);
    OWN_CODE[1].store(hi, Ordering::Relaxed);
    run_probe(lua)?;
    LEARNED_FOR.store(g, Ordering::Release);
    Ok(())
}

/// This module's own code (start, end), learned at start.
pub(super) static OWN_CODE: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

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

/// States of the probe: waiting for a call from a trace, done, failed.
pub(super) const PROBE_WAITING: usize = 1;
pub(super) const PROBE_DONE: usize = 2;
pub(super) const PROBE_FAILED: usize = 3;

pub(super) fn probe_fail(why: &'static str) {
    *PROBE_WHY.lock().unwrap_or_else(|e| e.into_inner()) = why;
    PROBE_STATE.store(PROBE_FAILED, Ordering::SeqCst);
}

/// Called by the probe loop through the FFI; from a trace, once, reads its
/// own stack as the handler would.
pub(super) extern "C" fn probe_from_trace(i: c_int) -> c_int {
    if PROBE_STATE.load(Ordering::SeqCst) != PROBE_WAITING {
        return i;
    }
    // SAFETY: the VM state's address was set by `learn` for this VM.
    let vmstate = unsafe { at::<i32>(VMSTATE_AT.load(Ordering::Relaxed)) };
    if vmstate < 1 {
        return i; // still interpreted: the loop is not compiled yet
    }
    let t = vmstate as usize;
    let g = G.load(Ordering::Relaxed);
    // jit_State follows the global state; its trace array holds this trace.
    let found = J_SEARCH.step_by(8).map(|k| g + k).find(|&j| {
        J_AT.store(j, Ordering::Relaxed);
        trace_header(t).is_some()
    });
    for c in &CACHED {
        c[0].store(0, Ordering::Relaxed);
    }
    if found.is_none() {
        J_AT.store(0, Ordering::Relaxed);
        return {
            probe_fail("the trace array was not found after the global state");
            i
        };
    }
    let rsp: usize;
    // SAFETY: reads the stack pointer into a register; no memory access.
    unsafe { std::arch::asm!("mov {}, rsp", out(reg) rsp, options(nomem, nostack, preserves_flags)) };
    let rip = probe_from_trace as *const () as usize;
    let Some(b) = buffers() else {
        probe_fail("no buffer");
        return i;
    };
    // SAFETY: not armed, so no handler uses the halves; on the VM thread.
    let c = unsafe { &mut (*b.halves[0].get()).scratch };
    // SAFETY: on the VM thread, in trace `t` (its FFI call).
    match unsafe { read_trace_stack(t, rip, rsp, c, 64) } {
        Ok(()) => {
            let mut text = PROBE_TEXT.lock().unwrap_or_else(|e| e.into_inner());
            text.clear();
            text.resize(64 * 1024, 0);
            let mut out = Out { buf: &mut text[..], len: 0 };
            // SAFETY: the frames were just read from the live stack.
            let ok = unsafe { write_stack(&mut out, c) };
            let n = out.len;
            text.truncate(n);
            if ok {
                PROBE_STATE.store(PROBE_DONE, Ordering::SeqCst);
            } else {
                drop(text);
                probe_fail("the probe's stack did not fit");
            }
        }
        Err(m) => probe_fail(match m {
            Miss::Trace => "the probe's trace could not be read",
            Miss::Address => "no return address into the probe's trace was found",
            Miss::Frame => "the probe's frames did not validate",
            Miss::Function => "the probe's inlined function is not a constant",
            Miss::Full => "the probe's stack did not fit",
        }),
    }
    i
}

/// Runs the probe loop until it is compiled and has read its own stack,
/// and checks the stack read against the one LuaJIT dumps.
pub(super) fn run_probe(lua: &Lua) -> Result<(), &'static str> {
    let ffi: mlua::Table = lua
        .globals()
        .get::<mlua::Function>("require")
        .and_then(|r| r.call("ffi"))
        .map_err(|_| "LuaJIT's ffi module is not available")?;
    let cast: mlua::Function = ffi.get("cast").map_err(|_| "LuaJIT's ffi module is not available")?;
    let fptr = lua.create_string("int (*)(int)").map_err(|_| "out of memory")?;
    let addr = probe_from_trace as *const () as usize;
    let f: mlua::Value = cast
        .call((fptr, mlua::Value::LightUserData(mlua::LightUserData(addr as *mut c_void))))
        .map_err(|_| "the probe function could not be cast")?;
    let run: mlua::Function =
        lua.load(PROBE_CHUNK).set_name(PROBE_NAME).call(f).map_err(|_| "the probe chunk could not be loaded")?;
    *PROBE_WHY.lock().unwrap_or_else(|e| e.into_inner()) = "the probe loop was never compiled (is the JIT off?)";
    PROBE_STATE.store(PROBE_WAITING, Ordering::SeqCst);
    let callers = crate::sys::lua_frames_here(lua, 64);
    let result = run.call::<mlua::Value>(4000);
    let state = PROBE_STATE.swap(0, Ordering::SeqCst);
    if result.is_err() {
        return Err("the probe loop failed");
    }
    if state != PROBE_DONE {
        return Err(*PROBE_WHY.lock().unwrap_or_else(|e| e.into_inner()));
    }
    let text = PROBE_TEXT.lock().unwrap_or_else(|e| e.into_inner()).clone();
    check_probe_stack(&text, &callers)
}

/// The probe's stack must end in the loop's frames, and the Lua frames
/// below them must be those `lua_getinfo` gives for the probe's caller
/// (within the depth both read).
pub(super) fn check_probe_stack(read: &[u8], callers: &[u8]) -> Result<(), &'static str> {
    let frames: Vec<&[u8]> = read.split(|&b| b == SEP).collect();
    let name = &PROBE_NAME.as_bytes()[1..];
    let frame = |line: &str| [name, b":", line.as_bytes()].concat();
    let n = frames.len();
    let Some(run_at) = (0..n).rev().find(|&i| frames[i] == frame("6")) else {
        return Err("the stack read in a trace does not end at the probe loop's line");
    };
    if !frames[run_at + 1..].iter().all(|f| *f == frame("3") || *f == frame("2")) {
        return Err("the stack read in a trace does not end at the probe loop's line");
    }
    // C frames (`@0x...`, `[builtin#...]`) have no line to compare.
    let is_lua = |f: &&[u8]| !f.starts_with(b"@0x") && !f.starts_with(b"[builtin#");
    let below: Vec<&[u8]> = frames[..run_at].iter().copied().filter(is_lua).collect();
    let want: Vec<&[u8]> = if callers.is_empty() { Vec::new() } else { callers.split(|&b| b == SEP).collect() };
    let k = below.len().min(want.len());
    if (k == 0 && below.len() + want.len() > 0) || below[below.len() - k..] != want[want.len() - k..] {
        return Err("the callers read in a trace differ from the ones lua_getinfo gives");
    }
    Ok(())
}

/// Arms the handler's reads for a session: `depth` frames kept, zones read
/// from the table at `zones` (0 for none).
pub fn arm(depth: usize, zones: usize) {
    if LEARNED_FOR.load(Ordering::Acquire) == 0 {
        return;
    }
    drain(|_| {});
    drain(|_| {});
    DEPTH.store(depth.min(MAX_FRAMES - 1), Ordering::Relaxed);
    for c in &CACHED {
        c[0].store(0, Ordering::Relaxed);
    }
    ZONES.store(zones, Ordering::Relaxed);
    READ.store(0, Ordering::Relaxed);
    for m in MISSES.iter().chain(&NAMED) {
        m.store(0, Ordering::Relaxed);
    }
    ARMED.store(true, Ordering::Release);
}

/// From now on the handler reads no trace.
pub fn disarm() {
    ARMED.store(false, Ordering::Release);
}

/// Whether the handler reads traces now.
pub fn armed() -> bool {
    ARMED.load(Ordering::Acquire)
}
