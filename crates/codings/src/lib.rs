//! The content-codings the proxy produces, each a module behind one interface, [`Encode`]:
//! `gzip` (and HTTP's `deflate`, the same encoders in zlib framing), `zstd` (RFC 8878) and
//! `br` (RFC 7932). the proxy's `CompressBody` drives any of them the same way:
//! compress a call, flush (sync) when the upstream pauses, finish, step down when the budget
//! is spent, and report the memory the stream holds. A new coding (or a cache that stores
//! encoded bodies) plugs in here and in `Codings::encoder`; the request path does not change.
//!
//! # Trait, not enum
//!
//! A body holds a `Box<dyn Encode>`: one indirect call per encoder call, and a call is a whole
//! gathered buffer (16-128 KB), so dispatch costs nothing measurable next to the compression
//! (the gzip figures of `zipwire demo` and the proxy tests are the same with an enum of the two
//! gzip encoders). The trait keeps each coding's state private to its module.
//!
//! # Memory per stream
//!
//! gzip levels 1-3 keep a few bytes per stream (their working memory is per thread); gzip 4-9
//! keeps zlib-rs's 32 KB window and hash chains. zstd and brotli keep a window and match-finder
//! tables per stream, so they are sized from the body: a body of known length gets a window no
//! larger than itself, a body of unknown length the configured maximum (2^19 = 512 KiB), and
//! a known-length body of up to two calls is encoded in one call whose state is freed at once.
//! `Codings::memory` gives the bytes a response's encoder holds, measured once per server
//! by building the encoder and reading the library's own size (`ZSTD_sizeof_CCtx`) or counting
//! brotli's allocations (the `codings_memory` test checks both against a counting allocator);
//! the memory gate takes a permit of that size, and a response it refuses falls back to
//! stateless gzip (see `docs/config.md`, "Memory per coding", for the figures).
//!
//! # Step-down
//!
//! When the CPU or rate budget is spent, a running stream stops compressing, decodably: gzip
//! writes stored blocks, zstd ends its frame and sends the rest as raw blocks of a new frame
//! (RFC 8878 §3.1: a stream is a sequence of frames), brotli flushes and sends the rest as
//! uncompressed meta-blocks (RFC 7932 §9.2). The encoder's state is freed when it steps down.

use std::fmt;

use zipwire_codec::{Format, Level};

use zipwire_rules::negotiate::Coding;

pub mod brotli;
pub mod cover;
pub mod dictionary;
pub mod gzip;
pub mod step_down;
pub mod train;
pub mod zstd;
pub mod zstd_context;

pub use brotli::{BrotliEncoder, BrotliLevel};
pub use step_down::Stepped;
pub use zstd::{ZstdEncoder, ZstdLevel};
pub use zstd_context::ZstdContext;

/// The largest window a zstd or brotli stream of unknown length gets: 2^19 bytes (512 KiB). RFC
/// 9659 caps zstd's window for HTTP at 8 MiB (2^23); a smaller one bounds memory per stream.
pub const MAX_WINDOW_LOG: u32 = 19;

/// Whether an encoder call must leave its output decodable up to the call's last byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// The encoder may keep input back for better matches (a full call of a body that goes on).
    Continue,
    /// Everything given so far must be decodable from the output so far: the upstream paused
    /// (zstd `ZSTD_e_flush`, brotli `BROTLI_OPERATION_FLUSH`, deflate sync flush).
    Sync,
}

/// One stream of one content-coding, as the proxy's `CompressBody` drives it.
///
/// The output of every call, ending with [`Encode::finish`], is one valid stream of the coding.
pub trait Encode: Send {
    /// Compresses `input`, appending what is ready to `out` (perhaps nothing, with
    /// [`Flush::Continue`]).
    ///
    /// # Errors
    ///
    /// [`EncodeFailure`] when the library fails (out of memory) or the stream was finished.
    fn encode(
        &mut self,
        input: &[u8],
        flush: Flush,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeFailure>;

    /// Compresses the last `input` and ends the stream.
    ///
    /// # Errors
    ///
    /// As [`Encode::encode`].
    fn finish(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeFailure>;

    /// Follows the budget's step-down switch, seen before each call: while `on`, stop
    /// compressing (see the module documentation). Stateless gzip follows the switch both
    /// ways; the others step down for the rest of the stream.
    fn step_down(&mut self, on: bool);

    /// Whether calls now store their input rather than compress it (stepped down). Such
    /// calls are not compression work: the budget does not count their bytes.
    fn is_storing(&self) -> bool;

    /// Bytes of encoder state this stream holds now, besides the input and output buffers.
    fn memory(&self) -> usize;

    /// Whether later calls refer back to earlier ones (a window per stream). Such an encoder
    /// gets a body of known length in as few calls as its memory allows, rather than in equal
    /// calls that each compress well alone.
    fn is_windowed(&self) -> bool;
}

/// Why an encoder call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeFailure {
    /// The coding whose encoder failed.
    pub coding: Coding,
    /// What the library said.
    pub reason: &'static str,
}

impl fmt::Display for EncodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} encoder failed: {}", self.coding, self.reason)
    }
}

impl std::error::Error for EncodeFailure {}

/// The encoder a the proxy's `CompressBody` drives, any coding.
pub struct BodyEncoder(Box<dyn Encode>);

impl BodyEncoder {
    /// A fresh gzip or zlib stream at `level`: the stateless encoder for levels 1-3, zlib-rs
    /// with a 32 KB window for 4-9.
    pub fn new(format: Format, level: Level) -> BodyEncoder {
        BodyEncoder(Box::new(gzip::GzipEncoder::new(format, level)))
    }

