//! A crate's own source read as text, for the checks about it that the
//! compiler does not make (`tests/signal_context.rs`: what runs in a
//! signal handler; the workspace's `tests/names.rs`): the files under
//! `src/`, their code without comments and literals, the functions
//! they define and the names each function's body uses. Not a parser: it
//! knows Rust's lexical rules (comments, strings, characters and
//! lifetimes), blocks and their headers, and finds names by their shape.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod lexical;
mod paths;

pub use lexical::blank_comments_and_literals;
use lexical::test_ranges;
use paths::skip_generic_args;
pub use paths::{absolute, use_map};

/// One file of `src/`.
pub struct SourceFile {
    /// The path under `src/`, with `/` separators.
    pub path: String,
    /// The module path (`["sys", "posix", "ticks"]`; `lib.rs` and `mod.rs`
    /// name their directory's module).
    pub module: Vec<String>,
    /// Whether the file is a directory's module (`mod.rs`, `lib.rs`).
    pub is_dir_module: bool,
    /// The text as written.
    pub text: String,
    /// The text with comments and literals blanked (same length, newlines
    /// kept), so that offsets and line numbers agree with `text`.
    pub code: String,
    /// Byte ranges of `code` that are compiled only for tests.
    pub test_ranges: Vec<(usize, usize)>,
    /// Whether the whole file is compiled only for tests (a `#[cfg(test)]`
    /// module declared with `mod name;`).
    pub test_only: bool,
}

impl SourceFile {
    /// The 1-based line of byte `at`.
    pub fn line_of(&self, at: usize) -> usize {
        self.text[..at].bytes().filter(|&b| b == b'\n').count() + 1
    }

    /// Whether byte `at` is in code compiled only for tests.
    pub fn in_test(&self, at: usize) -> bool {
        self.test_only || self.test_ranges.iter().any(|&(a, b)| a <= at && at < b)
    }
}

/// Every `.rs` file under this crate's `src/`, sorted by path.
pub fn crate_files() -> Vec<SourceFile> {
    files_under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

/// Every `.rs` file under `root` (a crate's `src/`), sorted by path.
pub fn files_under(root: &Path) -> Vec<SourceFile> {
    let root = root.to_path_buf();
    let mut paths = Vec::new();
    collect(&root, &mut paths);
    paths.sort();
    let mut files: Vec<SourceFile> = paths
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(p).unwrap();
            let code = blank_comments_and_literals(&text);
            let test_ranges = test_ranges(&code);
            let mut module: Vec<String> = rel.trim_end_matches(".rs").split('/').map(String::from).collect();
            let is_dir_module = matches!(module.last().map(String::as_str), Some("mod") | Some("lib"));
            if is_dir_module {
                module.pop();
            }
            SourceFile { path: rel, module, is_dir_module, text, code, test_ranges, test_only: false }
        })
        .collect();
    // Files declared as `#[cfg(test)] mod name;` (or with `#[path]`).
    let mut test_files = Vec::new();
    for f in &files {
        let dir = f.path.rsplit_once('/').map_or("", |(d, _)| d).to_string();
        let own_dir = if f.is_dir_module { dir.clone() } else { f.path.trim_end_matches(".rs").to_string() };
        for (at, _) in f.code.match_indices("#[cfg(test)]") {
            let rest = &f.code[at + "#[cfg(test)]".len()..];
            let item_end = rest.find([';', '{']).unwrap_or(rest.len());
            let item = &rest[..item_end];
            if !rest[item_end..].starts_with(';') {
                continue;
            }
            let Some(name) = item.split_whitespace().skip_while(|w| *w != "mod").nth(1) else { continue };
            // A `#[path = "x.rs"]` attribute: its string was blanked in
            // `code`, so it is read from the text.
            let attr = &f.text[at..at + "#[cfg(test)]".len() + item_end];
            let file = match attr.find("#[path = \"") {
                Some(p) => {
                    let from = p + "#[path = \"".len();
                    let to = attr[from..].find('"').unwrap() + from;
                    join(&dir, &attr[from..to])
                }
                None => join(&own_dir, &format!("{}.rs", name)),
            };
            test_files.push(file);
        }
    }
    for f in &mut files {
        f.test_only = test_files.contains(&f.path);
    }
    files
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{}/{}", dir, name)
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A function with a body.
#[derive(Clone, Debug)]
pub struct Function {
    /// The file, under `src/`.
    pub file: String,
    pub name: String,
    /// The type of the `impl` block it is in (`for` type of a trait impl),
    /// or None for a free function.
    pub owner: Option<String>,
    /// The trait of the `impl` block, for a trait method.
    pub of_trait: Option<String>,
    /// Where its body starts and ends in the file's `code`.
    pub body: (usize, usize),
    /// Whether it is compiled only for tests.
    pub test: bool,
}

