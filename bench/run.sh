#!/usr/bin/env bash
# The benchmark, whole or piece by piece. Prints tables; fragments go to
# build/bench/*.md and `report` (also run by `all`) puts them into
# BENCHMARKS.md between its generated-section markers.
#
#   bench/run.sh all                 everything (what `make bench` runs)
#   bench/run.sh matrix [workload..] overhead / rate / aborts table
#   bench/run.sh WORKLOAD            the matrix for one workload (zones, deep16,
#                                    deep64, deep200, gc, interp, record)
#   bench/run.sh persample           per-sample cost by stack depth, split
#   bench/run.sh floor               empty-handler signal cost (the floor)
#   bench/run.sh stop                stop(): 10k and 100k unique stacks
#   bench/run.sh zones               zone push+pop cost
#   bench/run.sh pollcost            the control channel's poll while nobody
#                                    drives the program (and LÖVE's frame
#                                    step, when love and xvfb-run are there)
#   bench/run.sh programs [name..]   overhead on whole programs (Debian's
#                                    dkjson and Penlight; LuaJIT's benchmark
#                                    programs too if LUAJIT_BENCH_DIR is set)
#   bench/run.sh truth               where samples land against the truth
#   bench/run.sh inside              inside a trace: inlined callees and hoisted
#                                    work against their marginal costs
#   bench/run.sh proto               methods made per object (callees a trace
#                                    checks by prototype) against theirs
#   bench/run.sh families            inside a trace by family of code (integer,
#                                    conversions, FFI, tables, builtins, sunk
#                                    allocation, up-recursion) against theirs;
#                                    TECS_PROFILE_PLACEMENT=decoded to measure
#                                    the decoded placement
#   bench/run.sh realcode            self shares on real libraries three ways,
#                                    and their hot functions against their
#                                    marginal costs (Debian's lua-binaryheap
#                                    and lua-basexx; Jumper too if JUMPER_DIR
#                                    is set)
#   bench/run.sh alloc               allocation sessions: byte shares against
#                                    exact counts; overhead on binary-trees
#                                    (LUAJIT_BENCH_DIR or ALLOC_BENCH_PROGRAM)
#   bench/run.sh cover               line coverage: profile.coverage and a
#                                    line hook against plain runs (dkjson,
#                                    Penlight; LuaJIT's programs too if
#                                    LUAJIT_BENCH_DIR is set)
#   bench/run.sh report              rewrite BENCHMARKS.md from the fragments
#
# Environment: BENCH_REPS (7), BENCH_SCALE (0.8), LUAJIT (luajit).
set -euo pipefail
cd "$(dirname "$0")/.."
LUAJIT=${LUAJIT:-luajit}
OUT=${BENCH_OUT:-build/bench}
export BENCH_OUT=$OUT
export LUA_PATH="$PWD/lua/?.lua;$PWD/lua/?/init.lua;;"
export LUA_CPATH="$PWD/build/lib/?.so;;"
TIMING_LIB=build/bench-timing/lib
mkdir -p "$OUT"

build_main() {
  make -s build
}
build_timing() {
  # The same library with the callback timed (feature bench-timing).
  cargo build --release --quiet --features bench-timing --target-dir target/bench-timing
  mkdir -p "$TIMING_LIB/tecs/profile"
  cp target/bench-timing/release/libtecs_profile.so "$TIMING_LIB/tecs/profile/native.so"
}
build_floor() {
  (cd bench/floor && cargo build --release --quiet)
}

machine() {
  local hz
  hz=$( (zcat /proc/config.gz 2>/dev/null || cat "/boot/config-$(uname -r)" 2>/dev/null) | sed -n 's/^CONFIG_HZ=//p' | head -1)
  echo "| | |"
  echo "|---|---|"
  echo "| CPU | $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) |"
  echo "| cores (nproc) | $(nproc) |"
  echo "| kernel | $(uname -sr) |"
  echo "| CONFIG_HZ | ${hz:-unknown} |"
  echo "| load average at start | $(cut -d' ' -f1-3 /proc/loadavg) |"
  echo "| LuaJIT | $($LUAJIT -v | cut -d' ' -f1-2) |"
  echo "| rustc | $(rustc --version | cut -d' ' -f2) |"
  echo "| date | $(date -u '+%Y-%m-%d %H:%M UTC') |"
}

