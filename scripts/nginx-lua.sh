#!/usr/bin/env bash
# Unpacks Debian's nginx with its Lua module (lua-nginx-module, the core of
# OpenResty) into build/nginx-lua/ without installing it: the module's
# packages pull in OpenResty's libluajit2, which conflicts with the
# libluajit-5.1 the rest of the suite uses. Prints the unpacked root.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/build/nginx-lua"
pkgs=(nginx libnginx-mod-http-ndk libnginx-mod-http-lua lua-resty-core lua-resty-lrucache libluajit2-5.1-2 libpcre3)
if [ -x "$dest/root/usr/sbin/nginx" ] && [ -f "$dest/root/usr/lib/nginx/modules/ngx_http_lua_module.so" ]; then
  echo "$dest/root"; exit 0
fi
rm -rf "$dest"; mkdir -p "$dest/debs"
(
  cd "$dest/debs"
  if ! apt-get download "${pkgs[@]}" >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1
    apt-get download "${pkgs[@]}" >/dev/null
  fi
  for deb in *.deb; do dpkg-deb -x "$deb" "$dest/root"; done
)
echo "$dest/root"
