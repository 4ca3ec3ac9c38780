//! Sessions started from Lua: a start failing halfway leaves nothing
//! behind, stop twice, drop without stop, and the one error convention.

use mlua::Lua;

use std::sync::atomic::Ordering;

use super::*;
use crate::session::{fail_at, Ownership};
use crate::sys::alloc_probe::{Counting, ALLOCATIONS};
use crate::sys::one_session_at_a_time;

#[global_allocator]
static COUNTING: Counting = Counting;

fn state() -> Lua {
    let lua = Lua::new();
    let native = exports(&lua).expect("exports");
    lua.globals().set("native", native).unwrap();
    lua
}

#[test]
fn a_start_failing_halfway_leaves_no_owner_and_a_good_start_follows() {
    let _turn = one_session_at_a_time();
    let lua = state();
    for step in ["anchors", "profiler"] {
        fail_at(Some(step));
        let err = lua.load("return native.start({})").exec().unwrap_err().to_string();
        fail_at(None);
        assert!(err.contains(&format!("tecs.profile.native.start: test failure at {}", step)), "{}", err);
        assert!(!Ownership::held(), "owner left set after a failure at {}", step);
    }
    lua.load("local h = native.start({}); assert(h:running()); h:stop(); assert(not h:running())").exec().unwrap();
    assert!(!Ownership::held());
}

#[test]
fn stop_twice_is_one_stop() {
    let _turn = one_session_at_a_time();
    let lua = state();
    lua.load(
        r#"
        local h = native.start({ intervalMs = 0.5 })
        local t0 = os.clock() while os.clock() - t0 < 0.05 do end
        h:stop()
        local first = h:stats()
        h:stop()
        local second = h:stats()
        assert(not first.running and not second.running)
        assert(first.samples == second.samples and first.durationSec == second.durationSec)
        "#,
    )
    .exec()
    .unwrap();
    assert!(!Ownership::held());
}

#[test]
fn a_session_dropped_without_stop_releases_everything() {
    let _turn = one_session_at_a_time();
    {
        let lua = state();
        lua.load("h = native.start({})").exec().unwrap();
        assert!(Ownership::held());
        lua.load("h = nil; collectgarbage(); collectgarbage()").exec().unwrap();
        assert!(!Ownership::held(), "the GC's drop released the owner flag");
        lua.load("h = native.start({ clock = 'wall' })").exec().unwrap();
    }
    // lua_close dropped the second one.
    assert!(!Ownership::held());
    let lua = state();
    lua.load("native.start({}):stop()").exec().unwrap();
}

#[test]
fn an_options_error_takes_nothing() {
    let _turn = one_session_at_a_time();
    let lua = state();
    let err = lua.load("native.start({ stackDepth = 0 })").exec().unwrap_err().to_string();
    assert!(
        err.contains("tecs.profile.native.start: option 'stackDepth' must be an integer from 1 to 1000"),
        "{}",
        err
    );
    assert!(!Ownership::held());
}

#[test]
fn errors_cross_as_plain_messages() {
    let lua = state();
    let (ok, msg): (bool, String) =
        lua.load("return native.call(native.raw.checkOptions, 'report', { sort = 'size' })").eval().unwrap();
    assert!(!ok);
    assert_eq!(msg, "option 'sort' must be \"self\" or \"total\" (got string \"size\")");
    let (ok, msg): (bool, String) = lua.load("return native.call(native.raw.parseProfile, 'x y\\n')").eval().unwrap();
    assert!(!ok);
    assert!(msg.starts_with("line 1: "), "{}", msg);
    assert!(!msg.contains("runtime error"), "{}", msg);
    // The wrapped functions raise at the caller's line, under their name.
    let err: String = lua
        .load("local ok, e = pcall(function() native.parseCollapsed(5) end); return e")
        .set_name("=caller")
        .eval()
        .unwrap();
    assert_eq!(
        err,
        "caller:1: tecs.profile.native.parseCollapsed: bad argument #1 'text' (string expected, got number 5)"
    );
    let (a, b, c): (bool, i64, i64) = lua.load("return native.call(function() return 1, 2 end)").eval().unwrap();
    assert!(a && b == 1 && c == 2);
}

