//! What a session asks of the platform, in one interface: the start and
//! stop in `session` are written once, with no `cfg`, against these
//! functions. On Linux they are the tick handler and tick sources of
//! `sys::posix`; elsewhere no per-thread tick source exists, so a session
//! always runs on LuaJIT's own timer and nothing here arms anything.

#[cfg(not(target_os = "linux"))]
pub(super) use elsewhere::*;
#[cfg(target_os = "linux")]
pub(super) use linux::*;

/// A CPU clock the session's timing reads: a POSIX clock id on Unix, a
/// thread id on Windows (0 for the whole process).
#[cfg(unix)]
pub(super) type CpuClock = libc::clockid_t;
#[cfg(windows)]
pub(super) type CpuClock = u32;
/// The whole process's CPU time, every thread.
#[cfg(unix)]
pub(super) const PROCESS_CPU_CLOCK: CpuClock = libc::CLOCK_PROCESS_CPUTIME_ID;
#[cfg(windows)]
pub(super) const PROCESS_CPU_CLOCK: CpuClock = 0;

/// The signal LuaJIT's own timer sends (SIGPROF) and the one perf events
/// trap with (SIGTRAP). Windows has no signals: LuaJIT's timer is a thread
/// that sets the VM's hook, and these are never sent.
#[cfg(unix)]
pub(super) const LUAJIT_TIMER_SIGNAL: i32 = libc::SIGPROF;
#[cfg(unix)]
pub(super) const TRAP_SIGNAL: i32 = libc::SIGTRAP;
#[cfg(windows)]
pub(super) const LUAJIT_TIMER_SIGNAL: i32 = -1;
#[cfg(windows)]
pub(super) const TRAP_SIGNAL: i32 = -2;

/// A tick source's kernel object, closed by [`close_source`] (none is made
/// elsewhere than Linux).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(super) enum SourceHandle {
    /// A perf event's descriptor.
    Fd(i32),
    /// Two perf events (task clock, context switches) of a wall-clock session.
    Fds(i32, i32),
    /// A POSIX timer.
    Timer(usize),
}

/// What the handler reads of the VM, armed with it: whether it notes the C
/// function each tick lands in, and whether it sets a profiler hook LuaJIT
/// lost again (or why not).
pub(super) struct VmReads {
    pub(super) running_c: Result<(), &'static str>,
    pub(super) lost_hook: Result<(), &'static str>,
}

/// What the tick handler counted since it was armed.
#[derive(Clone, Copy, Default)]
pub(super) struct HandlerCounts {
    /// Ticks passed on to LuaJIT.
    pub(super) passed: u64,
    /// Ticks refused: LuaJIT's profiler was no longer the session's.
    pub(super) refused: u64,
}

#[cfg(target_os = "linux")]
mod linux {
    use mlua::Lua;

    use super::{HandlerCounts, SourceHandle, VmReads};
    use crate::sys::posix;

    /// Whether a session can run on a tick source of its own.
    pub(in crate::session) const PER_THREAD_TICKS: bool = true;

    pub(in crate::session) fn unblock_signal(sig: i32) -> bool {
        posix::unblock_signal(sig)
    }

    pub(in crate::session) fn block_signal(sig: i32) {
        posix::block_signal(sig)
    }

    /// Whether `jit.p` or `jit.profile` seems to run (before our start).
    pub(in crate::session) fn foreign_sampler_active() -> bool {
        posix::foreign_sampler_active()
    }

    /// LuaJIT's own timer (ITIMER_PROF) at `ms`, as LuaJIT's start arms it.
    pub(in crate::session) fn arm_luajit_timer(ms: u64) {
        posix::arm_itimer_prof(ms)
    }

    pub(in crate::session) fn disarm_luajit_timer() {
        posix::disarm_itimer_prof()
    }

    /// The real-time signal of the tick handler, installed once; None when
    /// no real-time signal is free.
    pub(in crate::session) fn tick_signal() -> Option<i32> {
        posix::tick_signal()
    }

