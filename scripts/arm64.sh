#!/usr/bin/env bash
# The core checks on Linux arm64, under qemu-user: installs the cross
# compiler and qemu if missing, builds an arm64 LuaJIT (tools/luajit-arm64)
# and the module for aarch64-unknown-linux-gnu, lays out a tree as the
# repository's under build/arm64-tree (bin/ and lua/ linked, the module in
# build/lib), and runs platform_spec/core_check.lua there. Prints TAP.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
need=()
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || need+=(qemu-user)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
luajit=$(bash tools/luajit-arm64/build.sh)
rustup target add aarch64-unknown-linux-gnu >&2
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  cargo build --release --target aarch64-unknown-linux-gnu -p tecs-profile >&2
tree="$root/build/arm64-tree"
rm -rf "$tree"; mkdir -p "$tree/bin" "$tree/build/lib/tecs/profile" "$tree/platform_spec"
ln -s "$root/lua" "$tree/lua"
cp bin/tecs-profile "$tree/bin/"
cp platform_spec/core_check.lua "$tree/platform_spec/"
cp target/aarch64-unknown-linux-gnu/release/libtecs_profile.so "$tree/build/lib/tecs/profile/native.so"
cd "$tree"
run="qemu-aarch64 -L /usr/aarch64-linux-gnu $luajit"
export TECS_CHECK_LUAJIT="$run"
exec $run platform_spec/core_check.lua build/lib