#[test]
fn option_names_and_formats_come_from_the_declarations() {
    let lua = state();
    let names: Vec<String> = lua.load("return native.options.sample.names").eval().unwrap();
    assert_eq!(names, start_option_names());
    let depth: i64 = lua.load("return native.options.sample.defaults.stackDepth").eval().unwrap();
    assert_eq!(depth, 16);
    let formats: Vec<String> = lua.load("return native.formats").eval().unwrap();
    assert_eq!(formats, format_names().collect::<Vec<_>>());
    let registry: Vec<String> =
        lua.load("local t = {} for i, f in ipairs(native.formatTable) do t[i] = f.name end return t").eval().unwrap();
    assert_eq!(registry, crate::output::REGISTRY.iter().map(|d| d.name).collect::<Vec<_>>());
}

#[cfg(target_os = "linux")]
#[test]
fn a_guard_the_first_callback_turned_off_is_reported_in_stats() {
    let _turn = one_session_at_a_time();
    let lua = state();
    lua.load(
        r#"
        h = native.start({ intervalMs = 0.5 })
        local t0 = os.clock() while os.clock() - t0 < 0.05 do end
        local s = h:stats()
        assert(s.samples > 0 and s.hooksRearmedNote == nil, tostring(s.hooksRearmedNote))
        "#,
    )
    .exec()
    .unwrap();
    crate::sys::posix::lost_hook::refuse_for_test();
    let note = "the first callback found another byte where the hook mask should be";
    for (when, code) in [("running", "return h:stats()"), ("stopped", "h:stop(); return h:stats()")] {
        let stats: mlua::Table = lua.load(code).eval().unwrap();
        assert_eq!(stats.get::<String>("hooksRearmedNote").unwrap(), note, "{}", when);
        assert_eq!(stats.get::<u64>("hooksRearmed").unwrap(), 0, "{}", when);
    }
    assert!(!Ownership::held());
}

#[test]
fn a_stack_seen_before_is_counted_without_allocating() {
    let _turn = one_session_at_a_time();
    let lua = mlua::Lua::new();
    let native = exports(&lua).expect("exports");
    lua.globals().set("native", native).unwrap();
    let phase = |code: &str| -> (u64, u64) {
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let samples: u64 = lua.load(code).eval().expect("workload");
        (samples, ALLOCATIONS.load(Ordering::Relaxed) - before)
    };
    let setup = r#"
        local function busy(n) local s = 0 for i = 1, n do s = (s + i * 3) % 65537 end return s end
        function burn(sec) local t0 = os.clock() while os.clock() - t0 < sec do busy(5000) end end
        -- A small timeline: the measured phase overwrites its oldest samples.
        -- At function precision each callback records one sample (read in
        -- the tick handler, a compiled loop's ticks come as one entry per
        -- stack and callback, and so few that the line would not wrap).
        h = native.start({ intervalMs = 0.2, timelineSamples = 64, precision = "function" })
        burn(0.4)
        return h:stats().samples
    "#;
    let (warm, first_allocations) = phase(setup);
    assert!(warm > 100, "warm-up samples: {warm}");
    // The probe sees allocations: storing the first stacks makes some.
    assert!(first_allocations > 0, "no allocation counted while new stacks were stored");
    let (samples, allocations) =
        phase("local n0 = h:stats().samples; burn(0.4); local n = h:stats().samples - n0; h:stop(); return n");
    assert!(samples > 100, "samples in the measured phase: {samples}");
    assert_eq!(allocations, 0, "allocations in {samples} callbacks on known stacks");
    // Every recorded sample went through the timeline, which wrapped.
    let (kept, dropped, recorded): (u64, u64, u64) = lua
        .load("local st = h:stats() return st.timelineSamples, st.timelineDroppedSamples, st.recordedSamples")
        .eval()
        .expect("stats");
    assert!(kept >= 64 && dropped > samples / 2, "timeline kept {kept}, dropped {dropped}");
    assert_eq!(kept + dropped, recorded);
}
