//! The `jit.zone` stack, anchored in the registry and read with raw API
//! calls at every sample.

use std::ffi::c_int;

use mlua::ffi;
use mlua::Lua;

/// A registry-anchored private coroutine and the `jit.zone` table, read with
/// raw API calls only: no metamethods, no allocation, no Lua code.
pub struct ZoneAnchor {
    thread: *mut ffi::lua_State,
    thread_ref: c_int,
    table_ref: c_int,
    main: *mut ffi::lua_State,
}

impl ZoneAnchor {
    /// Anchors `zones` (the zone stack table) and a fresh coroutine.
    pub fn new(lua: &Lua, zones: &mlua::Table) -> mlua::Result<ZoneAnchor> {
        let mut anchor =
            ZoneAnchor { thread: std::ptr::null_mut(), thread_ref: 0, table_ref: 0, main: std::ptr::null_mut() };
        let out = &mut anchor;
        // SAFETY: exec_raw pushes `zones` at index 1 of a valid state; we pop
        // what we push and keep only registry references and the thread pointer,
        // which stays valid while its registry reference exists.
        unsafe {
            lua.exec_raw::<()>(zones, |l| {
                out.table_ref = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
                let t = ffi::lua_newthread(l);
                ffi::lua_checkstack(t, 8);
                out.thread_ref = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
                out.thread = t;
                out.main = l;
            })?;
        }
        Ok(anchor)
    }

    /// Appends the zone path (entries joined by `/`) to `out`; returns the
    /// number of entries. Non-string entries are written as `?`.
    #[inline]
    pub fn read_path(&self, out: &mut Vec<u8>, max_entries: usize) -> usize {
        let t = self.thread;
        // SAFETY: `t` is anchored in the registry; the raw reads push at most
        // two values (room was reserved with lua_checkstack) and the stack is
        // reset before returning. lua_tolstring is only called on strings, so
        // it never converts (and never allocates).
        unsafe {
            ffi::lua_rawgeti(t, ffi::LUA_REGISTRYINDEX, self.table_ref as ffi::lua_Integer);
            if ffi::lua_type(t, -1) != ffi::LUA_TTABLE {
                ffi::lua_settop(t, 0);
                return 0;
            }
            let n = ffi::lua_objlen(t, -1).min(max_entries);
            for i in 1..=n {
                if i > 1 {
                    out.push(b'/');
                }
                ffi::lua_rawgeti(t, -1, i as ffi::lua_Integer);
                if ffi::lua_type(t, -1) == ffi::LUA_TSTRING {
                    let mut len = 0usize;
                    let p = ffi::lua_tolstring(t, -1, &mut len);
                    out.extend_from_slice(std::slice::from_raw_parts(p as *const u8, len));
                } else {
                    out.push(b'?');
                }
                ffi::lua_settop(t, -2);
            }
            ffi::lua_settop(t, 0);
            n
        }
    }

    /// The zone table's address (what `lua_topointer` gives), which the
    /// tick handler reads.
    pub fn table_address(&self) -> usize {
        // SAFETY: as in `read_path`: one raw push and pop on the anchored
        // thread, which has room for it.
        unsafe {
            ffi::lua_rawgeti(self.thread, ffi::LUA_REGISTRYINDEX, self.table_ref as ffi::lua_Integer);
            let p = ffi::lua_topointer(self.thread, -1) as usize;
            ffi::lua_settop(self.thread, 0);
            p
        }
    }

    /// Releases the registry references. Must run while the state is open.
    pub fn release(&mut self, lua: &Lua) {
        if self.main.is_null() {
            return;
        }
        let (a, b) = (self.table_ref, self.thread_ref);
        // SAFETY: the references were created on this VM's registry.
        unsafe {
            let _ = lua.exec_raw::<()>((), |l| {
                ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, a);
                ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, b);
            });
        }
        self.main = std::ptr::null_mut();
    }
}
