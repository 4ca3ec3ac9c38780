#!/usr/bin/env bash
# Builds a Windows x86-64 LuaJIT (luajit.exe and lua51.dll, the way LuaJIT's
# own Makefile builds it for Windows, and the way LÖVE ships it) with
# Debian's mingw-w64, from the same pinned LuaJIT 2.1 source as
# tools/luajit-current/build.sh, into build/luajit-windows/. It runs under
# Wine. Prints the path of luajit.exe.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix="$root/build/luajit-windows"
exe="$prefix/luajit.exe"
if [ -f "$exe" ] && [ -f "$prefix/lua51.dll" ] && [ -f "$prefix/lua/jit/vmdef.lua" ] &&
  [ -f "$prefix/bcryptprimitives.dll" ]; then
  echo "$exe"; exit 0
fi
command -v x86_64-w64-mingw32-gcc >/dev/null || { echo "needs mingw-w64 (apt-get install mingw-w64)" >&2; exit 1; }
manifest=$(cargo metadata --quiet --format-version 1 --manifest-path "$root/tools/luajit-current/Cargo.toml" |
  python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "luajit-src": print(p["manifest_path"])')
crate=$(dirname "$manifest")
work="$root/build/luajit-windows-src"
rm -rf "$work"; mkdir -p "$work"
cp -R "$crate/luajit2/." "$work/"
cp "$crate/luajit_relver.txt" "$work/.relver"
chmod -R u+w "$work"
make -C "$work/src" -j2 HOST_CC=gcc CROSS=x86_64-w64-mingw32- TARGET_SYS=Windows >"$work.log" 2>&1 ||
  { tail -30 "$work.log" >&2; exit 1; }
# luajit.exe finds its jit.* modules in lua\jit\ beside itself (LuaJIT's
# default package.path on Windows starts with !\lua\?.lua).
rm -rf "$prefix"; mkdir -p "$prefix/lua/jit"
install -m 0755 "$work/src/luajit.exe" "$work/src/lua51.dll" "$prefix/"
install -m 0644 "$work"/src/jit/*.lua "$prefix/lua/jit/"
# Wine 8 lacks bcryptprimitives.dll (Windows 10 and later have it), whose
# ProcessPrng Rust's standard library imports: a stand-in for Wine only.
x86_64-w64-mingw32-gcc -O2 -shared -o "$prefix/bcryptprimitives.dll" "$here/process_prng.c" -ladvapi32
echo "$exe"
