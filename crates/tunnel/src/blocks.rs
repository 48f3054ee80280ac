//! Turning blocks into data frames and back, one encoder and one decoder per direction.
//!
//! Each codec keeps its own stream per direction: stateless deflate frames stand alone,
//! while the windowed deflate and zstd streams continue from one of their frames to the next
//! of the same codec. A raw frame in between touches neither window (the sender sends it
//! without feeding a compressor, and the receiver copies it out), so switching to raw and back
//! costs no ratio. A stream is created on its first frame: a direction that never compresses
//! holds no compressor memory.
//!
//! The windows never outlive the connection and never see another connection's bytes: that
//! is what keeps a tunnel carrying attacker-chosen and secret bytes together out of reach of
//! CRIME-style length oracles across connections.

mod zstd;

use std::fmt;
use std::io;

use zipwire_codec::{Decoder, Encoder, Format, Level, Scratch, StatefulEncoder};

use self::zstd::{ZstdDecoder, ZstdEncoder};
use crate::frame::{Codec, DataHeader, Method, DATA_HEADER_LEN, MAX_PAYLOAD};
use ::zstd::stream::raw::InBuffer;

/// Largest zstd window (log2) a receiver accepts: 16 MB, whatever the sender asks for.
const ZSTD_MAX_WINDOW_LOG: u32 = 24;

/// Bytes of the stateless encoder's scratch once level 3 has used it (about 420 KB; see
/// [`Scratch::memory_size`]), rounded up.
const SCRATCH_BYTES: u64 = 450_000;

/// Bytes of a windowed deflate stream (zlib-rs at windowBits 15, memLevel 8): 380,200 as the
/// proxy's `codings_memory` test counts them with a counting allocator, rounded up.
const WINDOW_BYTES: u64 = 400_000;

/// Bytes of a deflate decoder (zlib-rs's inflate state and its 32 KB window), rounded up.
const INFLATE_BYTES: u64 = 48_000;

/// The compressors of one direction.
#[derive(Default)]
pub struct BlockEncoder {
    scratch: Option<Scratch>,
    window: Option<StatefulEncoder>,
    window_level: u8,
    zstd: Option<ZstdEncoder>,
    /// The end of a zstd frame whose context was given back ([`BlockEncoder::release_zstd`]),
    /// to go in front of the next zstd payload.
    zstd_tail: Vec<u8>,
}

impl BlockEncoder {
    /// An encoder that has allocated nothing yet.
    pub fn new() -> BlockEncoder {
        BlockEncoder::default()
    }

    /// Bytes of compressor state this direction holds now.
    pub fn memory_size(&self) -> u64 {
        let scratch = self.scratch.as_ref().map_or(0, |s| s.memory_size() as u64);
        let window = if self.window.is_some() {
            WINDOW_BYTES
        } else {
            0
        };
        scratch + window + self.zstd.as_ref().map_or(0, ZstdEncoder::memory_size)
    }

    /// Bytes of compressor state this direction will hold after a frame of `method`, at
    /// most: a zstd stream whose level changes starts over in a new context, so only the new
    /// level's tables count.
    pub fn memory_with(&self, method: Method) -> u64 {
        let scratch = match (&self.scratch, method.codec) {
            (None, Codec::Deflate) => SCRATCH_BYTES,
            (Some(_), Codec::Deflate) => SCRATCH_BYTES.max(self.scratch_bytes()),
            _ => self.scratch_bytes(),
        };
        let window = if self.window.is_some() || method.codec == Codec::DeflateWindow {
            WINDOW_BYTES
        } else {
            0
        };
        let zstd = match (&self.zstd, method.codec) {
            (Some(z), Codec::Zstd) if z.level() == method.level => z.memory_size(),
            (_, Codec::Zstd) => zstd::encoder_bytes(method.level),
            (Some(z), _) => z.memory_size(),
            (None, _) => 0,
        };
        scratch + window + zstd
    }

    /// Whether a zstd context is held.
    pub fn holds_zstd(&self) -> bool {
        self.zstd.is_some()
    }

    /// Ends the zstd frame in progress and frees its context (the largest state a direction
    /// holds: 94 MB at level 19), for a direction gone idle; the frame's last bytes go in
    /// front of the next zstd payload, which starts a new frame, so the receiver needs no
    /// word of it. The next zstd block starts from an empty window, as after a change of
    /// level. Returns whether there was a context to free.
    ///
    /// # Errors
    ///
    /// Only if zstd reports an internal error ending the frame.
    pub fn release_zstd(&mut self) -> io::Result<bool> {
        match self.zstd.take() {
            Some(mut z) => z.finish(&mut self.zstd_tail).map(|()| true),
            None => Ok(false),
        }
    }

