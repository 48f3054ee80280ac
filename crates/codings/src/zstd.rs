//! zstd (RFC 8878, `Content-Encoding: zstd`, §7.2) through the `zstd` crate's libzstd.
//!
//! # Window
//!
//! RFC 9659 §3 lets an HTTP client refuse windows over 8 MiB (`window_log` 23); the window
//! log is set explicitly on every frame, to the body's size when it is known and to
//! [`MAX_WINDOW_LOG`](crate::MAX_WINDOW_LOG) (512 KiB) otherwise, which bounds the memory a
//! stream holds.
//!
//! # One call or a stream
//!
//! A body encoded in a single call (a known length of up to two flush-policy calls, so most
//! pages) is compressed with `ZSTD_compress2` in a context kept per thread: no state per
//! stream at all, and the frame header carries the content size. A longer body, or one of
//! unknown length, gets a context of its own, created at its first call, fed with
//! `ZSTD_e_continue` for full calls and `ZSTD_e_flush` when the upstream pauses (the client
//! can then decode everything sent so far, RFC 8878 §3.1.1.2), and freed at the end.
//!
//! # Checksum
//!
//! Off: the frame checksum (XXH64 of the content, RFC 8878 §3.1.1) would cost a pass over the
//! input and 4 bytes per response to guard against corruption that TCP and TLS already catch;
//! a truncated frame is still detected, since its last block never comes. gzip's CRC is part
//! of its format; zstd's is optional, and Caddy and nginx's zstd module leave it off too.
//!
//! # Step-down
//!
//! The frame is ended and the rest of the body goes out as raw blocks of a second frame
//! (RFC 8878 §3.1.1.2.2, `Raw_Block`) written here: a copy, no compression, decodable by any
//! decoder, since a zstd stream may hold several frames (§3.1).

use std::cell::RefCell;

use bytes::Bytes;

use zipwire_rules::negotiate::Coding;

use crate::step_down::{Stepped, Stream};
use crate::zstd_context::{End, ZstdContext};
use crate::{Encode, Flush};

/// A zstd compression level: 1 (fastest) to 19. Levels past 19 need windows over RFC 9659's
/// 8 MiB, and negative levels compress worse than gzip's fastest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ZstdLevel(u8);

impl ZstdLevel {
    /// The default, 2: see `docs/config.md` for the measurements it was chosen from.
    pub const DEFAULT: ZstdLevel = ZstdLevel(2);
    /// The highest level.
    pub const MAX: u8 = 19;

    /// The level, if within 1..=19.
    pub fn new(level: u8) -> Option<ZstdLevel> {
        (1..=Self::MAX).contains(&level).then_some(ZstdLevel(level))
    }

    /// The level as a number.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl Default for ZstdLevel {
    fn default() -> ZstdLevel {
        ZstdLevel::DEFAULT
    }
}

thread_local! {
    /// The context single-call bodies are compressed in, one per runtime thread.
    static ONE_SHOT: RefCell<Option<ZstdContext>> = const { RefCell::new(None) };
}

/// The largest block of a frame (RFC 8878 §3.1.1.2.3, `Block_Maximum_Size`).
const MAX_BLOCK: usize = 128 * 1024;

/// A zstd stream, stepped down as [`Stepped`] drives it.
pub type ZstdEncoder = Stepped<ZstdStream>;

impl ZstdEncoder {
    /// A fresh stream at `level` whose window is `2^window_log` bytes (10..=23).
    pub fn new(level: ZstdLevel, window_log: u32) -> ZstdEncoder {
        Stepped::starting(ZstdStream {
            level,
            window_log: window_log.clamp(10, 23),
            context: None,
            started: false,
            dictionary: None,
        })
    }

    /// A fresh stream that refers to `dictionary` as raw content (RFC 8878 §5, what RFC 9842's
    /// `dcz` needs): every frame it starts loads it. The caller writes `dcz`'s header and
    /// never passes bytes that start with zstd's dictionary magic, which libzstd would parse
    /// as a formatted dictionary ([`crate::dictionary::usable_for_dcz`]).
    pub fn with_dictionary(level: ZstdLevel, window_log: u32, dictionary: Bytes) -> ZstdEncoder {
        let mut encoder = ZstdEncoder::new(level, window_log);
        encoder.stream_mut().dictionary = Some(dictionary);
        encoder
    }
}

/// What a zstd stream does at each step (see the module documentation).
pub struct ZstdStream {
    level: ZstdLevel,
    window_log: u32,
    /// The stream's own context, from its first call that does not end it.
    context: Option<ZstdContext>,
    /// Whether the first frame has started (anything was given to a context).
    started: bool,
    /// The raw-content dictionary the compressed frame refers to, if any.
    dictionary: Option<Bytes>,
}

impl ZstdStream {
    /// The level and window this stream's frames get.
    fn parameters(&self) -> (i32, Option<u32>) {
        (i32::from(self.level.get()), Some(self.window_log))
    }

