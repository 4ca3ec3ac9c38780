//! Allocation sessions (`profile.allocations`): a sampling session whose
//! samples are triggered by bytes allocated instead of a timer (see
//! `record::alloc_hook`). The stack table counts samples, each standing for
//! `bytesPerSample` bytes on average; every profile and output of such a
//! session is in bytes (the counts times `bytesPerSample`).

use mlua::{Lua, Table, Value};

use super::options::{self, opt, setting, Check, Declared, DefaultValue, StartOptions};
use super::{runtime, NativeSession};
use crate::profile::Profile;
use crate::record::alloc_hook::Restored;
use crate::session::{Plan, Session};

/// Bytes allocated per sample by default (`bytesPerSample`).
pub const DEFAULT_BYTES_PER_SAMPLE: u64 = 512 * 1024;

/// Sampled blocks tracked until freed, by default (`maxLiveBlocks`): none,
/// because tracking has the wrapper ask a filter on every free and every
/// `realloc` (docs/allocations.md, "What is still live").
pub const DEFAULT_MAX_LIVE_BLOCKS: u64 = 0;

/// The options of `profile.allocations` (docs/allocations.md).
pub const ALLOCATION_OPTIONS: &[Declared] = &[
    opt(
        "bytesPerSample",
        Check::Integer { lo: 64.0, hi: 1_073_741_824.0, expected: "an integer number of bytes from 64 to 1073741824" },
        DefaultValue::Number(DEFAULT_BYTES_PER_SAMPLE as f64),
        "mean bytes allocated between two samples; each sample charges that many bytes to its stack",
    ),
    options::ZONE,
    options::STACK_DEPTH,
    options::PRECISION,
    options::MAX_STACKS,
    options::RESOLVE_C,
    options::FORMAT,
    opt(
        "maxLiveBlocks",
        Check::Integer { lo: 0.0, hi: 16_777_216.0, expected: "an integer from 0 to 16777216" },
        DefaultValue::Number(DEFAULT_MAX_LIVE_BLOCKS as f64),
        "sampled blocks tracked until freed, for live() and pprof's inuse values; 0 for none",
    ),
];

/// Reads and checks `startAllocations(opts, env)`: the sampler's options,
/// the bytes per sample and the live blocks tracked at most.
fn read_options(opts: &Value, env: &Value) -> Result<(StartOptions, u64, usize), String> {
    let mut o = options::read_start_options(ALLOCATION_OPTIONS, opts, env)?;
    // LuaJIT's own timer: the allocator wrapper passes the samples on.
    o.env.precise = false;
    let t = if let Value::Table(t) = opts { Some(t) } else { None };
    let number = |name| setting(ALLOCATION_OPTIONS, t, name).number().unwrap_or_default();
    Ok((o, number("bytesPerSample") as u64, number("maxLiveBlocks") as usize))
}

/// `native.raw.startAllocations(opts, env)`: a session handle and the
/// settings it runs with (defaults filled in).
pub(super) fn start_raw(lua: &Lua, (opts, env): (Value, Value)) -> mlua::Result<(mlua::AnyUserData, Table)> {
    let (o, bytes_per_sample, max_live) = read_options(&opts, &env).map_err(runtime)?;
    let given = if let Value::Table(t) = &opts { Some(t) } else { None };
    let settings = options::settings_table(lua, ALLOCATION_OPTIONS, given)?;
    let max_stacks = o.max_stacks;
    // Beside a sampling session of this VM, the session attaches to it:
    // LuaJIT has one profiler, and that session holds it.
    let native = match Session::attach(lua, attached_plan(&o, bytes_per_sample))? {
        Some(attached) => NativeSession::new(attached, &o),
        None => super::start::start(lua, o, Some(bytes_per_sample))?,
    };
    // The wrapper goes in once the session is a Lua value (see
    // `Session::install_allocator`).
    let ud = lua.create_userdata(native)?;
    ud.borrow_mut::<NativeSession>()?.session.install_allocator(lua, max_stacks, max_live)?;
    Ok((ud, settings))
}

/// The plan of a session attached to the sampling session of this VM: its
/// samples go on a timeline of their own, which the sampling session's
/// timeline reads (`allocation_points`).
fn attached_plan(o: &StartOptions, bytes_per_sample: u64) -> Plan {
    Plan { timeline_samples: options::DEFAULT_TIMELINE_SAMPLES, ..o.plan(Some(bytes_per_sample)) }
}

