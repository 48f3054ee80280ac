//! Decoding an upstream's own `dcb` or `dcz` body (RFC 9842) for a client that cannot take
//! it. With dictionaries on, the proxy never forwards `Available-Dictionary` or the
//! dictionary codings, so such a body was sent unasked: no client may be assumed to hold its
//! dictionary. The proxy decodes it when it holds the dictionary the body's header names (for
//! the same origin), and fails it otherwise, as a corrupt body (502 before the head, else a
//! cut connection): a coding the client did not ask for never reaches it.
//!
//! The header (magic and SHA-256) is read first; the stream after it goes to the zstd or
//! brotli decoder of [`super::decoders`], given the dictionary as raw prefix, within the same
//! [`Limits`].

use bytes::Bytes;
use zipwire_codec::{DecodeError, Limits, Progress};
use zipwire_dictionary::{DictCoding, Hash, DCB_MAGIC, DCZ_MAGIC};

use super::decoders::{BrotliDecoder, ZstdDecoder};

/// Finds the dictionary a body's header names, if the proxy holds it.
pub type Resolve = Box<dyn FnOnce(&Hash) -> Option<Bytes> + Send>;

/// A `dcb` or `dcz` body's decoder: its header, then the stream against the dictionary.
pub struct DictionaryDecoder {
    coding: DictCoding,
    resolve: Option<Resolve>,
    limits: Limits,
    header: Vec<u8>,
    stream: Option<Stream>,
    error: Option<DecodeError>,
}

enum Stream {
    Zstd(ZstdDecoder),
    Br(Box<BrotliDecoder>),
}

impl DictionaryDecoder {
    /// A decoder of a `coding` body whose dictionary `resolve` finds by hash.
    pub fn new(coding: DictCoding, resolve: Resolve, limits: Limits) -> DictionaryDecoder {
        DictionaryDecoder {
            coding,
            resolve: Some(resolve),
            limits,
            header: Vec::with_capacity(coding.header_len()),
            stream: None,
            error: None,
        }
    }

