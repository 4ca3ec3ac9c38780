#!/usr/bin/env bash
# Installs the system packages the build and the tests need, if missing.
set -euo pipefail
need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg -s "$1" >/dev/null 2>&1; }
have_cmd luajit      || need+=(luajit)
have_pkg libluajit-5.1-dev || need+=(libluajit-5.1-dev)
have_cmd busted      || need+=(lua-busted)
have_cmd luarocks    || need+=(luarocks)
have_cmd pkg-config  || need+=(pkg-config)
have_cmd cc          || need+=(gcc)
# `go tool pprof` reads the pprof files back in the format tests.
have_cmd go          || need+=(golang-go)
# `genhtml` reads the coverage lcov files back in the coverage tests.
have_cmd genhtml     || need+=(lcov)
# `curl` asks the live page's HTTP server in spec/live_spec.lua.
have_cmd curl        || need+=(curl)
# `strace` counts a listening program's system calls in spec/listen_spec.lua.
have_cmd strace      || need+=(strace)
if [ ${#need[@]} -gt 0 ]; then
  if ! have_cmd apt-get; then
    echo "missing: ${need[*]} (install them with your package manager)" >&2
    exit 1
  fi
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "installing: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! have_cmd cargo; then
  echo "cargo (Rust) is required: see https://rustup.rs" >&2
  exit 1
fi
