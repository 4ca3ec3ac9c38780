#!/usr/bin/env bash
# Runs scripts/valgrind_workload.lua and the "ends with a session running"
# fixture under valgrind memcheck with the leak checker. LuaJIT itself is not
# built for valgrind (its allocator and string functions read whole words), so
# records that do not involve our library are counted but not failed; any
# error or definite/indirect leak with a frame in tecs-profile fails.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "installing: valgrind"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq valgrind >/dev/null
fi
LUAJIT=${LUAJIT:-luajit}
logdir=build/valgrind
mkdir -p "$logdir"
export LUA_PATH="$PWD/lua/?.lua;;" LUA_CPATH="$PWD/build/lib/?.so;;"
status=0
run() { # name args...
  local name=$1; shift
  local log="$logdir/$name.log"
  valgrind --tool=memcheck --fair-sched=yes --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --smc-check=all --num-callers=40 \
    --suppressions=scripts/valgrind.supp \
    --log-file="$log" "$LUAJIT" "$@" >"$logdir/$name.out" 2>&1
  local rc=$?
  # Split the log into records (blank-line separated) and keep ours.
  local ours
  ours=$(awk -v RS= '/tecs_profile|native\.so/ && /(Invalid|uninitialised|Conditional|Mismatched|definitely lost|indirectly lost|overlap|free)/' "$log")
  local summary
  summary=$(grep -E 'ERROR SUMMARY|definitely lost:|indirectly lost:' "$log" | sed 's/^==[0-9]*== *//' | tr '\n' ' ')
  if [ "$rc" -ne 0 ] || [ -n "$ours" ]; then
    status=1
    echo "valgrind $name: FAILED (exit $rc)"
    echo "$ours" | head -60
    tail -5 "$logdir/$name.out"
  else
    echo "valgrind $name: no error or leak from tecs-profile ($summary)"
  fi
}
run workload scripts/valgrind_workload.lua
run exit-running spec/fixtures/exit_running.lua end
run exit-close spec/fixtures/exit_running.lua exit-close
run dropped spec/fixtures/exit_running.lua gc
exit $status
