//! RFC 9842's dictionary codings on top of the zstd and brotli streams: `dcz` (the 40-byte
//! header, then a zstd frame with the dictionary as raw content) and `dcb` (the 36-byte
//! header, then a brotli stream with the dictionary as a raw LZ77 prefix), their windows,
//! the memory a stream holds, the best-level variants the cache keeps, and a decoder for the
//! checks a variant passes before it is stored.
//!
//! # Window
//!
//! A delta can only refer to the dictionary while it is within the window, so the window
//! covers dictionary and body: `ceil(log2(dictionary + body))`, with 512 KiB for the body
//! when its length is unknown, at most 2^23 (8 MiB) for `dcz` (Firefox's limit; Chromium
//! takes max(8 MiB, 1.25 × dictionary)) and 2^24 for `dcb` (RFC 9842 §4).

use std::io::Read;

use bytes::Bytes;
use zipwire_dictionary::{DictCoding, Hash};

use crate::brotli::{BrotliLevel, MIN_DICTIONARY_QUALITY};
use crate::zstd::ZstdLevel;
use crate::zstd_context::{End, ZstdContext};
use crate::{BodyEncoder, BrotliEncoder, Encode, EncodeFailure, Flush, ZstdEncoder};

/// The largest `dcz` window: 2^23 (8 MiB).
pub const DCZ_MAX_WINDOW_LOG: u32 = 23;
/// The largest `dcb` window: 2^24 (16 MiB).
pub const DCB_MAX_WINDOW_LOG: u32 = 24;

/// zstd's dictionary magic (`0xEC30A437`, little-endian): bytes that start with it would be
/// read by libzstd as a formatted dictionary, not as raw content.
const ZSTD_DICTIONARY_MAGIC: [u8; 4] = [0x37, 0xA4, 0x30, 0xEC];

/// Whether `dictionary` can be given to libzstd as raw content: it does not start with the
/// dictionary magic. (A response that does is not offered as `dcz`; `dcb` still works.)
pub fn usable_for_dcz(dictionary: &[u8]) -> bool {
    !dictionary.starts_with(&ZSTD_DICTIONARY_MAGIC)
}

/// The window log a `coding` stream gets for a dictionary of `dictionary` bytes and a body
/// of `length` (see the module documentation).
pub fn window_log(coding: DictCoding, dictionary: usize, length: Option<u64>) -> u32 {
    let body = length.unwrap_or(1 << crate::MAX_WINDOW_LOG);
    let total = (dictionary as u64).saturating_add(body).max(1);
    let bits = u64::BITS - (total - 1).leading_zeros();
    let max = match coding {
        DictCoding::Dcz => DCZ_MAX_WINDOW_LOG,
        DictCoding::Dcb => DCB_MAX_WINDOW_LOG,
    };
    bits.clamp(crate::MIN_WINDOW_LOG, max)
}

/// An encoder that writes a dictionary coding's header before its first output.
pub struct Framed<E> {
    header: Option<Vec<u8>>,
    inner: E,
}

impl<E: Encode> Framed<E> {
    fn write_header(&mut self, out: &mut Vec<u8>) {
        if let Some(header) = self.header.take() {
            out.extend_from_slice(&header);
        }
    }
}

