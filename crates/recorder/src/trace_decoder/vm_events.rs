//! The raw side of the fine map ([`super::fine_map`]): the VM event
//! handlers that log what the recorder records and read each trace as it
//! is committed, the table of published maps, and the lookup the tick
//! handler makes.
//!
//! Two C functions of ours are attached to LuaJIT's `record` and `trace`
//! events while a session reads compiled code. Each keeps the handler it
//! replaced as its upvalue and calls it after its own work, so `-jdump`,
//! `-jv` or a trace session attached before still see every event. They
//! run on the VM thread, inside the VM's event call, and never in a signal
//! handler; no Lua runs in them and nothing is allocated on the Lua heap.
//!
//! - `record` (before each bytecode is recorded): appends the function,
//!   bytecode, frame depth and the trace's next IR reference
//!   (`J->cur.nins`, `cur` being the first member of `jit_State`).
//! - `trace` `start`: a new recording of that trace number: its log is
//!   emptied and any map of that number withdrawn. `stop`: the trace is
//!   committed (`J->trace[t]` holds it, its machine code and snapshot
//!   offsets final): its IR and snapshots are read, the map built and
//!   published. `abort`: the log is dropped. `flush`: every map withdrawn.
//!
//! A map is published in a table indexed by trace number, with the trace
//! object and machine code it belongs to; the tick handler uses it only for
//! the trace it has proved to be running, with that object and code. A map
//! withdrawn (its trace number recorded again, every trace flushed, the
//! session's end) is freed at once: see [`free`].

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use mlua::ffi;

use super::fine_map::{self, Ins, Recorded, Snap, TraceShape};
use super::vm_states::{VMSTATE_ASM, VMSTATE_RECORD};
use super::*;

/// The recorder's log of the trace being recorded.
struct Log {
    trace: usize,
    entries: Vec<Recorded>,
}

static LOG: Mutex<Log> = Mutex::new(Log { trace: 0, entries: Vec::new() });
/// The handlers log and publish only while this is set.
static LOGGING: AtomicBool = AtomicBool::new(false);
/// A `record` event was sent for the trace being recorded. LuaJIT sets the
/// VM state RECORD before it sends the event and leaves it as the event's
/// call returned it, C, while it records and interprets on until the trace
/// ends (`trace_state` in `lj_trace.c`); the tick handler puts RECORD back.
static RECORD_EVENT_SENT: AtomicBool = AtomicBool::new(false);

/// Whether the VM state may read C where LuaJIT itself would have left
/// RECORD: a `record` event was sent and the trace has not ended since.
pub(super) fn record_event_sent() -> bool {
    RECORD_EVENT_SENT.load(Ordering::Relaxed)
}

/// A map published for one committed trace.
pub(super) struct Published {
    tr: usize,
    mcode: usize,
    map: fine_map::FineMap,
}

static MAPS: [AtomicPtr<Published>; TRACE_CACHE] = [const { AtomicPtr::new(std::ptr::null_mut()) }; TRACE_CACHE];

/// Traces given a map, and traces committed without one, since the start.
static MAPPED: AtomicU64 = AtomicU64::new(0);
static UNMAPPED: AtomicU64 = AtomicU64::new(0);
/// Ticks in a trace placed by its map, left at the snapshot (the map names
/// no chain there, or it did not agree), and in a trace without a map.
pub(super) static PLACED: AtomicU64 = AtomicU64::new(0);
pub(super) static AT_SNAPSHOT: AtomicU64 = AtomicU64::new(0);
pub(super) static NO_MAP: AtomicU64 = AtomicU64::new(0);

/// Counts since the last attach: (traces mapped, traces committed without
/// a map, ticks placed by a map, ticks left at a snapshot of a mapped
/// trace, ticks in traces without a map).
pub fn map_counts() -> [u64; 5] {
    [&MAPPED, &UNMAPPED, &PLACED, &AT_SNAPSHOT, &NO_MAP].map(|c| c.load(Ordering::Relaxed))
}

/// The highest trace number given a map since every map was last
/// withdrawn: a flush (which `jit.flush` and a full trace cache make, in
/// the program's time) clears that many slots, not the whole table.
static HIGHEST_MAPPED: AtomicUsize = AtomicUsize::new(0);

