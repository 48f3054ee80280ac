//! brotli (RFC 7932, `Content-Encoding: br`) with the `brotli` crate: Dropbox's pure-Rust port
//! of Google's encoder, maintained, used by most Rust HTTP stacks (tower-http, actix), and with
//! no C to build (the `brotli` C library's Rust bindings would add a second C toolchain
//! dependency beside libzstd for the same output).
//!
//! # Window
//!
//! `lgwin` is the body's size when it is known, else [`MAX_WINDOW_LOG`](crate::MAX_WINDOW_LOG)
//! (512 KiB) rather than brotli's default 4 MiB: the ring buffer and the hash tables, sized
//! from it, are most of a stream's memory.
//!
//! # Streaming
//!
//! The encoder state is created at the stream's first call and dropped at its end, so a body
//! encoded in one call holds it only for that call. A full call runs
//! `BROTLI_OPERATION_PROCESS`; a pause runs `BROTLI_OPERATION_FLUSH`, which ends the
//! meta-block and pads to a byte boundary (RFC 7932 §9.2), so the client decodes everything
//! sent so far.
//!
//! # Step-down
//!
//! The stream is flushed, its state dropped, and the rest of the body written here as
//! uncompressed meta-blocks (RFC 7932 §9.2: `ISUNCOMPRESSED`), then an empty last meta-block:
//! brotli has no way to change quality mid-stream, and a copy costs almost nothing.

use brotli::enc::encode::BrotliEncoderParameter;
use brotli::enc::encode::{BrotliEncoderOperation, BrotliEncoderStateStruct};
use brotli::enc::interface::{
    InputPair, InputReferenceMut, PredictionModeContextMap, StaticCommand,
};
use brotli::enc::StandardAlloc;
use bytes::Bytes;

use zipwire_rules::negotiate::Coding;

use crate::step_down::{Stepped, Stream};
use crate::Flush;

/// A brotli quality: 0 (fastest) to 11.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrotliLevel(u8);

impl BrotliLevel {
    /// The default, 3: as fast as 2 and denser; 4 costs 1.5× the time and 5× the memory
    /// (`docs/config.md` has the measurements).
    pub const DEFAULT: BrotliLevel = BrotliLevel(3);
    /// The highest quality.
    pub const MAX: u8 = 11;

    /// The quality, if within 0..=11.
    pub fn new(level: u8) -> Option<BrotliLevel> {
        (level <= Self::MAX).then_some(BrotliLevel(level))
    }

    /// The quality as a number.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl Default for BrotliLevel {
    fn default() -> BrotliLevel {
        BrotliLevel::DEFAULT
    }
}

/// Output space reserved before each call into the encoder, at least.
const MIN_RESERVE: usize = 16 * 1024;

/// A brotli stream, stepped down as [`Stepped`] drives it.
pub type BrotliEncoder = Stepped<BrotliStream>;

impl BrotliEncoder {
    /// A fresh stream at `level` with a window of `2^window_log` bytes (10..=24; at least 17
    /// for qualities 5-9, whose smaller-window match finders take 34 MB of tables).
    pub fn new(level: BrotliLevel, window_log: u32) -> BrotliEncoder {
        Stepped::starting(BrotliStream {
            level,
            window_log: effective_window_log(level, window_log),
            state: None,
            dictionary: None,
            fed: 0,
        })
    }

    /// A fresh stream with `dictionary` as a raw LZ77 prefix (Shared Brotli's raw dictionary,
    /// what RFC 9842's `dcb` needs), at quality 5 or more (brotli ignores a dictionary below).
    /// The window should cover dictionary and body; the caller writes `dcb`'s header.
    pub fn with_dictionary(
        level: BrotliLevel,
        window_log: u32,
        dictionary: Bytes,
    ) -> BrotliEncoder {
        let level = BrotliLevel(level.get().max(MIN_DICTIONARY_QUALITY));
        let mut encoder = BrotliEncoder::new(level, window_log);
        encoder.stream_mut().dictionary = Some(dictionary);
        encoder
    }
}

/// The lowest quality at which brotli's encoder uses a dictionary (google/brotli#1148).
pub const MIN_DICTIONARY_QUALITY: u8 = 5;

/// What a brotli stream does at each step (see the module documentation).
pub struct BrotliStream {
    level: BrotliLevel,
    window_log: u32,
    state: Option<Box<BrotliEncoderStateStruct<StandardAlloc>>>,
    /// The raw prefix dictionary, if any.
    dictionary: Option<Bytes>,
    /// Input bytes given to the encoder so far (see [`BrotliStream::static_words`]).
    fed: u64,
}