impl<E: Encode> Encode for Framed<E> {
    fn encode(
        &mut self,
        input: &[u8],
        flush: Flush,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeFailure> {
        self.write_header(out);
        self.inner.encode(input, flush, out)
    }

    fn finish(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeFailure> {
        self.write_header(out);
        self.inner.finish(input, out)
    }

    fn step_down(&mut self, on: bool) {
        self.inner.step_down(on);
    }

    fn is_storing(&self) -> bool {
        self.inner.is_storing()
    }

    fn memory(&self) -> usize {
        self.inner.memory()
    }

    fn is_windowed(&self) -> bool {
        true
    }
}

/// The lowest zstd level a `dcz` stream gets. Levels 1 and 2 index a large dictionary
/// poorly: on the corpus' six library version pairs, the deltas sum to 128,195 bytes at
/// level 1, 49,087 at 2, 18,795 at 3 and 17,395 at 9 (brotli 11 without a dictionary:
/// 223,736), and level 3 took 1.3× level 2's time.
pub const MIN_DCZ_LEVEL: u8 = 3;

/// A fresh `coding` stream against `dictionary` (whose hash is `hash`) for a body of
/// `length`, at the request-path levels: zstd at `zstd` but at least [`MIN_DCZ_LEVEL`],
/// brotli at `br` but at least 5.
pub fn encoder(
    coding: DictCoding,
    dictionary: &Bytes,
    hash: &Hash,
    length: Option<u64>,
    (zstd, br): (ZstdLevel, BrotliLevel),
) -> BodyEncoder {
    let log = window_log(coding, dictionary.len(), length);
    let header = Some(coding.header(hash));
    let zstd = ZstdLevel::new(zstd.get().max(MIN_DCZ_LEVEL)).unwrap_or(zstd);
    match coding {
        DictCoding::Dcz => BodyEncoder::from_encode(Framed {
            header,
            inner: ZstdEncoder::with_dictionary(zstd, log, dictionary.clone()),
        }),
        DictCoding::Dcb => BodyEncoder::from_encode(Framed {
            header,
            inner: BrotliEncoder::with_dictionary(br, log, dictionary.clone()),
        }),
    }
}

/// Bytes of state a `coding` stream holds for a dictionary of `dictionary` bytes and a body
/// of `length`, besides its buffers: the encoder's window and tables (`zstd_memory` gives
/// zstd's by window log, as measured) and the dictionary's copy and tables, counted as twice
/// its size.
pub fn memory(
    coding: DictCoding,
    dictionary: usize,
    length: Option<u64>,
    (zstd_memory, br): (&dyn Fn(u32) -> usize, BrotliLevel),
) -> usize {
    let log = window_log(coding, dictionary, length);
    let window = match coding {
        DictCoding::Dcz => zstd_memory(log),
        DictCoding::Dcb => {
            let level = BrotliLevel::new(br.get().max(MIN_DICTIONARY_QUALITY)).unwrap_or(br);
            crate::brotli::estimate(level, log)
        }
    };
    window + 2 * dictionary
}

/// The body in `coding` against `dictionary` at the best level (zstd 19, brotli 11), header
/// included: for the cache's background worker.
pub fn encode_best(
    coding: DictCoding,
    dictionary: &Bytes,
    hash: &Hash,
    input: &[u8],
) -> Option<Bytes> {
    let best = (
        ZstdLevel::new(ZstdLevel::MAX)?,
        BrotliLevel::new(BrotliLevel::MAX)?,
    );
    let mut encoder = encoder(coding, dictionary, hash, Some(input.len() as u64), best);
    let mut out = Vec::with_capacity(input.len() / 4 + 64);
    encoder.as_encode_mut().finish(input, &mut out).ok()?;
    Some(Bytes::from(out))
}

/// Why a dictionary-coded body did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The header's magic or hash is not the dictionary's.
    Header,
    /// The stream is corrupt, cut short, or longer than the limit.
    Stream,
}

/// Decodes a `coding` body against `dictionary`, checking its header names the
/// dictionary's hash; at most `limit` bytes out.
pub fn decode(
    coding: DictCoding,
    dictionary: &[u8],
    body: &[u8],
    limit: u64,
) -> Result<Vec<u8>, DecodeError> {
    let header = coding.header(&Hash::of(dictionary));
    let stream = body
        .strip_prefix(header.as_slice())
        .ok_or(DecodeError::Header)?;
    let capacity = usize::try_from(limit).map_err(|_| DecodeError::Stream)?;
    match coding {
        DictCoding::Dcz => {
            let mut context = zstd::zstd_safe::DCtx::try_create().ok_or(DecodeError::Stream)?;
            context
                .ref_prefix(dictionary)
                .map_err(|_| DecodeError::Stream)?;
            context
                .set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(
                    DCB_MAX_WINDOW_LOG,
                ))
                .map_err(|_| DecodeError::Stream)?;
            let mut out = Vec::with_capacity(capacity);
            context
                .decompress(&mut out, stream)
                .map_err(|_| DecodeError::Stream)?;
            Ok(out)
        }
        DictCoding::Dcb => {
            let mut out = Vec::new();
            let mut reader = brotli::Decompressor::new_with_custom_dict(
                stream,
                64 * 1024,
                dictionary.to_vec().into(),
            );
            (&mut reader)
                .take(limit.saturating_add(1))
                .read_to_end(&mut out)
                .map_err(|_| DecodeError::Stream)?;
            if out.len() as u64 > limit {
                return Err(DecodeError::Stream);
            }
            Ok(out)
        }
    }
}

/// One zstd frame of `input` against `dictionary` in a context of its own, `dcz`'s header
/// first, at `level`: a check that the streaming path and a one-shot frame agree.
pub fn dcz_one_shot(dictionary: &Bytes, level: i32, input: &[u8]) -> Result<Vec<u8>, &'static str> {
    let mut out = DictCoding::Dcz.header(&Hash::of(dictionary));
    let log = window_log(DictCoding::Dcz, dictionary.len(), Some(input.len() as u64));
    let mut context = ZstdContext::new(level, Some(log))?;
    context.load_dictionary(dictionary)?;
    context.compress(input, End::Frame, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