    /// Arms the tick handler for LuaJIT's profiler, which the VM at
    /// `vm_addr` just started with callback words `cb` and `data`; returns
    /// the VM's global state, or None when LuaJIT's profiler state could not
    /// be located.
    pub(in crate::session) fn arm_handler(start_addr: usize, vm_addr: usize, cb: usize, data: usize) -> Option<usize> {
        let profiler = posix::find_luajit_profiler(start_addr, vm_addr, cb, data)?;
        posix::arm_ticks(&profiler);
        Some(profiler.g)
    }

    /// From now on the handler ignores every tick (and reads nothing).
    pub(in crate::session) fn disarm_handler() {
        posix::disarm_ticks();
        crate::native_frames::disarm();
    }

    /// Arms what the handler reads of the VM whose global state is `g`.
    pub(in crate::session) fn arm_vm_reads(lua: &Lua, g: usize) -> VmReads {
        let running_c = posix::running_c::arm(lua, g);
        let lost_hook = match running_c {
            Ok(()) => posix::lost_hook::arm(lua, g, posix::running_c::is_gc64()),
            Err(_) => Err("the VM state at each tick is unknown (see cFunctionLeavesNote)"),
        };
        VmReads { running_c, lost_hook }
    }

    /// Proves that this build's traces can be read in the handler.
    /// Also learns what reading interpreted code needs (`interp_reads`
    /// says whether it is read).
    pub(in crate::session) fn prove_compiled(lua: &Lua) -> Result<(), &'static str> {
        crate::trace_decoder::prove(lua)?;
        let _ = crate::trace_decoder::learn_interp();
        Ok(())
    }

    /// Lets the handler read traces, `depth` frames deep, with the zone
    /// table at `zones` (0 for none).
    pub(in crate::session) fn arm_compiled(depth: usize, zones: usize) {
        crate::trace_decoder::reset_interp_counts();
        crate::trace_decoder::reset_state_counts();
        crate::trace_decoder::arm(depth, zones)
    }

    /// Attaches the VM event handlers that build each trace's fine map
    /// (`sys::fine_map`); with `flush`, flushes the traces compiled
    /// without one.
    pub(in crate::session) fn attach_fine_map(lua: &Lua, flush: bool) -> Result<(), &'static str> {
        crate::trace_decoder::attach_logger(lua, flush)
    }

    pub(in crate::session) fn detach_fine_map(lua: &Lua) {
        crate::trace_decoder::detach_logger(lua)
    }

    /// Traces mapped and not, and ticks placed by a map, at a snapshot, or
    /// with no map (`stats().traceMap`).
    pub(in crate::session) fn fine_map_counts() -> [u64; 5] {
        crate::trace_decoder::map_counts()
    }

    /// Samples read in the handler's traces and the ticks it left to the
    /// hook, by reason (named).
    pub(in crate::session) fn compiled_misses() -> Vec<(&'static str, u64)> {
        let (_, misses) = crate::trace_decoder::counts();
        crate::trace_decoder::MISS_NAMES.iter().copied().zip(misses).collect()
    }

    /// Samples read in traces with a frame named by its prototype, and
    /// samples named at the caller of a frame that could not be named.
    pub(in crate::session) fn compiled_frames() -> Vec<(&'static str, u64)> {
        crate::trace_decoder::frame_counts().to_vec()
    }

    /// Ticks in the collector or the compiler the handler left to the
    /// hook, by reason (named).
    pub(in crate::session) fn state_misses() -> Vec<(&'static str, u64)> {
        crate::trace_decoder::STATE_MISS_NAMES.iter().copied().zip(crate::trace_decoder::state_counts()).collect()
    }

    /// Ticks in interpreted code the handler left to the hook, by reason,
    /// and every tick it left to the hook, by VM state (named), then those
    /// it left while a control-channel wake waited (`wake`); or why
    /// interpreted code is not read.
    pub(in crate::session) fn interp_reads() -> Result<[Vec<(&'static str, u64)>; 2], &'static str> {
        crate::trace_decoder::interp_state()?;
        let (misses, hooked) = crate::trace_decoder::interp_counts();
        let mut by_state: Vec<_> = crate::trace_decoder::HOOK_STATE_NAMES.iter().copied().zip(hooked).collect();
        by_state.push(("wake", crate::trace_decoder::wake_ticks()));
        Ok([crate::trace_decoder::INTERP_MISS_NAMES.iter().copied().zip(misses).collect(), by_state])
    }

    /// The task-clock perf event (and, for wall-clock time, the
    /// context-switch event), or the errno that refused it.
    pub(in crate::session) fn open_perf(wall: bool, interval_ns: u64) -> Result<SourceHandle, i32> {
        if !wall {
            let cpu = posix::open_task_clock(interval_ns)?;
            posix::jitter::arm(posix::jitter::Retuned::PerfEvent(cpu), interval_ns);
            return Ok(SourceHandle::Fd(cpu));
        }
        posix::arm_blocked_ticks(interval_ns);
        let cpu = posix::open_task_clock(interval_ns)?;
        match posix::open_switch_trap() {
            Ok(switches) => {
                posix::jitter::arm(posix::jitter::Retuned::PerfEvent(cpu), interval_ns);
                Ok(SourceHandle::Fds(cpu, switches))
            }
            Err(e) => {
                posix::close_fd(cpu);
                Err(e)
            }
        }
    }

    /// A POSIX timer on the thread's CPU clock (or the monotonic clock for
    /// wall-clock time) that sends `signal` to the calling thread.
    pub(in crate::session) fn open_timer(wall: bool, signal: i32, interval_ns: u64) -> Option<SourceHandle> {
        let clock = if wall { posix::MONOTONIC } else { posix::THREAD_CPU };
        let timer = posix::create_thread_timer(clock, signal, interval_ns)?;
        posix::jitter::arm(posix::jitter::Retuned::Timer(timer), interval_ns);
        Some(SourceHandle::Timer(timer))
    }

    pub(in crate::session) fn close_source(h: SourceHandle) {
        posix::jitter::disarm();
        match h {
            SourceHandle::Fd(fd) => posix::close_fd(fd),
            SourceHandle::Fds(a, b) => {
                posix::close_fd(b);
                posix::close_fd(a);
            }
            SourceHandle::Timer(t) => posix::delete_timer(t),
        }
    }

    pub(in crate::session) fn handler_counts() -> HandlerCounts {
        let (passed, refused) = posix::tick_counts();
        HandlerCounts { passed, refused }
    }

    /// Ticks a wall-clock session charged for time off the CPU.
    pub(in crate::session) fn blocked_ticks() -> u64 {
        posix::blocked_ticks()
    }

    /// Profiler hooks the handler set again since it was armed.
    pub(in crate::session) fn hooks_rearmed() -> u64 {
        posix::lost_hook::hooks_rearmed()
    }

    /// Where the armed VM's hook mask is, if it was found (read it before
    /// the handler is disarmed).
    pub(in crate::session) fn hook_mask() -> Option<usize> {
        posix::lost_hook::mask_address()
    }

    /// Runs `stop` (LuaJIT's profiler stop) without its flush of every
    /// trace when the hook mask is known.
    pub(in crate::session) fn stop_keeping_traces(hook_mask: Option<usize>, stop: impl FnOnce()) {
        match hook_mask {
            Some(at) => posix::lost_hook::without_trace_flush(at, stop),
            None => stop(),
        }
    }

    /// Why the first callback turned the lost-hook guard off, if it did.
    pub(in crate::session) fn lost_hook_refused() -> Option<&'static str> {
        posix::lost_hook::refused_by_callback()
    }

    /// The calling thread's CPU clock, readable from other threads.
    pub(in crate::session) fn thread_cpu_clock() -> Option<libc::clockid_t> {
        posix::thread_cpu_clock()
    }

    pub(in crate::session) fn clock_ns(clock: libc::clockid_t) -> Option<u64> {
        posix::clock_ns(clock)
    }

    /// The real-time signals' range.
    pub(in crate::session) fn realtime_signals() -> Option<(i32, i32)> {
        Some((libc::SIGRTMIN(), libc::SIGRTMAX()))
    }
}

