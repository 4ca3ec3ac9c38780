#!/usr/bin/env bash
# The core checks on Windows x86-64, under Wine: installs mingw-w64 and Wine
# if missing, builds a Windows LuaJIT (tools/luajit-windows) and the module
# for x86_64-pc-windows-gnu, puts it at build/lib/tecs/profile/native.dll,
# and runs platform_spec/core_check.lua with that LuaJIT. Prints TAP.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
need=()
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(mingw-w64)
command -v wine >/dev/null 2>&1 || need+=(wine wine64)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
luajit=$(bash tools/luajit-windows/build.sh)
rustup target add x86_64-pc-windows-gnu >&2
cargo build --release --target x86_64-pc-windows-gnu -p tecs-profile >&2
mkdir -p build/lib/tecs/profile
cp target/x86_64-pc-windows-gnu/release/tecs_profile.dll build/lib/tecs/profile/native.dll
export WINEDEBUG=-all
wineboot -i >/dev/null 2>&1 || true
exec wine "$luajit" platform_spec/core_check.lua build/lib
