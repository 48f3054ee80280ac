//! The decoders behind [`DecompressBody`](super::DecompressBody): gzip (the codec's own),
//! zstd (libzstd's streaming decoder) and brotli (the `brotli-decompressor` crate), behind
//! one push interface, each bounded by the same [`Limits`] and reporting in the codec's
//! [`DecodeError`] terms, so that a coding the client did not ask for is decoded as gzip
//! always was.
//!
//! # Windows
//!
//! zstd frames may ask for a window of at most 2^23 bytes (RFC 9659's 8 MiB for HTTP); a
//! larger one is refused as corrupt. brotli streams get the standard window of at most 2^24
//! (RFC 7932), not the large-window extension of up to 1 GiB. What one decoding stream may
//! hold is therefore bounded ([`stream_memory`]).

use brotli_decompressor::{BrotliDecompressStream, BrotliResult, BrotliState, StandardAlloc};
use zipwire_codec::{DecodeError, Decoder, Format, Limits, Progress};
use zipwire_dictionary::DictCoding;
use zipwire_rules::{Coding, ContentEncoding};
use zstd::zstd_safe::{DCtx, DParameter, InBuffer, OutBuffer};

use super::dictionary_decoder::{DictionaryDecoder, Resolve};

/// The largest zstd window a decoded stream may use: 2^23 (RFC 9659).
const ZSTD_MAX_WINDOW_LOG: u32 = 23;

/// What a dictionary in zstd's own format starts with (little-endian 0xEC30A437).
const ZSTD_DICTIONARY_MAGIC: [u8; 4] = [0x37, 0xA4, 0x30, 0xEC];

/// What one decoding stream of `coding` may hold besides its output buffer, as counted
/// against `budget.max_memory`: the decoder's state and its largest window.
pub fn stream_memory(coding: Coding) -> u64 {
    match coding {
        // zlib-rs's inflate and its 32 KiB window, rounded up.
        Coding::Gzip | Coding::Deflate => 48 * 1024,
        // The 8 MiB window, the block buffer, the context.
        Coding::Zstd => (1 << ZSTD_MAX_WINDOW_LOG) + (256 << 10),
        // The 16 MiB ring buffer and the Huffman tables.
        Coding::Br => (1 << 24) + (256 << 10),
    }
}

/// What an upstream body is decoded from: one of the proxy's codings, or an upstream's own
/// `dcb`/`dcz` (see [`super::dictionary_decoder`]).
pub enum Decoding {
    /// gzip, deflate, br or zstd.
    Coding(Coding),
    /// `dcb` or `dcz`, against the dictionary `Resolve` finds by the body's hash.
    Dictionary(DictCoding, Resolve),
}

impl Decoding {
    /// What a body in `encoding` is decoded from: for `dcb` or `dcz`, the dictionary lookup
    /// `resolve` gives for it, if any (a server without dictionaries has none, and passes
    /// such a body); otherwise its own coding, gzip when it has none the proxy knows.
    pub fn of(
        encoding: ContentEncoding,
        resolve: impl FnOnce(DictCoding) -> Option<Resolve>,
    ) -> Decoding {
        let dictionary = match encoding {
            ContentEncoding::Dcb => Some(DictCoding::Dcb),
            ContentEncoding::Dcz => Some(DictCoding::Dcz),
            _ => None,
        };
        match dictionary.and_then(|coding| Some((coding, resolve(coding)?))) {
            Some((coding, resolve)) => Decoding::Dictionary(coding, resolve),
            None => Decoding::Coding(encoding.decodable().unwrap_or(Coding::Gzip)),
        }
    }

    /// The decoder, within `limits`.
    pub fn decoder(self, limits: Limits) -> BodyDecoder {
        match self {
            Decoding::Coding(coding) => BodyDecoder::new(coding, limits),
            Decoding::Dictionary(coding, resolve) => {
                BodyDecoder::Dictionary(Box::new(DictionaryDecoder::new(coding, resolve, limits)))
            }
        }
    }
}

/// What one decoding stream of a body in `encoding` may hold ([`stream_memory`]); a `dcb`
/// body's dictionary lives in brotli's ring buffer (within the 16 MiB window counted), a
/// `dcz` body's is copied beside zstd's window: at most `dictionary` bytes.
pub fn encoding_memory(encoding: ContentEncoding, dictionary: u64) -> u64 {
    match encoding {
        ContentEncoding::Dcz => stream_memory(Coding::Zstd).saturating_add(dictionary),
        ContentEncoding::Dcb => stream_memory(Coding::Br),
        _ => stream_memory(encoding.decodable().unwrap_or(Coding::Gzip)),
    }
}

