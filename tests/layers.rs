//! The crate's modules depend on each other in one direction: each layer
//! uses only the layers below it, and no two modules use each other, even
//! through others. Read from the source: every `use` item and every path
//! written in the code (`crate::`, `super::`, or a name a `use` brought
//! in), tests included.

mod rust_source;

use std::collections::{BTreeMap, BTreeSet};

use rust_source::{Crate, SourceFile};

/// The layers, from the VM up: a module may use the modules of its own
/// top-level module and of the layers before its own, never a module of
/// its own layer or of a later one.
const LAYERS: &[&[&str]] = &[
    // Every FFI declaration, the tick handler and the platform's calls.
    &["sys"],
    // What runs while a session records: the callback, the stack table,
    // the allocator wrapper.
    &["record"],
    // A session's start and stop; the finished profile.
    &["session", "profile"],
    // What is made from a profile (views, formats), and coverage's
    // rewriter, which stands apart.
    &["views", "output", "rewrite"],
    // The control channel: it writes the registry's formats.
    &["control"],
    // The Lua bindings.
    &["lua_api"],
];

/// What the views and the output formats are made from: the finished
/// profile, not the recorder's types.
const MADE_FROM_THE_PROFILE: &[&str] = &["views", "output"];

/// Files that still reach the recorder from a view or a format, with why.
const STILL_REACHING_THE_RECORDER: &[(&str, &str)] = &[(
    "output/flamegraph.rs",
    "imports VM_STATES from record::stack_table: the file is being changed on another branch; \
     `crate::profile::VM_STATES` is the same constant",
)];

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&top))
}

/// The crate modules each file refers to, with a line where it does.
fn references(c: &Crate, f: &SourceFile) -> BTreeMap<Vec<String>, usize> {
    let mut out = BTreeMap::new();
    let code = &f.code;
    let b = code.as_bytes();
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let uses = &c.uses[&f.path];
    // `use` items, braces included.
    for path in uses.values() {
        if let Some(m) = c.module_of(f, path) {
            let first = path.last().map_or("", |s| s.as_str());
            let line = code.find(first).map_or(1, |at| f.line_of(at));
            out.entry(m).or_insert(line);
        }
    }
    // Paths in the code: `a::b::c` where `a` is `crate`, `super`, `self`
    // or a name a `use` brought in.
    let mut i = 0;
    while i < b.len() {
        if !is_ident(b[i]) || (i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        let mut segments = Vec::new();
        loop {
            let s = i;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
            if s == i {
                break;
            }
            segments.push(code[s..i].to_string());
            if code[i..].starts_with("::") && b.get(i + 2).is_some_and(|&c| is_ident(c)) {
                i += 2;
            } else {
                break;
            }
        }
        if segments.len() < 2 {
            continue;
        }
        let first = segments[0].as_str();
        if matches!(first, "crate" | "super" | "self") || uses.contains_key(first) {
            if let Some(m) = c.module_of(f, &segments) {
                out.entry(m).or_insert(f.line_of(start));
            }
        }
    }
    // A module names its own children (`mod x;`) and is named by them.
    out.retain(|m, _| !(m.starts_with(&f.module) || f.module.starts_with(m)));
    out
}

/// Every reference from one module to another: (from, to) -> where.
fn edges(c: &Crate) -> BTreeMap<(Vec<String>, Vec<String>), String> {
    let mut out = BTreeMap::new();
    for f in &c.files {
        for (m, line) in references(c, f) {
            out.entry((f.module.clone(), m)).or_insert(format!("src/{}:{}", f.path, line));
        }
    }
    out
}

#[test]
fn each_layer_uses_only_the_layers_below_it() {
    let c = Crate::read();
    let mut wrong = Vec::new();
    for ((from, to), at) in edges(&c) {
        let (Some(a), Some(b)) = (from.first(), to.first()) else { continue };
        if a == b {
            continue;
        }
        let (la, lb) = (layer_of(a), layer_of(b));
        assert!(la.is_some(), "{}: module {} is in no layer of tests/layers.rs", at, a);
        assert!(lb.is_some(), "{}: module {} is in no layer of tests/layers.rs", at, b);
        if lb >= la {
            wrong.push(format!("{}: {} uses {}", at, from.join("::"), to.join("::")));
        }
    }
    assert!(wrong.is_empty(), "uses of a module in the same or a later layer:\n{}", wrong.join("\n"));
}

#[test]
fn views_and_formats_are_made_from_the_profile() {
    let c = Crate::read();
    let mut wrong = Vec::new();
    for ((from, to), at) in edges(&c) {
        let (Some(a), Some(b)) = (from.first(), to.first()) else { continue };
        let file = at.trim_start_matches("src/").split(':').next().unwrap_or("");
        if MADE_FROM_THE_PROFILE.contains(&a.as_str())
            && b == "record"
            && !STILL_REACHING_THE_RECORDER.iter().any(|(f, _)| *f == file)
        {
            wrong.push(format!("{}: {} uses {}", at, from.join("::"), to.join("::")));
        }
    }
    assert!(wrong.is_empty(), "views and formats reaching the recorder:\n{}", wrong.join("\n"));
    for (file, why) in STILL_REACHING_THE_RECORDER {
        let f = c.file(file);
        assert!(
            f.code.contains("crate::record::"),
            "{} no longer reaches the recorder ({}): drop it from the list",
            file,
            why
        );
    }
}

#[test]
fn no_two_modules_use_each_other() {
    let c = Crate::read();
    let edges = edges(&c);
    let mut graph: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        graph.entry(from).or_default().insert(to);
        graph.entry(to).or_default();
    }
    // Tarjan's strongly connected components.
    struct State<'a> {
        graph: &'a BTreeMap<&'a Vec<String>, BTreeSet<&'a Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        found: Vec<Vec<&'a Vec<String>>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for &w in &s.graph[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let l = s.low[v].min(s.low[w]);
                s.low.insert(v, l);
            } else if s.on.contains(w) {
                let l = s.low[v].min(s.index[w]);
                s.low.insert(v, l);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.found.push(comp);
            }
        }
    }
    let mut s = State {
        graph: &graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        found: Vec::new(),
    };
    for &v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    let cycles: Vec<String> = s
        .found
        .iter()
        .map(|comp| {
            let names: BTreeSet<&Vec<String>> = comp.iter().copied().collect();
            let uses: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| names.contains(a) && names.contains(b))
                .map(|((a, b), at)| format!("  {}: {} uses {}", at, a.join("::"), b.join("::")))
                .collect();
            uses.join("\n")
        })
        .collect();
    assert!(cycles.is_empty(), "modules that use each other:\n{}", cycles.join("\n\n"));
}

#[test]
fn the_reader_sees_the_crates_known_dependencies() {
    // The checks above are only as good as the references found: a few
    // that are known to exist must be among them.
    let c = Crate::read();
    let edges = edges(&c);
    let has = |from: &str, to: &str| {
        let split = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
        edges.contains_key(&(split(from), split(to)))
    };
    assert!(has("lua_api", "session"), "a `use` item");
    assert!(has("record::sampler", "record::stack_table"), "a `use` item with braces");
    assert!(has("sys::posix::ticks", "sys::posix::compiled"), "a path through `super::`");
    assert!(has("profile::from_table", "record::stack_table"), "a `use` item to another layer");
}
