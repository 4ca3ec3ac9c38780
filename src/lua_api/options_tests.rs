//! Option reading: bounds, unknown names, wrong types, defaults.

use mlua::{Lua, Table, Value};

use super::*;
use crate::lua_api::report_options::{self, REPORT_OPTIONS};

fn table(lua: &Lua, code: &str) -> Value {
    lua.load(code).eval().expect("option table")
}

fn sample_error(code: &str) -> String {
    let lua = Lua::new();
    let opts = table(&lua, code);
    match read_options(&opts, &Value::Nil) {
        Ok(_) => panic!("{} was accepted", code),
        Err(e) => e,
    }
}

#[test]
fn bounds_are_inclusive_and_checked() {
    let lua = Lua::new();
    for code in [
        "{ intervalMs = 0.1 }",
        "{ intervalMs = 60000 }",
        "{ stackDepth = 1 }",
        "{ stackDepth = 1000 }",
        "{ maxStacks = 1 }",
        "{ maxStacks = 100000000 }",
    ] {
        assert!(read_options(&table(&lua, code), &Value::Nil).is_ok(), "{}", code);
    }
    assert_eq!(
        sample_error("{ intervalMs = 0 }"),
        "option 'intervalMs' must be a number of milliseconds from 0.1 to 60000 (got number 0)"
    );
    assert_eq!(
        sample_error("{ stackDepth = 1001 }"),
        "option 'stackDepth' must be an integer from 1 to 1000 (got number 1001)"
    );
    assert!(sample_error("{ stackDepth = 2.5 }").starts_with("option 'stackDepth'"));
    assert!(sample_error("{ maxStacks = 0/0 }").starts_with("option 'maxStacks'"));
    assert!(sample_error("{ intervalMs = math.huge }").starts_with("option 'intervalMs'"));
    assert_eq!(
        sample_error("{ maxStacks = 0 }"),
        "option 'maxStacks' must be an integer from 1 to 100000000 (got number 0)"
    );
}

#[test]
fn unknown_options_are_named_with_the_known_ones() {
    let known = names(SAMPLE_OPTIONS).join(", ");
    assert_eq!(
        known,
        "autosavePath, autosaveSeconds, clock, flushTraces, format, intervalMs, loveZones, maxStacks, nativeFrames, precision, resolveC, skipStartingThread, skipThread, slowFrameMs, stackDepth, timelineSamples, zone"
    );
    assert_eq!(sample_error("{ intervalms = 1 }"), format!("unknown option 'intervalms' (known options: {})", known));
    assert!(sample_error("{ [true] = 1 }").starts_with("unknown option boolean ("));
    assert!(sample_error("{ [2.5] = 1 }").starts_with("unknown option number 2.5 ("));
    assert!(sample_error("{ 1 }").starts_with("unknown option number 1 ("));
}

#[test]
fn wrong_types_say_what_was_given() {
    assert_eq!(sample_error("{ clock = 'CPU' }"), "option 'clock' must be \"cpu\" or \"wall\" (got string \"CPU\")");
    assert_eq!(sample_error("{ resolveC = 'yes' }"), "option 'resolveC' must be a boolean (got string \"yes\")");
    assert!(sample_error("{ intervalMs = true }").ends_with("(got boolean)"));
    assert!(sample_error("{ intervalMs = {} }").ends_with("(got table)"));
    assert!(sample_error("{ intervalMs = print }").ends_with("(got function)"));
    assert!(sample_error("{ zone = '///' }").starts_with("option 'zone' must be a non-empty zone path string"));
    assert!(sample_error(&format!("{{ clock = '{}' }}", "x".repeat(100)))
        .contains(&format!("got string \"{}...\"", "x".repeat(37))));
    let lua = Lua::new();
    assert_eq!(
        read_options(&Value::Integer(42), &Value::Nil).err().unwrap(),
        "bad argument #1 'opts' (table or nil expected, got number 42)"
    );
    assert!(read_options(&Value::Nil, &table(&lua, "{ zones = 'x' }")).err().unwrap().contains("field 'zones'"));
}

