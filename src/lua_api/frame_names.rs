//! Names for the functions a session recorded while sampling: the Lua
//! paths that reach them (`nameLuaFunctions`, at stop), and the recorded
//! table for tests and diagnostics (`frameFunctions`).

use std::collections::HashMap;

use mlua::{Lua, Table};

use super::NativeSession;
use crate::record::identity::FrameIdentity;

impl NativeSession {
    /// Records the Lua paths of Lua functions: `list` is `{ {path,
    /// short_src, linedefined, lastlinedefined}, ... }`, first path wins.
    pub(super) fn name_lua_functions(&mut self, list: Table) -> mlua::Result<()> {
        for entry in list.sequence_values::<Table>() {
            let entry = entry?;
            let (Ok(path), Ok(src), Ok(first), Ok(last)) = (
                entry.raw_get::<String>(1),
                entry.raw_get::<String>(2),
                entry.raw_get::<u32>(3),
                entry.raw_get::<u32>(4),
            ) else {
                continue;
            };
            self.lua_paths.entry((src, first, last.max(first))).or_insert(path);
        }
        Ok(())
    }

    /// The recorded function of each frame, named by its Lua path where
    /// `nameLuaFunctions` found one.
    pub(super) fn frame_identities(&self) -> HashMap<String, FrameIdentity> {
        let mut ids = self.sampler.with(|s| s.identities.snapshot());
        if !self.lua_paths.is_empty() {
            for id in ids.values_mut() {
                if let Some(path) = self.lua_paths.get(&(id.source.clone(), id.first, id.last)) {
                    id.name = Some(path.clone());
                }
            }
        }
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
