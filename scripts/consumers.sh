#!/usr/bin/env bash
# Installs the outside programs the output-format tests feed our files to:
#   inferno-flamegraph   (cargo install inferno), reads collapsed text
#   speedscope + ajv     (npm, into build/consumers), the published speedscope
#                        file-format schema and a JSON-schema validator
#   the MCP clients      (PyPI, npm: scripts/mcp-clients.sh pins them), which
#                        drive tecs-profile mcp in spec/mcp_clients_spec.lua
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
bash scripts/mcp-clients.sh >/dev/null