impl BrotliStream {
    /// Runs the encoder over `input` with `op` until it has taken it all and, for a flush or
    /// the end, written everything out.
    fn run(
        &mut self,
        input: &[u8],
        op: BrotliEncoderOperation,
        out: &mut Vec<u8>,
    ) -> Result<(), &'static str> {
        let (level, window_log) = (self.level, self.window_log);
        let dictionary = &self.dictionary;
        let state = self.state.get_or_insert_with(|| {
            let mut state = Box::new(BrotliEncoderStateStruct::new(StandardAlloc::default()));
            state.set_parameter(
                BrotliEncoderParameter::BROTLI_PARAM_QUALITY,
                u32::from(level.get()),
            );
            state.set_parameter(BrotliEncoderParameter::BROTLI_PARAM_LGWIN, window_log);
            if let Some(dictionary) = dictionary {
                state.set_custom_dictionary(dictionary.len(), dictionary);
            }
            state
        });
        if let Some(dictionary) = dictionary {
            state.params.use_dictionary =
                static_words(dictionary.len(), window_log, self.fed + input.len() as u64);
        }
        self.fed += input.len() as u64;
        let mut available_in = input.len();
        let mut in_offset = 0;
        let mut no_metablocks = |_: &mut PredictionModeContextMap<InputReferenceMut>,
                                 _: &mut [StaticCommand],
                                 _: InputPair,
                                 _: &mut StandardAlloc| ();
        loop {
            let start = out.len();
            let reserve = (available_in / 2).max(MIN_RESERVE);
            out.resize(start + reserve, 0);
            let mut available_out = reserve;
            let mut out_offset = start;
            let ok = state.compress_stream(
                op,
                &mut available_in,
                input,
                &mut in_offset,
                &mut available_out,
                out,
                &mut out_offset,
                &mut None,
                &mut no_metablocks,
            );
            out.truncate(out_offset);
            if !ok {
                return Err("encoder refused the call");
            }
            let done = available_in == 0
                && match op {
                    BrotliEncoderOperation::BROTLI_OPERATION_FINISH => state.is_finished(),
                    BrotliEncoderOperation::BROTLI_OPERATION_FLUSH => !state.has_more_output(),
                    _ => true,
                };
            if done {
                return Ok(());
            }
        }
    }
}

impl Stream for BrotliStream {
    const CODING: Coding = Coding::Br;

    fn compress(
        &mut self,
        input: &[u8],
        flush: Flush,
        out: &mut Vec<u8>,
    ) -> Result<(), &'static str> {
        let op = match flush {
            Flush::Continue => BrotliEncoderOperation::BROTLI_OPERATION_PROCESS,
            Flush::Sync => BrotliEncoderOperation::BROTLI_OPERATION_FLUSH,
        };
        self.run(input, op, out)
    }

    fn end(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), &'static str> {
        let result = self.run(input, BrotliEncoderOperation::BROTLI_OPERATION_FINISH, out);
        self.state = None;
        result
    }

    /// A flush leaves the stream byte-aligned at a meta-block boundary; on a stream not yet
    /// started it writes the stream header (WBITS) first.
    fn close(&mut self, out: &mut Vec<u8>) -> Result<(), &'static str> {
        self.run(&[], BrotliEncoderOperation::BROTLI_OPERATION_FLUSH, out)?;
        self.state = None;
        Ok(())
    }

    fn store(&mut self, input: &[u8], is_final: bool, out: &mut Vec<u8>) {
        for chunk in input.chunks(UNCOMPRESSED_MAX) {
            write_uncompressed_header(chunk.len(), out);
            out.extend_from_slice(chunk);
        }
        if is_final {
            // ISLAST = 1, ISLASTEMPTY = 1, then padding (RFC 7932 §9.2).
            out.push(0x03);
        }
    }

    fn memory(&self) -> usize {
        if self.state.is_some() {
            estimate(self.level, self.window_log) + self.dictionary.as_ref().map_or(0, Bytes::len)
        } else {
            0
        }
    }
}

