//! The first bytes inside TLS: the client proves itself with the shared token, and both ends
//! agree on the codecs, before any forwarded byte moves.
//!
//! ```text
//! client hello  "ZWT1" version:u8 codecs:u8 token_len:u8 token
//! server reply  "ZWT1" status:u8 codecs:u8
//! ```
//!
//! The token is compared in constant time, as the SHA-256 of each side's bytes, so neither
//! the bytes nor the length of the expected token leak through timing.

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::io::{AsyncRead, AsyncReadExt};

/// The protocol's magic bytes.
pub const MAGIC: &[u8; 4] = b"ZWT1";

/// The protocol version this build speaks.
pub const VERSION: u8 = 1;

/// Codec bit: zstd frames are understood. (Deflate is always understood.)
pub const CODEC_ZSTD: u8 = 1;

/// Longest token accepted.
pub const MAX_TOKEN: usize = 255;

/// What the server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Authenticated; forwarding starts.
    Ok,
    /// Wrong token.
    Denied,
    /// The forward target could not be reached.
    Unreachable,
}

impl Status {
    fn to_byte(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::Denied => 1,
            Status::Unreachable => 2,
        }
    }
}

/// A hello or reply that is not one.
#[derive(Debug)]
pub enum HandshakeError {
    /// Not the tunnel protocol (or another version of it).
    NotZipwire,
    /// The token is empty or too long.
    BadToken,
    /// The server refused: wrong token.
    Denied,
    /// The server could not reach its forward target.
    Unreachable,
    /// The connection failed or closed during the handshake.
    Io(std::io::Error),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::NotZipwire => {
                f.write_str("peer does not speak the zipwire tunnel protocol v1")
            }
            HandshakeError::BadToken => f.write_str("token is empty or longer than 255 bytes"),
            HandshakeError::Denied => f.write_str("server refused the token"),
            HandshakeError::Unreachable => f.write_str("server could not reach its forward target"),
            HandshakeError::Io(e) => write!(f, "connection failed during the handshake: {e}"),
        }
    }
}

impl std::error::Error for HandshakeError {}

impl From<std::io::Error> for HandshakeError {
    fn from(e: std::io::Error) -> HandshakeError {
        HandshakeError::Io(e)
    }
}

/// The client's hello.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Codec bits the client decodes.
    pub codecs: u8,
    /// The token it presents.
    pub token: Vec<u8>,
}

impl Hello {
    /// The hello's bytes.
    ///
    /// # Errors
    ///
    /// [`HandshakeError::BadToken`] for an empty or too long token.
    pub fn to_bytes(&self) -> Result<Vec<u8>, HandshakeError> {
        if self.token.is_empty() || self.token.len() > MAX_TOKEN {
            return Err(HandshakeError::BadToken);
        }
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[VERSION, self.codecs, self.token.len() as u8]);
        out.extend_from_slice(&self.token);
        Ok(out)
    }

    /// Reads a hello.
    ///
    /// # Errors
    ///
    /// [`HandshakeError`] for anything but a well-formed hello.
    pub async fn read<R: AsyncRead + Unpin>(r: &mut R) -> Result<Hello, HandshakeError> {
        let mut head = [0u8; 7];
        r.read_exact(&mut head).await?;
        if &head[..4] != MAGIC || head[4] != VERSION {
            return Err(HandshakeError::NotZipwire);
        }
        let len = usize::from(head[6]);
        if len == 0 {
            return Err(HandshakeError::BadToken);
        }
        let mut token = vec![0u8; len];
        r.read_exact(&mut token).await?;
        Ok(Hello {
            codecs: head[5],
            token,
        })
    }
}

/// The server's reply's bytes.
pub fn reply(status: Status, codecs: u8) -> [u8; 6] {
    [
        MAGIC[0],
        MAGIC[1],
        MAGIC[2],
        MAGIC[3],
        status.to_byte(),
        codecs,
    ]
}

/// Reads the server's reply and returns the agreed codec bits.
///
/// # Errors
///
/// [`HandshakeError`] for a refusal or anything but a well-formed reply.
pub async fn read_reply<R: AsyncRead + Unpin>(r: &mut R) -> Result<u8, HandshakeError> {
    let mut buf = [0u8; 6];
    r.read_exact(&mut buf).await?;
    if &buf[..4] != MAGIC {
        return Err(HandshakeError::NotZipwire);
    }
    match buf[4] {
        0 => Ok(buf[5]),
        1 => Err(HandshakeError::Denied),
        2 => Err(HandshakeError::Unreachable),
        _ => Err(HandshakeError::NotZipwire),
    }
}

/// Whether `presented` is the `expected` token, in time that does not depend on where they
/// differ or on the expected token's length.
pub fn token_matches(presented: &[u8], expected: &[u8]) -> bool {
    let a = Sha256::digest(presented);
    let b = Sha256::digest(expected);
    bool::from(a.as_slice().ct_eq(b.as_slice()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hello_reads_back_and_garbage_does_not() {
        let hello = Hello {
            codecs: CODEC_ZSTD,
            token: b"secret".to_vec(),
        };
        let bytes = hello.to_bytes().unwrap();
        assert_eq!(Hello::read(&mut &bytes[..]).await.unwrap(), hello);
        assert!(matches!(
            Hello::read(&mut &b"GET / HTTP/1.1\r\n"[..]).await,
            Err(HandshakeError::NotZipwire)
        ));
        assert!(matches!(
            Hello::read(&mut &bytes[..9]).await,
            Err(HandshakeError::Io(_))
        ));
        assert!(matches!(
            read_reply(&mut &reply(Status::Denied, 0)[..]).await,
            Err(HandshakeError::Denied)
        ));
        assert_eq!(read_reply(&mut &reply(Status::Ok, 1)[..]).await.unwrap(), 1);
    }

    #[test]
    fn tokens_match_only_when_equal() {
        assert!(token_matches(b"abc", b"abc"));
        assert!(!token_matches(b"abc", b"abd"));
        assert!(!token_matches(b"abc", b"abcd"));
    }
}