#[test]
fn defaults_are_the_declared_ones() {
    let o = read_options(&Value::Nil, &Value::Nil).expect("defaults");
    assert_eq!(o.interval_ns, 1_000_000);
    assert_eq!(o.depth, 16);
    assert_eq!(o.max_stacks, DEFAULT_MAX_STACKS);
    assert_eq!(o.clock, ClockKind::Cpu);
    assert_eq!(o.precision, Precision::Auto);
    assert!(o.resolve_c && o.env.precise && o.filter.is_none());
    let lua = Lua::new();
    let settings = settings_table(&lua, SAMPLE_OPTIONS, None).unwrap();
    assert_eq!(settings.get::<f64>("intervalMs").unwrap(), 1.0);
    assert_eq!(settings.get::<String>("format").unwrap(), "auto");
    assert!(settings.get::<Option<String>>("zone").unwrap().is_none());
}

#[test]
fn given_values_are_converted() {
    let lua = Lua::new();
    let opts = table(&lua, "{ intervalMs = 0.25, zone = 'a/b//', stackDepth = 3, clock = 'wall', precision = 'line' }");
    let o = read_options(&opts, &Value::Nil).unwrap();
    assert_eq!(o.interval_ns, 250_000);
    assert_eq!(o.filter.as_deref(), Some(&b"a/b"[..]));
    assert_eq!(o.depth, 3);
    assert_eq!(o.clock, ClockKind::Wall);
    assert_eq!(o.precision, Precision::Line);
    let Value::Table(t) = &opts else { unreachable!() };
    let settings: Table = settings_table(&lua, SAMPLE_OPTIONS, Some(t)).unwrap();
    assert_eq!(settings.get::<String>("zone").unwrap(), "a/b");
}

#[test]
fn every_declaration_has_a_default_it_accepts() {
    let lua = Lua::new();
    for function in report_options::FUNCTIONS {
        let decls = report_options::declared(function).unwrap();
        let defaults = settings_table(&lua, decls, None).unwrap();
        check_table(decls, &Value::Table(defaults)).unwrap_or_else(|e| panic!("{}: {}", function, e));
    }
}

#[test]
fn every_declaration_says_what_it_does() {
    for function in report_options::FUNCTIONS {
        for d in report_options::declared(function).unwrap() {
            assert!(d.help.len() > 10 && !d.help.ends_with('.'), "{}: option '{}' has no help text", function, d.name);
        }
    }
}

#[test]
fn report_options_are_read_from_their_declaration() {
    let lua = Lua::new();
    let err = |code: &str| check_table(REPORT_OPTIONS, &table(&lua, code)).unwrap_err();
    assert!(err("{ by = 'caller' }").starts_with("option 'by' must be \"function\" or"), "no alias for 'by'");
    assert!(err("{ depth = 0 }").starts_with("option 'depth' must be a non-zero integer"));
    assert!(err("{ colour = true }").starts_with("unknown option 'colour'"));
    let Value::Table(t) =
        table(&lua, "{ by = 'line', ['then'] = 'caller', sort = 'total', annotate = 'hot', context = 5 }")
    else {
        unreachable!()
    };
    let o = report_options::read(Some(t)).unwrap();
    assert_eq!(o.sort, crate::views::Metric::Total);
    assert!(matches!(o.annotate, Some(crate::views::Annotate::Excerpts(5))));
    let d = report_options::read(None).unwrap();
    assert_eq!((d.min_percent, d.depth, d.raw), (3.0, 1, false));
}

#[test]
fn numbers_are_shown_as_lua_shows_them() {
    assert_eq!(describe(&Value::Number(0.05)), "number 0.05");
    assert_eq!(describe(&Value::Number(1e9)), "number 1000000000");
    assert_eq!(describe(&Value::Number(1e20)), "number 1e+20");
    assert_eq!(describe(&Value::Number(f64::INFINITY)), "number inf");
    assert_eq!(describe(&Value::Integer(-1)), "number -1");
}
