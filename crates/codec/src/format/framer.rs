//! The framing half of a compressing stream, shared by the stateless and the stateful
//! encoder: the header once, the running checksum and length, the trailer, and refusing calls
//! after the end.

use super::{gzip, zlib, Format};
use crate::error::EncodeError;

/// Framing state of one stream: 16 bytes.
#[derive(Clone, Debug)]
pub(crate) struct Framer {
    total_in: u64,
    checksum: u32,
    format: Format,
    level: u8,
    header_pending: bool,
    finished: bool,
}

impl Framer {
    /// A stream of `format` whose header will announce `level`.
    pub(crate) fn new(format: Format, level: u8) -> Framer {
        Framer {
            total_in: 0,
            checksum: format.initial_checksum(),
            format,
            level,
            header_pending: true,
            finished: false,
        }
    }

    /// The caller writes its own header.
    pub(crate) fn skip_header(&mut self) {
        self.header_pending = false;
    }

    /// Refuses calls after the end, writes a pending header to `out` and accounts for `input`.
    pub(crate) fn start_call(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
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

    /// Writes the trailer and marks the stream finished.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        self.finished = true;
        match self.format {
            // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1): the truncation is the format.
            Format::Gzip => {
                out.extend_from_slice(&gzip::trailer(self.checksum, self.total_in as u32))
            }
            Format::Zlib => out.extend_from_slice(&zlib::trailer(self.checksum)),
            Format::Raw => {}
        }
    }

    pub(crate) fn format(&self) -> Format {
        self.format
    }

    pub(crate) fn level(&self) -> u8 {
        self.level
    }

    pub(crate) fn total_in(&self) -> u64 {
        self.total_in
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }
}
