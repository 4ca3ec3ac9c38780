//! Tables of the native module whose fields are built when first read.
//!
//! Everything the module hands Lua lives on the Lua heap, which the
//! program's collector marks on every cycle: the option declarations with
//! their help texts, the format registry, each function's closure. A
//! program that loads the profiler and never asks for them should not pay
//! for them, so a module table starts empty, with an `__index` that builds
//! the field asked for from its declaration here, stores it in the table
//! (the next read is a plain one) and returns it. `pairs` sees only the
//! fields built so far: every table handed out whole (`native.options`) is
//! built whole.

use std::cell::Cell;

use mlua::{Lua, Table, Value};

/// Builds one field; gets the table the field goes in (a field may read
/// others of the same table, built in turn).
pub type Build = fn(&Lua, &Table) -> mlua::Result<Value>;

/// Adds a group of fields to the table at once (a module that registers
/// its functions itself): run when a name no [`Build`] declares is read.
pub type Register = fn(&Lua, &Table) -> mlua::Result<()>;

/// A table whose fields are `fields`, each built when first read; a name
/// none declares runs `rest` (once) and is then looked up again.
pub fn table(lua: &Lua, fields: &'static [(&'static str, Build)], rest: Option<Register>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let registered = Cell::new(rest.is_none());
    let index = lua.create_function(move |lua, (t, key): (Table, Value)| {
        let Value::String(name) = &key else { return Ok(Value::Nil) };
        let bytes = name.as_bytes();
        let wanted: &[u8] = &bytes;
        if let Some((_, build)) = fields.iter().find(|(n, _)| n.as_bytes() == wanted) {
            let value = build(lua, &t)?;
            t.raw_set(key, value.clone())?;
            return Ok(value);
        }
        match rest {
            Some(register) if !registered.replace(true) => {
                register(lua, &t)?;
                t.raw_get(key)
            }
            _ => Ok(Value::Nil),
        }
    })?;
    let meta = lua.create_table()?;
    meta.raw_set("__index", index)?;
    t.set_metatable(Some(meta))?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use mlua::{Lua, Table, Value};

    #[test]
    fn a_field_is_built_when_first_read_and_stored() {
        let lua = Lua::new();
        let native = super::super::exports(&lua).expect("exports");
        assert_eq!(native.raw_len(), 0);
        assert!(matches!(native.raw_get::<Value>("options").unwrap(), Value::Nil), "nothing built at load");
        let options: Table = native.get("options").unwrap();
        let again: Table = native.raw_get("options").unwrap();
        assert_eq!(options.to_pointer(), again.to_pointer(), "built once, then read plainly");
        assert!(matches!(native.get::<Value>("no such field").unwrap(), Value::Nil));
    }

    #[test]
    fn a_name_no_field_declares_registers_the_rest_once() {
        let lua = Lua::new();
        let native = super::super::exports(&lua).expect("exports");
        let raw: Table = native.get("raw").unwrap();
        assert!(matches!(raw.raw_get::<Value>("start").unwrap(), Value::Nil));
        assert!(matches!(raw.get::<Value>("start").unwrap(), Value::Function(_)));
        #[cfg(unix)]
        {
            // The control channel's functions register themselves, all at once.
            assert!(matches!(raw.raw_get::<Value>("listen").unwrap(), Value::Nil));
            assert!(matches!(raw.get::<Value>("listen").unwrap(), Value::Function(_)));
            assert!(matches!(raw.raw_get::<Value>("controlTargets").unwrap(), Value::Function(_)));
        }
        assert!(matches!(raw.get::<Value>("no such function").unwrap(), Value::Nil));
    }
}
