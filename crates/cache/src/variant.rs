//! One-shot coding of stored bodies: a variant made from the identity bytes, the identity
//! bytes got back from a variant, and the check a variant passes before it is stored
//! (decoded length and CRC-32 equal to the representation's).

use std::io::Read;
use std::time::Instant;

use bytes::Bytes;
use zipwire_codec::{DecodeError, Format, Limits};

use crate::store::StoredBody;
use zipwire_codings::BodyEncoder;
use zipwire_rules::negotiate::Coding;

/// Decodes a stored variant; `limit` bounds the output (the stored length, known).
pub fn decode(coding: Coding, bytes: &[u8], limit: u64) -> Result<Vec<u8>, DecodeError> {
    let limits = Limits {
        max_output: Some(limit),
        max_ratio: None,
    };
    match coding {
        Coding::Gzip => zipwire_codec::decompress(Format::Gzip, bytes, limits),
        Coding::Deflate => zipwire_codec::decompress(Format::Zlib, bytes, limits),
        Coding::Zstd => {
            let capacity = usize::try_from(limit).map_err(|_| DecodeError::Truncated)?;
            zstd::bulk::decompress(bytes, capacity).map_err(|_| DecodeError::Truncated)
        }
        Coding::Br => {
            let mut out = Vec::new();
            brotli::Decompressor::new(bytes, 64 * 1024)
                .take(limit.saturating_add(1))
                .read_to_end(&mut out)
                .map_err(|_| DecodeError::Truncated)?;
            Ok(out)
        }
    }
}

/// The identity bytes of a stored body: as sent, or a variant decoded.
pub fn identity(body: &StoredBody) -> Result<Bytes, DecodeError> {
    if let Some(bytes) = &body.as_sent {
        return Ok(bytes.clone());
    }
    let variant = body.variants.first().ok_or(DecodeError::Truncated)?;
    decode(variant.coding, &variant.bytes, body.length).map(Bytes::from)
}

/// Whether `bytes` decode in `coding` to exactly the representation of `body`.
pub fn verify(body: &StoredBody, coding: Coding, bytes: &[u8]) -> bool {
    match decode(coding, bytes, body.length) {
        Ok(decoded) => decoded.len() as u64 == body.length && crc32fast::hash(&decoded) == body.crc,
        Err(_) => false,
    }
}

/// Compresses `input` whole with `encoder`; the bytes and the microseconds it took.
pub fn encode(mut encoder: BodyEncoder, input: &[u8]) -> Option<(Bytes, u64)> {
    let started = Instant::now();
    let mut out = Vec::with_capacity(input.len() / 2 + 64);
    encoder.as_encode_mut().finish(input, &mut out).ok()?;
    let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    Some((Bytes::from(out), micros))
}

/// Compresses `input` at the best level of `coding` this proxy knows: libdeflate 12 for gzip
/// and deflate, brotli 11, zstd 19. For the background worker: seconds per megabyte.
pub fn encode_best(coding: Coding, input: &[u8]) -> Option<Bytes> {
    match coding {
        Coding::Gzip | Coding::Deflate => {
            let level = libdeflater::CompressionLvl::new(12).ok()?;
            let mut compressor = libdeflater::Compressor::new(level);
            let bound = match coding {
                Coding::Gzip => compressor.gzip_compress_bound(input.len()),
                _ => compressor.zlib_compress_bound(input.len()),
            };
            let mut out = vec![0; bound];
            let written = match coding {
                Coding::Gzip => compressor.gzip_compress(input, &mut out),
                _ => compressor.zlib_compress(input, &mut out),
            }
            .ok()?;
            out.truncate(written);
            Some(Bytes::from(out))
        }
        Coding::Zstd => zstd::bulk::compress(input, 19).ok().map(Bytes::from),
        Coding::Br => {
            let mut out = Vec::new();
            let params = brotli::enc::BrotliEncoderParams {
                quality: 11,
                lgwin: 22,
                size_hint: input.len(),
                ..Default::default()
            };
            brotli::BrotliCompress(&mut &input[..], &mut out, &params).ok()?;
            Some(Bytes::from(out))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Variant;

    #[test]
    fn best_variants_verify_and_a_wrong_one_does_not() {
        let input: Vec<u8> = (0..20_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let body = StoredBody {
            as_sent: None,
            variants: Vec::new(),
            pending: Vec::new(),
            deltas: Vec::new(),
            length: input.len() as u64,
            crc: crc32fast::hash(&input),
        };
        for coding in [Coding::Gzip, Coding::Deflate, Coding::Zstd, Coding::Br] {
            let bytes = encode_best(coding, &input).expect("compresses");
            assert!(bytes.len() < input.len() / 2, "{coding}");
            assert!(verify(&body, coding, &bytes), "{coding}");
            let with = StoredBody {
                variants: vec![Variant {
                    coding,
                    bytes: bytes.clone(),
                    best: true,
                    micros: 0,
                }],
                ..body.clone()
            };
            assert_eq!(identity(&with).expect("decodes"), input);
        }
        let other = encode_best(Coding::Gzip, &input[1..]).expect("compresses");
        assert!(!verify(&body, Coding::Gzip, &other));
        assert!(!verify(&body, Coding::Gzip, b"not gzip"));
    }
}
