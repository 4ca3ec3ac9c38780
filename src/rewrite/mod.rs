//! Line coverage by rewriting source: every statement gets a counter
//! increment inserted before it, on the line the statement starts on; a
//! function's entries are counted by its first statement's counter, or, in
//! a body without one, by an increment right after its parameter list. A
//! loop header's counter counts again as each iteration starts (after
//! `do`, on the header's line), and an `elseif` becomes `else <increment>
//! if ... end`, so that its condition's line counts each evaluation, as a
//! line hook counts them.
//! Counting is
//! then ordinary Lua code, which LuaJIT compiles like the rest of the
//! program, where a debug hook would stop trace recording.
//!
//! Nothing is inserted as a new line, so line numbers, error messages and
//! `debug.getinfo`'s `currentline`, `linedefined` and `lastlinedefined` stay
//! those of the unmodified code. Every increment ends with `;`, so a
//! statement starting with `(` is never read as a call of the increment;
//! nothing is inserted before a label or after a `return` or `break`.
//!
//! The counters are a table held by one local of the main chunk, declared on
//! its first line: `local C=(G or {})[id] or {c1=0,...};` where G is a
//! global table of per-chunk counter tables (counter n is field `cn`, zeroed
//! by the caller). A chunk whose environment lacks G counts into a table
//! nobody reads rather than failing.

mod lex;
mod parse;
#[cfg(test)]
mod tests;

pub use parse::FunctionDef;

/// The global table of counter tables, indexed by chunk id.
pub const COUNTERS_GLOBAL: &str = "__tecs_cov";
/// The main chunk's local that holds the chunk's counter table.
pub const COUNTERS_LOCAL: &str = "__tecsC";
/// Counter `n` is the field `COUNTER_KEY .. n` of the counter table.
pub const COUNTER_KEY: &str = "c";

/// A rewritten chunk and what its counters mean: counter `i` (1-based in
/// Lua, `lines[i - 1]` here) counts the statement or function entry starting
/// on that line.
#[derive(Debug)]
pub struct Rewrite {
    pub code: Vec<u8>,
    pub lines: Vec<u32>,
    /// Whether each counter counts a statement (else a function entry).
    pub statement: Vec<bool>,
    pub functions: Vec<FunctionDef>,
}

/// Why a chunk cannot be rewritten: the line and a message.
#[derive(Debug, PartialEq, Eq)]
pub struct RewriteError {
    pub line: u32,
    pub message: String,
}

impl std::fmt::Display for RewriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Rewrites `src` to count into the table `COUNTERS_GLOBAL[id]`. A chunk
/// with no statement comes back unchanged, with no counters.
pub fn rewrite(src: &[u8], id: u64) -> Result<Rewrite, RewriteError> {
    let (toks, code_start) =
        lex::tokenize(src).map_err(|e| RewriteError { line: e.line, message: e.message.to_string() })?;
    let walk = parse::walk(src, &toks).map_err(|e| RewriteError { line: e.line, message: e.message })?;
    let lines: Vec<u32> = walk.sites.iter().map(|s| s.line).collect();
    if walk.sites.is_empty() {
        return Ok(Rewrite { code: src.to_vec(), lines, statement: walk.statement, functions: walk.functions });
    }
    let mut code = Vec::with_capacity(src.len() + walk.sites.len() * 32 + 64);
    code.extend_from_slice(&src[..code_start]);
    // The fallback is a table of zeros, built from a template constant only
    // when the chunk runs where COUNTERS_GLOBAL is not visible.
    let zeros: Vec<String> = (1..=walk.sites.len()).map(|n| format!("{}{}=0", COUNTER_KEY, n)).collect();
    code.extend_from_slice(
        format!(
            "local {l}=({g} or {{}})[{id}] or {{{z}}};",
            l = COUNTERS_LOCAL,
            g = COUNTERS_GLOBAL,
            z = zeros.join(",")
        )
        .as_bytes(),
    );
    // Every change in source order; at one offset, the `end`s that close an
    // `if` come before what starts the next statement.
    let mut changes: Vec<(usize, u8, usize)> = walk.sites.iter().enumerate().map(|(i, s)| (s.offset, 1, i)).collect();
    changes.extend(walk.edits.iter().enumerate().map(|(i, e)| {
        let order = if matches!(e.what, parse::EditKind::Close(_)) { 0 } else { 2 };
        (e.offset, order, i)
    }));
    changes.sort_unstable();
    let increment = |code: &mut Vec<u8>, n: usize| {
        if code.last().is_some_and(|&c| lex::is_ident_byte(c)) {
            code.push(b' ');
        }
        code.extend_from_slice(
            format!("{l}.{k}{n}={l}.{k}{n}+1;", l = COUNTERS_LOCAL, k = COUNTER_KEY, n = n + 1).as_bytes(),
        );
    };
    let mut copied = code_start;
    for (offset, order, i) in changes {
        debug_assert!(offset >= copied);
        code.extend_from_slice(&src[copied..offset]);
        copied = offset;
        match (order, walk.edits.get(i).map(|e| e.what)) {
            (1, _) => match walk.elseif_end[i] {
                // `elseif c then` becomes `else <increment> if c then`.
                Some(end) => {
                    code.extend_from_slice(b"else ");
                    increment(&mut code, i);
                    code.extend_from_slice(b"if");
                    copied = end;
                }
                None => increment(&mut code, i),
            },
            (_, Some(parse::EditKind::Again(n))) => increment(&mut code, n),
            (_, Some(parse::EditKind::Close(n))) => code.extend_from_slice(" end".repeat(n).as_bytes()),
            (_, None) => unreachable!("an edit's index is in range"),
        }
    }
    code.extend_from_slice(&src[copied..]);
    Ok(Rewrite { code, lines, statement: walk.statement, functions: walk.functions })
}
