//! A lexer for the source LuaJIT accepts, reduced to what the rewriter needs:
//! each token's kind, byte span and line. It follows LuaJIT's own rules where
//! they decide token boundaries (numerals are read greedily, so `1ULL`,
//! `0x10LL`, `1i` and hex floats are one token; bytes from 0x80 up are
//! identifier characters; `\r\n` and `\n\r` are one line break); whether a
//! numeral or an escape is valid is left to LuaJIT, which loads the result.

/// What a token is; keywords and symbols are told apart by their text.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Name,
    Keyword,
    Number,
    Str,
    Symbol,
    Eof,
}

#[derive(Clone, Copy, Debug)]
pub struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
    pub line: u32,
}

/// A lexing failure: the line it happened on and why.
#[derive(Debug, PartialEq, Eq)]
pub struct LexError {
    pub line: u32,
    pub message: &'static str,
}

const KEYWORDS: [&[u8]; 22] = [
    b"and",
    b"break",
    b"do",
    b"else",
    b"elseif",
    b"end",
    b"false",
    b"for",
    b"function",
    b"goto",
    b"if",
    b"in",
    b"local",
    b"nil",
    b"not",
    b"or",
    b"repeat",
    b"return",
    b"then",
    b"true",
    b"until",
    b"while",
];

/// The tokens of `src` and the byte offset where code starts: after a UTF-8
/// byte order mark and after a first line starting with `#` (LuaJIT skips
/// both, for files and strings alike).
pub fn tokenize(src: &[u8]) -> Result<(Vec<Token>, usize), LexError> {
    let mut lx = Lexer { src, pos: 0, line: 1 };
    if src.starts_with(b"\xEF\xBB\xBF") {
        lx.pos = 3;
    }
    if lx.peek(0) == Some(b'#') {
        while let Some(c) = lx.peek(0) {
            if c == b'\n' || c == b'\r' {
                lx.newline();
                break;
            }
            lx.pos += 1;
        }
    }
    let code_start = lx.pos;
    let mut toks = Vec::new();
    loop {
        let t = lx.next_token()?;
        toks.push(t);
        if t.kind == Kind::Eof {
            return Ok((toks, code_start));
        }
    }
}

pub fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    line: u32,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    fn err(&self, message: &'static str) -> LexError {
        LexError { line: self.line, message }
    }

    /// Consumes one line break at `pos` (`\n`, `\r`, `\r\n` or `\n\r`).
    fn newline(&mut self) {
        let first = self.src[self.pos];
        self.pos += 1;
        if let Some(c) = self.peek(0) {
            if (c == b'\n' || c == b'\r') && c != first {
                self.pos += 1;
            }
        }
        self.line += 1;
    }

    fn next_token(&mut self) -> Result<Token, LexError> {
        loop {
            let Some(c) = self.peek(0) else {
                return Ok(Token { kind: Kind::Eof, start: self.pos, end: self.pos, line: self.line });
            };
            match c {
                b'\n' | b'\r' => self.newline(),
                b' ' | b'\t' | 0x0b | 0x0c => self.pos += 1,
                b'-' if self.peek(1) == Some(b'-') => {
                    self.pos += 2;
                    if self.peek(0) == Some(b'[') {
                        if let Some(level) = self.long_bracket_level()? {
                            self.long_body(level, "unfinished long comment")?;
                            continue;
                        }
                    }
                    while let Some(c) = self.peek(0) {
                        if c == b'\n' || c == b'\r' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => return self.token(c),
            }
        }
    }

    fn token(&mut self, c: u8) -> Result<Token, LexError> {
        let start = self.pos;
        let line = self.line;
        let kind = if c.is_ascii_digit() || (c == b'.' && self.peek(1).is_some_and(|d| d.is_ascii_digit())) {
            self.number();
            Kind::Number
        } else if is_ident_byte(c) {
            while self.peek(0).is_some_and(is_ident_byte) {
                self.pos += 1;
            }
            if KEYWORDS.contains(&&self.src[start..self.pos]) {
                Kind::Keyword
            } else {
                Kind::Name
            }
        } else if c == b'"' || c == b'\'' {
            self.short_string(c)?;
            Kind::Str
        } else if c == b'[' {
            match self.long_bracket_level()? {
                Some(level) => {
                    self.long_body(level, "unfinished long string")?;
                    Kind::Str
                }
                None => {
                    self.pos += 1;
                    Kind::Symbol
                }
            }
        } else {
            self.symbol(c);
            Kind::Symbol
        };
        Ok(Token { kind, start, end: self.pos, line })
    }

    fn number(&mut self) {
        // LuaJIT's rule: identifier characters and dots continue a numeral,
        // and a sign continues it right after the exponent letter (`e`, or
        // `p` in hex numerals).
        let exp = if self.peek(0) == Some(b'0') && matches!(self.peek(1), Some(b'x' | b'X')) { b'p' } else { b'e' };
        let mut prev = 0u8;
        while let Some(c) = self.peek(0) {
            let sign_ok = (c == b'+' || c == b'-') && (prev | 0x20) == exp;
            if !(is_ident_byte(c) || c == b'.' || sign_ok) {
                break;
            }
            prev = c;
            self.pos += 1;
        }
    }

    fn symbol(&mut self, c: u8) {
        let two = |s: &Self, second: u8| s.peek(1) == Some(second);
        self.pos += match c {
            b'.' if two(self, b'.') => {
                if self.peek(2) == Some(b'.') {
                    3
                } else {
                    2
                }
            }
            b'=' | b'~' | b'<' | b'>' if two(self, b'=') => 2,
            b':' if two(self, b':') => 2,
            _ => 1,
        };
    }

    /// At a `[`: the level of a long bracket opening here (consumed), or None
    /// when this `[` opens no long bracket (nothing consumed).
    fn long_bracket_level(&mut self) -> Result<Option<usize>, LexError> {
        let mut n = 1;
        while self.peek(n) == Some(b'=') {
            n += 1;
        }
        if self.peek(n) == Some(b'[') {
            self.pos += n + 1;
            Ok(Some(n - 1))
        } else if n > 1 {
            Err(self.err("invalid long string delimiter"))
        } else {
            Ok(None)
        }
    }

    fn long_body(&mut self, level: usize, unfinished: &'static str) -> Result<(), LexError> {
        loop {
            match self.peek(0) {
                None => return Err(self.err(unfinished)),
                Some(b'\n' | b'\r') => self.newline(),
                Some(b']') => {
                    let mut n = 1;
                    while self.peek(n) == Some(b'=') {
                        n += 1;
                    }
                    if n - 1 == level && self.peek(n) == Some(b']') {
                        self.pos += n + 1;
                        return Ok(());
                    }
                    self.pos += 1;
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    fn short_string(&mut self, quote: u8) -> Result<(), LexError> {
        self.pos += 1;
        loop {
            match self.peek(0) {
                None | Some(b'\n' | b'\r') => return Err(self.err("unfinished string")),
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek(0) {
                        None => return Err(self.err("unfinished string")),
                        Some(b'\n' | b'\r') => self.newline(),
                        Some(b'z') => {
                            self.pos += 1;
                            while let Some(c) = self.peek(0) {
                                match c {
                                    b'\n' | b'\r' => self.newline(),
                                    b' ' | b'\t' | 0x0b | 0x0c => self.pos += 1,
                                    _ => break,
                                }
                            }
                        }
                        Some(_) => self.pos += 1,
                    }
                }
                Some(c) => {
                    self.pos += 1;
                    if c == quote {
                        return Ok(());
                    }
                }
            }
        }
    }
}
