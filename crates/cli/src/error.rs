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
    /// The input is not a valid gzip file.
    Decode(DecodeError),
}

impl StreamError {
    /// gzip's wording for a decoding problem, which scripts and users know; I/O errors keep
    /// the system's message.
    pub fn describe(&self) -> String {
        match self {
            StreamError::Read(err) | StreamError::Write(err) => io_message(err),
            StreamError::Decode(DecodeError::Corrupt { offset: 0 }) => {
                "not in gzip format".to_owned()
            }
            StreamError::Decode(DecodeError::Corrupt { offset }) => {
                format!("invalid compressed data--format violated at byte {offset}")
            }
            StreamError::Decode(DecodeError::ChecksumMismatch { .. }) => {
                "invalid compressed data--crc error".to_owned()
            }
            StreamError::Decode(DecodeError::Truncated) => "unexpected end of file".to_owned(),
            StreamError::Decode(other) => other.to_string(),
        }
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
