#!/usr/bin/env bash
# Builds a current LuaJIT 2.1 `luajit` executable from the source pinned by
# the luajit-src crate (see Cargo.toml beside this script) and installs it
# into build/luajit-current/ (bin/luajit, share/luajit-2.1/jit/*.lua).
# The install prefix is compiled into the binary, so jit.zone, jit.vmdef and
# jit.p are on its default package.path. Prints the binary's path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix="$root/build/luajit-current"
bin="$prefix/bin/luajit"
if [ -x "$bin" ] && "$bin" -e 'require("jit.zone")' 2>/dev/null; then
  echo "$bin"; exit 0
fi
# Locate the crate's source (cargo downloads it from crates.io if needed).
manifest=$(cargo metadata --quiet --format-version 1 --manifest-path "$here/Cargo.toml" |
  python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "luajit-src": print(p["manifest_path"])')
crate=$(dirname "$manifest")
work="$root/build/luajit-current-src"
rm -rf "$work"; mkdir -p "$work"
cp -R "$crate/luajit2/." "$work/"
cp "$crate/luajit_relver.txt" "$work/.relver"
chmod -R u+w "$work"
make -C "$work/src" -j2 PREFIX="$prefix" >"$work.log" 2>&1 || { tail -30 "$work.log" >&2; exit 1; }
# Install the way `make install` lays things out (the crate leaves out etc/,
# which that target needs): the executable and the jit.* Lua modules.
rm -rf "$prefix"; mkdir -p "$prefix/bin" "$prefix/share/luajit-2.1/jit"
install -m 0755 "$work/src/luajit" "$bin"
install -m 0644 "$work"/src/jit/*.lua "$prefix/share/luajit-2.1/jit/"
echo "$bin"