piece() {
  case "$1" in
    matrix) shift; build_main; $LUAJIT bench/bench.lua matrix "$@" ;;
    zones|deep16|deep64|deep200|gc|interp|record)
      build_main; BENCH_OUT="$OUT/single" $LUAJIT bench/bench.lua matrix "$1" ;;
    persample)
      build_main; build_floor; build_timing
      BENCH_TIMING_CPATH="$PWD/$TIMING_LIB/?.so;;" $LUAJIT bench/bench.lua persample ;;
    floor)
      build_floor
      { echo "| signal source | interval | delivered/s (requested) | empty handler: CPU per signal | helper thread CPU per signal |"
        echo "|---|---:|---:|---:|---:|"
        for m in tgkill posix-timer itimer; do FLOOR_METHOD=$m bench/floor/target/release/floor 1000 100; done | awk '{
          for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
          name = v["method"] == "tgkill" ? "tgkill timer thread (tecs-profile)" : (v["method"] == "posix-timer" ? "timer_create, SIGEV_THREAD_ID" : "setitimer ITIMER_PROF (LuaJIT)")
          helper = v["method"] == "tgkill" ? sprintf("%.2f µs", v["timer_thread_ns_per_signal"] / 1000) : "-"
          printf "| %s | %g ms | %.0f (%.0f) | %.2f µs | %s |\n", name, v["interval_us"] / 1000, v["rate"], v["requested"], v["signal_ns"] / 1000, helper }'
      } | tee "$OUT/floor.md" ;;
    stop)
      cargo bench --quiet --no-default-features --bench stop 2>/dev/null | grep '^|' | tee "$OUT/stop.md" ;;
    zonecost) build_main; $LUAJIT bench/bench.lua zones ;;
    autosave) build_main; $LUAJIT bench/autosave.lua | tee "$OUT/autosave.md" ;;
    pollcost) build_main; $LUAJIT bench/poll_cost.lua | tee "$OUT/poll_cost.md" ;;
    programs) shift; build_main; build_floor; bash scripts/deps-bench.sh; $LUAJIT bench/programs.lua "$@" ;;
    truth) build_main; $LUAJIT bench/truth.lua ;;
    inside) build_main; $LUAJIT bench/inside_trace.lua ;;
    proto) build_main; ORACLE=spec/fixtures/proto_callees.lua $LUAJIT bench/inside_trace.lua ;;
    families) build_main; ORACLE=spec/fixtures/families.lua $LUAJIT bench/inside_trace.lua ;;
    realcode) build_main; bash scripts/deps-bench.sh; $LUAJIT bench/real_code.lua ;;
    alloc) build_main; LUA_PATH="$PWD/?.lua;$LUA_PATH" $LUAJIT bench/alloc.lua ;;
    cover)
      build_main; bash scripts/deps-bench.sh
      # bench/cover.lua prints a fixed-width table (names in 22 columns);
      # cover.md is the same as a Markdown table.
      $LUAJIT bench/cover.lua | tee "$OUT/cover.txt" | awk '
        NR == 1 {
          print "| program | plain CPU s | profile.coverage CPU s | × plain | line hook, JIT on: CPU s | × plain | line hook, JIT off: CPU s | × plain |"
          print "|---|---:|---:|---:|---:|---:|---:|---:|"; next }
        { name = substr($0, 1, 22); sub(/ +$/, "", name); n = split(substr($0, 23), v, " ")
          if (n != 7) { print "bench/run.sh cover: unexpected line: " $0 > "/dev/stderr"; exit 1 }
          printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name, v[1], v[2], v[3], v[4], v[5], v[6], v[7] }
      ' >"$OUT/cover.md"
      cat "$OUT/cover.md" ;;
    machine) machine | tee "$OUT/machine.md" ;;
    report) bash bench/report.sh ;;
    all)
      local t0=$SECONDS
      piece machine
      echo; echo "== floor: empty SIGPROF handler, same timer =="; piece floor
      echo; echo "== stop(): unique stacks to collapsed text =="; piece stop
      echo; echo "== zones: push+pop cost =="; piece zonecost
      echo; echo "== per-sample cost by stack depth =="; piece persample
      echo; echo "== workloads: overhead, rate, aborts =="; piece matrix
      echo; echo "== where samples land: truth, tecs-profile, jit.profile =="; piece truth
      echo; echo "== inside a trace: marginal costs, tecs-profile, jit.p =="; piece inside
      echo; echo "== methods made per object: marginal costs, tecs-profile, jit.p =="; piece proto
      echo; echo "== whole programs: overhead =="; piece programs
      echo; echo "== allocation sessions: accuracy, overhead on binary-trees =="; piece alloc
      echo; echo "== line coverage: cost against plain runs and a line hook =="; piece cover
      echo; echo "== autosave: cost to the profiled thread =="; piece autosave
      echo; echo "== the control channel at rest: cost per poll =="; piece pollcost
      echo "total $((SECONDS - t0)) s" | tee "$OUT/duration.md"
      piece report ;;
    *) echo "bench/run.sh: unknown piece '$1' (see the header of this script)" >&2; exit 2 ;;
  esac
}

piece "${1:-all}" "${@:2}"