fn withdraw(t: usize) {
    if let Some(slot) = MAPS.get(t).filter(|s| !s.load(Ordering::Relaxed).is_null()) {
        free(slot.swap(std::ptr::null_mut(), Ordering::AcqRel));
    }
}

fn withdraw_all() {
    for t in 0..=HIGHEST_MAPPED.swap(0, Ordering::Relaxed).min(TRACE_CACHE - 1) {
        withdraw(t);
    }
}

/// Frees a map taken out of the table. The tick handler reads a map only
/// while it interrupts the thread that runs that map's trace, and only
/// after loading it from the table; a map is taken out on the VM's thread
/// (in an event handler or at a session's start or stop), where no trace
/// runs, so once it is out of the table no handler is reading it or can
/// find it.
fn free(p: *mut Published) {
    if !p.is_null() {
        // SAFETY: leaked from a Box by `publish`, out of the table (above).
        drop(unsafe { Box::from_raw(p) });
    }
}

/// The chain of frames (outermost first) the map of trace `t` names for
/// the code at `ofs` (with `call`, the last byte of a call the thread is
/// inside: named by the instruction that made it where the map knows the
/// call), when `t` has a map for the object `tr` with its current machine
/// code.
///
/// # Safety
/// On the VM thread, in the tick handler, with `tr` proved to be the trace
/// `t` this thread runs.
pub(super) unsafe fn chain_at(t: usize, tr: usize, ofs: usize, call: bool) -> Result<&'static fine_map::Chain, ()> {
    let p = MAPS.get(t).map_or(std::ptr::null_mut(), |s| s.load(Ordering::Acquire));
    if p.is_null() {
        NO_MAP.fetch_add(1, Ordering::Relaxed);
        return Err(());
    }
    // SAFETY: published maps are freed only once the handler is disarmed.
    let m = &*p;
    if m.tr != tr || m.mcode != at::<usize>(tr + TRACE_MCODE) {
        NO_MAP.fetch_add(1, Ordering::Relaxed);
        return Err(());
    }
    let found = if call { m.map.at_call(ofs as u32) } else { None };
    found.unwrap_or_else(|| m.map.at(ofs as u32)).ok_or_else(|| {
        AT_SNAPSHOT.fetch_add(1, Ordering::Relaxed);
    })
}

/// The bytecode of the prototype the trace `t` (the object `tr`) runs in
/// its base frame, as its published map has it.
///
/// # Safety
/// As [`chain_at`].
pub(super) unsafe fn base_proto(t: usize, tr: usize) -> Option<usize> {
    let p = MAPS.get(t).map_or(std::ptr::null_mut(), |s| s.load(Ordering::Acquire));
    if p.is_null() {
        return None;
    }
    // SAFETY: published maps are freed only once the handler is disarmed.
    let m = &*p;
    (m.tr == tr && m.mcode == at::<usize>(tr + TRACE_MCODE)).then(|| m.map.chains.first().map(|c| c[0].1)).flatten()
}

// -- Reading a committed trace ----------------------------------------------

/// GCtrace: the next IR reference.
const TRACE_NINS: usize = 12;
/// `IRT_FUNC`, the type of a function constant.
const IRT_FUNC: u8 = 8;
/// IR instructions read from one trace at most (LuaJIT's own limit is 4000
/// by default, 65535 at most).
const MAX_INS: u32 = 65536;

