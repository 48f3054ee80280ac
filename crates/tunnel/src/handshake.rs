//! The first bytes inside TLS: the client proves itself with the shared token, and each end
//! states which frames it accepts, before any forwarded byte moves.
//!
//! ```text
//! client hello  "ZWT1" version:u8 accepts:u8 token_len:u8 token
//! server reply  "ZWT1" status:u8 value:u8
//! ```
//!
//! `accepts` (in the hello, and the reply's `value` when the status is OK) is what that end
//! accepts to receive: [`ACCEPT_DEFLATE`], [`ACCEPT_ZSTD`], or neither (raw frames only).
//! Raw frames are always accepted. The receiver decides: an end that accepts raw only never
//! gets a compressed frame, whatever the sender's `--level`, and refuses one if it comes.
//!
//! Version 2 added the `accepts` meaning (version 1 sent the codecs it decoded beyond deflate,
//! and deflate could not be refused) and the ping and pong frames. A hello of a version this
//! end does not speak gets the status "version" and, as its value, the versions it speaks
//! (bit `v - 1` for version `v`), then the connection closes.
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
pub const VERSION: u8 = 2;

/// The versions this build speaks, bit `v - 1` for version `v`.
pub const VERSIONS: u8 = 1 << (VERSION - 1);

/// Accept bit: zstd frames are accepted.
pub const ACCEPT_ZSTD: u8 = 1;

/// Accept bit: deflate frames (stateless and windowed) are accepted.
pub const ACCEPT_DEFLATE: u8 = 2;

/// Everything this build decodes.
pub const ACCEPT_ALL: u8 = ACCEPT_ZSTD | ACCEPT_DEFLATE;

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
    /// The hello's version is not one this end speaks.
    Version,
}

impl Status {
    fn to_byte(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::Denied => 1,
            Status::Unreachable => 2,
            Status::Version => 3,
        }
    }
}

/// A hello or reply that is not one.
#[derive(Debug)]
pub enum HandshakeError {
    /// Not the tunnel protocol.
    NotZipwire,
    /// A hello of a version this end does not speak (the version named).
    UnknownVersion(u8),
    /// The server does not speak this end's version; it speaks these (bit `v - 1` for
    /// version `v`).
    ServerVersions(u8),
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
                f.write_str("peer does not speak the zipwire tunnel protocol")
            }
            HandshakeError::UnknownVersion(v) => write!(
                f,
                "hello of protocol version {v}; this end speaks {}",
                versions(VERSIONS)
            ),
            HandshakeError::ServerVersions(mask) => write!(
                f,
                "server speaks protocol version {}, this client {VERSION}: upgrade the older end",
                versions(*mask)
            ),
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

/// Versions in a mask, as `1, 2`.
fn versions(mask: u8) -> String {
    let list: Vec<String> = (1..=8u8)
        .filter(|v| mask & (1 << (v - 1)) != 0)
        .map(|v| v.to_string())
        .collect();
    if list.is_empty() {
        "none".to_owned()
    } else {
        list.join(", ")
    }
}

/// The client's hello.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// What the client accepts to receive ([`ACCEPT_ZSTD`], [`ACCEPT_DEFLATE`]).
    pub accepts: u8,
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
        out.extend_from_slice(&[VERSION, self.accepts, self.token.len() as u8]);
        out.extend_from_slice(&self.token);
        Ok(out)
    }

    /// Reads a hello.
    ///
    /// # Errors
    ///
    /// [`HandshakeError`] for anything but a well-formed hello;
    /// [`HandshakeError::UnknownVersion`] for one of another version (answer it with
    /// [`reply`]`(`[`Status::Version`]`, `[`VERSIONS`]`)`).
    pub async fn read<R: AsyncRead + Unpin>(r: &mut R) -> Result<Hello, HandshakeError> {
        let mut head = [0u8; 7];
        r.read_exact(&mut head).await?;
        if &head[..4] != MAGIC {
            return Err(HandshakeError::NotZipwire);
        }
        if head[4] != VERSION {
            return Err(HandshakeError::UnknownVersion(head[4]));
        }
        let len = usize::from(head[6]);
        if len == 0 {
            return Err(HandshakeError::BadToken);
        }
        let mut token = vec![0u8; len];
        r.read_exact(&mut token).await?;
        Ok(Hello {
            accepts: head[5],
            token,
        })
    }
}

/// The server's reply's bytes: `value` is what the server accepts (status OK) or the
/// versions it speaks (status version).
pub fn reply(status: Status, value: u8) -> [u8; 6] {
    [
        MAGIC[0],
        MAGIC[1],
        MAGIC[2],
        MAGIC[3],
        status.to_byte(),
        value,
    ]
}

/// Reads the server's reply and returns what the server accepts.
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
        3 => Err(HandshakeError::ServerVersions(buf[5])),
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
            accepts: ACCEPT_ALL,
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

    #[tokio::test]
    async fn another_version_is_told_which_versions_this_end_speaks() {
        let mut v1 = MAGIC.to_vec();
        v1.extend_from_slice(&[1, 1, 3]);
        v1.extend_from_slice(b"abc");
        assert!(matches!(
            Hello::read(&mut &v1[..]).await,
            Err(HandshakeError::UnknownVersion(1))
        ));
        let answer = reply(Status::Version, VERSIONS);
        let Err(e) = read_reply(&mut &answer[..]).await else {
            panic!("a version reply read as OK");
        };
        assert!(matches!(e, HandshakeError::ServerVersions(VERSIONS)));
        assert!(e.to_string().contains("speaks protocol version 2"), "{e}");
    }

    #[test]
    fn tokens_match_only_when_equal() {
        assert!(token_matches(b"abc", b"abc"));
        assert!(!token_matches(b"abc", b"abd"));
        assert!(!token_matches(b"abc", b"abcd"));
    }
}
