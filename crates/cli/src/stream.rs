//! What every decoder writes through, and the raw deflate body that gzip and zip share.

use std::io::{Read, Write};

use zipwire_codec::{Decoder, Format};

use crate::error::{Damage, StreamError};
use crate::member::Totals;
use crate::source::Source;

/// Output decoded per call, then written.
pub(crate) const WRITE: usize = 1 << 20;

/// What followed the last member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trailing {
    /// The input ended with the last member.
    Nothing,
    /// Only zero bytes followed.
    Zeros,
    /// Other bytes followed; they were ignored.
    Garbage,
    /// A zip file had more than one entry; the rest was ignored.
    MoreEntries,
    /// Other bytes followed and were copied (pass-through).
    Copied,
}

/// The format of the (first) compressed stream, as `gzip -lv` names its method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// gzip or zip deflate.
    Deflate,
    /// zip's stored entry.
    Stored,
    /// Unix compress.
    Compress,
    /// pack.
    Pack,
    /// Not compressed: copied unchanged.
    Copy,
}

/// Decoded output on its way to the writer, counted.
pub(crate) struct Output<'a, W: ?Sized> {
    out: &'a mut W,
    written: u64,
    progress: &'a mut dyn FnMut(Totals),
}

impl<'a, W: Write + ?Sized> Output<'a, W> {
    /// Output into `out`, reporting to `progress`.
    pub(crate) fn new(out: &'a mut W, progress: &'a mut dyn FnMut(Totals)) -> Output<'a, W> {
        Output {
            out,
            written: 0,
            progress,
        }
    }

    /// Bytes written so far.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Writes `data` and reports the totals (`consumed`: input used so far).
    pub(crate) fn write(&mut self, data: &[u8], consumed: u64) -> Result<(), StreamError> {
        if data.is_empty() {
            return Ok(());
        }
        self.out.write_all(data).map_err(StreamError::Write)?;
        self.written += data.len() as u64;
        (self.progress)(Totals {
            bytes_in: consumed,
            bytes_out: self.written,
        });
        Ok(())
    }
}

/// Inflates raw deflate (RFC 1951) from `src` up to the end of its final block, leaving what
/// follows unconsumed; returns the output's CRC-32 and length.
pub(crate) fn inflate_raw<R: Read, W: Write + ?Sized>(
    src: &mut Source<R>,
    out: &mut Output<'_, W>,
    outbuf: &mut [u8],
) -> Result<(u32, u64), StreamError> {
    let mut decoder = Decoder::new(Format::Raw);
    let mut crc = crc32fast::Hasher::new();
    let mut length = 0u64;
    loop {
        let available = src.available().len();
        let step = decoder.decode(src.available(), outbuf)?;
        src.consume(step.consumed);
        let produced = outbuf.get(..step.produced).unwrap_or_default();
        crc.update(produced);
        length += produced.len() as u64;
        out.write(produced, src.consumed())?;
        if step.produced == outbuf.len() {
            continue;
        }
        if decoder.is_done() {
            return Ok((crc.finalize(), length));
        }
        if available > 0 && step.consumed == 0 && step.produced == 0 {
            // No progress on the input it was given: the decoder cannot go on.
            return Err(Damage::Corrupt.into());
        }
        if !src.refill()? {
            return Err(Damage::Truncated.into());
        }
    }
}
