//! Compressed input with look-ahead: the decoders peek at magic numbers and headers before
//! consuming them, read bytes one at a time for bit streams, and count what they used.

use std::io::{ErrorKind, Read};

use crate::error::{Damage, StreamError};

/// Bytes read from the input per call.
const READ: usize = 256 * 1024;

/// A reader with a buffer the decoders can look into.
pub(crate) struct Source<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    consumed: u64,
}

impl<R: Read> Source<R> {
    /// A source over `inner`, nothing read yet.
    pub(crate) fn new(inner: R) -> Source<R> {
        Source {
            inner,
            buf: vec![0; READ],
            start: 0,
            end: 0,
            eof: false,
            consumed: 0,
        }
    }

    /// The buffered bytes not consumed yet.
    pub(crate) fn available(&self) -> &[u8] {
        self.buf.get(self.start..self.end).unwrap_or_default()
    }

    /// Input bytes consumed so far.
    pub(crate) fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Marks `n` buffered bytes as used.
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.end - self.start);
        self.start += n;
        self.consumed += n as u64;
    }

    /// Reads until at least `want` bytes are buffered (at most the buffer's size plus what
    /// `want` asks beyond it) or the input ends; returns how many are buffered.
    pub(crate) fn fill(&mut self, want: usize) -> Result<usize, StreamError> {
        while self.end - self.start < want && !self.eof {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len().max(want), 0);
                if self.end == self.buf.len() {
                    break;
                }
            }
            self.read_more()?;
        }
        Ok(self.end - self.start)
    }

    /// Reads more input after what is buffered; `false` once the input has ended.
    pub(crate) fn refill(&mut self) -> Result<bool, StreamError> {
        let before = self.end - self.start;
        Ok(self.fill(before + 1)? > before)
    }

    /// The next byte, or `None` at the end of the input.
    pub(crate) fn byte(&mut self) -> Result<Option<u8>, StreamError> {
        if self.start == self.end && !self.refill()? {
            return Ok(None);
        }
        let byte = self.buf.get(self.start).copied();
        self.consume(1);
        Ok(byte)
    }

    /// The next byte; the input ending here is [`Damage::Truncated`].
    pub(crate) fn need_byte(&mut self) -> Result<u8, StreamError> {
        self.byte()?.ok_or(StreamError::Damaged(Damage::Truncated))
    }

    fn read_more(&mut self) -> Result<(), StreamError> {
        loop {
            let room = self.buf.get_mut(self.end..).unwrap_or_default();
            match self.inner.read(room) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) => return Err(StreamError::Read(err)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peeks_fills_and_counts_across_reads() {
        // A reader that hands out one byte per call.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(buf.len()).min(1);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut source = Source::new(Trickle(b"hello world"));
        assert_eq!(source.fill(5).unwrap(), 5);
        assert_eq!(&source.available()[..5], b"hello");
        assert_eq!(source.fill(6).unwrap(), 6);
        source.consume(6);
        assert_eq!(source.need_byte().unwrap(), b'w');
        assert_eq!(source.fill(100).unwrap(), 4);
        source.consume(4);
        assert_eq!(source.byte().unwrap(), None);
        assert!(matches!(
            source.need_byte(),
            Err(StreamError::Damaged(Damage::Truncated))
        ));
        assert_eq!(source.consumed(), 11);
    }
}
