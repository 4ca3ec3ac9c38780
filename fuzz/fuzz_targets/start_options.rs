//! The option reader of `tecs.profile.native.start` on arbitrary option
//! tables: every outcome is Ok or an error naming an option; never a panic.
//! Bytes are decoded into (key, value) pairs: known and unknown keys, values
//! of every Lua type, edge numbers.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use mlua::{Lua, Value};
use tecs_profile::lua_api::{check_start_options, start_option_names};

thread_local! {
    static LUA: RefCell<Lua> = RefCell::new(Lua::new());
}

const NUMBERS: [f64; 12] =
    [0.0, -1.0, 1.0, 0.5, 16.0, 1e3, 1e8, 1e9, 6e7, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];

fn value(lua: &Lua, kind: u8, payload: &[u8]) -> Value {
    match kind % 8 {
        0 => Value::Nil,
        1 => Value::Boolean(payload.first().is_some_and(|b| b & 1 == 1)),
        2 => Value::Number(NUMBERS[payload.first().copied().unwrap_or(0) as usize % NUMBERS.len()]),
        3 => {
            let mut b = [0u8; 8];
            for (i, x) in payload.iter().take(8).enumerate() {
                b[i] = *x;
            }
            Value::Number(f64::from_le_bytes(b))
        }
        4 => Value::Integer(i64::from_le_bytes({
            let mut b = [0u8; 8];
            for (i, x) in payload.iter().take(8).enumerate() {
                b[i] = *x;
            }
            b
        }) as _),
        5 => Value::String(lua.create_string(payload).unwrap()),
        6 => {
            let names = start_option_names();
        let t = lua.create_table().unwrap();
            for (i, b) in payload.iter().take(4).enumerate() {
                let _ = t.raw_set(i as i64 - 1, lua.create_string([*b]).unwrap());
            }
            Value::Table(t)
        }
        _ => Value::Function(lua.create_function(|_, ()| Ok(())).unwrap()),
    }
}

fuzz_target!(|data: &[u8]| {
    LUA.with(|lua| {
        let lua = lua.borrow();
        let names = start_option_names();
        let t = lua.create_table().unwrap();
        // Records: [key selector][value kind][payload len][payload...]
        let mut rest = data;
        while rest.len() >= 3 {
            let (sel, kind, len) = (rest[0], rest[1], rest[2] as usize % 16);
            rest = &rest[3..];
            let payload = &rest[..len.min(rest.len())];
            rest = &rest[payload.len()..];
            let v = value(&lua, kind, payload);
            let idx = sel as usize;
            if idx < names.len() * 8 {
                let _ = t.raw_set(names[idx % names.len()], v);
            } else if sel % 2 == 0 {
                let _ = t.raw_set(lua.create_string(payload).unwrap(), v);
            } else {
                let _ = t.raw_set(sel as i64, v);
            }
        }
        if let Err(msg) = check_start_options(&t) {
            assert!(
                msg.starts_with("option '") || msg.starts_with("unknown option ") || msg.starts_with("bad argument"),
                "unexpected message: {}",
                msg
            );
        }
    });
});
