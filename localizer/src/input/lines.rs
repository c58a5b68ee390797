//! A reader that refuses over-long lines. The CSV parser keeps a whole
//! record in memory, so a single 1 GB line (no newline) would take 1 GB of
//! RAM before any field could be checked; wrapped in [`LineCapped`], the
//! parser sees an error once a line passes the cap and nothing more is read.

use std::io::{self, Read};

/// Default of `--max-line-length`: far above any real ping-log row (a
/// row of the schema is a few hundred bytes) and small enough that a
/// runaway line costs nothing.
pub const DEFAULT_MAX_LINE_LENGTH: usize = 64 * 1024;

/// A line longer than the cap: the error carried inside the `io::Error`
/// that [`LineCapped`] returns, so the CSV error can name the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("line longer than {max} bytes (--max-line-length)")]
pub struct LineTooLong {
    /// 1-based number of the line.
    pub line: u64,
    /// The cap in bytes, newline excluded.
    pub max: usize,
}

/// Passes bytes through while every line (bytes between `\n`s) is at most
/// `max` bytes long; at the first longer one it returns what came before
/// that line's bytes, then [`LineTooLong`] as `InvalidData` on every later
/// call. Reads at most one buffer past the cap.
pub struct LineCapped<R> {
    inner: R,
    max: usize,
    line: u64,
    len: usize,
    failed: Option<LineTooLong>,
}

impl<R> LineCapped<R> {
    /// Wrap `inner`; lines are counted from 1.
    pub fn new(inner: R, max: usize) -> Self {
        LineCapped {
            inner,
            max,
            line: 1,
            len: 0,
            failed: None,
        }
    }
}

impl<R: Read> Read for LineCapped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = self.failed {
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        let n = self.inner.read(buf)?;
        // `start`: where the current line's bytes begin in this buffer.
        let mut start = 0;
        let mut rest = &buf[..n];
        loop {
            let newline = rest.iter().position(|&b| b == b'\n');
            let segment = newline.unwrap_or(rest.len());
            if self.len + segment > self.max {
                let e = LineTooLong {
                    line: self.line,
                    max: self.max,
                };
                self.failed = Some(e);
                if start == 0 {
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
                return Ok(start);
            }
            match newline {
                Some(p) => {
                    self.line += 1;
                    self.len = 0;
                    start += p + 1;
                    rest = &rest[p + 1..];
                }
                None => {
                    self.len += segment;
                    return Ok(n);
                }
            }
        }
    }
}

/// The [`LineTooLong`] inside an I/O error, when it is one.
pub fn line_too_long(e: &io::Error) -> Option<LineTooLong> {
    e.get_ref()?.downcast_ref::<LineTooLong>().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read everything through a cap of `max` in chunks of `chunk` bytes.
    fn read_all(data: &[u8], max: usize, chunk: usize) -> (Vec<u8>, Option<LineTooLong>) {
        let mut r = LineCapped::new(data, max);
        let mut out = Vec::new();
        let mut buf = vec![0; chunk];
        loop {
            match r.read(&mut buf) {
                Ok(0) => return (out, None),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return (out, Some(line_too_long(&e).expect("a LineTooLong"))),
            }
        }
    }

    #[test]
    fn lines_up_to_the_cap_pass_unchanged() {
        let data = b"abcd\nefgh\n\nij";
        for chunk in [1, 3, 64] {
            assert_eq!(read_all(data, 4, chunk), (data.to_vec(), None));
        }
    }

    #[test]
    fn the_first_long_line_is_named_and_not_passed_on() {
        let data = b"ab\ncd\nefghij\nkl\n";
        for chunk in [1, 2, 5, 64] {
            let (out, err) = read_all(data, 4, chunk);
            assert_eq!(err, Some(LineTooLong { line: 3, max: 4 }), "chunk {chunk}");
            // Never more than the cap of the long line reaches the parser.
            assert!(out.len() <= 6 + 4, "chunk {chunk}: {out:?}");
            assert!(out.starts_with(b"ab\ncd\n") || b"ab\ncd\n".starts_with(&out));
        }
    }

    #[test]
    fn a_long_last_line_without_newline_fails_too() {
        let (_, err) = read_all(b"ok\n0123456789", 4, 64);
        assert_eq!(err, Some(LineTooLong { line: 2, max: 4 }));
    }
}