impl NativeSession {
    /// The profile in samples rather than bytes: what the text views take,
    /// so that their sampling errors follow the number of samples.
    pub(super) fn sample_profile(&self) -> Profile {
        self.view().sample_profile()
    }

    /// `handle:objectProfile()`: the estimated objects allocated per stack
    /// (rounded to whole objects), for an allocation session; nil for a
    /// sampling session.
    pub(super) fn object_profile(&self) -> Option<Profile> {
        self.objects_since(&[]).map(|(p, _)| p)
    }

    /// The estimated objects allocated per stack since `mark`, and the
    /// mark of now (see `SessionView::objects_since`).
    pub(super) fn objects_since(&self, mark: &[[f64; 5]]) -> Option<(Profile, Vec<[f64; 5]>)> {
        self.view().objects_since(mark)
    }

    /// `handle:liveProfiles()`: the bytes, the objects and the sample points
    /// of the tracked blocks not freed (at the stop, or now), per stack; nil
    /// for a sampling session or one that tracks no block (see
    /// `SessionView::live_profiles`).
    pub(super) fn live_profiles(&self) -> Option<(Profile, Profile, Profile)> {
        self.view().live_profiles()
    }

    /// `handle:allocStats()`: what the allocator wrapper counted, for an
    /// allocation session (nil for a sampling session).
    pub(super) fn alloc_stats(&self, lua: &Lua) -> mlua::Result<Option<Table>> {
        let Some(hook) = self.session.alloc_hook() else { return Ok(None) };
        let totals = hook.totals();
        let delivered = self.session.sampler().with(|s| s.stats.samples);
        let t = lua.create_table()?;
        t.set("bytesPerSample", self.session.bytes_per_sample().unwrap_or(0))?;
        t.set("allocatedBytes", totals.bytes)?;
        t.set("allocatedObjects", totals.objects)?;
        t.set("triggeredSamples", totals.samples)?;
        // The objects the samples stand for (`record::alloc_objects`), and
        // the standard error of that estimate.
        t.set("estimatedObjects", totals.estimated_objects)?;
        t.set("estimatedObjectsError", totals.estimated_objects_variance.sqrt())?;
        // Triggers LuaJIT has not handed to the callback yet (a `__gc`
        // finaliser or vmevent handler was running), or lost at the stop.
        t.set("pendingSamples", totals.samples.saturating_sub(delivered))?;
        // Sampled blocks not freed (`liveSamples` points on `liveBlocks`
        // blocks), and points whose blocks are not tracked: no room, or a
        // stack never given.
        if let Some((_, live)) = hook.live() {
            t.set("liveBlocks", live.blocks)?;
            t.set("liveSamples", live.points)?;
            t.set("liveDroppedSamples", live.dropped)?;
            t.set("liveTableBytes", hook.live_memory_bytes())?;
        }
        if let Some(r) = self.session.alloc_restored() {
            t.set("allocator", if r == Restored::Original { "restored" } else { "pass-through" })?;
        }
        Ok(Some(t))
    }
}

/// `native.raw._testWrapAllocator()`: wraps the VM's allocator in a
/// plain pass-through of another "library", as a test of what a stop does
/// when its wrapper is no longer the VM's allocator. Returns whether an
/// allocation session's wrapper was the allocator it wrapped. A native
/// function because nothing else can stand in: an FFI callback cannot be
/// an allocator (it would run Lua inside the allocator), and test-only
/// Rust code is not in the module Lua loads.
pub(super) fn test_wrap_allocator(lua: &Lua, (): ()) -> mlua::Result<bool> {
    let vm = crate::sys::VmHandle::of(lua)?;
    Ok(crate::record::alloc_hook::wrap_in_pass_through(vm))
}

/// `native.raw._testAllocatorWrapped()`: whether an allocation session's
/// wrapper is the VM's allocator now.
pub(super) fn test_allocator_wrapped(lua: &Lua, (): ()) -> mlua::Result<bool> {
    let vm = crate::sys::VmHandle::of(lua)?;
    Ok(crate::record::alloc_hook::wrapper_installed(vm))
}