impl Function {
    /// `file: name` or `file: Type::name`, as the lists name functions.
    pub fn id(&self) -> String {
        match &self.owner {
            Some(t) => format!("{}: {}::{}", self.file, t, self.name),
            None => format!("{}: {}", self.file, self.name),
        }
    }
}

/// What kind of block a `{` opens, from the text before it.
#[derive(Clone, Debug)]
enum Block {
    Fn(usize),
    Impl { ty: String, of_trait: Option<String> },
    Other,
}

/// Every function with a body in `f`, nested ones included, each with the
/// `impl` block it is in.
pub fn functions(f: &SourceFile) -> Vec<Function> {
    let b = f.code.as_bytes();
    let mut out: Vec<Function> = Vec::new();
    // Each open block, and the depth of parentheses and brackets it was
    // opened at: a `;` ends a statement only outside them (`[u8; 4]`).
    let mut stack: Vec<(Block, usize)> = Vec::new();
    let mut parens = 0usize;
    let mut header_start = 0;
    for i in 0..b.len() {
        match b[i] {
            b'{' => {
                let header = &f.code[header_start..i];
                let blocks: Vec<Block> = stack.iter().map(|(b, _)| b.clone()).collect();
                let block = classify(header, &blocks, f, i, &mut out);
                stack.push((block, parens));
                parens = 0;
                header_start = i + 1;
            }
            b'}' => {
                if let Some((block, p)) = stack.pop() {
                    if let Block::Fn(k) = block {
                        out[k].body.1 = i;
                    }
                    parens = p;
                }
                header_start = i + 1;
            }
            b'(' | b'[' => parens += 1,
            b')' | b']' => parens = parens.saturating_sub(1),
            b';' if parens == 0 => header_start = i + 1,
            _ => {}
        }
    }
    out
}

fn classify(header: &str, stack: &[Block], f: &SourceFile, open: usize, out: &mut Vec<Function>) -> Block {
    let words = words(header);
    if let Some(k) = (0..words.len()).find(|&k| words[k] == "fn" && words.get(k + 1).is_some_and(|w| is_ident(w))) {
        {
            let name = &words[k + 1];
            let (owner, of_trait) = match stack.iter().rev().find(|b| !matches!(b, Block::Other)) {
                Some(Block::Impl { ty, of_trait }) => (Some(ty.clone()), of_trait.clone()),
                _ => (None, None),
            };
            out.push(Function {
                file: f.path.clone(),
                name: name.clone(),
                owner,
                of_trait,
                body: (open, open),
                test: f.in_test(open),
            });
            return Block::Fn(out.len() - 1);
        }
    }
    // `impl<T> Type<T> {`, `impl Trait for Type {`, `unsafe impl ...`.
    let start = words.iter().position(|w| w == "impl");
    if let Some(k) = start.filter(|&k| words[..k].iter().all(|w| w == "unsafe" || w.starts_with('#') || w == "]")) {
        let rest = strip_generics(&words[k + 1..].join(" "));
        let (trait_part, ty_part) = match rest.split_once(" for ") {
            Some((t, ty)) => (Some(t.trim().to_string()), ty.trim().to_string()),
            None => (None, rest.trim().to_string()),
        };
        let last_ident = |s: &str| s.split(|c: char| !is_ident_char(c)).rfind(|w| !w.is_empty()).map(String::from);
        let ty = ty_part
            .split(|c: char| c.is_whitespace() || c == '<')
            .find(|w| !w.is_empty())
            .map(|w| w.rsplit("::").next().unwrap_or(w).to_string())
            .unwrap_or_default();
        return Block::Impl { ty, of_trait: trait_part.and_then(|t| last_ident(&t)) };
    }
    Block::Other
}