    fn scratch_bytes(&self) -> u64 {
        self.scratch.as_ref().map_or(0, |s| s.memory_size() as u64)
    }

    /// Appends one data frame for `block` (1 to [`crate::frame::MAX_BLOCK`] bytes) to `out`,
    /// compressed with `method`, and returns the method it used: raw when a stateless method
    /// did not make the block smaller. Windowed deflate uses the level of its first frame.
    ///
    /// # Errors
    ///
    /// Only if zstd fails to allocate or reports an internal error.
    pub fn encode_frame(
        &mut self,
        method: Method,
        block: &[u8],
        out: &mut Vec<u8>,
    ) -> io::Result<Method> {
        let start = out.len();
        out.resize(start + DATA_HEADER_LEN, 0);
        let used = match method.codec {
            Codec::Raw => {
                out.extend_from_slice(block);
                Method::RAW
            }
            Codec::Deflate => {
                let level = Level::try_from(method.level).unwrap_or(Level::FASTEST);
                let scratch = self.scratch.get_or_insert_with(Scratch::new);
                let mut encoder = Encoder::new(Format::Raw, level).map_err(io::Error::other)?;
                encoder
                    .encode(scratch, block, out)
                    .map_err(io::Error::other)?;
                method
            }
            Codec::DeflateWindow => {
                let window = self.window.get_or_insert_with(|| {
                    let level = Level::try_from(method.level).unwrap_or(Level::DEFAULT);
                    self.window_level = level.get();
                    StatefulEncoder::new(Format::Raw, level)
                });
                window.encode(block, out).map_err(io::Error::other)?;
                Method {
                    codec: Codec::DeflateWindow,
                    level: self.window_level,
                }
            }
            Codec::Zstd => {
                self.zstd_encode(method.level, block, out)?;
                method
            }
        };
        let payload_len = out.len() - start - DATA_HEADER_LEN;
        // A stateless frame that did not shrink is sent as it was; the windowed codecs must
        // send what they produced, since their receiver's window has to follow.
        let expanded = payload_len >= block.len() || payload_len > MAX_PAYLOAD;
        let used = if used.codec == Codec::Deflate && expanded {
            out.truncate(start + DATA_HEADER_LEN);
            out.extend_from_slice(block);
            Method::RAW
        } else {
            used
        };
        let header = DataHeader {
            method: used,
            raw_len: block.len() as u32,
            payload_len: (out.len() - start - DATA_HEADER_LEN) as u32,
        };
        let mut head = Vec::with_capacity(DATA_HEADER_LEN);
        header.write(&mut head);
        out[start..start + DATA_HEADER_LEN].copy_from_slice(&head);
        Ok(used)
    }

    /// Compresses `block` into the direction's zstd stream and flushes it. A change of level
    /// ends the current zstd frame and starts the next in a new context (the level is fixed
    /// within a frame, and a new frame starts from an empty window either way), so that
    /// stepping down also gives back the higher level's tables.
    fn zstd_encode(&mut self, level: u8, block: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        if let Some(mut z) = self.zstd.take_if(|z| z.level() != level) {
            z.finish(out)?;
        }
        let z = match &mut self.zstd {
            Some(z) => z,
            None => {
                let z = ZstdEncoder::new(level)?;
                out.append(&mut self.zstd_tail);
                self.zstd.insert(z)
            }
        };
        z.encode(block, out)
    }
}

/// A data frame that does not decode to what its header says.
#[derive(Debug)]
pub enum BlockError {
    /// The payload is not valid for its codec.
    Corrupt {
        /// The codec and level named in the header.
        method: Method,
        /// What the decoder said.
        detail: String,
    },
    /// The payload decodes to a different number of bytes than the header says.
    Length {
        /// The codec and level named in the header.
        method: Method,
        /// Bytes the header promised.
        expected: u32,
    },
}

impl fmt::Display for BlockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockError::Corrupt { method, detail } => {
                write!(f, "corrupt {method} frame: {detail}")
            }
            BlockError::Length { method, expected } => write!(
                f,
                "{method} frame does not decode to the {expected} bytes its header says"
            ),
        }
    }
}

impl std::error::Error for BlockError {}

/// The decompressors of one direction.
#[derive(Default)]
pub struct BlockDecoder {
    stateless: Option<Decoder>,
    window: Option<Decoder>,
    zstd: Option<ZstdDecoder>,
}

