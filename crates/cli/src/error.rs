//! Errors of the streaming halves, saying which side failed so the message can name the file.

use std::{fmt, io};

use zipwire_codec::DecodeError;

/// Why compressing or decompressing a stream stopped.
#[non_exhaustive]
#[derive(Debug)]
pub enum StreamError {
    /// Reading the input failed.
    Read(io::Error),
    /// Writing the output failed (a full disk, a closed pipe).
    Write(io::Error),
    /// The input is not valid data of a format gzip reads.
    Damaged(Damage),
}

/// What is wrong with compressed input, in the classes gzip's messages name.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// The input starts with no magic number gzip knows.
    NotGzip,
    /// The compressed data breaks its format's rules.
    Corrupt,
    /// The input ends inside a header, the compressed data or a trailer.
    Truncated,
    /// compress (LZW) data breaks its format's rules (gzip's unlzw.c words it differently).
    CorruptLzw,
    /// The CRC-32 in the trailer disagrees with the data.
    Crc,
    /// Both the CRC-32 and the length disagree: gzip reports both, on two lines.
    CrcAndLength,
    /// The length in the trailer disagrees with the data.
    Length,
    /// The header's CRC-16 disagrees with the header (gzip 1.12's own message names both).
    HeaderChecksum {
        /// The value in the header.
        stored: u16,
        /// The value of the header's bytes.
        computed: u16,
    },
    /// A variant gzip does not decode either (a method, flag or option), in gzip's words.
    Unsupported(String),
    /// As [`Damage::Unsupported`], in a message gzip writes as `FILE text`, without a colon.
    Refused(String),
}

impl From<DecodeError> for StreamError {
    fn from(err: DecodeError) -> StreamError {
        StreamError::Damaged(match err {
            DecodeError::Truncated => Damage::Truncated,
            DecodeError::Corrupt { .. } | DecodeError::LimitExceeded { .. } => Damage::Corrupt,
            DecodeError::ChecksumMismatch { .. } => Damage::Crc,
            // The codec's error is non-exhaustive: a new kind is still damage.
            _ => Damage::Corrupt,
        })
    }
}

impl From<Damage> for StreamError {
    fn from(damage: Damage) -> StreamError {
        StreamError::Damaged(damage)
    }
}

impl StreamError {
    /// gzip's wording for a decoding problem, which scripts and users know; I/O errors keep
    /// the system's message.
    pub fn describe(&self) -> String {
        match self {
            StreamError::Read(err) | StreamError::Write(err) => io_message(err),
            StreamError::Damaged(damage) => damage.to_string(),
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Damage::HeaderChecksum { stored, computed } = self {
            // gzip.c's get_method.
            return write!(
                f,
                "header checksum 0x{stored:04x} != computed checksum 0x{computed:04x}"
            );
        }
        // The exact strings of gzip 1.12 (gzip.c, inflate.c, unlzw.c, unzip.c).
        f.write_str(match self {
            Damage::NotGzip => "not in gzip format",
            Damage::Corrupt => "invalid compressed data--format violated",
            Damage::Truncated => "unexpected end of file",
            Damage::CorruptLzw => "corrupt input.",
            Damage::Crc => "invalid compressed data--crc error",
            Damage::CrcAndLength => "invalid compressed data--crc error",
            Damage::Length => "invalid compressed data--length error",
            Damage::Unsupported(what) | Damage::Refused(what) => what,
            Damage::HeaderChecksum { .. } => "header checksum mismatch",
        })
    }
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl std::error::Error for StreamError {}

/// An I/O error's message without Rust's " (os error N)" suffix, as C tools print it.
pub fn io_message(err: &io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(end) => text[..end].to_owned(),
        None => text,
    }
}