/// Whether a stream with a raw prefix dictionary of `dictionary` bytes and a window of
/// `2^window_log` may still refer to brotli's built-in dictionary of words once `fed` bytes
/// of body were given to it.
///
/// The `brotli` crate turns its built-in dictionary off when it is given a prefix, because
/// past one point the two models of a prefix disagree: the crate places the prefix in its
/// ring buffer, so a built-in word's distance starts after `min(prefix + position, window -
/// 16)`, while Shared Brotli decoders (Chromium's, brotli's own) keep the prefix outside the
/// window and start a word's distance after `min(position, window - 16) + prefix`. Both are
/// `prefix + position` while the prefix and the body so far fit in the window, so until then
/// the words are as valid as without a prefix. They are worth keeping: on 49 pages of
/// Debian's python3.11-doc against a 32 KiB site dictionary, `dcb` at quality 11 takes
/// 0.807x brotli 11's bytes with the words and 0.848x without them.
fn static_words(dictionary: usize, window_log: u32, fed: u64) -> bool {
    let room = (1u64 << window_log).saturating_sub(16);
    (dictionary as u64).saturating_add(fed) <= room
}

/// The most bytes one uncompressed meta-block carries here: 2^16, so that `MLEN - 1` fits the
/// four nibbles of the shortest header (RFC 7932 §9.2: more nibbles than needed are invalid).
const UNCOMPRESSED_MAX: usize = 1 << 16;

/// The header of an uncompressed meta-block of `len` (1..=65536) bytes, at a byte boundary:
/// `ISLAST` 0, `MNIBBLES` 4 (coded 0), `MLEN - 1` in 16 bits, `ISUNCOMPRESSED` 1, then zero
/// bits to the byte boundary: 20 bits, padded to 3 bytes.
fn write_uncompressed_header(len: usize, out: &mut Vec<u8>) {
    let mlen = (len - 1) as u32;
    let bits = (mlen << 3) | (1 << 19);
    let bytes = bits.to_le_bytes();
    out.extend_from_slice(&bytes[..3]);
}

/// Bytes of encoder state a stream holds at `level` with a window of `2^window_log`: the ring
/// buffer, the quality's hash tables, and the command and block buffers, as the
/// `codings_memory` test counts them after a megabyte of text, rounded up. Columns: window logs
/// up to 16, 17, 18, 19 (a window of 2^16 or less is counted as 2^16). Qualities 5-9 never get
/// a window under 2^17 (see [`BrotliEncoder::new`]).
const MEMORY: [[usize; 4]; 12] = [
    [140_000, 400_000, 665_000, 1_190_000],
    [270_000, 1_450_000, 1_715_000, 2_240_000],
    [875_000, 1_105_000, 1_365_000, 1_890_000],
    [905_000, 1_035_000, 1_300_000, 1_820_000],
    [5_450_000, 6_125_000, 7_200_000, 9_640_000],
    [3_080_000, 3_080_000, 4_205_000, 6_800_000],
    [4_100_000, 4_100_000, 5_200_000, 7_705_000],
    [10_405_000, 10_405_000, 11_750_000, 13_905_000],
    [18_780_000, 18_780_000, 20_140_000, 22_210_000],
    [36_120_000, 36_120_000, 38_610_000, 41_245_000],
    [2_305_000, 4_070_000, 7_610_000, 11_280_000],
    [2_305_000, 4_070_000, 7_610_000, 11_280_000],
];

/// Bytes of encoder state a stream holds at `level` with a window of `2^window_log` (see
/// `MEMORY`; windows past 2^19 are counted twice per step).
pub fn estimate(level: BrotliLevel, window_log: u32) -> usize {
    let window_log = effective_window_log(level, window_log);
    let row = &MEMORY[usize::from(level.get().min(BrotliLevel::MAX))];
    match window_log {
        ..=16 => row[0],
        17..=19 => row[(window_log - 16) as usize],
        _ => row[3] << (window_log - 19),
    }
}

/// The window a stream at `level` really gets: at least 2^17 for qualities 5-9, whose
/// smaller-window match finders (brotli's H40-H42) take 34 MB of tables whatever the window.
fn effective_window_log(level: BrotliLevel, window_log: u32) -> u32 {
    let window_log = window_log.clamp(10, 24);
    if (5..=9).contains(&level.get()) {
        window_log.max(17)
    } else {
        window_log
    }
}

#[cfg(test)]
mod tests {
    use super::static_words;

    #[test]
    fn built_in_words_stop_where_dictionary_and_body_outgrow_the_window() {
        // A window of 2^17 holds 131,056 bytes of history.
        assert!(static_words(100_000, 17, 31_056));
        assert!(!static_words(100_000, 17, 31_057));
        assert!(!static_words(200_000, 17, 0));
        assert!(static_words(0, 10, 1008));
    }
}