impl BlockDecoder {
    /// A decoder that has allocated nothing yet.
    pub fn new() -> BlockDecoder {
        BlockDecoder::default()
    }

    /// Bytes of decompressor state this direction holds now: a zstd window grows to what
    /// the sender's level uses (8 MB at level 19, never past 2^24 bytes).
    pub fn memory_size(&self) -> u64 {
        let inflate = [&self.stateless, &self.window]
            .iter()
            .filter(|d| d.is_some())
            .count() as u64;
        inflate * INFLATE_BYTES + self.zstd.as_ref().map_or(0, ZstdDecoder::memory_size)
    }

    /// Decodes the payload of a data frame with `header`, appending exactly
    /// `header.raw_len` bytes to `out`.
    ///
    /// # Errors
    ///
    /// [`BlockError`] when the payload is corrupt or decodes to any other length; the
    /// direction's stream cannot be trusted after that.
    pub fn decode(
        &mut self,
        header: &DataHeader,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), BlockError> {
        let method = header.method;
        let expected = header.raw_len as usize;
        let start = out.len();
        let produced = match method.codec {
            Codec::Raw => {
                out.extend_from_slice(payload);
                payload.len()
            }
            Codec::Deflate => {
                let decoder = self
                    .stateless
                    .get_or_insert_with(|| Decoder::new(Format::Raw));
                inflate(decoder, method, payload, expected, out)?
            }
            Codec::DeflateWindow => {
                let decoder = self.window.get_or_insert_with(|| Decoder::new(Format::Raw));
                inflate(decoder, method, payload, expected, out)?
            }
            Codec::Zstd => {
                let decoder = match &mut self.zstd {
                    Some(d) => d,
                    None => self.zstd.insert(
                        ZstdDecoder::new(ZSTD_MAX_WINDOW_LOG).map_err(|e| corrupt(method, e))?,
                    ),
                };
                unzstd(decoder, method, payload, expected, out)?
            }
        };
        if produced != expected {
            out.truncate(start);
            return Err(BlockError::Length {
                method,
                expected: header.raw_len,
            });
        }
        Ok(())
    }
}

fn corrupt(method: Method, detail: impl fmt::Display) -> BlockError {
    BlockError::Corrupt {
        method,
        detail: detail.to_string(),
    }
}

/// Inflates all of `payload` into room for one byte more than `expected`, so that a frame that
/// decodes to more is caught without decoding all of it.
fn inflate(
    decoder: &mut Decoder,
    method: Method,
    payload: &[u8],
    expected: usize,
    out: &mut Vec<u8>,
) -> Result<usize, BlockError> {
    let start = out.len();
    out.resize(start + expected + 1, 0);
    let mut input = payload;
    let mut filled = 0;
    loop {
        let room = &mut out[start + filled..];
        if room.is_empty() {
            break;
        }
        let progress = decoder
            .decode(input, room)
            .map_err(|e| corrupt(method, e))?;
        input = &input[progress.consumed..];
        filled += progress.produced;
        if progress.consumed == 0 && progress.produced == 0 {
            break;
        }
    }
    out.truncate(start + filled);
    if !input.is_empty() {
        return Err(BlockError::Length {
            method,
            expected: expected as u32,
        });
    }
    Ok(filled)
}

