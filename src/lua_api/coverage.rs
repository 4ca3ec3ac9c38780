//! The coverage rewriter's Lua side: `native.coverRewrite(source, id)`
//! returns the rewritten source and a table describing its counters, or nil
//! and a message when the source cannot be rewritten (the caller then loads
//! it unchanged). `native.coverGlobal` names the global table of counters
//! (the module's table declares both, in `lua_api`).

use mlua::{Lua, MultiValue, Value};

use crate::rewrite::rewrite;

pub fn cover_rewrite(lua: &Lua, (source, id): (mlua::LuaString, u64)) -> mlua::Result<MultiValue> {
    let r = match rewrite(&source.as_bytes(), id) {
        Ok(r) => r,
        Err(e) => {
            let msg = lua.create_string(e.to_string())?;
            return Ok(MultiValue::from_iter([Value::Nil, Value::String(msg)]));
        }
    };
    let info = lua.create_table()?;
    info.set("lines", lua.create_sequence_from(r.lines.iter().copied())?)?;
    info.set("statement", lua.create_sequence_from(r.statement.iter().copied())?)?;
    let functions = lua.create_table()?;
    for (i, f) in r.functions.iter().enumerate() {
        let entry = lua.create_table()?;
        entry.set("name", f.name.as_str())?;
        entry.set("line", f.line)?;
        entry.set("lastline", f.last_line)?;
        entry.set("counter", f.entry + 1)?;
        functions.raw_set(i + 1, entry)?;
    }
    info.set("functions", functions)?;
    Ok(MultiValue::from_iter([Value::String(lua.create_string(&r.code)?), Value::Table(info)]))
}
