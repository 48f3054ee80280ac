//! Error types of the codec.

use std::fmt;

/// Why decoding failed. Each kind calls for a different reaction: corrupt and checksum errors
/// mean the data is bad, [`DecodeError::Truncated`] that it was cut short, and
/// [`DecodeError::LimitExceeded`] that a configured cap stopped a (possible) decompression bomb.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not valid deflate/gzip/zlib data; `offset` is the count of input bytes consumed before the
    /// problem was found.
    Corrupt {
        /// Input offset at which the decoder gave up.
        offset: u64,
    },
    /// The stream decoded but its trailer's checksum (or length) disagrees with the data.
    ChecksumMismatch {
        /// The value stored in the stream.
        expected: u32,
        /// The value computed over the decoded data.
        actual: u32,
    },
    /// The input ended inside a stream.
    Truncated,
    /// Output grew past the configured size or ratio limit.
    LimitExceeded {
        /// The limit, in output bytes, that was hit.
        limit: u64,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Corrupt { offset } => {
                write!(f, "corrupt compressed data at input byte {offset}")
            }
            DecodeError::ChecksumMismatch { expected, actual } => {
                write!(
                    f,
                    "checksum mismatch: stream says {expected:#010x}, data gives {actual:#010x}"
                )
            }
            DecodeError::Truncated => f.write_str("unexpected end of compressed data"),
            DecodeError::LimitExceeded { limit } => {
                write!(f, "decoded output exceeds the limit of {limit} bytes")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why a level or call was refused.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// A level outside 1..=9 (or outside 1..=3 for the stateless encoder).
    InvalidLevel {
        /// The level asked for.
        level: u8,
    },
    /// `encode` or `finish` was called after the stream was finished.
    Finished,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::InvalidLevel { level } => write!(f, "invalid compression level {level}"),
            EncodeError::Finished => f.write_str("stream already finished"),
        }
    }
}

impl std::error::Error for EncodeError {}
