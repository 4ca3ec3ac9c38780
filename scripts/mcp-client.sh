#!/usr/bin/env bash
# A Python virtual environment with PyPI's `mcp` package, the reference MCP
# client the MCP server's tests drive it with. Prints the python path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/build/mcp-venv"
if ! "$venv/bin/python" -c 'import mcp.client.stdio' 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv" >/dev/null
  "$venv/bin/pip" install -q --disable-pip-version-check 'mcp>=1.9,<2' >&2
fi
echo "$venv/bin/python"
