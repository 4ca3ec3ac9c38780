#!/usr/bin/env bash
# A Python virtual environment with PyPI's `mcp` package, the reference MCP
# client the MCP server's tests drive it with. Prints the python path.
exec bash "$(dirname "$0")/pyvenv.sh" mcp-venv 'mcp>=1.9,<2' mcp.client.stdio