    /// Wraps an encoder of any coding.
    pub fn from_encode(encoder: impl Encode + 'static) -> BodyEncoder {
        BodyEncoder(Box::new(encoder))
    }

    /// The encoder, to drive.
    pub fn as_encode_mut(&mut self) -> &mut dyn Encode {
        self.0.as_mut()
    }

    /// The encoder, to ask.
    pub fn as_encode(&self) -> &dyn Encode {
        self.0.as_ref()
    }
}

impl From<zipwire_codec::Encoder> for BodyEncoder {
    fn from(encoder: zipwire_codec::Encoder) -> BodyEncoder {
        BodyEncoder::from_encode(gzip::GzipEncoder::from(encoder))
    }
}

impl From<zipwire_codec::StatefulEncoder> for BodyEncoder {
    fn from(encoder: zipwire_codec::StatefulEncoder) -> BodyEncoder {
        BodyEncoder::from_encode(gzip::GzipEncoder::from(encoder))
    }
}

impl<S: step_down::Stream + 'static> From<Stepped<S>> for BodyEncoder {
    fn from(encoder: Stepped<S>) -> BodyEncoder {
        BodyEncoder::from_encode(encoder)
    }
}

impl fmt::Debug for BodyEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyEncoder")
            .field("memory", &self.0.memory())
            .field("windowed", &self.0.is_windowed())
            .finish()
    }
}

/// One server's encoders: the level of each coding, and the memory each needs, measured
/// when the server starts.
#[derive(Clone, Debug)]
pub struct Codings {
    gzip: Level,
    zstd: ZstdLevel,
    br: BrotliLevel,
    /// gzip's state per stream at `gzip` (0 for the stateless levels).
    gzip_memory: usize,
    /// zstd's state per stream, by window log 10..=[`MAX_WINDOW_LOG`].
    zstd_memory: Vec<usize>,
    /// brotli's state per stream, by window log 10..=[`MAX_WINDOW_LOG`].
    br_memory: Vec<usize>,
    /// The longest body a windowed encoder takes in one call (two flush-policy calls).
    one_call: u64,
}

/// The smallest window log either windowed coding is given (zstd's `ZSTD_WINDOWLOG_MIN`,
/// brotli's `BROTLI_MIN_WINDOW_BITS`).
pub const MIN_WINDOW_LOG: u32 = 10;

impl Codings {
    /// The encoders at these levels, their memory measured for the codings in `offered`;
    /// bodies are gathered in calls of `coalesce` bytes.
    pub fn new(
        gzip: Level,
        zstd: ZstdLevel,
        br: BrotliLevel,
        offered: &[Coding],
        coalesce: usize,
    ) -> Codings {
        let logs = MIN_WINDOW_LOG..=MAX_WINDOW_LOG;
        let zstd_memory = if offered.contains(&Coding::Zstd) {
            logs.clone().map(|log| zstd::measure(zstd, log)).collect()
        } else {
            Vec::new()
        };
        let br_memory = if offered.contains(&Coding::Br) {
            logs.map(|log| brotli::estimate(br, log)).collect()
        } else {
            Vec::new()
        };
        Codings {
            gzip,
            zstd,
            br,
            gzip_memory: gzip::memory(gzip),
            zstd_memory,
            br_memory,
            one_call: 2 * coalesce as u64,
        }
    }

    /// A fresh encoder of `coding` for a body of `length` bytes, if known.
    pub fn encoder(&self, coding: Coding, length: Option<u64>) -> BodyEncoder {
        match coding {
            Coding::Gzip => BodyEncoder::new(Format::Gzip, self.gzip),
            // HTTP's "deflate" is the zlib format (RFC 9110 §8.4.1.2).
            Coding::Deflate => BodyEncoder::new(Format::Zlib, self.gzip),
            Coding::Zstd => ZstdEncoder::new(self.zstd, window_log_for(length)).into(),
            Coding::Br => BrotliEncoder::new(self.br, window_log_for(length)).into(),
        }
    }

    /// The stateless gzip encoder that a response the memory gate refuses falls back to.
    pub fn fallback(&self) -> BodyEncoder {
        BodyEncoder::new(Format::Gzip, Level::FAST)
    }

    /// Bytes of encoder state a response of `coding` for a body of `length` holds. A windowed
    /// encoder given the whole body in one call holds no state of its own (its working memory
    /// lives for that call, one per thread at most), only the gathered body past one call.
    pub fn memory(&self, coding: Coding, length: Option<u64>) -> usize {
        let index = (window_log_for(length) - MIN_WINDOW_LOG) as usize;
        if let (Coding::Zstd | Coding::Br, Some(length)) = (coding, length) {
            if length <= self.one_call {
                let extra = length.saturating_sub(self.one_call / 2);
                return usize::try_from(extra).unwrap_or(usize::MAX);
            }
        }
        match coding {
            Coding::Gzip | Coding::Deflate => self.gzip_memory,
            Coding::Zstd => self.zstd_memory.get(index).copied().unwrap_or(0),
            Coding::Br => self.br_memory.get(index).copied().unwrap_or(0),
        }
    }
}

/// The window log a windowed encoder gets for a body of `length` bytes: no larger than the
/// body (a window past the data holds nothing), at most [`MAX_WINDOW_LOG`].
pub fn window_log_for(length: Option<u64>) -> u32 {
    match length {
        Some(length) => {
            let bits = u64::BITS - length.saturating_sub(1).leading_zeros();
            bits.clamp(MIN_WINDOW_LOG, MAX_WINDOW_LOG)
        }
        None => MAX_WINDOW_LOG,
    }
}

#[cfg(test)]
mod tests;
