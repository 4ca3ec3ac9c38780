#!/usr/bin/env bash
# Runs every cargo-fuzz target for FUZZ_SECONDS each (default 60). cargo-fuzz
# needs nightly-only compiler flags; RUSTC_BOOTSTRAP=1 lets the stable
# toolchain accept them. Installs cargo-fuzz from crates.io if missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${FUZZ_SECONDS:-60}
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
status=0
for t in $(cargo fuzz list); do
  mkdir -p "corpus/$t"
  echo "fuzz: $t for ${secs}s"
  # -O: optimised, -a: with debug assertions (integer overflow is a crash).
  if cargo fuzz run -O -a "$t" "corpus/$t" "seeds/$t" -- -max_total_time="$secs" >"corpus/$t.log" 2>&1; then
    grep -E '^Done [0-9]+ runs' "corpus/$t.log" | sed "s/^/fuzz: $t: /"
  else
    status=1
    echo "fuzz: $t FAILED (artifacts in fuzz/artifacts/$t):"
    grep -E 'panicked|ERROR|SUMMARY|Test unit' "corpus/$t.log" | head -20
  fi
done
exit $status
