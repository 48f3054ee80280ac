//! The stateless encoder: per-stream state, per-thread scratch, and the block pipeline.

// The matcher, block writer and bit writer are shared with the windowed encoder
// (`crate::window`).
pub(crate) mod bits;
pub(crate) mod block;
mod huffman;
pub(crate) mod lz77;
pub(crate) mod scratch;
mod tables;

pub use scratch::Scratch;

use crate::error::EncodeError;
use crate::format::{Format, Framer};
use crate::level::Level;

/// A stateless compressing stream (levels 1-3): at most 64 bytes between calls.
///
/// Each call compresses only its own input, so callers that want a good ratio should hand it
/// reasonably large chunks (16 KB and up); a call's output is complete, byte-aligned and can be
/// sent at once. Concatenating the output of every call, ending with [`Encoder::finish`], gives
/// one valid stream of the chosen [`Format`].
#[derive(Clone, Debug)]
pub struct Encoder {
    framer: Framer,
    store_only: bool,
}

impl Encoder {
    /// Starts a stream.
    ///
    /// # Errors
    ///
    /// [`EncodeError::InvalidLevel`] for a level above 3: use [`crate::StatefulEncoder`] there.
    pub fn new(format: Format, level: Level) -> Result<Encoder, EncodeError> {
        if !level.is_stateless() {
            return Err(EncodeError::InvalidLevel { level: level.get() });
        }
        Ok(Encoder {
            framer: Framer::new(format, level.get()),
            store_only: false,
        })
    }

    /// Does not write the format's header: the caller writes its own (a gzip header with a file
    /// name, say) before the first call's output.
    pub fn without_header(mut self) -> Encoder {
        self.framer.skip_header();
        self
    }

    /// The stream's format.
    pub fn format(&self) -> Format {
        self.framer.format()
    }

    /// The stream's level.
    pub fn level(&self) -> Level {
        Level::try_from(self.framer.level()).expect("validated in Encoder::new")
    }

    /// Switches the following calls to stored blocks (no compression, almost no CPU) or back.
    ///
    /// A gateway over its CPU budget steps running streams down this way instead of cutting
    /// them: the stream stays valid and is decoded the same way.
    pub fn set_store_only(&mut self, store_only: bool) {
        self.store_only = store_only;
    }

    /// Whether calls currently write stored blocks.
    pub fn is_store_only(&self) -> bool {
        self.store_only
    }

    /// Uncompressed bytes taken so far.
    pub fn total_in(&self) -> u64 {
        self.framer.total_in()
    }

    /// Whether [`Encoder::finish`] has been called.
    pub fn is_finished(&self) -> bool {
        self.framer.is_finished()
    }

    /// Compresses `input` into `out` as non-final blocks ending on a byte boundary (an empty
    /// input still writes the header, if pending, and nothing else).
    ///
    /// # Errors
    ///
    /// [`EncodeError::Finished`] after [`Encoder::finish`].
    pub fn encode(
        &mut self,
        scratch: &mut Scratch,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        self.framer.start_call(input, out)?;
        if !input.is_empty() {
            scratch.compress(self.effective_level(), input, false, out);
        }
        Ok(())
    }

    /// Compresses `input` (possibly empty) as the final block and writes the trailer.
    ///
    /// # Errors
    ///
    /// [`EncodeError::Finished`] if called twice.
    pub fn finish(
        &mut self,
        scratch: &mut Scratch,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        self.framer.start_call(input, out)?;
        scratch.compress(self.effective_level(), input, true, out);
        self.framer.finish(out);
        Ok(())
    }

    /// The level the next call runs at: 0 (stored) when stepped down.
    fn effective_level(&self) -> u8 {
        if self.store_only {
            0
        } else {
            self.framer.level()
        }
    }
}

/// Appends `input` as stored blocks, the last one final when `is_final`, to a raw deflate
/// stream in `out` that stands at a byte-aligned block boundary (after a sync flush): the
/// stateful encoder's step-down.
pub(crate) fn append_stored(input: &[u8], is_final: bool, out: &mut Vec<u8>) {
    let mut w = bits::BitWriter::new(out);
    block::write_stored(&mut w, input, is_final);
    w.finish();
}