/// What the map needs of the committed trace `tr`.
///
/// # Safety
/// `tr` must be a committed trace of the VM, not being modified.
unsafe fn shape_of(tr: usize) -> TraceShape {
    let ir = at::<usize>(tr + TRACE_IR);
    let bias = REF_BIAS as u32;
    let nins = at::<u32>(tr + TRACE_NINS).min(bias + MAX_INS);
    let nk = at::<u32>(tr + TRACE_NK) as usize;
    let ins_at = |r: usize| ir + r * IR_SIZE;
    let mut shape = TraceShape { first: bias, szmcode: at::<u32>(tr + TRACE_SZMCODE), ..TraceShape::default() };
    for r in REF_BIAS..nins as usize {
        let p = ins_at(r);
        shape.ins.push(Ins {
            op: at::<u8>(p + IR_OP),
            t: at::<u8>(p + IR_TYPE),
            r: at::<u8>(p + 6),
            s: at::<u8>(p + 7),
            op1: at::<u16>(p + IR_OP1),
            op2: at::<u16>(p + IR_OP2),
        });
    }
    // Constants, from the lowest: 64-bit ones take the next slot too.
    let mut r = nk;
    while r < REF_BIAS {
        let p = ins_at(r);
        let op = at::<u8>(p + IR_OP);
        if op == IR_KGC && at::<u8>(p + IR_TYPE) & 0x1f == IRT_FUNC {
            shape.functions.push(at::<u64>(p + IR_SIZE) as usize);
        }
        if op == IR_KGC && at::<u8>(p + IR_TYPE) & 0x1f == IRT_PROTO {
            shape.protos.push(at::<u64>(p + IR_SIZE) as usize + PROTO_SIZE);
        }
        r += if matches!(op, IR_KGC | IR_KPTR | IR_KKPTR | IR_KNUM | IR_KINT64) { 2 } else { 1 };
    }
    let constant = |r: usize| -> usize {
        let p = ins_at(r);
        if r != 0 && r < REF_BIAS && at::<u8>(p + IR_OP) == IR_KGC {
            at::<u64>(p + IR_SIZE) as usize
        } else {
            0
        }
    };
    let nsnap = at::<u16>(tr + TRACE_NSNAP) as usize;
    let (snaps, snapmap) = (at::<usize>(tr + TRACE_SNAP), at::<usize>(tr + TRACE_SNAPMAP));
    for k in 0..nsnap {
        let s = snaps + k * SNAP_SIZE;
        let map = snapmap + 4 * at::<u32>(s + SNAP_MAPOFS) as usize;
        let snap_ref = at::<u16>(s + SNAP_REF) as usize;
        let mut snap = Snap { ir_ref: snap_ref as u32, mcofs: at::<u16>(s + SNAP_MCOFS) as u32, ..Snap::default() };
        let mut prev = (usize::MAX, 0usize);
        for i in 0..at::<u8>(s + SNAP_NENT) as usize {
            let e = at::<u32>(map + 4 * i);
            let (slot, r) = ((e >> 24) as usize, (e & 0xFFFF) as usize);
            if slot == 0 {
                snap.base = constant(r);
            } else if e & SNAP_FRAME != 0 && slot >= 2 {
                let f = if prev.0 == slot - 1 { constant(prev.1) } else { 0 };
                let checked = if prev.0 == slot - 1 && f == 0 {
                    checked_proto(ir, nk, prev.1, snap_ref).map_or(0, |pt| pt + PROTO_SIZE)
                } else {
                    0
                };
                snap.inlined.push(f);
                snap.checked.push(checked);
            }
            prev = (slot, r);
        }
        shape.snaps.push(snap);
    }
    // The machine code, decoded where the decoder reads it (x86-64): its
    // calls are named by the instructions that made them, and with the
    // decoded placement its anchors place the rest.
    shape.anchored = DECODED.load(Ordering::Relaxed);
    if cfg!(target_arch = "x86_64") {
        let mcode = at::<usize>(tr + TRACE_MCODE);
        if mcode != 0 && shape.szmcode > 0 {
            // SAFETY: a committed trace's machine code, `szmcode` bytes at
            // `mcode`, mapped readable and not being patched (the VM is in
            // the event that reports its commit, on this thread).
            let bytes = std::slice::from_raw_parts(mcode as *const u8, shape.szmcode as usize);
            shape.code = super::code_anchors::decode(bytes, mcode as u64);
        }
    }
    shape
}

/// Whether the sessions attached since the environment's
/// `TECS_PROFILE_PLACEMENT` said `decoded` place code by the decoded
/// machine code (read at each attach, so a process can measure both).
/// Off by default: on the loops of `spec/fixtures/proto_callees.lua` the
/// decoded boundaries gave a shared method 15 to 33 points over its truth
/// where the fitted sizes were within 4 (BENCHMARKS.md, "Inside a trace").
static DECODED: AtomicBool = AtomicBool::new(false);