#[cfg(not(target_os = "linux"))]
mod elsewhere {
    use mlua::Lua;

    use super::{HandlerCounts, SourceHandle, VmReads};

    const NO_HANDLER: &str = "the tick source is LuaJIT's own timer";

    pub(in crate::session) const PER_THREAD_TICKS: bool = false;

    pub(in crate::session) fn unblock_signal(_sig: i32) -> bool {
        false
    }
    pub(in crate::session) fn block_signal(_sig: i32) {}
    pub(in crate::session) fn foreign_sampler_active() -> bool {
        false
    }
    pub(in crate::session) fn arm_luajit_timer(_ms: u64) {}
    pub(in crate::session) fn disarm_luajit_timer() {}
    pub(in crate::session) fn tick_signal() -> Option<i32> {
        None
    }
    pub(in crate::session) fn arm_handler(_start: usize, _vm: usize, _cb: usize, _data: usize) -> Option<usize> {
        None
    }
    pub(in crate::session) fn disarm_handler() {}
    pub(in crate::session) fn arm_vm_reads(_lua: &Lua, _g: usize) -> VmReads {
        VmReads { running_c: Err(NO_HANDLER), lost_hook: Err(NO_HANDLER) }
    }
    pub(in crate::session) fn prove_compiled(_lua: &Lua) -> Result<(), &'static str> {
        Err("compiled code is read in the handler only on x86-64 Linux")
    }
    pub(in crate::session) fn arm_compiled(_depth: usize, _zones: usize) {}
    pub(in crate::session) fn attach_fine_map(_lua: &Lua, _flush: bool) -> Result<(), &'static str> {
        Err("compiled code is not read in the tick handler")
    }
    pub(in crate::session) fn detach_fine_map(_lua: &Lua) {}
    pub(in crate::session) fn fine_map_counts() -> [u64; 5] {
        [0; 5]
    }
    pub(in crate::session) fn compiled_misses() -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    pub(in crate::session) fn compiled_frames() -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    pub(in crate::session) fn state_misses() -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    pub(in crate::session) fn interp_reads() -> Result<[Vec<(&'static str, u64)>; 2], &'static str> {
        Err("interpreted code is read in the handler only on x86-64 Linux")
    }
    pub(in crate::session) fn open_perf(_wall: bool, _interval_ns: u64) -> Result<SourceHandle, i32> {
        // No perf events here (never called: PER_THREAD_TICKS is false).
        #[cfg(unix)]
        return Err(libc::ENOTSUP);
        #[cfg(windows)]
        Err(50) // ERROR_NOT_SUPPORTED
    }
    pub(in crate::session) fn open_timer(_wall: bool, _signal: i32, _interval_ns: u64) -> Option<SourceHandle> {
        None
    }
    pub(in crate::session) fn close_source(_h: SourceHandle) {}
    pub(in crate::session) fn handler_counts() -> HandlerCounts {
        HandlerCounts::default()
    }
    pub(in crate::session) fn blocked_ticks() -> u64 {
        0
    }
    pub(in crate::session) fn hooks_rearmed() -> u64 {
        0
    }
    pub(in crate::session) fn hook_mask() -> Option<usize> {
        None
    }
    pub(in crate::session) fn stop_keeping_traces(_hook_mask: Option<usize>, stop: impl FnOnce()) {
        stop()
    }
    pub(in crate::session) fn lost_hook_refused() -> Option<&'static str> {
        None
    }
    pub(in crate::session) fn thread_cpu_clock() -> Option<super::CpuClock> {
        #[cfg(windows)]
        return Some(crate::sys::windows::current_thread_id());
        #[cfg(not(windows))]
        None
    }
    pub(in crate::session) fn clock_ns(clock: super::CpuClock) -> Option<u64> {
        #[cfg(windows)]
        return crate::sys::windows::cpu_ns(clock);
        #[cfg(not(windows))]
        {
            let _ = clock;
            None
        }
    }
    pub(in crate::session) fn realtime_signals() -> Option<(i32, i32)> {
        None
    }
}
