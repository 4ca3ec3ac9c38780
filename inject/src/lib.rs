//! The LD_PRELOAD library of `tecs-profile love`: it runs the package's
//! boot chunk (`tecs/profile/host/love_boot.lua`) in an unmodified LÖVE game.
//!
//! LÖVE's `main` creates its Lua state, calls `luaL_openlibs` on it, then
//! preloads and boots `love`. This library exports `luaL_openlibs`: the
//! dynamic linker binds `love`'s call to it, it calls LuaJIT's own (the next
//! definition, `dlsym(RTLD_NEXT)`), and on the process's main thread it runs
//! the boot chunk in that state with the package's directories and the
//! command line's options as arguments. `love.thread` workers open their libraries on threads of
//! their own and are left alone.
//!
//! The command line hands over what the boot needs in environment variables
//! (`TECS_PROFILE_LOVE_*`, see `lua/tecs/profile/cli/love.lua`). At the
//! first call they are read and removed, and `LD_PRELOAD` is given back the
//! value the user had (or unset), so that neither the game nor the programs
//! it starts see a difference. A boot that fails says so on stderr; nothing
//! is raised into the game.
//!
//! This crate is a sys layer of its own: every `extern "C"` item and every
//! `unsafe` block is here, each with its `// SAFETY:` reason. It links no
//! Lua: the Lua C API is looked up with `dlsym` in the LuaJIT `love` links.

//!
//! It is built for Linux only (LD_PRELOAD, and LÖVE's Linux builds link
//! LuaJIT dynamically); elsewhere the library is empty.

#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(target_os = "linux")]
mod preload;
