//! Names for the functions a session recorded: the Lua paths that reach
//! them (`love.graphics.points` for a C function LuaJIT's stack dump gives
//! as an address, `love.update` for a Lua function its caller called
//! `update`), and the recorded table for tests and diagnostics
//! (`frameFunctions`).
//!
//! The paths come from one walk of the program's modules, made by the
//! state's path finder (`tecs.profile.cfuncs`, set with
//! `native.raw.setFunctionPaths`). Every view of a session, running or
//! stopped (the report, the live page's snapshot, a delta, a timeline),
//! asks [`NativeSession::name_new_functions`] first, so that all of them
//! name a function the same way. A walk runs only when the session has
//! recorded a function no walk has looked for yet: a running session
//! viewed once a second walks while new functions turn up, not each time.
//! The walk is the profiler's work, not the program's: the session is
//! paused while it runs, and it waits while an allocation session records
//! (whose counts would take in its allocations).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use mlua::{Lua, Table};

use super::NativeSession;
use crate::profile::frames::FrameIdentity;
use crate::record::alloc_hook;
use crate::session::state::StrippedFunction;
use crate::sys;

/// The registry field holding the state's path finder.
const PATH_FINDER: &str = "tecs.profile.function_paths";

/// `native.raw.setFunctionPaths(finder)`: sets the function the sessions
/// of this state ask for Lua paths. `finder()` returns the C functions
/// reachable by a path, `{ {path, fn}, ... }`, and the Lua functions, `{
/// {path, short_src, linedefined, lastlinedefined}, ... }`, each under the
/// first path that reaches it.
pub(super) fn set_function_paths(lua: &Lua, finder: mlua::Function) -> mlua::Result<()> {
    lua.set_named_registry_value(PATH_FINDER, finder)
}

impl NativeSession {
    /// Asks the path finder for the paths of the functions recorded since
    /// the last walk, if any were (see the module's documentation). Runs
    /// Lua code, so never inside `sampler.with`. A finder that fails names
    /// nothing and is not asked again for these functions.
    pub(super) fn name_new_functions(&mut self, lua: &Lua) {
        // A kept profile was built after the last walk this session needs.
        if self.state.finished.is_some() {
            return;
        }
        let paths = &self.state.paths;
        let c_new = self.session.sampler().with(|s| paths.c_addresses_not_looked_for(&s.table));
        let ids = self.session.sampler().with(|s| s.identities.snapshot());
        let (lua_new, stripped_new) = (paths.lua_functions_not_looked_for(&ids), paths.stripped_not_looked_for(&ids));
        if c_new.is_empty() && lua_new.is_empty() && stripped_new.is_empty() {
            return;
        }
        // While an allocation session records in this state, the walk's own
        // allocations would be counted in it: the names wait for its stop.
        if sys::VmHandle::of(lua).is_ok_and(alloc_hook::wrapper_installed) {
            return;
        }
        let Ok(finder) = lua.named_registry_value::<mlua::Function>(PATH_FINDER) else { return };
        // The walk is the profiler's work: the session is paused while it
        // runs, so that neither its time nor its allocations are recorded
        // (they count as paused samples).
        let was_paused = self.session.sampler().with(|s| s.paused.swap(true, Ordering::Relaxed));
        let found = finder.call::<(Option<Table>, Option<Table>)>(());
        if !was_paused {
            self.session.sampler().with(|s| s.paused.store(false, Ordering::Relaxed));
        }
        if let Ok((c_list, lua_list)) = found {
            if let Some(list) = c_list {
                let _ = self.name_c_functions(lua, list);
            }
            if let Some(list) = lua_list {
                let _ = self.name_lua_functions(list);
            }
        }
        self.state.paths.looked_for(c_new, lua_new, stripped_new);
    }