/// Decompresses all of `payload` from the direction's zstd stream, with room for one byte
/// more than `expected`.
fn unzstd(
    decoder: &mut ZstdDecoder,
    method: Method,
    payload: &[u8],
    expected: usize,
    out: &mut Vec<u8>,
) -> Result<usize, BlockError> {
    let start = out.len();
    let limit = start + expected + 1;
    out.reserve(expected + 1);
    let mut input = InBuffer::around(payload);
    loop {
        // The output may grow into the spare capacity only, which bounds what one frame can
        // make the receiver write, whatever the payload claims.
        let moved = decoder
            .run(&mut input, out)
            .map_err(|e| corrupt(method, e))?;
        if out.len() >= limit || !moved {
            break;
        }
    }
    if input.pos < payload.len() {
        return Err(BlockError::Length {
            method,
            expected: expected as u32,
        });
    }
    Ok(out.len() - start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{parse_head, Head};

    fn text(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| b"the quick brown fox jumps over the lazy dog "[i % 44] ^ (i / 997 % 3) as u8)
            .collect()
    }

    fn roundtrip(methods: &[Method], blocks: &[Vec<u8>]) -> (Vec<u8>, usize) {
        let mut enc = BlockEncoder::new();
        let mut dec = BlockDecoder::new();
        let mut wire = Vec::new();
        for (i, block) in blocks.iter().enumerate() {
            enc.encode_frame(methods[i % methods.len()], block, &mut wire)
                .unwrap();
        }
        let mut out = Vec::new();
        let mut rest = &wire[..];
        while !rest.is_empty() {
            let (Head::Data(h), used) = parse_head(rest).unwrap().unwrap() else {
                panic!("not a data frame");
            };
            let payload = &rest[used..used + h.payload_len as usize];
            dec.decode(&h, payload, &mut out).unwrap();
            rest = &rest[used + h.payload_len as usize..];
        }
        (out, wire.len())
    }

    #[test]
    fn every_codec_mixed_with_raw_round_trips_and_windows_survive_raw_frames() {
        let data = text(600_000);
        let blocks: Vec<Vec<u8>> = data.chunks(50_000).map(<[u8]>::to_vec).collect();
        let methods = [
            Method::new(Codec::Zstd, 3).unwrap(),
            Method::RAW,
            Method::new(Codec::DeflateWindow, 6).unwrap(),
            Method::new(Codec::Deflate, 1).unwrap(),
            Method::new(Codec::Zstd, 9).unwrap(),
        ];
        let (out, wire) = roundtrip(&methods, &blocks);
        assert_eq!(out, data);
        assert!(wire < data.len() / 2, "{wire} wire bytes");
    }

    #[test]
    fn a_zstd_context_given_back_between_blocks_ends_its_frame_in_the_next_payload() {
        let data = text(400_000);
        let zstd12 = Method::new(Codec::Zstd, 12).unwrap();
        let (mut enc, mut dec) = (BlockEncoder::new(), BlockDecoder::new());
        let (mut wire, mut out) = (Vec::new(), Vec::new());
        let mut send = |enc: &mut BlockEncoder, method: Method, block: &[u8]| {
            let start = wire.len();
            enc.encode_frame(method, block, &mut wire).unwrap();
            let (Head::Data(h), used) = parse_head(&wire[start..]).unwrap().unwrap() else {
                panic!("not a data frame");
            };
            dec.decode(&h, &wire[start + used..], &mut out).unwrap();
        };
        send(&mut enc, zstd12, &data[..100_000]);
        assert!(enc.memory_size() > 40_000_000, "{}", enc.memory_size());
        assert!(enc.release_zstd().unwrap());
        assert!(!enc.holds_zstd());
        assert!(enc.memory_size() < 1_000_000, "{}", enc.memory_size());
        assert!(!enc.release_zstd().unwrap(), "nothing left to give back");
        // A raw frame between leaves the tail for the next zstd payload.
        send(&mut enc, Method::RAW, &data[100_000..200_000]);
        send(&mut enc, zstd12, &data[200_000..300_000]);
        assert!(enc.holds_zstd());
        send(&mut enc, zstd12, &data[300_000..]);
        assert_eq!(out, data);
    }

    #[test]
    fn incompressible_stateless_blocks_go_raw() {
        let mut state = 0x1234_5678u32;
        let noise: Vec<u8> = (0..70_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect();
        let mut enc = BlockEncoder::new();
        let mut wire = Vec::new();
        let used = enc
            .encode_frame(Method::new(Codec::Deflate, 1).unwrap(), &noise, &mut wire)
            .unwrap();
        assert_eq!(used, Method::RAW);
        assert_eq!(wire.len(), noise.len() + DATA_HEADER_LEN);
    }

    #[test]
    fn a_frame_that_decodes_to_more_or_less_than_it_says_is_refused() {
        let data = text(10_000);
        for method in [
            Method::new(Codec::Deflate, 2).unwrap(),
            Method::new(Codec::DeflateWindow, 6).unwrap(),
            Method::new(Codec::Zstd, 1).unwrap(),
        ] {
            for claimed in [9_999u32, 10_001] {
                let mut wire = Vec::new();
                BlockEncoder::new()
                    .encode_frame(method, &data, &mut wire)
                    .unwrap();
                let (Head::Data(mut h), used) = parse_head(&wire).unwrap().unwrap() else {
                    panic!("not a data frame");
                };
                h.raw_len = claimed;
                let mut out = Vec::new();
                let result = BlockDecoder::new().decode(&h, &wire[used..], &mut out);
                assert!(
                    matches!(result, Err(BlockError::Length { .. })),
                    "{method} {claimed}"
                );
            }
        }
    }
}
