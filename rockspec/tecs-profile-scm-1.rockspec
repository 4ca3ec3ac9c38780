rockspec_format = "3.0"
package = "tecs-profile"
version = "scm-1"
source = {
   url = "git+https://example.invalid/tecs-profile.git",
}
description = {
   summary = "Native sampling profiler and trace-abort tracker for LuaJIT",
   detailed = [[
A Rust profiler callback installed with luaJIT_profile_start counts stacks
tagged with jit.zone paths and VM states; profile.sample() returns collapsed
stacks for flamegraph tools, profile.trace() reports JIT trace aborts.
]],
   license = "MIT",
}
dependencies = {
   "lua == 5.1",
}
build = {
   type = "make",
   build_target = "build",
   build_variables = {
      CARGO = "cargo",
      CFLAGS = "$(CFLAGS)",
   },
   install_target = "install",
   -- Neovim's plugin file (:TecsProfile; rocks.nvim puts a rock's plugin/
   -- on the runtime path): docs/neovim.md.
   copy_directories = { "plugin" },
   install_variables = {
      INST_LIBDIR = "$(LIBDIR)",
      INST_LUADIR = "$(LUADIR)",
      INST_BINDIR = "$(BINDIR)",
   },
}
