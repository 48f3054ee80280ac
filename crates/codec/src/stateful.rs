//! The stateful encoder (levels 4-9): raw deflate from zlib-rs through flate2, keeping a 32 KB
//! window across calls, with the gzip/zlib framing written here.
//!
//! zlib-rs is asked for a raw stream (no zlib header) so that the header, the running checksum
//! and the trailer come from [`crate::format`], the same code the stateless encoder uses: the
//! two encoders then agree byte for byte on framing, and `without_header` works the same way.

use flate2::{Compress, Compression, FlushCompress, Status};

use crate::error::EncodeError;
use crate::format::{Format, Framer};
use crate::level::Level;

/// Spare output space reserved before each call into zlib-rs, at least.
const MIN_RESERVE: usize = 4 * 1024;

/// A compressing stream that keeps a 32 KB window across calls (zlib-rs underneath).
///
/// Unlike [`crate::Encoder`], later calls can refer back to the data of earlier ones, so the
/// ratio does not depend on how the input is split; the price is about 256 KB of state per
/// stream. Every [`StatefulEncoder::encode`] call ends with a sync flush, so its output is
/// byte-aligned and everything sent so far can be decoded at once. Concatenating the output of
/// every call, ending with [`StatefulEncoder::finish`], gives one valid stream of the chosen
/// [`Format`].
pub struct StatefulEncoder {
    deflate: Compress,
    framer: Framer,
    /// The rest of the stream goes out as stored blocks ([`StatefulEncoder::store_rest`]).
    storing: bool,
}

impl StatefulEncoder {
    /// Starts a stream. Any level 1-9 is accepted and passed to zlib-rs as is, though levels 1-3
    /// are normally served by the stateless [`crate::Encoder`].
    pub fn new(format: Format, level: Level) -> StatefulEncoder {
        StatefulEncoder {
            deflate: Compress::new(Compression::new(u32::from(level.get())), false),
            framer: Framer::new(format, level.get()),
            storing: false,
        }
    }

    /// Writes the rest of the stream as stored blocks, from the next call on: the step-down a
    /// compression budget asks of a running stream, which then costs a copy and no more.
    ///
    /// One way, unlike the stateless encoder's [`crate::Encoder::set_store_only`]: zlib-rs's
    /// window does not hold the stored bytes, so it cannot compress after them, and zlib's own
    /// way to change level (`deflateParams`, flate2's `set_level`) fails once data has gone
    /// through (flate2 calls it with no output buffer, which the flush it needs refuses). Every
    /// call ends with a sync flush, so the stored blocks start on a block boundary.
    pub fn store_rest(&mut self) {
        self.storing = true;
    }

    /// Whether [`StatefulEncoder::store_rest`] was called.
    pub fn is_storing(&self) -> bool {
        self.storing
    }

    /// Does not write the format's header: the caller writes its own (a gzip header with a file
    /// name, say) before the first call's output. The trailer is still written by
    /// [`StatefulEncoder::finish`].
    pub fn without_header(mut self) -> StatefulEncoder {
        self.framer.skip_header();
        self
    }

    /// The stream's format.
    pub fn format(&self) -> Format {
        self.framer.format()
    }

    /// Uncompressed bytes taken so far.
    pub fn total_in(&self) -> u64 {
        self.framer.total_in()
    }

    /// Whether [`StatefulEncoder::finish`] has been called.
    pub fn is_finished(&self) -> bool {
        self.framer.is_finished()
    }

