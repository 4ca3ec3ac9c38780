#!/usr/bin/env bash
# Installs the Debian-packaged Lua libraries the benchmarks drive
# (bench/programs/, bench/real_code.lua), if missing.
set -euo pipefail
need=()
for p in lua-dkjson lua-penlight lua-cjson lua-inspect lua-binaryheap lua-basexx; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
echo "installing: ${need[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
