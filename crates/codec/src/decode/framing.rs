//! The gzip and zlib framing around the deflate body: headers, trailers and their checks,
//! and where one gzip member ends and the next begins.

use super::{Decoder, State};
use crate::error::DecodeError;
use crate::format::{gzip, zlib, Format};

impl Decoder {
    /// Reads (part of) a gzip or zlib header; returns the bytes taken.
    pub(super) fn header(&mut self, rest: &[u8]) -> Result<usize, DecodeError> {
        let corrupt = DecodeError::Corrupt {
            offset: self.total_in,
        };
        match self.format {
            Format::Gzip => {
                let held = self.buf.len();
                let parsed = if held == 0 {
                    // The common case, a whole header in one call: no copy.
                    gzip::parse_header_progress(rest)
                } else {
                    let take = rest
                        .len()
                        .min((gzip::MAX_HEADER_LEN + 1).saturating_sub(held));
                    self.buf
                        .extend_from_slice(rest.get(..take).unwrap_or_default());
                    if !self.awaiting.has_come(&self.buf, held) {
                        // Parsed again only once what it waits for is here: linear work
                        // however the header is split.
                        return Ok(take);
                    }
                    gzip::parse_header_progress(&self.buf)
                };
                match parsed {
                    Err(gzip::HeaderError::Invalid | gzip::HeaderError::Checksum { .. }) => {
                        Err(corrupt)
                    }
                    Ok(Ok((_, len))) => {
                        let taken = len.checked_sub(held).ok_or(corrupt)?;
                        self.buf.clear();
                        self.awaiting = gzip::Awaiting::Length(0);
                        self.state = State::Body;
                        Ok(taken)
                    }
                    Ok(Err(awaiting)) => {
                        self.awaiting = awaiting;
                        let taken = if held == 0 {
                            let take = rest.len().min(gzip::MAX_HEADER_LEN + 1);
                            self.buf
                                .extend_from_slice(rest.get(..take).unwrap_or_default());
                            take
                        } else {
                            self.buf.len() - held
                        };
                        // parse_header refuses overlong headers itself; this only guards the
                        // buffer should it ever not.
                        if self.buf.len() > gzip::MAX_HEADER_LEN {
                            return Err(corrupt);
                        }
                        Ok(taken)
                    }
                }
            }
            Format::Zlib => {
                let take = rest.len().min(2usize.saturating_sub(self.buf.len()));
                self.buf
                    .extend_from_slice(rest.get(..take).unwrap_or_default());
                if let Ok(bytes) = <[u8; 2]>::try_from(self.buf.as_slice()) {
                    if !zlib::is_valid_header(bytes) {
                        return Err(corrupt);
                    }
                    self.buf.clear();
                    self.state = State::Body;
                }
                Ok(take)
            }
            Format::Raw => {
                self.state = State::Body;
                Ok(0)
            }
        }
    }

    /// Reads (part of) the trailer and checks it once complete; returns the bytes taken.
    pub(super) fn trailer(&mut self, rest: &[u8]) -> Result<usize, DecodeError> {
        let need = match self.format {
            Format::Gzip => 8,
            Format::Zlib => 4,
            Format::Raw => 0,
        };
        let take = rest.len().min(need - self.buf.len().min(need));
        self.buf
            .extend_from_slice(rest.get(..take).unwrap_or_default());
        if self.buf.len() < need {
            return Ok(take);
        }
        let word = |at: usize| -> [u8; 4] {
            let mut bytes = [0; 4];
            if let Some(src) = self.buf.get(at..at + 4) {
                bytes.copy_from_slice(src);
            }
            bytes
        };
        match self.format {
            Format::Gzip => {
                let (crc, isize) = (u32::from_le_bytes(word(0)), u32::from_le_bytes(word(4)));
                if crc != self.checksum {
                    return Err(DecodeError::ChecksumMismatch {
                        expected: crc,
                        actual: self.checksum,
                    });
                }
                // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1).
                let actual = self.member_out as u32;
                if isize != actual {
                    return Err(DecodeError::ChecksumMismatch {
                        expected: isize,
                        actual,
                    });
                }
            }
            Format::Zlib => {
                let adler = u32::from_be_bytes(word(0));
                if adler != self.checksum {
                    return Err(DecodeError::ChecksumMismatch {
                        expected: adler,
                        actual: self.checksum,
                    });
                }
            }
            Format::Raw => {}
        }
        self.buf.clear();
        self.state = if self.format == Format::Gzip && self.multi_member {
            State::MemberEnd
        } else {
            State::Done
        };
        Ok(take)
    }

    /// After a gzip member: starts the next one if `rest` begins with the magic; returns the
    /// bytes taken.
    pub(super) fn member_end(&mut self, rest: &[u8]) -> usize {
        match rest {
            [] => 0,
            [first, second, ..] if [*first, *second] == gzip::MAGIC => {
                self.start_member();
                0
            }
            [first] if *first == gzip::MAGIC[0] => {
                // Half a magic: keep it, the next call decides.
                self.buf.push(*first);
                self.state = State::MaybeMember;
                1
            }
            _ => {
                self.state = State::Done;
                0
            }
        }
    }

    /// After a gzip member and a lone `0x1f`: returns the bytes taken (none).
    pub(super) fn maybe_member(&mut self, rest: &[u8]) -> usize {
        match rest.first() {
            None => {}
            Some(&byte) if byte == gzip::MAGIC[1] => self.start_member(), // `buf` keeps the 0x1f
            Some(_) => {
                // `buf` keeps the 0x1f: the first trailing byte, taken by an earlier call
                // (see `Decoder::held_trailing`).
                self.state = State::Done;
            }
        }
        0
    }

    /// Resets the per-member state for a further gzip member.
    fn start_member(&mut self) {
        self.inflate.reset(false);
        self.checksum = self.format.initial_checksum();
        self.member_out = 0;
        self.state = State::Header;
    }
}