/// Builds and publishes the map of the trace `t` just committed, from the
/// log of its recording.
fn publish(t: usize, log: &[Recorded]) {
    let Some((tr, h)) = trace_header(t) else { return };
    if t >= TRACE_CACHE || log.is_empty() || tr == J_AT.load(Ordering::Relaxed) {
        UNMAPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: `tr` is the trace the VM committed just now, on this thread.
    let shape = unsafe { shape_of(tr) };
    let map = fine_map::build(log, &shape);
    let p = Box::into_raw(Box::new(Published { tr, mcode: le(&h, TRACE_MCODE, 8) as usize, map }));
    free(MAPS[t].swap(p, Ordering::AcqRel));
    HIGHEST_MAPPED.fetch_max(t, Ordering::Relaxed);
    MAPPED.fetch_add(1, Ordering::Relaxed);
}

// -- The event handlers -----------------------------------------------------

/// Calls the handler this one replaced (its upvalue) with the event's
/// arguments, when there is one.
///
/// # Safety
/// Inside a C function LuaJIT called with `nargs` arguments.
unsafe fn chain(l: *mut ffi::lua_State, nargs: i32) {
    if ffi::lua_type(l, ffi::lua_upvalueindex(1)) != ffi::LUA_TFUNCTION {
        return;
    }
    ffi::lua_pushvalue(l, ffi::lua_upvalueindex(1));
    for i in 1..=nargs {
        ffi::lua_pushvalue(l, i);
    }
    ffi::lua_call(l, nargs, 0);
}

/// Puts the VM state `state` (the compiler's) back while a handler of ours
/// runs: LuaJIT sends `record` while recording, `stop` while assembling,
/// `start` and `abort` from the compiler, but the event's call makes the
/// state C, and this handler's time is the compiler's, as LuaJIT counts
/// it, not a C function's of the program. (`flush` comes from the
/// program's `jit.flush` too, and keeps C.)
///
/// # Safety
/// On the VM thread, inside one of our event handlers.
unsafe fn compiler_state(state: i32) {
    let at = VMSTATE_AT.load(Ordering::Relaxed);
    if at != 0 {
        std::ptr::write_volatile(at as *mut i32, state);
    }
}

/// The `record` event: (trace number, function, bytecode position, depth).
///
/// # Safety
/// Called by LuaJIT as a Lua C function, on the VM thread, with the
/// event's arguments on the stack; the VM is recording the trace `J->cur`.
unsafe extern "C-unwind" fn on_record(l: *mut ffi::lua_State) -> i32 {
    let nargs = ffi::lua_gettop(l);
    RECORD_EVENT_SENT.store(true, Ordering::Relaxed);
    compiler_state(VMSTATE_RECORD);
    let j = J_AT.load(Ordering::Relaxed);
    if LOGGING.load(Ordering::Acquire) && j != 0 && nargs >= 4 {
        let t = ffi::lua_tonumber(l, 1) as usize;
        let func = ffi::lua_topointer(l, 2) as usize;
        let pos = ffi::lua_tonumber(l, 3) as i64;
        let depth = ffi::lua_tonumber(l, 4) as i32;
        // SAFETY: `j` is the VM's jit_State (found by the probe); its first
        // member is the trace being recorded.
        if at::<u16>(j + TRACE_TRACENO) as usize == t {
            let nins = at::<u32>(j + TRACE_NINS);
            let lua_fn = func != 0 && at::<u8>(func + OBJ_GCT) == GCT_FUNC && at::<u8>(func + FN_FFID) == FF_LUA;
            let bc = if lua_fn { at::<usize>(func + FN_PC) } else { 0 };
            let ins = if bc != 0 && pos >= 0 { bc + 4 * (pos as usize + 1) } else { 0 };
            let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
            if log.trace == t {
                log.entries.push(Recorded { func, bc, ins, depth, nins });
            }
        }
    }
    chain(l, nargs);
    0
}

/// The `trace` event: ("start" | "stop" | "abort" | "flush", trace, ...).
///
/// # Safety
/// Called by LuaJIT as a Lua C function, on the VM thread, with the
/// event's arguments on the stack.
unsafe extern "C-unwind" fn on_trace(l: *mut ffi::lua_State) -> i32 {
    let nargs = ffi::lua_gettop(l);
    // Every trace event begins or ends a recording (`start`, `stop`,
    // `abort`, `flush`).
    RECORD_EVENT_SENT.store(false, Ordering::Relaxed);
    if LOGGING.load(Ordering::Acquire) && nargs >= 1 {
        let mut len = 0usize;
        let s = ffi::lua_tolstring(l, 1, &mut len);
        // SAFETY: lua_tolstring's bytes stay valid while the string is on
        // the stack, which is until this function returns.
        let what = if s.is_null() { &[][..] } else { std::slice::from_raw_parts(s as *const u8, len) };
        let t = if nargs >= 2 { ffi::lua_tonumber(l, 2) as usize } else { 0 };
        match what {
            b"stop" => compiler_state(VMSTATE_ASM),
            b"start" | b"abort" => compiler_state(VMSTATE_RECORD),
            _ => {}
        }
        let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
        match what {
            b"start" => {
                withdraw(t);
                log.trace = t;
                log.entries.clear();
            }
            b"stop" if log.trace == t => {
                let entries = std::mem::take(&mut log.entries);
                log.trace = 0;
                drop(log);
                publish(t, &entries);
                let mut entries = entries;
                entries.clear();
                LOG.lock().unwrap_or_else(|e| e.into_inner()).entries = entries;
            }
            b"stop" => {
                UNMAPPED.fetch_add(1, Ordering::Relaxed);
            }
            b"abort" => {
                log.trace = 0;
                log.entries.clear();
            }
            b"flush" => withdraw_all(),
            _ => {}
        }
    }
    chain(l, nargs);
    0
}

// -- Attaching and detaching ------------------------------------------------

/// Where our handlers were attached, and what they replaced.
struct Attached {
    record: mlua::Function,
    trace: mlua::Function,
    previous: [mlua::Value; 2],
}

// SAFETY: only used on the thread of the VM the functions belong to (a
// session starts and stops on it); the Mutex only guards against reentry.
unsafe impl Send for Attached {}

static ATTACHED: Mutex<Option<Attached>> = Mutex::new(None);

/// One of our handlers, with `previous` (the handler attached to the event
/// now, or nil) as its upvalue.
fn handler(lua: &Lua, f: ffi::lua_CFunction, previous: &mlua::Value) -> mlua::Result<mlua::Function> {
    // SAFETY: exec_raw hands a valid state with `previous` pushed; the
    // closure takes it as its upvalue and is left as the result.
    unsafe { lua.exec_raw::<mlua::Function>(previous, |l| ffi::lua_pushcclosure(l, f, 1)) }
}

/// The key of `event`'s handler in the VM's event table (`_VMEVENTS`), as
/// `jit.attach` computes it.
fn event_key(event: &str) -> i64 {
    let mut h = event.len() as u32;
    for &b in event.as_bytes() {
        h ^= h.rotate_left(6).wrapping_add(b as u32);
    }
    (h << 3) as i32 as i64
}

/// The handler attached to `event` now, or nil.
fn current(lua: &Lua, event: &str) -> mlua::Value {
    let events: Option<mlua::Table> = lua.named_registry_value("_VMEVENTS").ok().flatten();
    events.and_then(|t| t.raw_get(event_key(event)).ok()).unwrap_or(mlua::Value::Nil)
}

/// `v`, or the handler it calls after it when `v` is our handler `f`.
fn passed_over(lua: &Lua, v: mlua::Value, f: ffi::lua_CFunction) -> mlua::Value {
    let mlua::Value::Function(_) = &v else { return v };
    // SAFETY: exec_raw hands a valid state with `v` at index 1, the
    // result; a closure of `f` has one upvalue, which replaces it.
    let r = unsafe {
        lua.exec_raw::<mlua::Value>(&v, |l| {
            let ours = ffi::lua_tocfunction(l, 1).map(|g| g as usize) == Some(f as usize);
            if ours && !ffi::lua_getupvalue(l, 1, 1).is_null() {
                ffi::lua_replace(l, 1);
            }
        })
    };
    r.unwrap_or(v)
}

/// Attaches the logger for a session reading compiled code. With `flush`,
/// every trace is flushed, so that the traces the program runs are recorded
/// again with a log. Returns why not when the VM has no event API.
pub fn attach(lua: &Lua, flush: bool) -> Result<(), &'static str> {
    detach(lua);
    let jit: mlua::Table = lua.globals().get("jit").map_err(|_| "LuaJIT's jit module is not available")?;
    let run = || -> mlua::Result<Attached> {
        // One of ours left attached (a handler attached after an earlier
        // session's, then put back) is passed over: its own previous one
        // is what the event had.
        let previous =
            [passed_over(lua, current(lua, "record"), on_record), passed_over(lua, current(lua, "trace"), on_trace)];
        // Passed by reference: a clone of a handle to a Lua value makes
        // mlua allocate a shared count for it.
        let record = handler(lua, on_record, &previous[0])?;
        let trace = handler(lua, on_trace, &previous[1])?;
        let attach: mlua::Function = jit.get("attach")?;
        attach.call::<()>((&record, "record"))?;
        attach.call::<()>((&trace, "trace"))?;
        Ok(Attached { record, trace, previous })
    };
    withdraw_all();
    DECODED.store(std::env::var_os("TECS_PROFILE_PLACEMENT").is_some_and(|v| v == "decoded"), Ordering::Relaxed);
    for c in [&MAPPED, &UNMAPPED, &PLACED, &AT_SNAPSHOT, &NO_MAP] {
        c.store(0, Ordering::Relaxed);
    }
    *LOG.lock().unwrap_or_else(|e| e.into_inner()) = Log { trace: 0, entries: Vec::new() };
    let a = run().map_err(|_| "the VM's event handlers could not be attached (jit.attach)")?;
    *ATTACHED.lock().unwrap_or_else(|e| e.into_inner()) = Some(a);
    LOGGING.store(true, Ordering::Release);
    if flush {
        if let Ok(f) = jit.get::<mlua::Function>("flush") {
            let _ = f.call::<()>(());
        }
    }
    Ok(())
}