/// A decoder of one coding.
pub enum BodyDecoder {
    /// gzip, by the codec.
    Gzip(Decoder),
    /// zstd, by libzstd.
    Zstd(ZstdDecoder),
    /// brotli.
    Br(Box<BrotliDecoder>),
    /// An upstream's own `dcb` or `dcz`.
    Dictionary(Box<DictionaryDecoder>),
}

impl BodyDecoder {
    /// A decoder of `coding` (gzip, zstd or br; deflate is read as zlib) within `limits`.
    pub fn new(coding: Coding, limits: Limits) -> BodyDecoder {
        match coding {
            Coding::Gzip => BodyDecoder::Gzip(Decoder::new(Format::Gzip).with_limits(limits)),
            Coding::Deflate => BodyDecoder::Gzip(Decoder::new(Format::Zlib).with_limits(limits)),
            Coding::Zstd => BodyDecoder::Zstd(ZstdDecoder::new(limits)),
            Coding::Br => BodyDecoder::Br(Box::new(BrotliDecoder::new(limits))),
        }
    }

    /// Decodes from `input` into `out`.
    ///
    /// # Errors
    ///
    /// Corrupt data, or output past the limits; the decoder stays failed.
    pub fn decode(&mut self, input: &[u8], out: &mut [u8]) -> Result<Progress, DecodeError> {
        match self {
            BodyDecoder::Gzip(decoder) => decoder.decode(input, out),
            BodyDecoder::Zstd(decoder) => decoder.decode(input, out),
            BodyDecoder::Br(decoder) => decoder.decode(input, out),
            BodyDecoder::Dictionary(decoder) => decoder.decode(input, out),
        }
    }

    /// Whether the stream has ended (bytes after it are not decoded).
    pub fn is_done(&self) -> bool {
        match self {
            BodyDecoder::Gzip(decoder) => decoder.is_done(),
            // A zstd stream may hold further frames: it is never done before the input ends.
            BodyDecoder::Zstd(_) => false,
            BodyDecoder::Br(decoder) => decoder.finished,
            BodyDecoder::Dictionary(decoder) => decoder.is_done(),
        }
    }

    /// Checks the stream ended where the input did.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Truncated`] inside a stream, or the error that stopped it.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self {
            BodyDecoder::Gzip(decoder) => decoder.finish(),
            BodyDecoder::Zstd(decoder) => decoder.finish(),
            BodyDecoder::Br(decoder) => decoder.finish(),
            BodyDecoder::Dictionary(decoder) => decoder.finish(),
        }
    }

    /// Input bytes taken so far.
    pub fn total_in(&self) -> u64 {
        match self {
            BodyDecoder::Gzip(decoder) => decoder.total_in(),
            BodyDecoder::Zstd(decoder) => decoder.total_in,
            BodyDecoder::Br(decoder) => decoder.total_in,
            BodyDecoder::Dictionary(decoder) => decoder.total_in(),
        }
    }
}

/// The output limit of `limits`: `max_output`, and `max_ratio` times the input so far.
/// After a decoder's call: the error it stops at, corrupt input at the offset read so far or
/// output past `limits`, kept in `slot` so that every later call fails the same way.
fn stop(
    slot: &mut Option<DecodeError>,
    limits: &Limits,
    (total_in, total_out): (u64, u64),
    corrupt: bool,
) -> Result<(), DecodeError> {
    let error = match corrupt {
        true => Some(DecodeError::Corrupt { offset: total_in }),
        false => over_limit(limits, total_in, total_out),
    };
    match error {
        Some(error) => {
            *slot = Some(error.clone());
            Err(error)
        }
        None => Ok(()),
    }
}

fn over_limit(limits: &Limits, total_in: u64, total_out: u64) -> Option<DecodeError> {
    if let Some(max) = limits.max_output {
        if total_out > max {
            return Some(DecodeError::LimitExceeded { limit: max });
        }
    }
    if let Some(ratio) = limits.max_ratio {
        let limit = total_in.max(1).saturating_mul(ratio);
        if total_out > limit {
            return Some(DecodeError::LimitExceeded { limit });
        }
    }
    None
}

/// libzstd's streaming decoder, frame after frame.
pub struct ZstdDecoder {
    context: Option<DCtx<'static>>,
    limits: Limits,
    pub(super) total_in: u64,
    total_out: u64,
    /// Whether the last call ended a frame (libzstd returned 0) with nothing begun since.
    at_frame_end: bool,
    error: Option<DecodeError>,
}