    /// Runs the stream's context over `input` until `end` is done.
    fn stream(&mut self, input: &[u8], end: End, out: &mut Vec<u8>) -> Result<(), &'static str> {
        let (level, window_log) = self.parameters();
        let context = match self.context.as_mut() {
            Some(context) => context,
            None => {
                let mut context = ZstdContext::new(level, window_log)?;
                if let Some(dictionary) = &self.dictionary {
                    context.load_dictionary(dictionary)?;
                }
                self.context.insert(context)
            }
        };
        self.started = true;
        context.compress(input, end, out)
    }

    /// Compresses a whole body in one call, in the thread's context.
    fn one_shot(&self, input: &[u8], out: &mut Vec<u8>) -> Result<(), &'static str> {
        let (level, window_log) = self.parameters();
        ONE_SHOT.with(|slot| {
            let mut slot = slot.borrow_mut();
            let context = match slot.as_mut() {
                Some(context) => {
                    context.configure(level, window_log)?;
                    context
                }
                None => slot.insert(ZstdContext::new(level, window_log)?),
            };
            // `configure` dropped the last body's dictionary with its parameters.
            if let Some(dictionary) = &self.dictionary {
                context.load_dictionary(dictionary)?;
            }
            // A frame's first call with `End::Frame` compresses in one pass and writes the
            // content size into the frame header.
            context.compress(input, End::Frame, out)
        })
    }
}

impl Stream for ZstdStream {
    const CODING: Coding = Coding::Zstd;

    fn compress(
        &mut self,
        input: &[u8],
        flush: Flush,
        out: &mut Vec<u8>,
    ) -> Result<(), &'static str> {
        let end = match flush {
            Flush::Continue => End::Continue,
            Flush::Sync => End::Flush,
        };
        self.stream(input, end, out)
    }

    fn end(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), &'static str> {
        if !self.started {
            return self.one_shot(input, out);
        }
        let result = self.stream(input, End::Frame, out);
        self.context = None;
        result
    }

    /// Ends the compressed frame if one is open, and opens the raw frame.
    fn close(&mut self, out: &mut Vec<u8>) -> Result<(), &'static str> {
        if self.started {
            self.stream(&[], End::Frame, out)?;
        }
        // The window's memory goes as soon as the frame is done.
        self.context = None;
        write_raw_frame_header(out);
        Ok(())
    }

    fn store(&mut self, input: &[u8], is_final: bool, out: &mut Vec<u8>) {
        write_raw_blocks(input, is_final, out);
    }

    fn memory(&self) -> usize {
        self.context.as_ref().map_or(0, ZstdContext::memory)
    }
}

/// Bytes a stream's own context holds at `level` with a window of `2^window_log`, as libzstd
/// reports it (`ZSTD_sizeof_CCtx`) once the context has taken a first flushed call.
pub fn measure(level: ZstdLevel, window_log: u32) -> usize {
    let mut encoder = ZstdEncoder::new(level, window_log);
    let mut out = Vec::new();
    match encoder.encode(b"zipwire", Flush::Sync, &mut out) {
        Ok(()) => encoder.memory(),
        // A context that cannot even be built holds nothing; the stream will fail alike.
        Err(_) => 0,
    }
}

/// The window of the raw frame: 128 KiB, the largest block (RFC 8878 §3.1.1.1.2: exponent 7,
/// mantissa 0, window `2^(10 + 7)`).
const RAW_WINDOW_DESCRIPTOR: u8 = 7 << 3;

/// A frame header with no content size, no checksum, no dictionary, not single-segment
/// (RFC 8878 §3.1.1.1): magic number, descriptor 0, window descriptor.
fn write_raw_frame_header(out: &mut Vec<u8>) {
    out.extend_from_slice(&0xFD2F_B528_u32.to_le_bytes());
    out.push(0x00);
    out.push(RAW_WINDOW_DESCRIPTOR);
}

/// `input` as `Raw_Block`s of at most 128 KiB (RFC 8878 §3.1.1.2), the last one marked final
/// when `is_final` (an empty final block when `input` is empty).
fn write_raw_blocks(input: &[u8], is_final: bool, out: &mut Vec<u8>) {
    let mut chunks = input.chunks(MAX_BLOCK).peekable();
    if chunks.peek().is_none() {
        if is_final {
            out.extend_from_slice(&block_header(0, true));
        }
        return;
    }
    while let Some(chunk) = chunks.next() {
        let last = is_final && chunks.peek().is_none();
        out.extend_from_slice(&block_header(chunk.len(), last));
        out.extend_from_slice(chunk);
    }
}

/// A raw block's 3-byte header: `Last_Block` in bit 0, `Block_Type` 0 (raw) in bits 1-2,
/// `Block_Size` in bits 3-23, little-endian.
fn block_header(size: usize, last: bool) -> [u8; 3] {
    let value = (size as u32) << 3 | u32::from(last);
    let bytes = value.to_le_bytes();
    [bytes[0], bytes[1], bytes[2]]
}
