//! The lexical side of the source reader: comments and literals blanked,
//! the items compiled only for tests, matching braces.

/// `text` with every comment, string, byte string and character literal
/// replaced by spaces (newlines kept). Lifetimes stay.
pub fn blank_comments_and_literals(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let end = b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (c == b'r' || c == b'b' || c == b'c') && (i == 0 || !ident(b[i - 1])) && raw_string_at(b, i).is_some()
        {
            let end = raw_string_at(b, i).unwrap();
            blank(&mut out, i, end);
            i = end;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{1f}', b'x' was reached
            // at its quote) or a lifetime ('a, 'static).
            let end = if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                Some(j + 1)
            } else {
                let ch_len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(i + 2 + ch_len)
            };
            match end {
                Some(e) => {
                    blank(&mut out, i, e);
                    i = e;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// The end of a raw string, byte string or C string starting at `i`
/// (`r"`, `r#"`, `b"`, `br#"`, `c"`), or None.
fn raw_string_at(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    if b[j] == b'b' || b[j] == b'c' {
        j += 1;
    }
    let raw = b.get(j) == Some(&b'r');
    if raw {
        j += 1;
    }
    let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
    j += hashes;
    if b.get(j) != Some(&b'"') || (j == i) {
        return None;
    }
    if !raw {
        // b"..." / c"...": escapes as in a plain string.
        let mut k = j + 1;
        while k < b.len() && b[k] != b'"' {
            k += if b[k] == b'\\' { 2 } else { 1 };
        }
        return Some(k + 1);
    }
    let mut k = j + 1;
    while k < b.len() {
        if b[k] == b'"' && b[k + 1..].iter().take(hashes).filter(|&&c| c == b'#').count() == hashes {
            return Some(k + 1 + hashes);
        }
        k += 1;
    }
    Some(b.len())
}

/// The byte ranges of the items marked `#[cfg(test)]` in `code`: each from
/// the attribute to the end of its item (its block, or its `;`).
pub(super) fn test_ranges(code: &str) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    for (at, _) in code.match_indices("#[cfg(test)]") {
        let mut j = at + "#[cfg(test)]".len();
        while j < b.len() && b[j] != b';' && b[j] != b'{' {
            j += 1;
        }
        if j < b.len() && b[j] == b'{' {
            j = matching_brace(b, j);
        }
        out.push((at, (j + 1).min(b.len())));
    }
    out
}

/// The index of the `}` that closes the `{` at `open`.
pub fn matching_brace(b: &[u8], open: usize) -> usize {
    let mut depth = 0;
    for (k, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    b.len() - 1
}
