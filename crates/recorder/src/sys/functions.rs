//! Lua functions kept alive for a session: a registry-anchored coroutine
//! whose stack holds the functions the sampler captured (the callback
//! pushes them there; see `VmStack::capture_leaf`), read back by slot.

use std::ffi::c_int;

use mlua::ffi;
use mlua::Lua;

/// A registry-anchored coroutine whose stack keeps captured Lua functions
/// alive until the session ends.
pub struct FunctionAnchor {
    pub(super) thread: *mut ffi::lua_State,
    thread_ref: c_int,
    pub(super) capacity: i32,
    pub(super) len: i32,
}

impl FunctionAnchor {
    pub fn new(lua: &Lua, capacity: i32) -> mlua::Result<FunctionAnchor> {
        let mut anchor = FunctionAnchor { thread: std::ptr::null_mut(), thread_ref: 0, capacity: 0, len: 0 };
        let out = &mut anchor;
        // The stack is not sized for `capacity` up front: that would be
        // `capacity` slots of the program's Lua heap from the start, and the
        // collector halves an idle coroutine's stack on each cycle anyway
        // (`lj_state_shrinkstack`), so `lua_xmove` grows it as captures come.
        // SAFETY: exec_raw gives a valid state; the new coroutine is popped
        // into a registry reference, which keeps it (and its stack) alive.
        unsafe {
            lua.exec_raw::<()>((), |l| {
                let t = ffi::lua_newthread(l);
                if ffi::lua_checkstack(t, 8) != 0 {
                    out.capacity = capacity;
                }
                out.thread_ref = ffi::luaL_ref(l, ffi::LUA_REGISTRYINDEX);
                out.thread = t;
            })?;
        }
        Ok(anchor)
    }

    /// A copy of what `FunctionSlots::get` needs, to use outside the
    /// sampler's borrow (getting a value may run the GC, hence Lua code).
    pub fn slots(&self) -> FunctionSlots {
        FunctionSlots { thread: self.thread, len: self.len }
    }

    /// Releases the coroutine. Must run while the state is open.
    pub fn release(&mut self, lua: &Lua) {
        if self.thread.is_null() {
            return;
        }
        let r = self.thread_ref;
        // SAFETY: the reference was created on this VM's registry.
        unsafe {
            let _ = lua.exec_raw::<()>((), |l| ffi::luaL_unref(l, ffi::LUA_REGISTRYINDEX, r));
        }
        self.thread = std::ptr::null_mut();
    }
}

/// The captured functions of a [`FunctionAnchor`], readable by slot.
#[derive(Clone, Copy)]
pub struct FunctionSlots {
    thread: *mut ffi::lua_State,
    len: i32,
}

impl FunctionSlots {
    /// The function captured in `slot`, as a Lua value.
    pub fn get(&self, lua: &Lua, slot: i32) -> mlua::Result<mlua::Value> {
        if self.thread.is_null() || slot < 1 || slot > self.len {
            return Ok(mlua::Value::Nil);
        }
        let t = self.thread;
        // SAFETY: `slot` indexes a value on the anchored coroutine's stack;
        // it is copied there and moved to the calling state, which exec_raw
        // returns as the result.
        unsafe {
            lua.exec_raw::<mlua::Value>((), |l| {
                ffi::lua_pushvalue(t, slot);
                ffi::lua_xmove(t, l, 1);
            })
        }
    }
}
