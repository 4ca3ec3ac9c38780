#!/usr/bin/env bash
# Builds a Linux arm64 LuaJIT (a GC64 build, as every arm64 LuaJIT is) with
# Debian's gcc-aarch64-linux-gnu, from the same pinned LuaJIT 2.1 source as
# tools/luajit-current/build.sh, into build/luajit-arm64/. It runs under
# qemu-user (`qemu-aarch64 -L /usr/aarch64-linux-gnu`). Prints the path of
# the executable.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix="$root/build/luajit-arm64"
bin="$prefix/bin/luajit"
if [ -x "$bin" ] && [ -f "$prefix/share/luajit-2.1/jit/vmdef.lua" ]; then
  echo "$bin"; exit 0
fi
command -v aarch64-linux-gnu-gcc >/dev/null ||
  { echo "needs gcc-aarch64-linux-gnu (apt-get install gcc-aarch64-linux-gnu)" >&2; exit 1; }
manifest=$(cargo metadata --quiet --format-version 1 --manifest-path "$root/tools/luajit-current/Cargo.toml" |
  python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "luajit-src": print(p["manifest_path"])')
crate=$(dirname "$manifest")
work="$root/build/luajit-arm64-src"
rm -rf "$work"; mkdir -p "$work"
cp -R "$crate/luajit2/." "$work/"
cp "$crate/luajit_relver.txt" "$work/.relver"
chmod -R u+w "$work"
# The executable exports the lua_* API the module resolves at load time, as
# Debian's luajit does on x86-64.
make -C "$work/src" -j2 HOST_CC=gcc CROSS=aarch64-linux-gnu- TARGET_SYS=Linux PREFIX="$prefix" \
  >"$work.log" 2>&1 || { tail -30 "$work.log" >&2; exit 1; }
rm -rf "$prefix"; mkdir -p "$prefix/bin" "$prefix/share/luajit-2.1/jit"
install -m 0755 "$work/src/luajit" "$bin"
install -m 0644 "$work"/src/jit/*.lua "$prefix/share/luajit-2.1/jit/"
echo "$bin"
