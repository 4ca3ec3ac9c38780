#!/usr/bin/env bash
# A Python virtual environment with PyPI's `lupa`, whose lupa.luajit20
# extension embeds LuaJIT 2.0 (no profiler API). Prints the python path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/build/lupa-venv"
if ! "$venv/bin/python" -c 'import lupa.luajit20' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check 'lupa==2.8' >&2
fi
echo "$venv/bin/python"