    /// Compresses all of `input` and appends it to `out`, ending with a sync flush: the output
    /// is byte-aligned and, with what came before, decodes to all input given so far. An empty
    /// `input` writes the header, if pending, and nothing else.
    ///
    /// # Errors
    ///
    /// [`EncodeError::Finished`] after [`StatefulEncoder::finish`].
    pub fn encode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.framer.start_call(input, out)?;
        if self.storing {
            if !input.is_empty() {
                crate::encode::append_stored(input, false, out);
            }
        } else if !input.is_empty() {
            self.run(input, out, FlushCompress::Sync);
        }
        Ok(())
    }

    /// Compresses `input` (possibly empty) as the end of the stream, then writes the trailer.
    ///
    /// # Errors
    ///
    /// [`EncodeError::Finished`] if called twice; nothing is written then.
    pub fn finish(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.framer.start_call(input, out)?;
        if self.storing {
            crate::encode::append_stored(input, true, out);
        } else {
            self.run(input, out, FlushCompress::Finish);
        }
        self.framer.finish(out);
        Ok(())
    }

    /// Feeds all of `input` to zlib-rs with `flush`, growing `out` until the flush is complete:
    /// for a sync flush, all input taken and spare output space left over (zlib's rule that a
    /// flush is done only when the output buffer did not fill up); for finish, the stream end.
    fn run(&mut self, mut input: &[u8], out: &mut Vec<u8>, flush: FlushCompress) {
        loop {
            let reserve = (input.len() / 2).max(out.capacity() / 4).max(MIN_RESERVE);
            out.reserve(reserve);
            let before_in = self.deflate.total_in();
            let status = self.deflate.compress_vec(input, out, flush);
            let consumed =
                usize::try_from(self.deflate.total_in() - before_in).unwrap_or(input.len());
            input = input.get(consumed..).unwrap_or_default();
            // Raw deflate into memory we own has no error path in zlib-rs (no dictionary, no
            // misuse of the stream); treating an error like the end keeps a bug from hanging.
            debug_assert!(status.is_ok(), "zlib-rs deflate failed: {status:?}");
            let filled = out.len() == out.capacity();
            match status {
                Ok(Status::StreamEnd) | Err(_) => return,
                // Nothing left to do: a repeated flush with no new input.
                Ok(Status::BufError) if !filled => return,
                Ok(_) if input.is_empty() && !filled && !matches!(flush, FlushCompress::Finish) => {
                    return
                }
                Ok(_) => {}
            }
        }
    }
}

