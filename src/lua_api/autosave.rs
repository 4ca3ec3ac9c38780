//! `session:autosave(path, seconds)` and `session:finishAutosave()`: the
//! Lua side of the writer thread of `session::autosave`, which gets the
//! names the session knows when autosave starts.

use mlua::Lua;

use super::{runtime, NativeSession};
use crate::session::autosave;

impl NativeSession {
    /// `session:autosave(path, seconds)`: see [`autosave::start`].
    pub(super) fn start_autosave(&mut self, lua: &Lua, path: String, seconds: f64) -> mlua::Result<()> {
        if !self.running() {
            return Err(runtime("the session is stopped"));
        }
        if autosave::busy() {
            return Err(runtime("another session of this process autosaves already"));
        }
        // The thread names C functions by the paths reachable now.
        self.name_every_c_function(lua);
        autosave::start(self.session.sampler().watch(), self.state.autosave_names(), &path, seconds).map_err(runtime)
    }
}

/// `session:finishAutosave()`: see [`autosave::finish`].
pub(super) fn finish() {
    autosave::finish();
}