/// Detaches the logger, puts back the handlers it replaced (where the
/// event still holds ours), and frees every map.
pub fn detach(lua: &Lua) {
    LOGGING.store(false, Ordering::Release);
    RECORD_EVENT_SENT.store(false, Ordering::Relaxed);
    let a = ATTACHED.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(a) = a {
        let _ = (|| -> mlua::Result<()> {
            let jit: mlua::Table = lua.globals().get("jit")?;
            let attach: mlua::Function = jit.get("attach")?;
            for ((ours, event), previous) in [(&a.record, "record"), (&a.trace, "trace")].into_iter().zip(a.previous) {
                // A handler attached after ours stays (it may call ours,
                // which then only passes the event on).
                let holds = matches!(current(lua, event), mlua::Value::Function(f) if f == *ours);
                if holds {
                    attach.call::<()>(ours)?;
                    if let mlua::Value::Function(_) = previous {
                        attach.call::<()>((previous, event))?;
                    }
                }
            }
            Ok(())
        })();
    }
    withdraw_all();
    *LOG.lock().unwrap_or_else(|e| e.into_inner()) = Log { trace: 0, entries: Vec::new() };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program with loops, side traces, inlined calls, C calls and
    /// aborted recordings; run after a flush, it returns its result and what the
    /// JIT compiler did (an observer on the `trace` event, attached before
    /// the logger, which then passes the event on to it).
    const PROGRAM: &str = r#"
        local util = require("jit.util")
        local events = {}
        -- Without trace numbers, and sorted: an aborted recording is retried
        -- after a random penalty (LuaJIT's PRNG, seeded per VM), so the
        -- order in which two hot spots are recorded varies from VM to VM.
        local start_pc = {}
        jit.attach(function(what, tr, func, pc, code)
          local e
          if what == "start" then
            start_pc[tr] = pc
          elseif what == "stop" then
            local ti = util.traceinfo(tr)
            e = "trace at " .. start_pc[tr] .. ": " .. ti.linktype .. ", " .. ti.nins .. " IR, " .. ti.nexit .. " exits"
          elseif what == "abort" then
            e = "abort at " .. start_pc[tr] .. ", pc " .. pc .. ": " .. tostring(code)
          end
          if e then events[#events + 1] = e end
        end, "trace")
        local function mix(x) local y = x * 1.0000001 + 0.25 return y * 0.9999999 + 0.125 end
        local function program()
          local t, acc = {}, 0
          for i = 1, 3000 do t[i] = (i * 7919) % 1009 end
          for r = 1, 30 do
            for i = 1, #t do
              local v = t[i]
              if v % 3 == 0 then acc = acc + v elseif v % 5 == 0 then acc = acc - v * 0.5 else acc = mix(acc) end
            end
            acc = acc + #tostring(acc) + #string.format("%d", r)
            for _, v in ipairs({ 1, 2, r }) do acc = acc + v end
            if r % 7 == 0 then acc = acc + #debug.traceback("x") end
          end
          -- A closure made in a loop: NYI, the recording aborts. Once only:
          -- the retry comes after a random penalty, more than the 40
          -- iterations left.
          local fns = {}
          for i = 1, 60 do fns[i] = function() return i end end
          return acc + fns[7]()
        end
        return function()
          jit.flush()
          events = {}
          local result = program()
          table.sort(events)
          return tostring(result) .. "\n" .. table.concat(events, "\n")
        end
    "#;

    /// Runs `PROGRAM` in a VM of its own, with the logger attached or not;
    /// returns what it printed and the logger's counts.
    fn run_program(logged: bool) -> (String, [u64; 5]) {
        // SAFETY: every standard library loaded, as in a program's VM; none
        // is used unsafely here.
        let lua = unsafe { Lua::unsafe_new() };
        assert_eq!(prove(&lua), Ok(()));
        let run: mlua::Function = lua.load(PROGRAM).set_name("=program").call(()).unwrap();
        if logged {
            attach(&lua, true).unwrap();
        }
        let out: String = run.call(()).unwrap();
        let counts = map_counts();
        detach(&lua);
        (out, counts)
    }

    #[test]
    fn a_handler_of_an_earlier_session_put_back_is_passed_over() {
        let _turn = crate::sys::one_session_at_a_time();
        // SAFETY: every standard library loaded, as in a program's VM; none
        // is used unsafely here.
        let lua = unsafe { Lua::unsafe_new() };
        assert_eq!(prove(&lua), Ok(()));
        let mine = lua.create_function(|_, ()| Ok(())).unwrap();
        let jit: mlua::Table = lua.globals().get("jit").unwrap();
        let attach: mlua::Function = jit.get("attach").unwrap();
        attach.call::<()>((mine.clone(), "record")).unwrap();
        attach_logger(&lua, false).unwrap();
        // A handler attached after ours, which keeps ours to call and puts
        // it back when it goes (as a trace session does).
        let ours = current(&lua, "record");
        let later = lua.create_function(|_, ()| Ok(())).unwrap();
        attach.call::<()>((later.clone(), "record")).unwrap();
        detach_logger(&lua);
        attach.call::<()>(later).unwrap();
        attach.call::<()>((ours.clone(), "record")).unwrap();
        attach_logger(&lua, false).unwrap();
        let a = ATTACHED.lock().unwrap().as_ref().map(|a| a.previous[0].clone()).unwrap();
        assert!(
            matches!(&a, mlua::Value::Function(f) if *f == mine),
            "the new logger calls {a:?}, not the first handler"
        );
        detach_logger(&lua);
        assert!(matches!(current(&lua, "record"), mlua::Value::Function(f) if f == mine));
    }

    #[test]
    fn the_logger_changes_no_result_and_no_decision_of_the_jit_compiler() {
        let _turn = crate::sys::one_session_at_a_time();
        let (plain, _) = run_program(false);
        let (logged, counts) = run_program(true);
        let (again, _) = run_program(false);
        assert!(plain.lines().count() > 8, "{plain}");
        assert!(plain.contains("\nabort ") && plain.contains("\ntrace "), "{plain}");
        assert_eq!(plain, again, "the program is not deterministic without the logger");
        assert_eq!(plain, logged, "the logger changed what the JIT compiler did");
        assert!(counts[0] > 0, "no trace was mapped: {counts:?}");
        // A trace that ends before its first bytecode is recorded has no log.
        assert!(counts[1] <= 1, "committed traces got no map: {counts:?}");
    }
}
