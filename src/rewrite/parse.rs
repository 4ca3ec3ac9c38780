//! A statement parser for Lua 5.1 with LuaJIT's extensions (`goto`, labels).
//! It does not build a tree: it walks the grammar far enough to know where
//! each statement starts and where each function body starts, which is all
//! the rewriter inserts counters at. Precedence is irrelevant here, so
//! expressions are read as flat operand/operator sequences.

use super::lex::{Kind, Token};

/// A place to insert a counter increment, before the byte at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    pub offset: usize,
    pub line: u32,
}

/// A function definition: its lcov name, the lines `debug.getinfo` reports
/// as linedefined and lastlinedefined, and the index of its entry site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionDef {
    pub name: String,
    pub line: u32,
    pub last_line: u32,
    pub entry: usize,
}

/// A change besides a counter of its own: at `offset`, another increment
/// of a statement's counter (a loop header's, once per iteration), or the
/// `end`s that close the `if`s an `elseif` chain became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edit {
    pub offset: usize,
    pub what: EditKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditKind {
    /// Count counter `n` (0-based) again.
    Again(usize),
    /// Append ` end` this many times.
    Close(usize),
}

/// An `elseif` chain longer than this keeps its further `elseif`s as they
/// are: each one counted becomes a nested `if`, and LuaJIT allows 200
/// levels of nesting in all.
pub const MAX_COUNTED_ELSEIFS: usize = 40;

/// What the walk found: every site in source order, and which of them are
/// statements (the rest are function entries); the sites that stand for an
/// `elseif` keyword, by the offset where that keyword ends (it becomes
/// `else <increment> if`, so that its condition is counted each time it is
/// evaluated); and the other edits.
#[derive(Debug, Default)]
pub struct Walk {
    pub sites: Vec<Site>,
    pub statement: Vec<bool>,
    pub functions: Vec<FunctionDef>,
    pub elseif_end: Vec<Option<usize>>,
    pub edits: Vec<Edit>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: u32,
    pub message: String,
}

pub fn walk(src: &[u8], toks: &[Token]) -> Result<Walk, ParseError> {
    let mut p = Parser { src, toks, pos: 0, out: Walk::default(), hint: None };
    p.block()?;
    if p.kind() != Kind::Eof {
        return Err(p.err("'<eof>' expected"));
    }
    Ok(p.out)
}

struct Parser<'a> {
    src: &'a [u8],
    toks: &'a [Token],
    pos: usize,
    out: Walk,
    /// The name an assignment gives the function expression it assigns.
    hint: Option<String>,
}

type Res = Result<(), ParseError>;