    /// Decodes from `input` into `out`: the header bytes are taken first.
    ///
    /// # Errors
    ///
    /// A header with another magic, a dictionary the proxy does not hold or cannot use, and
    /// the stream decoder's errors; the decoder stays failed.
    pub fn decode(&mut self, input: &[u8], out: &mut [u8]) -> Result<Progress, DecodeError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let mut taken = 0;
        if self.stream.is_none() {
            let want = self.coding.header_len() - self.header.len();
            taken = want.min(input.len());
            self.header.extend_from_slice(&input[..taken]);
            if self.header.len() < self.coding.header_len() {
                return Ok(Progress {
                    consumed: taken,
                    produced: 0,
                });
            }
            match self.open() {
                Some(stream) => self.stream = Some(stream),
                None => {
                    let error = DecodeError::Corrupt { offset: 0 };
                    self.error = Some(error.clone());
                    return Err(error);
                }
            }
        }
        let progress = match &mut self.stream {
            Some(Stream::Zstd(decoder)) => decoder.decode(&input[taken..], out),
            Some(Stream::Br(decoder)) => decoder.decode(&input[taken..], out),
            None => Err(DecodeError::Corrupt { offset: 0 }),
        };
        match progress {
            Ok(progress) => Ok(Progress {
                consumed: taken + progress.consumed,
                produced: progress.produced,
            }),
            Err(error) => {
                self.error = Some(error.clone());
                Err(error)
            }
        }
    }

    /// The stream decoder for the dictionary the header names, if it is held and usable.
    fn open(&mut self) -> Option<Stream> {
        let magic: &[u8] = match self.coding {
            DictCoding::Dcz => &DCZ_MAGIC,
            DictCoding::Dcb => &DCB_MAGIC,
        };
        let hash = self.header.strip_prefix(magic)?;
        let hash = Hash(<[u8; 32]>::try_from(hash).ok()?);
        let dictionary = (self.resolve.take()?)(&hash)?;
        if Hash::of(&dictionary) != hash {
            return None;
        }
        Some(match self.coding {
            DictCoding::Dcz => Stream::Zstd(ZstdDecoder::with_prefix(self.limits, &dictionary)?),
            DictCoding::Dcb => Stream::Br(Box::new(BrotliDecoder::with_prefix(
                self.limits,
                &dictionary,
            ))),
        })
    }

    /// Whether the stream has ended.
    pub fn is_done(&self) -> bool {
        matches!(&self.stream, Some(Stream::Br(decoder)) if decoder.finished)
    }

    /// Checks the stream ended where the input did.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Truncated`] inside the header or the stream, or the error that stopped
    /// it.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        match &self.stream {
            None => Err(DecodeError::Truncated),
            Some(Stream::Zstd(decoder)) => decoder.finish(),
            Some(Stream::Br(decoder)) => decoder.finish(),
        }
    }

    /// Input bytes taken so far, the header included.
    pub fn total_in(&self) -> u64 {
        let stream = match &self.stream {
            None => 0,
            Some(Stream::Zstd(decoder)) => decoder.total_in,
            Some(Stream::Br(decoder)) => decoder.total_in,
        };
        self.header.len() as u64 + stream
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(seed: usize) -> Vec<u8> {
        (0..3000)
            .flat_map(|i| format!("entry {} of the catalogue, page {seed}\n", i * 7).into_bytes())
            .collect()
    }

    /// Decodes `wire` fed in pieces of `piece` bytes.
    fn decode(
        coding: DictCoding,
        dictionary: &Bytes,
        wire: &[u8],
        piece: usize,
    ) -> Result<Vec<u8>, DecodeError> {
        let held = dictionary.clone();
        let resolve: Resolve = Box::new(move |hash| (*hash == Hash::of(&held)).then_some(held));
        let mut decoder = DictionaryDecoder::new(coding, resolve, Limits::default());
        let mut out = Vec::new();
        let mut chunk = vec![0; 4096];
        for piece in wire.chunks(piece) {
            let mut rest = piece;
            loop {
                let progress = decoder.decode(rest, &mut chunk)?;
                out.extend_from_slice(&chunk[..progress.produced]);
                rest = &rest[progress.consumed..];
                if rest.is_empty() && progress.produced < chunk.len() {
                    break;
                }
            }
        }
        decoder.finish()?;
        Ok(out)
    }

    #[test]
    fn both_codings_decode_in_any_pieces() {
        let dictionary = Bytes::from(text(1));
        let body = text(2);
        for coding in [DictCoding::Dcz, DictCoding::Dcb] {
            let hash = Hash::of(&dictionary);
            let wire = zipwire_codings::dictionary::encode_best(coding, &dictionary, &hash, &body)
                .expect("a delta");
            for piece in [1, 7, 40, 1000, wire.len()] {
                assert_eq!(
                    decode(coding, &dictionary, &wire, piece).as_deref(),
                    Ok(&body[..]),
                    "{coding} in pieces of {piece}"
                );
            }
        }
    }

    #[test]
    fn an_unknown_dictionary_a_wrong_header_and_a_cut_stream_fail() {
        let dictionary = Bytes::from(text(1));
        let other = Bytes::from(text(3));
        let body = text(2);
        for coding in [DictCoding::Dcz, DictCoding::Dcb] {
            let wire = zipwire_codings::dictionary::encode_best(
                coding,
                &dictionary,
                &Hash::of(&dictionary),
                &body,
            )
            .expect("a delta");
            // The proxy holds another dictionary only.
            assert!(decode(coding, &other, &wire, 64).is_err(), "{coding}");
            // Another magic.
            let mut wrong = wire.to_vec();
            wrong[0] ^= 0xff;
            assert!(decode(coding, &dictionary, &wrong, 64).is_err(), "{coding}");
            // Cut in the header, and in the stream.
            for cut in [10, wire.len() - 5] {
                assert_eq!(
                    decode(coding, &dictionary, &wire[..cut], 64),
                    Err(DecodeError::Truncated),
                    "{coding} cut at {cut}"
                );
            }
        }
    }
}
