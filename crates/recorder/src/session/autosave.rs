//! A running session's collapsed profile written every few seconds
//! (`autosavePath`, `autosaveSeconds`), so that an editor or a game that
//! hangs, and is killed, still leaves its profile.
//!
//! The writer is a thread of ours, not the program's thread: a program
//! stuck in a compiled loop never reaches a safe point, so LuaJIT never
//! calls the profiler's callback, while the tick handler goes on counting
//! the loop's stacks in its buffer. The thread takes the session state's
//! lock (`SamplerWatch`), takes in those stacks as the callback would, and
//! builds the profile under the lock; it writes the text after letting go.
//! The frames are named with what the session knew when autosave started
//! (builtins, the C functions reachable then by a Lua path, else their
//! symbols); C-call lines are not corrected (line precision only).
//!
//! A session has one writer, kept here (LuaJIT has one profiler per
//! process). It stops when the session stops, after one last write that
//! holds every sample, or when the session is collected. The Lua side
//! (`session:autosave`) gathers the names and calls [`start`].

use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tecs_profile_format::profile::{collapsed, FrameNamer, Profile};

use crate::record::sampler::Sampler;
use crate::sys::SamplerWatch;

/// Seconds from the start to the first write after the start's (sooner
/// when `autosaveSeconds` is shorter): the start's write holds no sample
/// yet, and a program that hangs soon after it starts, killed before a
/// whole period, leaves what was sampled by then.
pub const FIRST_WRITE_SECONDS: f64 = 1.0;

/// How long the writer waits before its write number `n` after the
/// start's (0 the first): a second, then `every`.
fn wait_before(n: u64, every: Duration) -> Duration {
    if n == 0 {
        every.min(Duration::from_secs_f64(FIRST_WRITE_SECONDS))
    } else {
        every
    }
}

/// The running writer, if any.
static WRITER: Mutex<Option<Writer>> = Mutex::new(None);

struct Writer {
    /// Set to ask the thread for its last write; the condvar wakes it.
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: JoinHandle<()>,
}

/// What the thread needs to name frames, owned by it: what the session
/// knew when autosave started.
pub struct Names {
    /// Builtin names by fast function id.
    pub ffnames: Vec<Option<String>>,
    /// C function addresses -> Lua paths, None where a walk found none.
    pub c_paths: HashMap<usize, Option<String>>,
    /// Whether C functions no path names are named by their symbols.
    pub resolve_c: bool,
}

/// Writes `text` to `path` through a temporary file renamed over it: a
/// reader (or a kill) never leaves half a profile.
fn write_file(path: &PathBuf, text: &[u8]) -> Result<(), String> {
    let mut tmp = path.clone().into_os_string();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text)?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write '{}': {}", path.display(), e)
    })
}

/// The collapsed text of the samples so far; None once the session is gone.
fn snapshot(watch: &SamplerWatch<Sampler>, names: &Names) -> Option<Vec<u8>> {
    let profile: Profile = watch.with(|s| {
        let mut namer = FrameNamer::new(&names.ffnames, names.resolve_c).with_c_paths(&names.c_paths);
        Profile::from_table(&s.table, &mut namer)
    })?;
    Some(collapsed::write_bytes(&profile))
}

fn run(watch: SamplerWatch<Sampler>, names: Names, path: PathBuf, every: Duration, stop: Arc<(Mutex<bool>, Condvar)>) {
    let (lock, wake) = &*stop;
    for n in 0.. {
        let stopping = {
            let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
            let wait = wait_before(n, every);
            let (guard, _) = wake.wait_timeout_while(guard, wait, |asked| !*asked).unwrap_or_else(|e| e.into_inner());
            *guard
        };
        let Some(text) = snapshot(&watch, &names) else { return };
        // A failed write is tried again at the next period; the session
        // keeps every sample whatever happens here.
        let _ = write_file(&path, &text);
        if stopping {
            return;
        }
    }
}

/// Whether another session's writer runs; one whose session was collected
/// without a stop has ended by itself, and is forgotten here.
pub fn busy() -> bool {
    running(&mut WRITER.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Whether `writer` runs, after joining one that ended by itself.
fn running(writer: &mut Option<Writer>) -> bool {
    if writer.as_ref().is_some_and(|w| w.thread.is_finished()) {
        if let Some(w) = writer.take() {
            let _ = w.thread.join();
        }
    }
    writer.is_some()
}

/// Starts the writer of a running session: writes the collapsed profile to
/// `path` now (so that a path that cannot be written fails here), a second
/// later ([`FIRST_WRITE_SECONDS`]) and every `seconds` from a thread of
/// ours until the session stops. Fails with a message when another
/// session's writer runs, or the file or the thread cannot be made.
pub fn start(watch: SamplerWatch<Sampler>, names: Names, path: &str, seconds: f64) -> Result<(), String> {
    let mut writer = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    if running(&mut writer) {
        return Err("another session of this process autosaves already".into());
    }
    // Made absolute now: the program may change its directory later.
    let path = std::path::absolute(path).map_err(|e| format!("cannot write '{}': {}", path, e))?;
    let first = snapshot(&watch, &names).unwrap_or_default();
    write_file(&path, &first)?;
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let every = Duration::from_secs_f64(seconds);
    let thread_stop = stop.clone();
    let thread = std::thread::Builder::new()
        .name("tecs-autosave".into())
        .spawn(move || run(watch, names, path, every, thread_stop))
        .map_err(|e| format!("cannot start the autosave thread: {}", e))?;
    *writer = Some(Writer { stop, thread });
    Ok(())
}

/// `session:finishAutosave()`: the writer's last write (the session
/// stopped: every sample it took), then the thread ends. Nothing when no
/// writer runs.
pub fn finish() {
    let Some(w) = WRITER.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
    {
        let (lock, wake) = &*w.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
    }
    let _ = w.thread.join();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_write_comes_a_second_after_the_start_then_every_period() {
        let ten = Duration::from_secs(10);
        assert_eq!(wait_before(0, ten), Duration::from_secs(1));
        assert_eq!(wait_before(1, ten), ten);
        assert_eq!(wait_before(7, ten), ten);
        // A period shorter than a second is kept from the first write on.
        let short = Duration::from_millis(200);
        assert_eq!(wait_before(0, short), short);
        assert_eq!(wait_before(1, short), short);
    }
}