impl Parser<'_> {
    fn tok(&self) -> Token {
        self.toks[self.pos]
    }

    fn kind(&self) -> Kind {
        self.tok().kind
    }

    fn text(&self) -> &[u8] {
        let t = self.tok();
        &self.src[t.start..t.end]
    }

    fn text_at(&self, ahead: usize) -> &[u8] {
        match self.toks.get(self.pos + ahead) {
            Some(t) => &self.src[t.start..t.end],
            None => b"",
        }
    }

    fn is(&self, s: &str) -> bool {
        matches!(self.kind(), Kind::Keyword | Kind::Symbol) && self.text() == s.as_bytes()
    }

    fn advance(&mut self) {
        if self.kind() != Kind::Eof {
            self.pos += 1;
        }
    }

    fn err(&self, what: &str) -> ParseError {
        let near = String::from_utf8_lossy(self.text()).into_owned();
        ParseError { line: self.tok().line, message: format!("{} near '{}'", what, near) }
    }

    fn expect(&mut self, s: &str) -> Res {
        if self.is(s) {
            self.advance();
            Ok(())
        } else {
            Err(self.err(&format!("'{}' expected", s)))
        }
    }

    fn name(&mut self) -> Result<String, ParseError> {
        if self.kind() != Kind::Name {
            return Err(self.err("<name> expected"));
        }
        let n = String::from_utf8_lossy(self.text()).into_owned();
        self.advance();
        Ok(n)
    }

    fn site(&mut self, statement: bool) -> usize {
        let t = self.tok();
        self.site_at(t.start, t.line, statement)
    }

    fn site_at(&mut self, offset: usize, line: u32, statement: bool) -> usize {
        self.out.sites.push(Site { offset, line });
        self.out.statement.push(statement);
        self.out.elseif_end.push(None);
        self.out.sites.len() - 1
    }

    /// Counts the loop header `counter` again each time the body starts:
    /// the header's line is then run once per iteration and once at the
    /// entry, as a line hook sees a loop's header line.
    fn loop_body(&mut self, counter: usize) -> Res {
        let offset = self.tok().end;
        self.expect("do")?;
        self.out.edits.push(Edit { offset, what: EditKind::Again(counter) });
        self.block()?;
        self.expect("end")
    }

    fn block_follow(&self) -> bool {
        self.kind() == Kind::Eof || self.is("end") || self.is("else") || self.is("elseif") || self.is("until")
    }

    fn block(&mut self) -> Res {
        while !self.block_follow() {
            if self.is("return") {
                self.site(true);
                self.advance();
                if !self.block_follow() && !self.is(";") {
                    self.explist()?;
                }
                if self.is(";") {
                    self.advance();
                }
                if !self.block_follow() {
                    return Err(self.err("'<eof>' expected"));
                }
                return Ok(());
            }
            self.statement()?;
        }
        Ok(())
    }

    fn statement(&mut self) -> Res {
        if self.is(";") {
            self.advance();
            return Ok(());
        }
        if self.is("::") {
            // Nothing goes before a label: a label ending a block is outside
            // the scope of the block's locals only while nothing follows it.
            self.advance();
            self.name()?;
            return self.expect("::");
        }
        let here = self.site(true);
        let word = if self.kind() == Kind::Keyword { self.text().to_vec() } else { Vec::new() };
        match word.as_slice() {
            b"break" => self.advance(),
            b"goto" => {
                self.advance();
                self.name()?;
            }
            b"do" => {
                self.advance();
                self.block()?;
                self.expect("end")?;
            }
            b"while" => {
                self.advance();
                self.exp()?;
                self.loop_body(here)?;
            }
            b"repeat" => {
                self.advance();
                self.block()?;
                self.expect("until")?;
                self.exp()?;
            }
            b"if" => {
                self.advance();
                self.exp()?;
                self.expect("then")?;
                self.block()?;
                let mut counted = 0;
                while self.is("elseif") {
                    if counted < MAX_COUNTED_ELSEIFS {
                        let t = self.tok();
                        let i = self.site_at(t.start, t.line, true);
                        self.out.elseif_end[i] = Some(t.end);
                        counted += 1;
                    }
                    self.advance();
                    self.exp()?;
                    self.expect("then")?;
                    self.block()?;
                }
                if self.is("else") {
                    self.advance();
                    self.block()?;
                }
                let offset = self.tok().end;
                self.expect("end")?;
                if counted > 0 {
                    self.out.edits.push(Edit { offset, what: EditKind::Close(counted) });
                }
            }
            b"for" => self.for_statement(here)?,
            b"function" => {
                let line = self.tok().line;
                self.advance();
                let mut name = self.name()?;
                while self.is(".") || self.is(":") {
                    let method = self.is(":");
                    name.push(if method { ':' } else { '.' });
                    self.advance();
                    name.push_str(&self.name()?);
                    if method {
                        break;
                    }
                }
                self.body(name, line)?;
            }
            b"local" => {
                self.advance();
                if self.is("function") {
                    let line = self.tok().line;
                    self.advance();
                    let name = self.name()?;
                    self.body(name, line)?;
                } else {
                    let first = self.name()?;
                    let mut count = 1;
                    while self.is(",") {
                        self.advance();
                        self.name()?;
                        count += 1;
                    }
                    if self.is("=") {
                        self.advance();
                        // The values are what runs: `local a, b =` ending a
                        // line has no code of its own there, so the
                        // statement counts on the line its values start on.
                        self.out.sites[here].line = self.tok().line;
                        self.hint = if count == 1 { Some(first) } else { None };
                        self.explist()?;
                    } else {
                        // `local x` alone declares; it is no counted line
                        // (LuaJIT often emits no code for it, and luacov
                        // leaves it out), though its counter still counts a
                        // function's entries when it comes first.
                        self.out.statement[here] = false;
                    }
                }
            }
            _ => self.expression_statement()?,
        }
        Ok(())
    }

    fn for_statement(&mut self, header: usize) -> Res {
        self.advance();
        self.name()?;
        if self.is("=") {
            self.advance();
            self.exp()?;
            self.expect(",")?;
            self.exp()?;
            if self.is(",") {
                self.advance();
                self.exp()?;
            }
        } else {
            while self.is(",") {
                self.advance();
                self.name()?;
            }
            self.expect("in")?;
            self.explist()?;
        }
        self.loop_body(header)
    }

    fn expression_statement(&mut self) -> Res {
        let start = self.tok().start;
        self.suffixed()?;
        let mut targets = 1;
        let mut end = self.toks[self.pos - 1].end;
        while self.is(",") {
            self.advance();
            self.suffixed()?;
            targets += 1;
        }
        if self.is("=") {
            self.advance();
            if targets == 1 {
                end = end.max(start);
                self.hint = Some(String::from_utf8_lossy(&self.src[start..end]).into_owned());
            }
            self.explist()?;
        } else if targets > 1 {
            return Err(self.err("'=' expected"));
        }
        Ok(())
    }

    fn explist(&mut self) -> Res {
        self.exp()?;
        while self.is(",") {
            self.advance();
            self.hint = None;
            self.exp()?;
        }
        Ok(())
    }

    fn exp(&mut self) -> Res {
        let mut hint = self.hint.take();
        loop {
            while self.is("not") || self.is("-") || self.is("#") {
                self.advance();
                hint = None;
            }
            self.simple(hint.take())?;
            const BINARY: [&str; 15] =
                ["+", "-", "*", "/", "%", "^", "..", "==", "~=", "<", "<=", ">", ">=", "and", "or"];
            if BINARY.iter().any(|op| self.is(op)) {
                self.advance();
            } else {
                return Ok(());
            }
        }
    }

    fn simple(&mut self, hint: Option<String>) -> Res {
        match self.kind() {
            Kind::Number | Kind::Str => self.advance(),
            Kind::Keyword if self.is("nil") || self.is("true") || self.is("false") => self.advance(),
            Kind::Symbol if self.is("...") => self.advance(),
            Kind::Symbol if self.is("{") => self.table()?,
            Kind::Keyword if self.is("function") => {
                let line = self.tok().line;
                self.advance();
                let name = hint.unwrap_or_else(|| format!("anonymous@{}", line));
                self.body(name, line)?;
            }
            _ => self.suffixed()?,
        }
        Ok(())
    }

    fn suffixed(&mut self) -> Res {
        if self.is("(") {
            self.advance();
            self.exp()?;
            self.expect(")")?;
        } else {
            self.name()?;
        }
        loop {
            if self.is(".") {
                self.advance();
                self.name()?;
            } else if self.is("[") {
                self.advance();
                self.exp()?;
                self.expect("]")?;
            } else if self.is(":") {
                self.advance();
                self.name()?;
                self.args()?;
            } else if self.is("(") || self.is("{") || self.kind() == Kind::Str {
                self.args()?;
            } else {
                return Ok(());
            }
        }
    }

    fn args(&mut self) -> Res {
        if self.kind() == Kind::Str {
            self.advance();
            Ok(())
        } else if self.is("{") {
            self.table()
        } else {
            self.expect("(")?;
            if !self.is(")") {
                self.explist()?;
            }
            self.expect(")")
        }
    }

    fn table(&mut self) -> Res {
        self.expect("{")?;
        while !self.is("}") {
            if self.is("[") {
                self.advance();
                self.exp()?;
                self.expect("]")?;
                self.expect("=")?;
                self.exp()?;
            } else if self.kind() == Kind::Name && self.text_at(1) == b"=" {
                self.hint = Some(self.name()?);
                self.advance();
                self.exp()?;
            } else {
                self.exp()?;
            }
            if self.is(",") || self.is(";") {
                self.advance();
            } else {
                break;
            }
        }
        self.expect("}")
    }

    /// A function body after its name: parameters, the entry count, the
    /// block and `end`. A body whose first statement is counted is entered
    /// exactly as often as that statement starts, so its counter is the
    /// entry count; other bodies get an entry site right after `)` (on the
    /// line of `)`, so no line gains or loses code).
    fn body(&mut self, name: String, line: u32) -> Res {
        self.expect("(")?;
        if !self.is(")") {
            loop {
                if self.is("...") {
                    self.advance();
                    break;
                }
                self.name()?;
                if !self.is(",") {
                    break;
                }
                self.advance();
            }
        }
        let close = self.tok();
        self.expect(")")?;
        let first_counted = !self.block_follow() && !self.is(";") && !self.is("::");
        let entry = if first_counted { self.out.sites.len() } else { self.site_at(close.end, close.line, false) };
        let index = self.out.functions.len();
        self.out.functions.push(FunctionDef { name, line, last_line: 0, entry });
        self.block()?;
        self.out.functions[index].last_line = self.tok().line;
        self.expect("end")
    }
}
