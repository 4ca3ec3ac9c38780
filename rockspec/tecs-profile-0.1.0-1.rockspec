rockspec_format = "3.0"
package = "tecs-profile"
version = "0.1.0-1"
-- The source rock made by `make dist` carries this archive (the tree at the
-- release's commit): `luarocks install` of that rock builds from it.
source = {
   url = "https://example.invalid/tecs-profile/tecs-profile-0.1.0.tar.gz",
   dir = "tecs-profile-0.1.0",
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
