//! Lines read from a stream with a bound on their length: what `tecs-profile
//! mcp` reads its client's requests with. A line longer than the bound is
//! not kept: its bytes are dropped up to its end, and the reader says a line
//! was too long, so a client that sends 100 MB without a newline costs the
//! server the bound, not 100 MB.

use std::io::{self, Read};

/// One item of [`BoundedLines`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A whole line, without its newline (nor a `\r` before it).
    Whole(Vec<u8>),
    /// A line longer than the bound, dropped; its length so far when it
    /// was dropped.
    TooLong(usize),
}

/// The lines of `R`, at most `max` bytes each.
pub struct BoundedLines<R> {
    input: R,
    max: usize,
    pending: Vec<u8>,
    /// Dropping the rest of a line too long, up to its newline.
    skipping: bool,
    ended: bool,
}

impl<R: Read> BoundedLines<R> {
    pub fn new(input: R, max: usize) -> Self {
        BoundedLines { input, max, pending: Vec::new(), skipping: false, ended: false }
    }

    /// The next line, None at the end of the input. Blocks while the input
    /// does; a read interrupted by a signal is tried again.
    pub fn next_line(&mut self) -> io::Result<Option<Line>> {
        loop {
            if let Some(at) = memchr::memchr(b'\n', &self.pending) {
                let mut line: Vec<u8> = self.pending.drain(..=at).collect();
                line.pop();
                if self.skipping {
                    self.skipping = false;
                    continue;
                }
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.len() > self.max {
                    return Ok(Some(Line::TooLong(line.len())));
                }
                return Ok(Some(Line::Whole(line)));
            }
            if self.pending.len() > self.max {
                let n = self.pending.len();
                self.pending.clear();
                if !self.skipping {
                    self.skipping = true;
                    return Ok(Some(Line::TooLong(n)));
                }
            }
            if self.ended {
                if self.pending.is_empty() || self.skipping {
                    self.pending.clear();
                    return Ok(None);
                }
                // A last line without its newline still counts.
                return Ok(Some(Line::Whole(std::mem::take(&mut self.pending))));
            }
            let mut buf = [0u8; 8192];
            match self.input.read(&mut buf) {
                Ok(0) => self.ended = true,
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], max: usize) -> Vec<Line> {
        let mut r = BoundedLines::new(input, max);
        let mut out = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            out.push(l);
        }
        out
    }

    #[test]
    fn splits_lines_and_keeps_a_last_one_without_newline() {
        assert_eq!(
            all(b"a\r\nbc\n\nd", 8),
            vec![
                Line::Whole(b"a".to_vec()),
                Line::Whole(b"bc".to_vec()),
                Line::Whole(vec![]),
                Line::Whole(b"d".to_vec())
            ]
        );
    }

    #[test]
    fn drops_a_line_too_long_once_and_goes_on_after_it() {
        let mut input = vec![b'x'; 100_000];
        input.extend_from_slice(b"\nok\n");
        let out = all(&input, 1000);
        assert_eq!(out.len(), 2);
        assert!(matches!(out[0], Line::TooLong(n) if n > 1000 && n <= 1000 + 8192));
        assert_eq!(out[1], Line::Whole(b"ok".to_vec()));
        // Too long by a little, found whole in one read.
        assert_eq!(all(b"123456\nab\n", 5), vec![Line::TooLong(6), Line::Whole(b"ab".to_vec())]);
        // Too long and never ended.
        assert_eq!(all(&[b'y'; 20_000], 100).len(), 1);
    }

    #[test]
    fn keeps_at_most_the_bound_and_a_read_in_memory() {
        struct Endless(usize);
        impl Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Ok(0);
                }
                self.0 -= 1;
                buf.fill(b'z');
                Ok(buf.len())
            }
        }
        let mut r = BoundedLines::new(Endless(10_000), 64 << 10);
        assert!(matches!(r.next_line().unwrap(), Some(Line::TooLong(_))));
        assert!(r.pending.capacity() < (64 << 10) * 4);
        assert_eq!(r.next_line().unwrap(), None);
        assert!(r.pending.capacity() < (64 << 10) * 4);
    }
}
