//! `native.json(value)`: JSON text of a Lua value, by serde_json, for the
//! data a page carries inside a `<script>` element.
//!
//! A table with a `[1]`, or an empty one, is an array (its `ipairs` part);
//! any other table, and one whose metatable has `__jsontype = "object"`
//! (an empty object), an object of its string keys, sorted. Integral numbers
//! are written as integers, NaN and infinities as `null`. `<`, `>` and `&`
//! are escaped (`\u003c`...), so the text can sit inside an HTML element:
//! in JSON text they only occur inside strings, where the escape means the
//! same character.

use mlua::{Lua, Value};
use serde_json::{Map, Number, Value as Json};

/// Nesting beyond this is refused (a table that contains itself).
const MAX_DEPTH: usize = 200;

fn convert(v: &Value, depth: usize) -> Result<Json, String> {
    if depth > MAX_DEPTH {
        return Err(format!("tables nested more than {} deep (a table that contains itself?)", MAX_DEPTH));
    }
    Ok(match v {
        Value::Nil => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(i) => Json::Number((*i).into()),
        Value::Number(n) => number(*n),
        Value::String(s) => Json::String(s.to_string_lossy()),
        Value::Table(t) => {
            let first: Value = t.raw_get(1).map_err(|e| e.to_string())?;
            let empty = t.clone().pairs::<Value, Value>().next().is_none();
            let object = t
                .metatable()
                .and_then(|m| m.raw_get::<Option<String>>("__jsontype").ok().flatten())
                .is_some_and(|k| k == "object");
            if !object && (!first.is_nil() || empty) {
                let mut list = Vec::new();
                for item in t.clone().sequence_values::<Value>() {
                    list.push(convert(&item.map_err(|e| e.to_string())?, depth + 1)?);
                }
                Json::Array(list)
            } else {
                let mut map = Map::new();
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, v) = pair.map_err(|e| e.to_string())?;
                    if let Value::String(k) = k {
                        map.insert(k.to_string_lossy(), convert(&v, depth + 1)?);
                    }
                }
                Json::Object(map)
            }
        }
        _ => Json::Null,
    })
}

fn number(n: f64) -> Json {
    if n.is_finite() && n == n.trunc() && n.abs() < 9_007_199_254_740_992.0 {
        Json::Number((n as i64).into())
    } else {
        Number::from_f64(n).map_or(Json::Null, Json::Number)
    }
}

/// The JSON text of `v`, safe inside an HTML element.
pub fn to_json(v: &Value) -> Result<String, String> {
    let text = serde_json::to_string(&convert(v, 0)?).map_err(|e| e.to_string())?;
    Ok(text.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026"))
}

pub(super) fn json(_: &Lua, v: Value) -> mlua::Result<String> {
    to_json(&v).map_err(|e| mlua::Error::runtime(format!("json: bad argument #1 'value': {}", e)))
}

/// `native.jsonDecode(text)`: the Lua value of JSON text (objects and
/// arrays as tables, `null` as nil), or nil and why it is not JSON.
pub(super) fn json_decode(lua: &Lua, text: mlua::LuaString) -> mlua::Result<(Value, Option<String>)> {
    match serde_json::from_slice::<Json>(&text.as_bytes()) {
        Ok(v) => Ok((to_lua(lua, &v)?, None)),
        Err(e) => Ok((Value::Nil, Some(e.to_string()))),
    }
}

/// JSON as a Lua value (objects and arrays as tables, null as nil).
pub(super) fn to_lua(lua: &Lua, v: &Json) -> mlua::Result<Value> {
    Ok(match v {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        Json::String(s) => Value::String(lua.create_string(s)?),
        Json::Array(list) => {
            let t = lua.create_table_with_capacity(list.len(), 0)?;
            for (i, item) in list.iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
        Json::Object(map) => {
            let t = lua.create_table_with_capacity(0, map.len())?;
            for (k, item) in map {
                t.raw_set(k.as_str(), to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(lua: &Lua, code: &str) -> String {
        to_json(&lua.load(code).eval::<Value>().unwrap()).unwrap()
    }

    #[test]
    fn lua_values_become_json_as_the_page_reads_them() {
        let lua = Lua::new();
        assert_eq!(of(&lua, "{}"), "[]");
        assert_eq!(of(&lua, "{ 1, 2.5, 'x' }"), r#"[1,2.5,"x"]"#);
        assert_eq!(of(&lua, "{ b = true, a = { n = 3 }, [7] = 'dropped' }"), r#"{"a":{"n":3},"b":true}"#);
        assert_eq!(of(&lua, "{ 0/0, 1/0, -1/0, 2^53, 1e300 }"), "[null,null,null,9007199254740992,1e+300]");
        assert_eq!(of(&lua, "'</script>&\"\\n'"), r#""\u003c/script\u003e\u0026\"\n""#);
        assert_eq!(of(&lua, "{ s = '\\0\\31' }"), r#"{"s":"\u0000\u001f"}"#);
        assert_eq!(of(&lua, "setmetatable({}, { __jsontype = 'object' })"), "{}");
        let err = to_json(&lua.load("local t = {} t[1] = t return t").eval::<Value>().unwrap()).unwrap_err();
        assert!(err.contains("nested more than"), "{}", err);
    }
}