impl ZstdDecoder {
    fn new(limits: Limits) -> ZstdDecoder {
        let context = DCtx::try_create().and_then(|mut context| {
            context
                .set_parameter(DParameter::WindowLogMax(ZSTD_MAX_WINDOW_LOG))
                .ok()?;
            Some(context)
        });
        ZstdDecoder {
            error: context
                .is_none()
                .then_some(DecodeError::Corrupt { offset: 0 }),
            context,
            limits,
            total_in: 0,
            total_out: 0,
            at_frame_end: true,
        }
    }

    /// A decoder of a frame made against `dictionary` as raw content (`dcz`); `None` for a
    /// dictionary libzstd would read as one in its own format (its magic first), which no
    /// raw-content frame can have been made against here.
    pub(super) fn with_prefix(limits: Limits, dictionary: &[u8]) -> Option<ZstdDecoder> {
        if dictionary.starts_with(&ZSTD_DICTIONARY_MAGIC) {
            return None;
        }
        let mut decoder = ZstdDecoder::new(limits);
        decoder.context.as_mut()?.load_dictionary(dictionary).ok()?;
        Some(decoder)
    }

    pub(super) fn decode(&mut self, input: &[u8], out: &mut [u8]) -> Result<Progress, DecodeError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let Some(context) = self.context.as_mut() else {
            return Err(DecodeError::Corrupt { offset: 0 });
        };
        let mut source = InBuffer::around(input);
        let mut target = OutBuffer::around(out);
        let result = context.decompress_stream(&mut target, &mut source);
        let (consumed, produced) = (source.pos, target.pos());
        self.total_in += consumed as u64;
        self.total_out += produced as u64;
        match result {
            // A call that moved nothing says only what the next frame would need.
            Ok(_) if consumed == 0 && produced == 0 => {}
            Ok(hint) => self.at_frame_end = hint == 0,
            Err(_) => {}
        }
        let totals = (self.total_in, self.total_out);
        stop(&mut self.error, &self.limits, totals, result.is_err())?;
        Ok(Progress { consumed, produced })
    }

    pub(super) fn finish(&self) -> Result<(), DecodeError> {
        match &self.error {
            Some(error) => Err(error.clone()),
            None if !self.at_frame_end => Err(DecodeError::Truncated),
            None => Ok(()),
        }
    }
}

/// The brotli state machine, standard windows only.
pub struct BrotliDecoder {
    state: BrotliState<StandardAlloc, StandardAlloc, StandardAlloc>,
    limits: Limits,
    pub(super) total_in: u64,
    total_out: u64,
    pub(super) finished: bool,
    error: Option<DecodeError>,
}

impl BrotliDecoder {
    fn new(limits: Limits) -> BrotliDecoder {
        let mut state = BrotliState::new(
            StandardAlloc::default(),
            StandardAlloc::default(),
            StandardAlloc::default(),
        );
        // RFC 7932's windows only: the large-window extension could ask for 1 GiB.
        state.large_window = false;
        BrotliDecoder {
            state,
            limits,
            total_in: 0,
            total_out: 0,
            finished: false,
            error: None,
        }
    }

    /// A decoder of a stream made against `dictionary` as raw LZ77 prefix (`dcb`).
    pub(super) fn with_prefix(limits: Limits, dictionary: &[u8]) -> BrotliDecoder {
        let mut decoder = BrotliDecoder::new(limits);
        let mut state = BrotliState::new_with_custom_dictionary(
            StandardAlloc::default(),
            StandardAlloc::default(),
            StandardAlloc::default(),
            dictionary.to_vec().into(),
        );
        state.large_window = false;
        decoder.state = state;
        decoder
    }

    pub(super) fn decode(&mut self, input: &[u8], out: &mut [u8]) -> Result<Progress, DecodeError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        if self.finished {
            return Ok(Progress {
                consumed: 0,
                produced: 0,
            });
        }
        let (mut available_in, mut input_offset) = (input.len(), 0);
        let (mut available_out, mut output_offset) = (out.len(), 0);
        let mut written = 0;
        let result = BrotliDecompressStream(
            &mut available_in,
            &mut input_offset,
            input,
            &mut available_out,
            &mut output_offset,
            out,
            &mut written,
            &mut self.state,
        );
        self.total_in += input_offset as u64;
        self.total_out += output_offset as u64;
        let corrupt = matches!(result, BrotliResult::ResultFailure);
        if matches!(result, BrotliResult::ResultSuccess) {
            self.finished = true;
        }
        let totals = (self.total_in, self.total_out);
        stop(&mut self.error, &self.limits, totals, corrupt)?;
        Ok(Progress {
            consumed: input_offset,
            produced: output_offset,
        })
    }

    pub(super) fn finish(&self) -> Result<(), DecodeError> {
        match &self.error {
            Some(error) => Err(error.clone()),
            None if !self.finished => Err(DecodeError::Truncated),
            None => Ok(()),
        }
    }
}