impl std::fmt::Debug for StatefulEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulEncoder")
            .field("framer", &self.framer)
            .field("storing", &self.storing)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use crate::format::{gzip, zlib};

    fn level(n: u8) -> Level {
        Level::try_from(n).expect("valid level")
    }

    /// Decodes with flate2's own readers, independent of this crate's decoder.
    fn flate2_decode(format: Format, data: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut plain = Vec::new();
        match format {
            Format::Gzip => flate2::read::GzDecoder::new(data).read_to_end(&mut plain)?,
            Format::Zlib => flate2::read::ZlibDecoder::new(data).read_to_end(&mut plain)?,
            Format::Raw => flate2::read::DeflateDecoder::new(data).read_to_end(&mut plain)?,
        };
        Ok(plain)
    }

    fn sample(len: usize) -> Vec<u8> {
        // Text-like data with repeats far apart, so the window across calls matters.
        let words: [&[u8]; 6] = [
            b"zipwire ",
            b"deflate ",
            b"window ",
            b"stream ",
            b"gzip\n",
            b"proxy ",
        ];
        let mut data = Vec::with_capacity(len);
        let mut x: u32 = 12345;
        while data.len() < len {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            data.extend_from_slice(words[(x >> 16) as usize % words.len()]);
        }
        data.truncate(len);
        data
    }

    #[test]
    fn round_trips_all_formats_and_levels_in_several_calls() -> std::io::Result<()> {
        let data = sample(200_000);
        for format in Format::ALL {
            for n in [1, 4, 6, 9] {
                let mut enc = StatefulEncoder::new(format, level(n));
                let mut wire = Vec::new();
                let mut fed = 0;
                for chunk in data.chunks(7_001) {
                    enc.encode(chunk, &mut wire)
                        .map_err(std::io::Error::other)?;
                    enc.encode(&[], &mut wire).map_err(std::io::Error::other)?; // empty calls
                    fed += chunk.len();
                }
                enc.finish(&[], &mut wire).map_err(std::io::Error::other)?;
                assert_eq!(enc.total_in(), fed as u64);
                assert_eq!(flate2_decode(format, &wire)?, data, "{format} level {n}");
                assert!(
                    wire.len() < data.len() / 3,
                    "{format} level {n}: {} bytes",
                    wire.len()
                );
            }
        }
        Ok(())
    }

    #[test]
    fn every_encode_call_is_decodable_on_its_own_prefix() -> std::io::Result<()> {
        let data = sample(50_000);
        let mut enc = StatefulEncoder::new(Format::Raw, level(6));
        let mut wire = Vec::new();
        let mut fed = 0;
        for chunk in data.chunks(10_000) {
            enc.encode(chunk, &mut wire)
                .map_err(std::io::Error::other)?;
            fed += chunk.len();
            // A sync-flushed prefix decodes to everything so far; the reader then hits EOF
            // without a final block, which flate2 reports as an error after the data.
            let mut plain = Vec::new();
            let _ = flate2::read::DeflateDecoder::new(&wire[..]).read_to_end(&mut plain);
            assert_eq!(plain, &data[..fed]);
            assert_eq!(wire.get(wire.len() - 4..), Some(&[0, 0, 0xff, 0xff][..]));
        }
        Ok(())
    }

    #[test]
    fn empty_streams_and_finish_only() -> std::io::Result<()> {
        for format in Format::ALL {
            let mut wire = Vec::new();
            let mut enc = StatefulEncoder::new(format, level(5));
            enc.finish(&[], &mut wire).map_err(std::io::Error::other)?;
            assert!(flate2_decode(format, &wire)?.is_empty(), "{format}");

            let data = sample(3_000);
            let mut wire = Vec::new();
            let mut enc = StatefulEncoder::new(format, level(9));
            enc.finish(&data, &mut wire)
                .map_err(std::io::Error::other)?;
            assert_eq!(flate2_decode(format, &wire)?, data, "{format}");
        }
        Ok(())
    }

    #[test]
    fn framing_matches_the_format_module() {
        let mut wire = Vec::new();
        let mut enc = StatefulEncoder::new(Format::Zlib, level(9));
        assert_eq!(enc.encode(&[], &mut wire), Ok(()));
        assert_eq!(wire, zlib::header(9));
        let mut wire = Vec::new();
        let mut enc = StatefulEncoder::new(Format::Gzip, level(4)).without_header();
        assert_eq!(enc.finish(b"abc", &mut wire), Ok(()));
        let crc = crc32fast::hash(b"abc");
        assert_eq!(wire.get(wire.len() - 8..), Some(&gzip::trailer(crc, 3)[..]));
        let mut full = gzip::minimal_header(4).to_vec();
        full.extend_from_slice(&wire);
        assert_eq!(
            flate2_decode(Format::Gzip, &full).ok(),
            Some(b"abc".to_vec())
        );
    }

    #[test]
    fn calls_after_finish_are_refused_and_write_nothing() {
        let mut wire = Vec::new();
        let mut enc = StatefulEncoder::new(Format::Gzip, level(6));
        assert_eq!(enc.finish(b"x", &mut wire), Ok(()));
        assert!(enc.is_finished());
        let len = wire.len();
        assert_eq!(enc.encode(b"more", &mut wire), Err(EncodeError::Finished));
        assert_eq!(enc.finish(b"more", &mut wire), Err(EncodeError::Finished));
        assert_eq!(wire.len(), len);
        assert_eq!(enc.total_in(), 1);
    }

    #[test]
    fn a_running_stream_stores_the_rest_when_asked() -> std::io::Result<()> {
        let text: Vec<u8> = b"stored blocks carry the bytes as they are; ".repeat(3_000);
        for format in Format::ALL {
            for stored_from in 0..3 {
                let mut enc = StatefulEncoder::new(format, level(6));
                let mut wire = Vec::new();
                let mut sizes = Vec::new();
                for call in 0..3 {
                    if call == stored_from {
                        enc.store_rest();
                    }
                    let before = wire.len();
                    if call == 2 {
                        enc.finish(&text, &mut wire)
                    } else {
                        enc.encode(&text, &mut wire)
                    }
                    .map_err(std::io::Error::other)?;
                    sizes.push(wire.len() - before);
                }
                for (call, size) in sizes.iter().enumerate() {
                    if call < stored_from {
                        assert!(size * 20 < text.len(), "{format:?} {sizes:?}");
                    } else {
                        assert!(*size > text.len(), "{format:?} {sizes:?}");
                    }
                }
                assert!(enc.is_storing());
                assert_eq!(flate2_decode(format, &wire)?, text.repeat(3), "{format:?}");
            }
        }
        Ok(())
    }

    #[test]
    fn incompressible_input_grows_the_output_by_stored_block_framing_only() -> std::io::Result<()> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let data: Vec<u8> = (0..300_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut wire = Vec::new();
        let mut enc = StatefulEncoder::new(Format::Zlib, level(6));
        enc.encode(&data[..150_000], &mut wire)
            .map_err(std::io::Error::other)?;
        enc.finish(&data[150_000..], &mut wire)
            .map_err(std::io::Error::other)?;
        assert_eq!(flate2_decode(Format::Zlib, &wire)?, data);
        // It grows, by stored-block framing only: the 2-byte header and 4-byte trailer, 5 bytes
        // per stored block (zlib's level 6 ends a block every 16,383 literals, its literal
        // buffer less one), and the empty stored block of the first call's sync flush.
        let n = data.len();
        let blocks = 2 * 150_000usize.div_ceil(16_383) + 1;
        let bound = n + 6 + 5 * blocks;
        assert!(
            wire.len() > n && wire.len() <= bound,
            "{} bytes for {n} ({bound} allowed)",
            wire.len()
        );
        Ok(())
    }
}
