#!/usr/bin/env bash
# Unpacks OpenResty's LuaJIT (Debian's `luajit2` package) into build/luajit2/
# without installing it: the package conflicts with Debian's `luajit`, which
# the rest of the suite uses. Prints the path of a `luajit` launcher that puts
# the package's own jit/*.lua (its vmdef matches its VM) first on
# package.path. The executable is statically linked, so nothing else is needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/build/luajit2"
launcher="$dest/bin/luajit"
if [ -x "$launcher" ] && "$launcher" -e 'assert(require("table.isempty"))' 2>/dev/null; then
  echo "$launcher"; exit 0
fi
rm -rf "$dest"; mkdir -p "$dest/debs" "$dest/bin"
(
  cd "$dest/debs"
  if ! apt-get download luajit2 libluajit2-5.1-common >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1
    apt-get download luajit2 libluajit2-5.1-common >/dev/null
  fi
  for deb in *.deb; do dpkg-deb -x "$deb" "$dest/root"; done
)
jitdir=$(dirname "$(find "$dest/root/usr/share" -path '*/jit/vmdef.lua' | head -1)")
[ -x "$dest/root/usr/bin/luajit" ] && [ -d "$jitdir" ] || { echo "luajit2: unexpected package layout" >&2; exit 1; }
cat >"$launcher" <<SH
#!/bin/sh
# OpenResty's luajit2, unpacked from the Debian package by scripts/luajit2.sh.
exec "$dest/root/usr/bin/luajit" -e "package.path = '$(dirname "$jitdir")/?.lua;' .. package.path" "\$@"
SH
chmod +x "$launcher"
echo "$launcher"
