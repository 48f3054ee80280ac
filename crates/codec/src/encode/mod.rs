//! The stateless encoder: per-stream state, per-thread scratch, and the block pipeline.

use crate::error::EncodeError;
use crate::format::{gzip, zlib, Format};
use crate::level::Level;

/// A stateless compressing stream (levels 1-3): at most 64 bytes between calls.
///
/// Each call compresses only its own input, so callers that want a good ratio should hand it
/// reasonably large chunks (16 KB and up); a call's output is complete, byte-aligned and can be
/// sent at once. Concatenating the output of every call, ending with [`Encoder::finish`], gives
/// one valid stream of the chosen [`Format`].
#[derive(Clone, Debug)]
pub struct Encoder {
    total_in: u64,
    checksum: u32,
    format: Format,
    level: u8,
    header_pending: bool,
    finished: bool,
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
            total_in: 0,
            checksum: format.initial_checksum(),
            format,
            level: level.get(),
            header_pending: true,
            finished: false,
        })
    }

    /// Does not write the format's header: the caller writes its own (a gzip header with a file
    /// name, say) before the first call's output.
    pub fn without_header(mut self) -> Encoder {
        self.header_pending = false;
        self
    }

    /// The stream's format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The stream's level.
    pub fn level(&self) -> Level {
        Level::try_from(self.level).expect("validated in Encoder::new")
    }

    /// Uncompressed bytes taken so far.
    pub fn total_in(&self) -> u64 {
        self.total_in
    }

    /// Whether [`Encoder::finish`] has been called.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Compresses `input` into `out` as non-final blocks ending on a byte boundary (an empty
    /// input still writes the header, if pending, and nothing else).
    ///
    /// # Errors
    ///
    /// [`EncodeError::Finished`] after [`Encoder::finish`].
    pub fn encode(&mut self, scratch: &mut Scratch, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.start_call(input, out)?;
        if !input.is_empty() {
            scratch.compress(self.level, input, false, out);
        }
        Ok(())
    }

    /// Compresses `input` (possibly empty) as the final block and writes the trailer.
    ///
    /// # Errors
    ///
    /// [`EncodeError::Finished`] if called twice.
    pub fn finish(&mut self, scratch: &mut Scratch, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.start_call(input, out)?;
        scratch.compress(self.level, input, true, out);
        self.finished = true;
        match self.format {
            Format::Gzip => out.extend_from_slice(&gzip::trailer(self.checksum, self.total_in as u32)),
            Format::Zlib => out.extend_from_slice(&zlib::trailer(self.checksum)),
            Format::Raw => {}
        }
        Ok(())
    }

    fn start_call(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.finished {
            return Err(EncodeError::Finished);
        }
        if self.header_pending {
            self.header_pending = false;
            match self.format {
                Format::Gzip => out.extend_from_slice(&gzip::minimal_header(self.level)),
                Format::Zlib => out.extend_from_slice(&zlib::header(self.level)),
                Format::Raw => {}
            }
        }
        self.checksum = self.format.update_checksum(self.checksum, input);
        self.total_in += input.len() as u64;
        Ok(())
    }
}

/// Per-thread working memory of the stateless encoder: hash tables, token buffer, Huffman
/// tables. One `Scratch` serves any number of streams, one call at a time.
#[derive(Debug, Default)]
pub struct Scratch {
    _reserved: (),
}

impl Scratch {
    /// Allocates scratch memory (about 300 KB once used).
    pub fn new() -> Scratch {
        Scratch::default()
    }

    fn compress(&mut self, _level: u8, input: &[u8], is_final: bool, out: &mut Vec<u8>) {
        // Stored blocks only, until the LZ77/Huffman pipeline lands.
        let mut chunks = input.chunks(65_535).peekable();
        if chunks.peek().is_none() {
            out.extend_from_slice(&[u8::from(is_final), 0, 0, 0xff, 0xff]);
            return;
        }
        while let Some(chunk) = chunks.next() {
            let last = chunks.peek().is_none();
            out.push(u8::from(is_final && last));
            let len = chunk.len() as u16;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(chunk);
        }
        if !is_final {
            out.extend_from_slice(&[0, 0, 0, 0xff, 0xff]);
        }
    }
}

/// One-shot compression of `input` at any level (1-3 stateless, 4-9 through zlib-rs).
pub fn compress(format: Format, level: Level, input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() / 2 + 64);
    if level.is_stateless() {
        let mut scratch = Scratch::new();
        let mut enc = Encoder::new(format, level).expect("level is stateless");
        enc.finish(&mut scratch, input, &mut out).expect("fresh encoder");
    } else {
        let mut enc = crate::StatefulEncoder::new(format, level);
        enc.finish(input, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_state_fits_in_64_bytes() {
        assert!(std::mem::size_of::<Encoder>() <= 64, "{}", std::mem::size_of::<Encoder>());
    }
}
