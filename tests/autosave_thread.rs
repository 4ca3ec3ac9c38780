//! Autosave's writer thread reading a running session while the VM thread
//! records (compiled loops, whose stacks the tick handler buffers), then
//! the last write at the stop. `make tsan` runs this under
//! ThreadSanitizer: the session state and the handler's buffer are shared
//! with the writer only through the session's lock and the buffer's flags.

use mlua::Lua;

#[test]
fn the_writer_reads_a_running_session_and_writes_every_sample_at_the_stop() {
    let lua = Lua::new();
    let native = tecs_profile::lua_api::exports(&lua).expect("exports");
    lua.globals().set("native", native).unwrap();
    let path = std::env::temp_dir().join(format!("tecs-autosave-{}.collapsed", std::process::id()));
    lua.globals().set("path", path.to_string_lossy().to_string()).unwrap();
    let (written, kept): (i64, i64) = lua
        .load(
            r#"
            local h = native.start({ intervalMs = 0.2 })
            h:autosave(path, 0.1)
            -- Compiled loops for CPU time: the writer runs about ten times.
            local t0, s = os.clock(), 0
            while os.clock() - t0 < 1 do for i = 1, 100000 do s = (s + i) % 7 end end
            h:stop()
            h:finishAutosave()
            local f = assert(io.open(path, "rb"))
            local text = f:read("*a")
            f:close()
            return native.parseCollapsed(text).samples, native.parseCollapsed(h:collapsed()).samples
            "#,
        )
        .eval()
        .expect("no Lua error");
    let _ = std::fs::remove_file(&path);
    assert!(kept > 0);
    assert_eq!(written, kept, "the last write holds every sample");
}
