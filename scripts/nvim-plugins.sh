#!/usr/bin/env bash
# Real Neovim plugins for the Neovim suite (platform_spec/nvim_spec.lua),
# from PyPI: `nvim-zsh-profile` ships a lazy.nvim plugin tree (plenary.nvim,
# Comment.nvim, nui.nvim, lualine.nvim, ...) as package data. Installed in a
# virtual environment under build/; prints the directory holding the
# plugins, one directory each.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=$(bash "$root/scripts/pyvenv.sh" nvim-plugins-venv 'nvim-zsh-profile==0.1.0' nvim_zsh_profile)
"$py" -c 'import importlib.resources as r; print(r.files("nvim_zsh_profile") / "assets" / "nvim-lazy")'
