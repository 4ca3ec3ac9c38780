//! The rewriter against LuaJIT itself (the test build links the system
//! libluajit): rewritten chunks load exactly when the originals do, keep
//! every function's line range, and compute the same results.

use super::{rewrite, COUNTERS_GLOBAL};
use mlua::{Lua, Value};

/// Loads `src` and reports, for the main chunk and every nested function
/// prototype (walked through jit.util), `linedefined-lastlinedefined`, or
/// the load error.
const SHAPE: &str = r#"
local src, name = ...
local f, err = loadstring(src, name)
if not f then return "error: " .. err end
local util = require("jit.util")
local out = {}
local function walk(fn)
  local info = util.funcinfo(fn)
  out[#out + 1] = info.linedefined .. "-" .. info.lastlinedefined
  local i = -1
  while true do
    local k = util.funck(fn, i)
    if k == nil then break end
    if type(k) == "proto" then walk(k) end
    i = i - 1
  end
end
walk(f)
return table.concat(out, " ")
"#;

/// Runs `src` with counters installed and returns its results and error as
/// text, and the counter table.
const RUN: &str = r#"
local src, name, id, global = ...
local counters = setmetatable({}, { __index = function() return 0 end })
_G[global] = { [id] = counters }
local f, err = loadstring(src, name)
if not f then return "load error: " .. err, counters end
local res = { pcall(f) }
local parts = {}
for i = 1, #res do parts[i] = tostring(res[i]) end
_G[global] = nil
return table.concat(parts, ","), counters
"#;

fn shape(lua: &Lua, src: &[u8]) -> String {
    let f = lua.load(SHAPE).into_function().unwrap();
    f.call((lua.create_string(src).unwrap(), "=chunk")).unwrap()
}

fn run(lua: &Lua, src: &[u8]) -> (String, mlua::Table) {
    let f = lua.load(RUN).into_function().unwrap();
    f.call((lua.create_string(src).unwrap(), "=chunk", 1, COUNTERS_GLOBAL)).unwrap()
}

/// Asserts the rewrite of `src` loads iff `src` loads, keeps every line
/// range, and runs to the same results; returns the counters by line.
fn same(src: &str) -> Vec<(u32, i64)> {
    let lua = Lua::new();
    let r = rewrite(src.as_bytes(), 1).unwrap_or_else(|e| panic!("rewrite failed: {e}\n{src}"));
    assert_eq!(shape(&lua, src.as_bytes()), shape(&lua, &r.code), "shape of\n{}", String::from_utf8_lossy(&r.code));
    let (plain, _) = run(&lua, src.as_bytes());
    let (covered, counters) = run(&lua, &r.code);
    assert_eq!(plain, covered, "results of\n{}", String::from_utf8_lossy(&r.code));
    r.lines
        .iter()
        .enumerate()
        .map(|(i, &line)| {
            (line, counters.get::<Option<i64>>(format!("{}{}", super::COUNTER_KEY, i + 1)).unwrap().unwrap_or(0))
        })
        .collect()
}

#[test]
fn counts_a_loop_body_and_function_entries() {
    let counts = same("local n = 0\nlocal function f() n = n + 1 end\nfor i = 1, 1000 do\n  f()\nend\nreturn n\n");
    // f's entry count is its first statement's counter; the loop header
    // counts its entry and each iteration, as a line hook sees it.
    assert_eq!(counts, vec![(1, 1), (2, 1), (2, 1000), (3, 1001), (4, 1000), (6, 1)]);
    let r = rewrite(b"local function f() n = 1 end\nlocal function g() end\nlocal function h() ; end\n", 1).unwrap();
    let entries: Vec<(usize, bool)> = r.functions.iter().map(|f| (f.entry, r.statement[f.entry])).collect();
    assert_eq!(entries, vec![(1, true), (3, false), (5, false)]);
}

#[test]
fn luajit_numerals_are_single_tokens() {
    same("local a = 1ULL + 0x10LL + 2ll\nlocal b = 1i\nlocal c = 0x1p4 + 0x.8p-1 + 1e+5 + .5 + 3.e2 + 0xA.8P+1\nreturn tostring(a), tostring(b), c\n");
}

#[test]
fn long_strings_and_comments_of_every_level() {
    same("local s = [[a]=]b]]\n--[==[ x = 1\n]] ]=] ]==] local t = [=[\n]]\n]=]\n--[[\nerror()]] return s .. t, [==[]]\n\n]==]\n");
    same("local s = 'a\\z\n   b\\\nc' -- [[ not long\nreturn s, \"q\\\"\"\n");
}

#[test]
fn goto_and_labels_at_block_end() {
    same("local out = 0\nfor i = 1, 10 do\n  if i % 2 == 0 then goto continue end\n  local x = i\n  out = out + x\n  ::continue::\nend\ndo goto done; local y = 1; ::done:: end\nreturn out\n");
}

#[test]
fn return_and_break_anywhere() {
    same("local function f(x) if x then return 1 elseif x == false then return 2 else return end end\nwhile true do break end\nrepeat local z = 1 until z == 1\ndo return f(true), f(false), f() end\n");
}

#[test]
fn ambiguous_calls_keep_their_meaning() {
    // LuaJIT rejects the first (ambiguous syntax), and must still reject it.
    same("local b = print\nlocal a = b\n(print)('x')\n");
    same("local t = {}\nlocal a = 1;\n(function() t.x = 2 end)()\nreturn t.x\n");
    same("local f = function(...) return select('#', ...) end\nlocal s = 'x'\n;(f)(1, 2)\nreturn f(1, nil, 3), s:upper(), #s, -#s, not nil\n");
}

#[test]
fn shebang_and_byte_order_mark() {
    let counts = same("#!/usr/bin/env luajit\nlocal a = 1\nreturn a\n");
    assert_eq!(counts, vec![(2, 1), (3, 1)]);
    same("\u{feff}local a = 1\nreturn a\n");
    same("\u{feff}# comment line\nreturn 2\n");
}

#[test]
fn methods_varargs_and_constructors() {
    same("local obj = { n = 0, f = function(self, ...) self.n = self.n + select('#', ...) return self end }\nfunction obj:g(a,\n   b) return a + b end\nfunction obj.h.i() end\n");
    same("local obj = { n = 0 }\nfunction obj:g(a,\n   b)\n  return a + b\nend\nlocal t = { [1] = 2; x = obj:g(1, 2), obj.g(obj, 3, 4), 'z' }\nreturn t.x, t[2], #t\n");
}

#[test]
fn function_names_and_lines() {
    let r = rewrite(b"local function a() end\nfunction M.b:c()\nend\nlocal d = function() end\nx.y = function() end\nreturn function() end\n", 1).unwrap();
    let names: Vec<(String, u32, u32)> = r.functions.iter().map(|f| (f.name.clone(), f.line, f.last_line)).collect();
    assert_eq!(
        names,
        vec![
            ("a".into(), 1, 1),
            ("M.b:c".into(), 2, 3),
            ("d".into(), 4, 4),
            ("x.y".into(), 5, 5),
            ("anonymous@6".into(), 6, 6)
        ]
    );
}

#[test]
fn unparseable_chunks_are_refused() {
    for bad in ["local = 1", "x = [==[ open", "if x then", "return 1 x = 2", "f(", "a.b:c = 1", "'open"] {
        assert!(rewrite(bad.as_bytes(), 1).is_err(), "{bad}");
    }
    let empty = rewrite(b"-- nothing\n;;\n", 1).unwrap();
    assert!(empty.lines.is_empty());
    assert_eq!(empty.code, b"-- nothing\n;;\n");
}

/// Every prefix and every one-token deletion of the samples: when the
/// rewriter accepts a variant, its rewrite loads exactly when the variant
/// does and has the same function line ranges.
#[test]
fn mutated_sources_load_alike() {
    let samples = [
        "local a, b = 1, 2\nlocal function f(x, ...)\n  if x then return ... end\n  for i = 1, 3 do a = a + i end\n  return b\nend\nt = { f = function() return f end, [a] = b; 'c' }\nwhile a > 0 do a = a - 1; goto skip; ::skip:: end\nrepeat b = b - 1 until b < 0\nreturn f(1), t.f()()\n",
        "local s = [=[x]=] .. 'y' -- c\nlocal o = {}\nfunction o:m(k) self[k] = 1ULL end\no:m 'k'\no.m(o, \"k2\")\nprint(#s)\n(f)()\nlocal g = not -s\ndo break end\n",
    ];
    let lua = Lua::new();
    let mut checked = 0;
    for sample in samples {
        let (toks, _) = super::lex::tokenize(sample.as_bytes()).unwrap();
        let mut variants: Vec<String> = Vec::new();
        for t in &toks {
            variants.push(sample[..t.start].to_string());
            variants.push(format!("{}{}", &sample[..t.start], &sample[t.end..]));
        }
        for v in variants {
            if let Ok(r) = rewrite(v.as_bytes(), 1) {
                assert_eq!(
                    shape(&lua, v.as_bytes()).starts_with("error"),
                    shape(&lua, &r.code).starts_with("error"),
                    "{v}"
                );
                if !shape(&lua, v.as_bytes()).starts_with("error") {
                    assert_eq!(shape(&lua, v.as_bytes()), shape(&lua, &r.code), "{v}");
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "only {checked} variants were rewritable");
    let _ = Value::Nil;
}

/// Random mutations of the syntax fixtures (a fixed seed, so a failure
/// reproduces): byte ranges deleted, duplicated or swapped for tokens of
/// other places. The rewriter never panics; when it accepts a variant, its
/// rewrite loads exactly when the variant does, with the same function
/// line ranges. The `cargo fuzz` target (`fuzz/`) runs the same check on
/// arbitrary bytes.
#[test]
fn randomly_mutated_sources_load_alike() {
    let root = env!("CARGO_MANIFEST_DIR");
    let corpus: Vec<Vec<u8>> = ["cover_syntax.lua", "cover_oracle.lua"]
        .iter()
        .map(|f| std::fs::read(format!("{root}/spec/fixtures/{f}")).unwrap())
        .collect();
    let lua = Lua::new();
    let mut state: u64 = 0x7ec5_0b5e_ed00_0001;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    let (mut accepted, mut tried) = (0, 0);
    for round in 0..3000 {
        let src = &corpus[round % corpus.len()];
        let (toks, _) = super::lex::tokenize(src).unwrap();
        let mut v = src.clone();
        for _ in 0..1 + next(3) {
            let a = next(v.len());
            let b = (a + 1 + next(40)).min(v.len());
            match next(3) {
                0 => {
                    v.drain(a..b);
                }
                1 => {
                    let piece = v[a..b].to_vec();
                    let at = next(v.len());
                    v.splice(at..at, piece);
                }
                _ => {
                    let t = &toks[next(toks.len())];
                    let piece = src[t.start..t.end].to_vec();
                    v.splice(a..b, piece);
                }
            }
        }
        tried += 1;
        if let Ok(r) = rewrite(&v, 1) {
            let (plain, rewritten) = (shape(&lua, &v), shape(&lua, &r.code));
            assert_eq!(plain.starts_with("error"), rewritten.starts_with("error"), "{}", String::from_utf8_lossy(&v));
            if !plain.starts_with("error") {
                assert_eq!(plain, rewritten, "{}", String::from_utf8_lossy(&v));
                accepted += 1;
            }
        }
    }
    assert!(accepted > 100, "only {accepted} of {tried} variants loaded and were rewritten");
}

#[test]
fn elseif_conditions_count_each_evaluation() {
    let src = "local function f(x)\n  if x == 1 then\n    return 'a'\n  elseif x == 2 then\n    return 'b'\n  elseif x == 3 then return 'c'\n  else\n    return 'd'\n  end\nend\nlocal out = {}\nfor i = 1, 4 do out[i] = f(i) end\nreturn table.concat(out)\n";
    let counts = same(src);
    let at = |line: u32| counts.iter().filter(|c| c.0 == line).map(|c| c.1).collect::<Vec<_>>();
    assert_eq!(at(2), vec![4], "the if: every call");
    assert_eq!(at(4), vec![3], "the first elseif: every call the if did not take");
    assert_eq!(at(6), vec![2, 1], "the second elseif, and its return");
    assert_eq!(at(8), vec![1], "the else branch");
    // The loop on line 12 runs its header once and again per iteration.
    assert_eq!(at(12), vec![5, 4]);
}

#[test]
fn while_loops_count_iterations_and_long_elseif_chains_still_load() {
    let counts = same("local i = 0\nwhile i < 7 do\n  i = i + 1\nend\nreturn i\n");
    assert_eq!(counts, vec![(1, 1), (2, 8), (3, 7), (5, 1)]);
    // More elseifs than are counted: the rest stay as they were.
    let mut src = String::from("local function g(x)\n  if x == 0 then return 0\n");
    for k in 1..=120 {
        src.push_str(&format!("  elseif x == {k} then return {k}\n"));
    }
    src.push_str("  end\nend\nreturn g(0), g(7), g(119), g(500)\n");
    let counts = same(&src);
    assert_eq!(counts.iter().find(|c| c.0 == 9).map(|c| c.1), Some(3), "the 7th elseif: g(7), g(119) and g(500)");
}

#[test]
fn local_declarations_count_where_their_values_run() {
    let src = "local a, b =\n  1, 2\nlocal c\nlocal function f()\n  local d\n  return a + b\nend\nreturn f(), c\n";
    let counts = same(src);
    let r = rewrite(src.as_bytes(), 1).unwrap();
    let lines: Vec<(u32, bool)> = r.lines.iter().copied().zip(r.statement.iter().copied()).collect();
    // `local a, b =` counts on line 2, where its values are; `local c` and
    // `local d` are no counted lines, though d's counter is f's entry count.
    assert_eq!(lines, vec![(2, true), (3, false), (4, true), (5, false), (6, true), (8, true)]);
    assert_eq!(counts, vec![(2, 1), (3, 1), (4, 1), (5, 1), (6, 1), (8, 1)]);
    assert_eq!(r.functions[0].entry, 3);
}
