//! Two Lua states in two OS threads (as `love.thread` makes) racing to start a
//! session: exactly one wins each round, the other gets a clear error, and the
//! winner's session samples normally. `make helgrind` runs this under
//! valgrind's thread checker.

use std::sync::{Arc, Barrier, Mutex};

use mlua::{Lua, Table};

const ROUNDS: usize = 200;

/// The owner flag is process-wide: the tests of this file take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn state() -> (Lua, Table) {
    let lua = Lua::new();
    let native = tecs_profile::lua_api::exports(&lua).expect("exports");
    lua.globals().set("native", native.clone()).unwrap();
    (lua, native)
}

/// One contender: each round, wait for the other, try to start, and if this
/// thread won, do some work, check it was sampled, stop. Returns the number
/// of rounds won and checks every loss carried the owner error.
fn contender(barrier: Arc<Barrier>, rounds: usize) -> (usize, u64) {
    let (lua, _native) = state();
    let mut won = 0;
    let mut samples = 0;
    for _ in 0..rounds {
        barrier.wait();
        let r: mlua::Result<mlua::Value> = lua
            .load(
                r#"
                local ok, h = pcall(native.start, { intervalMs = 0.2 })
                if not ok then
                  assert(tostring(h):find("a sampling session is already running in this process", 1, true), tostring(h))
                  return false
                end
                local t0, s = os.clock(), 0
                while os.clock() - t0 < 0.005 do for i = 1, 1000 do s = (s + i) % 7 end end
                h:stop()
                return h:stats().samples
                "#,
            )
            .eval();
        match r.expect("no Lua error") {
            mlua::Value::Integer(n) => {
                won += 1;
                samples += n as u64;
            }
            mlua::Value::Number(n) => {
                won += 1;
                samples += n as u64;
            }
            _ => {}
        }
        barrier.wait();
    }
    (won, samples)
}

#[test]
fn two_states_in_two_threads_one_owner_at_a_time() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let barrier = Arc::new(Barrier::new(2));
    let a = {
        let b = barrier.clone();
        std::thread::spawn(move || contender(b, ROUNDS))
    };
    let b = {
        let b = barrier.clone();
        std::thread::spawn(move || contender(b, ROUNDS))
    };
    let ((wa, sa), (wb, sb)) = (a.join().unwrap(), b.join().unwrap());
    assert!(sa > 0 && sb > 0, "the winners' sessions sampled: {} / {}", sa, sb);
    // Each round has at least one winner; both can win a round only if one
    // finished before the other tried, which the 5 ms of work makes rare.
    assert!(wa + wb >= ROUNDS, "rounds won: {} + {}", wa, wb);
    assert!(wa + wb < 2 * ROUNDS, "a start never failed: {} + {}", wa, wb);
    assert!(wa > 0 && wb > 0, "both threads won some rounds: {} / {}", wa, wb);
}

#[test]
fn the_loser_can_start_once_the_winner_stops() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (la, _) = state();
    let (lb, _) = state();
    la.load("h = native.start({})").exec().unwrap();
    let err = lb.load("native.start({})").exec().unwrap_err().to_string();
    assert!(
        err.contains("tecs.profile.native.start: a sampling session is already running in this process"),
        "{}",
        err
    );
    la.load("h:stop()").exec().unwrap();
    lb.load("h = native.start({}); h:stop()").exec().unwrap();
    // Closing a state with a running session releases the owner flag too.
    la.load("h2 = native.start({})").exec().unwrap();
    drop(la);
    lb.load("h = native.start({}); h:stop()").exec().unwrap();
}

#[test]
fn jit_profile_in_another_state_blocks_start_with_a_clear_error() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (la, _) = state();
    let (lb, _) = state();
    la.load("jp = require('jit.profile'); n = 0; jp.start('i1', function(_, k) n = n + k end)").exec().unwrap();
    let err = lb.load("native.start({})").exec().unwrap_err().to_string();
    assert!(err.contains("LuaJIT's profiler is in use by another Lua state or library"), "{}", err);
    // Run until its callback has seen samples (signals arrive late under
    // ThreadSanitizer), at most 5 s of CPU.
    la.load("local t0 = os.clock() while (n == 0 or os.clock() - t0 < 0.05) and os.clock() - t0 < 5 do end; jp.stop()")
        .exec()
        .unwrap();
    let n: i64 = la.globals().get("n").unwrap();
    // ThreadSanitizer defers signal handlers to its own sync points, so the
    // process-wide ITIMER_PROF signal may never reach a pure Lua loop there.
    if std::env::var_os("TECS_UNDER_TSAN").is_none() {
        assert!(n > 0, "the other state's jit.profile kept running: {}", n);
    }
    // Once it stops, a session starts and samples.
    let samples: i64 = lb
        .load(
            "local h = native.start({}); local t0 = os.clock() \
             while (h:stats().samples == 0 or os.clock() - t0 < 0.05) and os.clock() - t0 < 5 do end; \
             h:stop(); return h:stats().samples",
        )
        .eval()
        .unwrap();
    assert!(samples > 0);
}
