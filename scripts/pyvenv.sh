#!/usr/bin/env bash
# A Python virtual environment under build/NAME with one PyPI package in
# it, made when IMPORT does not import there yet. Prints the python path.
#
#   bash scripts/pyvenv.sh NAME PIP-REQUIREMENT IMPORT
set -euo pipefail
name=$1 requirement=$2 module=$3
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/build/$name"
if ! "$venv/bin/python" -c "import $module" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check "$requirement" >&2
fi
echo "$venv/bin/python"
