#!/usr/bin/env bash
# Installs what the platform suites need, if missing: LÖVE and a virtual X
# server (love, xvfb, xauth), python3-venv for the LuaJIT 2.0 check and the
# Neovim suite's plugins, chromium for the report page's browser test, and
# Debian's neovim.
set -euo pipefail
need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_cmd love     || need+=(love)
have_cmd xvfb-run || need+=(xvfb)
have_cmd xauth    || need+=(xauth)
have_cmd chromium || need+=(chromium)
have_cmd nvim     || need+=(neovim)
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "installing: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