/// `s` without any `<...>` part (generic parameters and arguments).
fn strip_generics(s: &str) -> String {
    let mut depth = 0;
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_ident(w: &str) -> bool {
    !w.is_empty() && w.chars().all(is_ident_char) && !w.starts_with(|c: char| c.is_ascii_digit())
}

/// The words of a header: identifiers and single punctuation.
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in s.chars() {
        if is_ident_char(c) {
            cur.push(c);
        } else {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// One use of a name in a body.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Use {
    /// `.name(`: a method call on a value.
    Method(String),
    /// `Type::name(` (`Self` already replaced by the impl's type).
    Associated(String, String),
    /// `name(`, `path::name(`, or `name` as a value: a free function, with
    /// the path written before it (`["super", "running_c"]`) and whether it
    /// is called there (not named as a value).
    Free(String, Vec<String>, bool),
    /// A type named in the body (its `Drop` may run there).
    Type(String),
}

/// The names the code in `[from, to)` of `f` uses, skipping the bodies of
/// the functions nested in it. `own_type` replaces `Self`.
pub fn uses(f: &SourceFile, from: usize, to: usize, nested: &[(usize, usize)], own_type: Option<&str>) -> Vec<Use> {
    let code = &f.code[from..to];
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let skip = |at: usize| nested.iter().any(|&(a, e)| from + at > a && from + at <= e);
    while i < b.len() {
        if !(b[i].is_ascii_alphabetic() || b[i] == b'_') || (i > 0 && is_ident_char(b[i - 1] as char)) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_ident_char(b[i] as char) {
            i += 1;
        }
        if skip(start) {
            continue;
        }
        let name = &code[start..i];
        // A lifetime or a label.
        if start > 0 && b[start - 1] == b'\'' {
            continue;
        }
        let before = code[..start].trim_end();
        let after = code[i..].trim_start();
        let after = after.strip_prefix("::<").map_or(after, |rest| skip_generic_args(rest));
        let called = after.starts_with('(');
        let macro_call = after.starts_with('!') && !after.starts_with("!=");
        if macro_call || KEYWORDS.contains(&name) {
            continue;
        }
        if before.ends_with('.') && !before.ends_with("..") {
            if called {
                out.push(Use::Method(name.to_string()));
            }
            continue;
        }
        let path = path_before(before);
        if let Some(owner) = path.last() {
            let owner = if owner == "Self" { own_type.unwrap_or("Self") } else { owner.as_str() };
            if owner.starts_with(|c: char| c.is_ascii_uppercase()) {
                out.push(Use::Associated(owner.to_string(), name.to_string()));
                continue;
            }
        }
        if name.starts_with(|c: char| c.is_ascii_uppercase()) {
            let name = if name == "Self" { own_type.unwrap_or("Self") } else { name };
            out.push(Use::Type(name.to_string()));
            continue;
        }
        // A field (`x: value` in a struct literal, or `name:` in a
        // declaration) is not a use.
        if after.starts_with(':') && !after.starts_with("::") {
            continue;
        }
        out.push(Use::Free(name.to_string(), path, called));
    }
    out.sort();
    out.dedup();
    out
}

/// The path segments written before a name (`a::b::` gives `["a", "b"]`),
/// `before` being the code up to the name.
fn path_before(before: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = before;
    while let Some(r) = rest.strip_suffix("::") {
        let r = r.trim_end();
        let start = r.rfind(|c: char| !is_ident_char(c)).map_or(0, |k| k + 1);
        let seg = &r[start..];
        if seg.is_empty() {
            break;
        }
        out.push(seg.to_string());
        rest = &r[..start];
    }
    out.reverse();
    out
}

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in",
    "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "static", "struct", "super", "trait",
    "true", "type", "unsafe", "use", "where", "while", "dyn", "async", "await",
];

/// The crate read whole: its files, its functions compiled outside tests,
/// its modules and each file's `use` names.
pub struct Crate {
    pub files: Vec<SourceFile>,
    pub functions: Vec<Function>,
    pub modules: BTreeSet<Vec<String>>,
    pub uses: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// The capitalised names (types, traits) each file's code mentions.
    pub mentioned: BTreeMap<String, BTreeSet<String>>,
}

impl Crate {
    pub fn read() -> Crate {
        let files = crate_files();
        let functions = files.iter().flat_map(functions).filter(|f| !f.test).collect();
        let modules = files.iter().map(|f| f.module.clone()).collect();
        let uses = files.iter().map(|f| (f.path.clone(), use_map(f))).collect();
        let mentioned = files
            .iter()
            .map(|f| {
                let names = f
                    .code
                    .split(|c: char| !is_ident_char(c))
                    .filter(|w| w.starts_with(|c: char| c.is_ascii_uppercase()))
                    .map(String::from)
                    .collect();
                (f.path.clone(), names)
            })
            .collect();
        Crate { files, functions, modules, uses, mentioned }
    }

    pub fn file(&self, path: &str) -> &SourceFile {
        self.files.iter().find(|f| f.path == path).unwrap()
    }

    /// The crate module a path written in `f` names (its leading segments
    /// that are modules), or None for a path into another crate.
    pub fn module_of(&self, f: &SourceFile, path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let abs = if let Some(abs) = absolute(f, path) {
            abs
        } else if let Some(p) = self.uses[&f.path].get(first) {
            let mut v = p.clone();
            v.extend(path[1..].iter().cloned());
            if !matches!(v.first().map(String::as_str), Some(m) if self.modules.iter().any(|x| x.first().map(String::as_str) == Some(m)))
            {
                return None;
            }
            v
        } else {
            let mut child = f.module.clone();
            child.push(first.clone());
            if !self.modules.contains(&child) {
                return None;
            }
            child.extend(path[1..].iter().cloned());
            child
        };
        // The longest prefix that is a module of the crate.
        (0..=abs.len()).rev().map(|n| abs[..n].to_vec()).find(|m| self.modules.contains(m))
    }

    /// The functions `f`'s body uses, by name: a method call reaches the
    /// methods of that name of the types (or traits) the caller's file
    /// names or defines; `Type::name` that type's; a free function called,
    /// the ones its path (or the file's `use`) leads to, else the file's
    /// own, else any of that name; a type named, its `Drop`.
    pub fn callees(&self, f: &Function) -> BTreeSet<usize> {
        let file = self.file(&f.file);
        let nested: Vec<(usize, usize)> = self
            .functions
            .iter()
            .filter(|g| g.file == f.file && g.body.0 > f.body.0 && g.body.1 < f.body.1)
            .map(|g| g.body)
            .collect();
        let mentioned = &self.mentioned[&f.file];
        let known = |ty: &Option<String>| ty.as_ref().is_some_and(|t| mentioned.contains(t));
        let mut out = BTreeSet::new();
        for u in uses(file, f.body.0, f.body.1, &nested, f.owner.as_deref()) {
            let found: Vec<usize> = match &u {
                Use::Method(name) => self.matching(|g| {
                    g.owner.is_some() && g.name == *name && (g.file == f.file || known(&g.owner) || known(&g.of_trait))
                }),
                Use::Associated(ty, name) => {
                    self.matching(|g| g.owner.as_deref() == Some(ty.as_str()) && g.name == *name)
                }
                Use::Type(ty) => {
                    self.matching(|g| g.owner.as_deref() == Some(ty.as_str()) && g.of_trait.as_deref() == Some("Drop"))
                }
                // A function named as a value is not followed: it runs
                // where it is called (a hook set in a handler runs later).
                Use::Free(_, _, false) => Vec::new(),
                Use::Free(name, path, _) => {
                    let free = |g: &Function| g.owner.is_none() && g.name == *name;
                    let in_module =
                        |m: &[String]| self.matching(|g| free(g) && self.file(&g.file).module.starts_with(m));
                    if !path.is_empty() {
                        match self.module_of(file, path) {
                            Some(m) => in_module(&m),
                            None => Vec::new(),
                        }
                    } else {
                        let here = self.matching(|g| free(g) && g.file == f.file);
                        match self.uses[&f.file].get(name) {
                            _ if !here.is_empty() => here,
                            // A use names the item itself, from the crate's
                            // root: its module is the longest prefix that
                            // is one.
                            Some(p) => match (0..p.len())
                                .rev()
                                .map(|n| p[..n].to_vec())
                                .find(|m| !m.is_empty() && self.modules.contains(m))
                                .or_else(|| self.module_of(file, p))
                            {
                                Some(m) => in_module(&m),
                                None => Vec::new(),
                            },
                            None => self.matching(free),
                        }
                    }
                }
            };
            out.extend(found);
        }
        out
    }

    pub fn matching(&self, keep: impl Fn(&Function) -> bool) -> Vec<usize> {
        (0..self.functions.len()).filter(|&k| keep(&self.functions[k])).collect()
    }

    pub fn by_id(&self, id: &str) -> Option<usize> {
        self.functions.iter().position(|f| f.id() == id)
    }
}
