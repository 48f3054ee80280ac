//! One direction's zstd stream: the compressing side on zipwire-codings' [`ZstdContext`], the
//! decompressing side on zstd's own context (`zstd_safe`), both because the `zstd` crate's
//! stream wrappers do not say how much memory their context holds, and the tunnel's memory
//! cap ([`crate::memory`]) has to know.

use std::io;

use zipwire_codings::zstd_context::{End, ZstdContext};
use zstd::zstd_safe::{self, DCtx, DParameter, InBuffer, OutBuffer};

/// Bytes a compressing context holds at each level of the tunnel's use (a stream of unknown
/// length, flushed after every block of up to 256 KB), as `ZSTD_sizeof_CCtx` reports them with
/// zstd 1.5.7 once the first blocks have gone through, rounded up; the test
/// `estimates_cover_what_the_context_holds` checks them. They are a property of the level's
/// parameters (window, hash and chain tables), not of the data.
pub(crate) fn encoder_bytes(level: u8) -> u64 {
    // Not monotonic: zstd's parameter table trades window, hash and chain sizes differently
    // from one level to the next.
    match level {
        0..=1 => 1_400_000,
        2 => 2_150_000,
        3 => 3_700_000,
        4 => 5_050_000,
        5..=6 => 5_600_000,
        7..=8 => 8_200_000,
        9 => 15_500_000,
        10..=11 => 26_100_000,
        12 => 47_100_000,
        13 => 38_700_000,
        14 => 55_500_000,
        15 => 72_300_000,
        16 => 38_800_000,
        17 => 59_800_000,
        18 => 60_500_000,
        _ => 94_100_000,
    }
}

/// A compressing stream: one zstd frame per level, flushed after every block.
pub(crate) struct ZstdEncoder {
    context: ZstdContext,
    level: u8,
}

impl ZstdEncoder {
    /// A stream at `level`; allocates its tables on the first block.
    pub(crate) fn new(level: u8) -> io::Result<ZstdEncoder> {
        let context = ZstdContext::new(i32::from(level), None).map_err(io::Error::other)?;
        Ok(ZstdEncoder { context, level })
    }

    /// The level of the current frame.
    pub(crate) fn level(&self) -> u8 {
        self.level
    }

    /// Bytes the context holds now.
    pub(crate) fn memory_size(&self) -> u64 {
        self.context.memory() as u64
    }

    /// Ends the current frame into `out`.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.context
            .compress(&[], End::Frame, out)
            .map_err(io::Error::other)
    }

    /// Compresses `block` into the stream and flushes it, so that the receiver can decode
    /// everything sent so far.
    pub(crate) fn encode(&mut self, block: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        self.context
            .compress(block, End::Flush, out)
            .map_err(io::Error::other)
    }
}

/// A decompressing stream that refuses windows over 2^`max_window_log` bytes.
pub(crate) struct ZstdDecoder {
    context: DCtx<'static>,
}

impl ZstdDecoder {
    pub(crate) fn new(max_window_log: u32) -> io::Result<ZstdDecoder> {
        let mut context = DCtx::try_create()
            .ok_or_else(|| io::Error::other("zstd could not allocate a context"))?;
        context
            .set_parameter(DParameter::WindowLogMax(max_window_log))
            .map_err(error)?;
        Ok(ZstdDecoder { context })
    }

    /// Bytes the context holds now (its window buffer grows to the sender's window).
    pub(crate) fn memory_size(&self) -> u64 {
        self.context.sizeof() as u64
    }

    /// Decompresses from `input` into the spare capacity of `out` (never beyond it); returns
    /// whether anything was consumed or produced.
    pub(crate) fn run(&mut self, input: &mut InBuffer<'_>, out: &mut Vec<u8>) -> io::Result<bool> {
        let before = (input.pos, out.len());
        let mut buf = OutBuffer::around_pos(out, out.len());
        self.context
            .decompress_stream(&mut buf, input)
            .map_err(error)?;
        Ok((input.pos, out.len()) != before)
    }
}

fn error(code: zstd_safe::ErrorCode) -> io::Error {
    io::Error::other(zstd_safe::get_error_name(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text that zstd's higher levels still find matches in, so that every table fills.
    fn text(n: usize) -> Vec<u8> {
        let mut x = 7u32;
        let words: [&[u8]; 8] = [
            b"tunnel ", b"block ", b"window ", b"zstd ", b"level ", b"memory ", b"frame ", b"cap\n",
        ];
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            out.extend_from_slice(words[(x >> 16) as usize % words.len()]);
        }
        out.truncate(n);
        out
    }

    #[test]
    fn estimates_cover_what_the_context_holds() -> io::Result<()> {
        let data = text(2 << 20);
        for level in 1..=19u8 {
            let mut encoder = ZstdEncoder::new(level)?;
            let mut out = Vec::new();
            for block in data.chunks(256 * 1024) {
                encoder.encode(block, &mut out)?;
            }
            let (held, estimate) = (encoder.memory_size(), encoder_bytes(level));
            // Above what it holds, and not so far above that the cap refuses what fits.
            assert!(
                held <= estimate && estimate <= held + held / 8 + 100_000,
                "level {level}: holds {held}, estimated {estimate}"
            );
        }
        Ok(())
    }
}