/// Decodes a whole body of `coding` within `limits` (a stored response for a client that does
/// not accept its coding).
///
/// # Errors
///
/// As [`BodyDecoder::decode`] and [`BodyDecoder::finish`].
pub fn decode_all(
    decoding: Decoding,
    input: &[u8],
    limits: Limits,
) -> Result<Vec<u8>, DecodeError> {
    let mut decoder = decoding.decoder(limits);
    let mut out = Vec::new();
    let mut chunk = vec![0; 64 * 1024];
    let mut rest = input;
    loop {
        let progress = decoder.decode(rest, &mut chunk)?;
        out.extend_from_slice(&chunk[..progress.produced]);
        rest = &rest[progress.consumed..];
        if decoder.is_done() || (progress.consumed == 0 && progress.produced == 0) {
            break;
        }
    }
    if input.is_empty() {
        return Ok(out);
    }
    decoder.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn text() -> Vec<u8> {
        (0..20_000)
            .flat_map(|i| format!("line {i} of a body the origin compressed\n").into_bytes())
            .collect()
    }

    fn encoded(coding: Coding, data: &[u8]) -> Vec<u8> {
        match coding {
            Coding::Zstd => zstd::stream::encode_all(data, 3).expect("zstd"),
            Coding::Br => {
                let mut out = Vec::new();
                {
                    let mut writer = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
                    writer.write_all(data).expect("br");
                }
                out
            }
            Coding::Gzip | Coding::Deflate => {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(data).expect("gzip");
                encoder.finish().expect("gzip")
            }
        }
    }

    #[test]
    fn each_coding_decodes_in_any_pieces() {
        let data = text();
        for coding in [Coding::Gzip, Coding::Zstd, Coding::Br] {
            let wire = encoded(coding, &data);
            assert_eq!(
                decode_all(Decoding::Coding(coding), &wire, Limits::default()).unwrap(),
                data,
                "{coding}"
            );
            // Fed a few bytes at a time, with a small output buffer.
            let mut decoder = BodyDecoder::new(coding, Limits::default());
            let mut out = Vec::new();
            let mut buffer = [0u8; 777];
            for piece in wire.chunks(13) {
                let mut rest = piece;
                loop {
                    let progress = decoder.decode(rest, &mut buffer).unwrap();
                    out.extend_from_slice(&buffer[..progress.produced]);
                    rest = &rest[progress.consumed..];
                    if rest.is_empty() && progress.produced < buffer.len() {
                        break;
                    }
                }
            }
            // Whatever output is still inside the decoder.
            loop {
                let progress = decoder.decode(&[], &mut buffer).unwrap();
                if progress.produced == 0 {
                    break;
                }
                out.extend_from_slice(&buffer[..progress.produced]);
            }
            decoder.finish().unwrap();
            assert_eq!(out, data, "{coding} in pieces");
        }
    }

    #[test]
    fn cut_corrupt_and_oversized_bodies_are_errors() {
        let data = text();
        for coding in [Coding::Zstd, Coding::Br] {
            let wire = encoded(coding, &data);
            let cut = &wire[..wire.len() - 5];
            assert_eq!(
                decode_all(Decoding::Coding(coding), cut, Limits::default()),
                Err(DecodeError::Truncated),
                "{coding} cut"
            );
            let mut corrupt = wire.clone();
            corrupt[wire.len() / 2] ^= 0x55;
            corrupt[wire.len() / 3] ^= 0x55;
            assert!(
                decode_all(Decoding::Coding(coding), &corrupt, Limits::default())
                    != Ok(data.clone())
            );
            let capped = Limits {
                max_output: Some(1000),
                max_ratio: None,
            };
            assert_eq!(
                decode_all(Decoding::Coding(coding), &wire, capped),
                Err(DecodeError::LimitExceeded { limit: 1000 }),
                "{coding} capped"
            );
        }
    }
}
