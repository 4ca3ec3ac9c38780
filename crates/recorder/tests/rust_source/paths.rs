//! The paths a file writes: what its `use` items bring in, and a path as
//! written made absolute from the crate root.

use std::collections::BTreeMap;

use super::{is_ident_char, SourceFile};

/// What `use` items of `f` bring in: each name (or alias) and the path it
/// stands for, absolute from the crate root where it starts with
/// `crate::`, `super::` or `self::`, else as written (another crate, or a
/// child module). Glob imports are left out.
pub fn use_map(f: &SourceFile) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let code = &f.code;
    let mut at = 0;
    while let Some(k) = code[at..].find("use ") {
        let start = at + k;
        at = start + 4;
        if start > 0 && is_ident_char(code.as_bytes()[start - 1] as char) {
            continue;
        }
        let Some(end) = code[start..].find(';') else { break };
        let tree = squeeze(&code[start + 4..start + end]);
        for (name, path) in expand_use_tree(&tree) {
            out.insert(name, absolute(f, &path).unwrap_or(path));
        }
        at = start + end;
    }
    out
}

/// `s` with runs of white space made one space, and none next to `:`,
/// `{`, `}` or `,`.
fn squeeze(s: &str) -> String {
    let words: Vec<&str> = s.split_whitespace().collect();
    let mut out = String::new();
    for w in words {
        let glue = out.ends_with([':', '{', '}', ',']) || w.starts_with([':', '{', '}', ',']);
        if !out.is_empty() && !glue {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// `a::{b, c::{d as e}}` into `(name, path)` pairs.
fn expand_use_tree(tree: &str) -> Vec<(String, Vec<String>)> {
    fn go(prefix: &[String], tree: &str, out: &mut Vec<(String, Vec<String>)>) {
        if let Some(open) = tree.find('{') {
            let head: Vec<String> =
                tree[..open].trim_end_matches("::").split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            let mut p = prefix.to_vec();
            p.extend(head);
            let inner = &tree[open + 1..tree.len() - 1];
            let mut depth = 0;
            let mut part = String::new();
            for c in inner.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if c == ',' && depth == 0 {
                    go(&p, &part, out);
                    part.clear();
                } else {
                    part.push(c);
                }
            }
            if !part.is_empty() {
                go(&p, &part, out);
            }
            return;
        }
        let (path, alias) = match tree.split_once(" as ") {
            Some((p, a)) => (p, Some(a)),
            None => (tree, None),
        };
        let mut full = prefix.to_vec();
        full.extend(path.split("::").filter(|s| !s.is_empty()).map(String::from));
        let Some(last) = full.last().cloned() else { return };
        if last == "*" {
            return;
        }
        if last == "self" {
            full.pop();
        }
        let name = alias.map(String::from).unwrap_or_else(|| full.last().cloned().unwrap_or_default());
        out.push((name, full));
    }
    let mut out = Vec::new();
    go(&[], tree, &mut out);
    out
}

/// A path as written in `f` (`crate::x`, `super::y`, `self::z`, or a
/// name `use` brought in), absolute from the crate root; None for a path
/// outside the crate (`std::`, `libc::`, `mlua::`).
pub fn absolute(f: &SourceFile, path: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String> = match first.as_str() {
        "crate" => Vec::new(),
        "self" => f.module.clone(),
        "super" => {
            let mut m = f.module.clone();
            let mut k = 0;
            while path.get(k).map(String::as_str) == Some("super") {
                m.pop();
                k += 1;
            }
            m.extend(path[k..].iter().cloned());
            return Some(m);
        }
        _ => return None,
    };
    base.extend(path[1..].iter().cloned());
    Some(base)
}

pub(super) fn skip_generic_args(s: &str) -> &str {
    let mut depth = 1;
    for (k, c) in s.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return s[k + 1..].trim_start();
                }
            }
            _ => {}
        }
    }
    ""
}
