#!/usr/bin/env bash
# A Python virtual environment with PyPI's `lupa`, whose lupa.luajit20
# extension embeds LuaJIT 2.0 (no profiler API). Prints the python path.
exec bash "$(dirname "$0")/pyvenv.sh" lupa-venv 'lupa==2.8' lupa.luajit20
