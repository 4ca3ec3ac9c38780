//! The coverage rewriter on arbitrary bytes: it never panics, and whenever
//! it accepts a chunk that LuaJIT loads, the rewrite loads too, with the
//! same line range for the main chunk.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use mlua::{Function, Lua};
use tecs_profile::rewrite::rewrite;

thread_local! {
    static LUA: RefCell<Lua> = RefCell::new(Lua::new());
}

const CHECK: &str = r#"
local src = ...
local f = loadstring(src, "=fuzz")
if not f then return nil end
local info = require("jit.util").funcinfo(f)
return info.linedefined .. "-" .. info.lastlinedefined
"#;

fuzz_target!(|data: &[u8]| {
    let Ok(r) = rewrite(data, 1) else { return };
    LUA.with(|lua| {
        let lua = lua.borrow();
        let check: Function = lua.load(CHECK).into_function().unwrap();
        let plain: Option<String> = check.call(lua.create_string(data).unwrap()).unwrap();
        let rewritten: Option<String> = check.call(lua.create_string(&r.code).unwrap()).unwrap();
        if plain.is_some() {
            assert_eq!(plain, rewritten, "{}", String::from_utf8_lossy(&r.code));
        }
    });
});
