#!/usr/bin/env bash
# Runs the competing-owners integration tests (two Lua states in two OS
# threads racing to start) and autosave's writer thread reading a running
# session under ThreadSanitizer. The sanitizer flag is
# nightly-only; RUSTC_BOOTSTRAP=1 lets the stable toolchain accept it. The
# standard library is not instrumented (that would need rust-src), so reports
# inside libtest's own result channel are suppressed (scripts/tsan.supp); our
# threads, the owner flag and LuaJIT's profiler state are what is checked.
set -uo pipefail
cd "$(dirname "$0")/.."
export RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer"
export CARGO_TARGET_DIR=target/tsan TECS_UNDER_TSAN=1
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp"
target=$(rustc -vV | sed -n 's/^host: //p')
cargo test --no-default-features --target "$target" --test competing_owners --test autosave_thread 2>&1 | tee build/tsan.log | grep -E '^test |test result|ThreadSanitizer' 
rc=${PIPESTATUS[0]}
if grep -q 'WARNING: ThreadSanitizer' build/tsan.log; then
  echo "tsan: data race reported (see build/tsan.log)"
  exit 1
fi
[ "$rc" -eq 0 ] && echo "tsan: no data race reported" 
exit "$rc"
