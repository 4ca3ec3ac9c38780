#!/usr/bin/env bash
# What serving MCP with the official Rust SDK (rmcp) would cost to build
# and install, beside what the project's own native code costs: each built
# from nothing in a target directory of its own, with the CPU time (user +
# system: the machine's other load changes the wall time, not this), the
# crates compiled and the size of what an install would add. The probe
# (bench/rmcp_probe) is the smallest stdio server on rmcp, one tool; the
# Lua server (lua/tecs/profile/mcp.lua and mcp/) needs no build at all.
# Prints a Markdown table.
#
#   bash bench/rmcp_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name, manifest, artifacts (relative to the target's release directory)
measure() {
  local name=$1 manifest=$2; shift 2
  local target=$work/$name
  /usr/bin/time -f "%U %S %e" -o "$work/$name.time" \
    cargo build --release --locked --quiet --manifest-path "$manifest" --target-dir "$target" --workspace \
    >"$work/$name.log" 2>&1
  local user sys wall crates size=0
  read -r user sys wall < "$work/$name.time"
  crates=$(find "$target/release/deps" -name '*.d' | wc -l)
  for a in "$@"; do size=$((size + $(stat -c %s "$target/release/$a"))); done
  printf '| %s | %.0f | %.0f | %d | %.2f |\n' "$name" "$(echo "$user + $sys" | bc)" "$wall" "$crates" \
    "$(echo "$size / 1048576" | bc -l)"
}

echo "| build | CPU s | wall s | crates compiled | installed MiB |"
echo "|---|---|---|---|---|"
measure "tecs-profile (native.so, love_preload.so)" Cargo.toml libtecs_profile.so libtecs_profile_love_preload.so
measure "rmcp probe (one tool, stdio)" bench/rmcp_probe/Cargo.toml rmcp_probe
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(rustc --version)"
