#!/usr/bin/env bash
# Runs every test suite and prints a summary line per suite, then the total
# as `N passed, N failed`. Exits non-zero if any suite failed or ran nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
LUAJIT=${LUAJIT:-luajit}
# The source tree's modules and the built native module come first.
export LUA_PATH="$PWD/lua/?.lua;$PWD/lua/?/init.lua;;"
export LUA_CPATH="$PWD/build/lib/?.so;;"
logdir=build/test-logs
mkdir -p "$logdir"
total_pass=0 total_fail=0 status=0
summary=()

record() { # name passed failed rc
  local name=$1 p=$2 f=$3 rc=$4
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # a crash counts as a failure
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; fi    # a suite that ran nothing fails
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
  [ "$f" -eq 0 ] || status=1
  summary+=("$(printf '%-28s %5d passed, %d failed' "$name" "$p" "$f")")
}

# Rust unit and integration tests (linked against the system LuaJIT).
cargo test --no-default-features --features flamegraph,speedscope >"$logdir/rust.log" 2>&1; rc=$?
read -r p f < <(awk '/^test result:/ { for (i = 2; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } } END { print p+0, f+0 }' "$logdir/rust.log")
[ "$rc" -eq 0 ] || tail -40 "$logdir/rust.log"
record "cargo test" "${p:-0}" "${f:-0}" "$rc"

# busted specs under LuaJIT, TAP output counted line by line.
run_busted() { # name luajit-binary
  local name=$1 lj=$2 log="$logdir/$1.log"
  LUAJIT_BIN="$lj" busted --lua="$lj" -o TAP spec >"$log" 2>&1; local rc=$?
  local p f
  p=$(grep -cE '^ok ' "$log"); f=$(grep -cE '^not ok ' "$log")
  [ "$rc" -eq 0 ] || grep -A12 -E '^not ok ' "$log" | head -120
  record "$name" "$p" "$f" "$rc"
}
run_busted "busted ($LUAJIT)" "$LUAJIT"

# Robustness: 30 s of the mixed-fault soak at the highest rate (`make soak`
# runs it for 10 minutes), and memcheck on a fault mix (`make valgrind`).
run_check() { # name log command...
  local name=$1 log=$2; shift 2
  "$@" >"$log" 2>&1; local rc=$?
  if [ "$rc" -eq 0 ]; then record "$name" 1 0 0; else tail -25 "$log"; record "$name" 0 1 "$rc"; fi
}
run_check "soak (30 s)" "$logdir/soak.log" env SOAK_SECONDS=30 LUAJIT_BIN="$LUAJIT" "$LUAJIT" scripts/soak.lua
run_check "valgrind memcheck" "$logdir/valgrind.log" env LUAJIT="$LUAJIT" bash scripts/valgrind.sh

echo
printf '%s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed"
exit $status