/// One-shot compression of `input` at any level (1-3 stateless, 4-9 through zlib-rs).
pub fn compress(format: Format, level: Level, input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() / 2 + 64);
    if level.is_stateless() {
        let mut scratch = Scratch::new();
        let mut enc = Encoder::new(format, level).expect("level is stateless");
        enc.finish(&mut scratch, input, &mut out)
            .expect("fresh encoder");
    } else {
        let mut enc = crate::StatefulEncoder::new(format, level);
        enc.finish(input, &mut out).expect("fresh encoder");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decompress, Limits};

    /// Deterministic test data: text-like with repeats, then noise, then runs.
    fn sample(len: usize, seed: u64) -> Vec<u8> {
        let words: [&[u8]; 8] = [
            b"alpha ",
            b"beta ",
            b"<div class=\"x\">",
            b"gamma\n",
            b"0123",
            b"{\"k\":",
            b"zz",
            b" ",
        ];
        let mut x = seed | 1;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 10 {
                0 => out.push((x >> 8) as u8),
                1 => out.extend(std::iter::repeat_n(b'a', (x >> 20) as usize % 300)),
                _ => out.extend_from_slice(words[(x >> 32) as usize % words.len()]),
            }
        }
        out.truncate(len);
        out
    }

    fn encode_calls(format: Format, level: u8, calls: &[&[u8]], scratch: &mut Scratch) -> Vec<u8> {
        let mut enc = Encoder::new(format, Level::try_from(level).unwrap()).unwrap();
        let mut out = Vec::new();
        let (last, rest) = calls.split_last().unwrap();
        for call in rest {
            enc.encode(scratch, call, &mut out).unwrap();
        }
        enc.finish(scratch, last, &mut out).unwrap();
        out
    }

    #[test]
    fn stream_state_fits_in_64_bytes() {
        assert!(
            std::mem::size_of::<Encoder>() <= 64,
            "{}",
            std::mem::size_of::<Encoder>()
        );
    }

    #[test]
    fn edge_sizes_round_trip_in_every_format_and_level() {
        let mut scratch = Scratch::new();
        for len in [
            0, 1, 3, 4, 5, 8, 257, 258, 259, 4096, 65_535, 65_536, 200_000,
        ] {
            let data = sample(len, len as u64 + 7);
            for format in Format::ALL {
                for level in 1..=3 {
                    let wire = encode_calls(format, level, &[&data], &mut scratch);
                    let back = decompress(format, &wire, Limits::default()).unwrap();
                    assert!(back == data, "len {len} {format} level {level}");
                }
            }
        }
    }

    #[test]
    fn output_does_not_depend_on_what_the_scratch_did_before() {
        let a = sample(100_000, 1);
        let b = sample(70_000, 2);
        for level in 1..=3 {
            // Reference: each stream alone on a fresh scratch.
            let alone_a = encode_calls(
                Format::Gzip,
                level,
                &[&a[..40_000], &a[40_000..]],
                &mut Scratch::new(),
            );
            let alone_b = encode_calls(
                Format::Gzip,
                level,
                &[&b[..10], &b[10..]],
                &mut Scratch::new(),
            );
            // Interleaved on one scratch, after it has seen both streams' data.
            let mut shared = Scratch::new();
            let _ = encode_calls(Format::Gzip, level, &[&b, &a], &mut shared);
            let mut enc_a = Encoder::new(Format::Gzip, Level::try_from(level).unwrap()).unwrap();
            let mut enc_b = Encoder::new(Format::Gzip, Level::try_from(level).unwrap()).unwrap();
            let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
            enc_a.encode(&mut shared, &a[..40_000], &mut out_a).unwrap();
            enc_b.encode(&mut shared, &b[..10], &mut out_b).unwrap();
            enc_a.finish(&mut shared, &a[40_000..], &mut out_a).unwrap();
            enc_b.finish(&mut shared, &b[10..], &mut out_b).unwrap();
            assert!(out_a == alone_a && out_b == alone_b, "level {level}");
        }
    }

    #[test]
    fn every_call_ends_byte_aligned_and_decodes_so_far() {
        let data = sample(50_000, 3);
        let mut scratch = Scratch::new();
        let mut enc = Encoder::new(Format::Raw, Level::FASTEST).unwrap();
        let mut out = Vec::new();
        for (i, chunk) in data.chunks(7_000).enumerate() {
            enc.encode(&mut scratch, chunk, &mut out).unwrap();
            assert_eq!(
                &out[out.len() - 4..],
                &[0, 0, 0xff, 0xff],
                "call {i} ends with a sync marker"
            );
            let mut inflate = flate2::Decompress::new(false);
            let mut plain = Vec::with_capacity(60_000);
            inflate
                .decompress_vec(&out, &mut plain, flate2::FlushDecompress::Sync)
                .unwrap();
            assert_eq!(plain, &data[..(7_000 * (i + 1)).min(data.len())]);
        }
    }

    #[test]
    fn incompressible_input_costs_only_stored_block_framing() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let noise: Vec<u8> = (0..300_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        for level in 1..=3 {
            let wire = encode_calls(Format::Raw, level, &[&noise], &mut Scratch::new());
            let bound = noise.len() + 5 * noise.len().div_ceil(65_535) + 5;
            assert!(
                wire.len() <= bound,
                "level {level}: {} > {bound}",
                wire.len()
            );
        }
    }

    #[test]
    fn compressible_input_shrinks_at_every_level() {
        let data = sample(100_000, 9);
        let mut sizes = Vec::new();
        for level in 1..=9u8 {
            let wire = if level <= 3 {
                encode_calls(Format::Raw, level, &[&data], &mut Scratch::new())
            } else {
                let mut wire = Vec::new();
                let level = Level::try_from(level).unwrap();
                let mut enc = crate::StatefulEncoder::new(Format::Raw, level);
                enc.finish(&data, &mut wire).unwrap();
                wire
            };
            assert_eq!(
                decompress(Format::Raw, &wire, Limits::default()).unwrap(),
                data,
                "level {level}"
            );
            sizes.push(wire.len());
        }
        for (level, size) in (1..=9).zip(&sizes) {
            assert!(size * 3 < data.len(), "level {level}: {sizes:?}");
        }
        assert!(
            sizes[2] <= sizes[0],
            "level 3 is not worse than 1: {sizes:?}"
        );
        assert!(
            sizes[8] <= sizes[3],
            "level 9 is not worse than 4: {sizes:?}"
        );
    }

    #[test]
    fn calls_after_finish_are_refused_and_levels_checked() {
        let mut scratch = Scratch::new();
        let mut enc = Encoder::new(Format::Zlib, Level::FASTEST).unwrap();
        let mut out = Vec::new();
        enc.finish(&mut scratch, b"x", &mut out).unwrap();
        let len = out.len();
        assert_eq!(
            enc.encode(&mut scratch, b"y", &mut out),
            Err(EncodeError::Finished)
        );
        assert_eq!(
            enc.finish(&mut scratch, b"y", &mut out),
            Err(EncodeError::Finished)
        );
        assert_eq!(out.len(), len);
        assert!(matches!(
            Encoder::new(Format::Gzip, Level::DEFAULT),
            Err(EncodeError::InvalidLevel { level: 6 })
        ));
    }

    #[test]
    fn store_only_calls_write_stored_blocks_in_a_valid_stream() {
        let data = sample(60_000, 4);
        let mut scratch = Scratch::new();
        let mut enc = Encoder::new(Format::Gzip, Level::FASTEST).unwrap();
        let mut out = Vec::new();
        enc.encode(&mut scratch, &data[..20_000], &mut out).unwrap();
        let compressed_call = out.len();
        enc.set_store_only(true);
        assert!(enc.is_store_only());
        enc.encode(&mut scratch, &data[20_000..40_000], &mut out)
            .unwrap();
        // Stored: the call's output is the input plus block framing.
        assert_eq!(out.len() - compressed_call, 20_000 + 5);
        enc.set_store_only(false);
        enc.finish(&mut scratch, &data[40_000..], &mut out).unwrap();
        assert_eq!(
            decompress(Format::Gzip, &out, Limits::default()).unwrap(),
            data
        );
    }
}