    /// Asks the path finder for every C function reachable now, recorded
    /// or not (for a writer that cannot ask later: see `autosave`).
    pub(super) fn name_every_c_function(&mut self, lua: &Lua) {
        let Ok(finder) = lua.named_registry_value::<mlua::Function>(PATH_FINDER) else { return };
        let was_paused = self.session.sampler().with(|s| s.paused.swap(true, Ordering::Relaxed));
        let found = finder.call::<(Option<Table>, Option<Table>)>(());
        if !was_paused {
            self.session.sampler().with(|s| s.paused.store(false, Ordering::Relaxed));
        }
        if let Ok((Some(list), _)) = found {
            let _ = self.name_c_functions(lua, list);
        }
    }

    /// Records the Lua paths of C functions: `list` is `{ {path, fn}, ...
    /// }`, the first path of a function wins (see
    /// `FunctionPaths::name_c_functions`). Names change, so a kept profile
    /// is built again.
    fn name_c_functions(&mut self, lua: &Lua, list: Table) -> mlua::Result<()> {
        let mut found = Vec::new();
        let mut failed = Ok(());
        for entry in list.sequence_values::<Table>() {
            let step = entry.and_then(|entry| {
                let (Ok(path), Ok(f)) = (entry.raw_get::<String>(1), entry.raw_get::<mlua::Function>(2)) else {
                    return Ok(());
                };
                if let Some(addr) = sys::c_function_address(lua, &f)? {
                    found.push((addr, f.to_pointer() as usize, path));
                }
                Ok(())
            });
            if step.is_err() {
                failed = step;
                break;
            }
        }
        if self.state.paths.name_c_functions(found) {
            self.state.names_changed();
        }
        failed
    }

    /// Records the Lua paths of Lua functions: `list` is `{ {path,
    /// short_src, linedefined, lastlinedefined}, ... }`, first path wins;
    /// a function of bytecode without lines comes with itself, `{path or
    /// false, short_src, first, last, fn}` (its lines in its source file),
    /// and is known by its prototype. (They name the recorded functions,
    /// not the profile's frames: a kept profile stays.)
    fn name_lua_functions(&mut self, list: Table) -> mlua::Result<()> {
        let mut found = Vec::new();
        let mut stripped = Vec::new();
        let mut failed = Ok(());
        for entry in list.sequence_values::<Table>() {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    failed = Err(e);
                    break;
                }
            };
            if let Ok(f) = entry.raw_get::<mlua::Function>(5) {
                if let (Some(pt), Ok(first), Ok(last)) =
                    (sys::stripped_proto(&f), entry.raw_get::<u32>(3), entry.raw_get::<u32>(4))
                {
                    let path = entry.raw_get::<Option<String>>(1).ok().flatten();
                    stripped.push((pt as u64, StrippedFunction { path, first, last }));
                }
                continue;
            }
            if let (Ok(path), Ok(src), Ok(first), Ok(last)) = (
                entry.raw_get::<String>(1),
                entry.raw_get::<String>(2),
                entry.raw_get::<u32>(3),
                entry.raw_get::<u32>(4),
            ) {
                found.push((path, src, first, last));
            }
        }
        self.state.paths.name_lua_functions(found);
        self.state.paths.name_stripped(stripped);
        failed
    }

    /// The recorded function of each frame, named by its Lua path where a
    /// walk found one.
    pub(super) fn frame_identities(&self) -> HashMap<String, FrameIdentity> {
        let mut ids = self.session.sampler().with(|s| s.identities.snapshot());
        self.state.paths.name_identities(&mut ids);
        ids
    }

    /// `{ [frame] = { first, last, name, source, ambiguous } }`.
    pub(super) fn frame_functions_table(&self, lua: &Lua) -> mlua::Result<Table> {
        let t = lua.create_table()?;
        for (frame, id) in self.frame_identities() {
            let e = lua.create_table()?;
            e.set("first", id.first)?;
            e.set("last", id.last)?;
            e.set("name", id.name)?;
            e.set("source", id.source)?;
            e.set("ambiguous", id.ambiguous)?;
            t.set(frame, e)?;
        }
        Ok(t)
    }
}
