//! Starting a session from Lua: the options read and checked
//! (`options`), turned into the session's typed plan, and the started
//! [`Session`] wrapped in the value Lua holds. The start itself, its order
//! and its guards are `crate::session`'s.

use mlua::{Lua, Table, Value};

use super::options::{self, StartOptions};
use super::{runtime, NativeSession, SAMPLE_OPTIONS};
use crate::session::state::SessionState;
use crate::session::{Plan, Session};
use crate::sys;

/// `native.raw.start(opts, env)`: a session handle and the settings it runs
/// with (every option of `profile.sample`, defaults filled in).
pub(super) fn start_raw(lua: &Lua, (opts, env): (Value, Value)) -> mlua::Result<(NativeSession, Table)> {
    let o = options::read_options(&opts, &env).map_err(runtime)?;
    let given = if let Value::Table(t) = &opts { Some(t) } else { None };
    let settings = options::settings_table(lua, SAMPLE_OPTIONS, given)?;
    Ok((start(lua, o, None)?, settings))
}

/// Starts a session. With `bytes_per_sample`, an allocation session: no
/// timer, allocations trigger the samples.
pub(super) fn start(lua: &Lua, o: StartOptions, bytes_per_sample: Option<u64>) -> mlua::Result<NativeSession> {
    let session = Session::start(lua, o.plan(bytes_per_sample))?;
    Ok(NativeSession::new(session, &o))
}

impl StartOptions {
    /// The plan of a session started with these options.
    pub(super) fn plan(&self, bytes_per_sample: Option<u64>) -> Plan {
        Plan {
            interval_ns: self.interval_ns,
            clock: self.clock,
            precision: self.precision,
            flush_traces: self.flush_traces,
            native_frames: self.native_frames,
            depth: self.depth,
            filter: self.filter.clone(),
            max_stacks: self.max_stacks,
            skip_starting_thread: self.skip_starting_thread,
            skip_thread: self.skip_thread.clone(),
            timeline_samples: self.timeline_samples,
            zones: self.env.zones.clone(),
            own_ticks: self.env.precise,
            bytes_per_sample,
        }
    }
}

impl NativeSession {
    /// The Lua value of `session`, started with `o`.
    pub(super) fn new(session: Session, o: &StartOptions) -> NativeSession {
        let state = SessionState::new(o.env.ffnames.clone(), o.resolve_c, sys::monotonic_ns(), o.slow_frame_ns);
        NativeSession { session, state, call_site: o.env.call_site.clone() }
    }
}
