#!/usr/bin/env bash
# Installs the outside programs the output-format tests feed our files to:
#   inferno-flamegraph   (cargo install inferno), reads collapsed text
#   speedscope + ajv     (npm, into build/consumers), the published speedscope
#                        file-format schema and a JSON-schema validator
#   @modelcontextprotocol/inspector (npm, into build/consumers, pinned: later
#                        releases need Node 22), whose CLI mode drives
#                        tecs-profile mcp in spec/mcp_spec.lua
# Each is skipped when already present.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v inferno-flamegraph >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/inferno-flamegraph" ]; then
  echo "installing inferno (cargo install inferno --locked)"
  cargo install inferno --locked --quiet
fi
dir=build/consumers
if [ ! -f "$dir/node_modules/speedscope/package.json" ] || [ ! -f "$dir/node_modules/ajv/package.json" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "npm is required to install speedscope and ajv for the format tests" >&2
    exit 1
  fi
  echo "installing speedscope and ajv (npm, into $dir)"
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || echo '{"name":"tecs-profile-consumers","private":true}' > "$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --silent speedscope ajv >/dev/null
fi
inspector=0.15.0
if [ "$(node -p "require('./$dir/node_modules/@modelcontextprotocol/inspector/package.json').version" 2>/dev/null)" \
  != "$inspector" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "npm is required to install the MCP inspector for the MCP server's tests" >&2
    exit 1
  fi
  echo "installing @modelcontextprotocol/inspector@$inspector (npm, into $dir)"
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || echo '{"name":"tecs-profile-consumers","private":true}' > "$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --silent "@modelcontextprotocol/inspector@$inspector" >/dev/null
fi
