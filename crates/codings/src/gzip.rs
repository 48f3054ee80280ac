//! gzip (RFC 1952) and HTTP's deflate (zlib, RFC 1950): the stateless encoder for levels 1-3,
//! zlib-rs with a 32 KB window for levels 4-9, both from `zipwire-codec`.

use std::cell::RefCell;

use zipwire_codec::{Encoder, Format, Level, Scratch, StatefulEncoder};

use crate::{Encode, EncodeFailure, Flush};
use zipwire_rules::negotiate::Coding;

/// State a levels 4-9 stream holds: zlib-rs's window, hash chains, hash heads and pending
/// buffer (zlib documents `(1 << (windowBits + 2)) + (1 << (memLevel + 9))`, 256 KiB, for
/// `memLevel` 8) plus zlib-rs's own buffers: 380,200 bytes as the `codings_memory` test counts
/// them, rounded up.
const STATEFUL_MEMORY: usize = 384 * 1024;

thread_local! {
    /// One encoder scratch per runtime thread, shared by every stream that thread polls.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// Bytes a gzip stream at `level` holds: 0 for the stateless levels (their working memory is
/// per thread), zlib-rs's state for 4-9.
pub fn memory(level: Level) -> usize {
    if level.is_stateless() {
        0
    } else {
        STATEFUL_MEMORY
    }
}

/// A gzip or zlib stream.
pub enum GzipEncoder {
    /// Levels 1-3: a few bytes of state per stream; each call is compressed on its own, so
    /// the flush policy's call size sets the ratio. Follows the step-down switch both ways.
    Stateless(Encoder),
    /// Levels 4-9: later calls refer back to earlier data. Follows the step-down switch one
    /// way: once it is seen set, the rest of the body goes out as stored blocks
    /// ([`StatefulEncoder::store_rest`]), even if the budget recovers.
    Stateful(StatefulEncoder),
}

impl GzipEncoder {
    /// A fresh stream of `format` at `level`, stateless when the level allows it.
    pub fn new(format: Format, level: Level) -> GzipEncoder {
        match Encoder::new(format, level) {
            Ok(encoder) => GzipEncoder::Stateless(encoder),
            Err(_) => GzipEncoder::Stateful(StatefulEncoder::new(format, level)),
        }
    }

    fn coding(&self) -> Coding {
        let format = match self {
            GzipEncoder::Stateless(encoder) => encoder.format(),
            GzipEncoder::Stateful(encoder) => encoder.format(),
        };
        match format {
            Format::Gzip => Coding::Gzip,
            _ => Coding::Deflate,
        }
    }

    fn failure(&self) -> EncodeFailure {
        EncodeFailure {
            coding: self.coding(),
            reason: "stream already finished",
        }
    }
}

impl From<Encoder> for GzipEncoder {
    fn from(encoder: Encoder) -> GzipEncoder {
        GzipEncoder::Stateless(encoder)
    }
}

impl From<StatefulEncoder> for GzipEncoder {
    fn from(encoder: StatefulEncoder) -> GzipEncoder {
        GzipEncoder::Stateful(encoder)
    }
}

impl Encode for GzipEncoder {
    /// Every call ends on a byte boundary whatever `flush` says: the stateless encoder's
    /// calls are complete blocks, the stateful one ends each with a sync flush.
    fn encode(&mut self, input: &[u8], _: Flush, out: &mut Vec<u8>) -> Result<(), EncodeFailure> {
        let result = match self {
            GzipEncoder::Stateless(encoder) => {
                SCRATCH.with(|scratch| encoder.encode(&mut scratch.borrow_mut(), input, out))
            }
            GzipEncoder::Stateful(encoder) => encoder.encode(input, out),
        };
        result.map_err(|_| self.failure())
    }

    fn finish(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeFailure> {
        let result = match self {
            GzipEncoder::Stateless(encoder) => {
                SCRATCH.with(|scratch| encoder.finish(&mut scratch.borrow_mut(), input, out))
            }
            GzipEncoder::Stateful(encoder) => encoder.finish(input, out),
        };
        result.map_err(|_| self.failure())
    }

    fn step_down(&mut self, on: bool) {
        match self {
            GzipEncoder::Stateless(encoder) => encoder.set_store_only(on),
            GzipEncoder::Stateful(encoder) if on => encoder.store_rest(),
            GzipEncoder::Stateful(_) => {}
        }
    }

    fn is_storing(&self) -> bool {
        match self {
            GzipEncoder::Stateless(encoder) => encoder.is_store_only(),
            GzipEncoder::Stateful(encoder) => encoder.is_storing(),
        }
    }

    fn memory(&self) -> usize {
        match self {
            GzipEncoder::Stateless(_) => 0,
            GzipEncoder::Stateful(_) => STATEFUL_MEMORY,
        }
    }

    fn is_windowed(&self) -> bool {
        false
    }
}
