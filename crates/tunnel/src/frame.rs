//! The tunnel's frames: what travels inside TLS once the handshake is done.
//!
//! ```text
//! data   'D' codec:u8 level:u8 raw_len:u32be payload_len:u32be payload
//! end    'E'                      (this direction is over: half-close)
//! abort  'A' len:u16be reason     (the sender hit an error: reset the forwarded connection)
//! ping   'P'                      (are you there? answered by a pong; protocol version 2)
//! pong   'Q'                      (the answer to a ping; protocol version 2)
//! ```
//!
//! Parsing is pure and bounded: a header names at most [`MAX_PAYLOAD`] payload bytes, and a
//! frame that decodes to more than [`MAX_BLOCK`] bytes is refused before any byte of it is
//! read, so a peer cannot make the receiver allocate more than one block at a time beside
//! its decoder's window (a zstd frame may ask for up to 16 MB; see docs/design/tunnel.md).

use std::fmt;

/// Most uncompressed bytes one data frame carries.
pub const MAX_BLOCK: usize = 256 * 1024;

/// Most payload bytes one data frame carries: a block plus what a compressor may add to
/// incompressible data (stored blocks and framing), with room to spare.
pub const MAX_PAYLOAD: usize = MAX_BLOCK + MAX_BLOCK / 16 + 1024;

/// Longest reason an abort frame carries.
pub const MAX_REASON: usize = 1024;

/// Bytes in a data frame's header.
pub const DATA_HEADER_LEN: usize = 11;

/// How a data frame's payload is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Codec {
    /// The bytes as they are.
    Raw,
    /// zipwire's stateless deflate (levels 1-3): each frame compresses only its own bytes.
    Deflate,
    /// zlib-rs deflate with a 32 KB window kept across this direction's frames (levels 4-9).
    DeflateWindow,
    /// zstd with its window kept across this direction's frames (levels 1-19).
    Zstd,
}

impl Codec {
    fn from_byte(byte: u8) -> Option<Codec> {
        match byte {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Deflate),
            2 => Some(Codec::DeflateWindow),
            3 => Some(Codec::Zstd),
            _ => None,
        }
    }

    fn to_byte(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Deflate => 1,
            Codec::DeflateWindow => 2,
            Codec::Zstd => 3,
        }
    }

    /// The levels a frame of this codec may name.
    pub fn levels(self) -> std::ops::RangeInclusive<u8> {
        match self {
            Codec::Raw => 0..=0,
            Codec::Deflate => 1..=3,
            Codec::DeflateWindow => 4..=9,
            Codec::Zstd => 1..=19,
        }
    }
}

/// A codec and a level: one rung of the compression ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Method {
    /// The codec.
    pub codec: Codec,
    /// Its level (0 for raw).
    pub level: u8,
}

impl Method {
    /// No compression.
    pub const RAW: Method = Method {
        codec: Codec::Raw,
        level: 0,
    };

    /// A method, if `level` is valid for `codec`.
    pub fn new(codec: Codec, level: u8) -> Option<Method> {
        codec
            .levels()
            .contains(&level)
            .then_some(Method { codec, level })
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.codec {
            Codec::Raw => f.write_str("raw"),
            Codec::Deflate | Codec::DeflateWindow => write!(f, "deflate-{}", self.level),
            Codec::Zstd => write!(f, "zstd-{}", self.level),
        }
    }
}

/// The fixed part of a data frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    /// How the payload is encoded.
    pub method: Method,
    /// Bytes the payload decodes to.
    pub raw_len: u32,
    /// Payload bytes that follow the header.
    pub payload_len: u32,
}

impl DataHeader {
    /// Appends the header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(b'D');
        out.push(self.method.codec.to_byte());
        out.push(self.method.level);
        out.extend_from_slice(&self.raw_len.to_be_bytes());
        out.extend_from_slice(&self.payload_len.to_be_bytes());
    }
}

/// The start of a frame, as parsed from its first bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Head {
    /// A data frame; its payload follows.
    Data(DataHeader),
    /// The end of this direction.
    End,
    /// The peer gave up on this connection, for the reason given.
    Abort(String),
    /// The peer asks for a pong (its keepalive).
    Ping,
    /// The answer to our ping.
    Pong,
}

/// A frame the peer should not have sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The first byte is no frame type.
    UnknownType(u8),
    /// A data frame names a codec this build does not know.
    UnknownCodec(u8),
    /// A data frame names a level its codec does not have.
    BadLevel(Method),
    /// A data frame is empty or larger than the limits.
    BadLength {
        /// Bytes it claims to decode to.
        raw_len: u32,
        /// Payload bytes it claims to carry.
        payload_len: u32,
    },
    /// An abort reason is too long or not UTF-8.
    BadReason,
    /// A data frame uses a codec this end did not accept in the handshake.
    NotAccepted(Method),
    /// A data or end frame after the peer's end frame.
    AfterEnd,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::UnknownType(t) => write!(f, "unknown frame type 0x{t:02x}"),
            FrameError::UnknownCodec(c) => write!(f, "unknown codec {c}"),
            FrameError::BadLevel(m) => write!(f, "level {} is not valid for {:?}", m.level, m.codec),
            FrameError::BadLength {
                raw_len,
                payload_len,
            } => write!(
                f,
                "frame of {payload_len} payload bytes for {raw_len} bytes of data is outside the limits ({MAX_PAYLOAD}, {MAX_BLOCK})"
            ),
            FrameError::BadReason => f.write_str("abort reason is too long or not UTF-8"),
            FrameError::NotAccepted(m) => write!(f, "{m} frame, which this end did not accept"),
            FrameError::AfterEnd => f.write_str("data after the end frame"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Parses a frame's head from the front of `buf`: `Ok(None)` when more bytes are needed,
/// otherwise the head and how many bytes it took. A data frame's payload is not part of it.
///
/// # Errors
///
/// [`FrameError`] for anything that is not a well-formed frame within the limits.
pub fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, FrameError> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    match kind {
        b'D' => {
            let Some(h) = buf.get(..DATA_HEADER_LEN) else {
                return Ok(None);
            };
            let codec = Codec::from_byte(h[1]).ok_or(FrameError::UnknownCodec(h[1]))?;
            let method = Method { codec, level: h[2] };
            if !codec.levels().contains(&method.level) {
                return Err(FrameError::BadLevel(method));
            }
            let raw_len = u32::from_be_bytes([h[3], h[4], h[5], h[6]]);
            let payload_len = u32::from_be_bytes([h[7], h[8], h[9], h[10]]);
            let raw_ok = raw_len > 0 && raw_len as usize <= MAX_BLOCK;
            let payload_ok = payload_len > 0
                && payload_len as usize <= MAX_PAYLOAD
                && (codec != Codec::Raw || payload_len == raw_len);
            if !raw_ok || !payload_ok {
                return Err(FrameError::BadLength {
                    raw_len,
                    payload_len,
                });
            }
            let header = DataHeader {
                method,
                raw_len,
                payload_len,
            };
            Ok(Some((Head::Data(header), DATA_HEADER_LEN)))
        }
        b'E' => Ok(Some((Head::End, 1))),
        b'P' => Ok(Some((Head::Ping, 1))),
        b'Q' => Ok(Some((Head::Pong, 1))),
        b'A' => {
            let Some(len) = buf.get(1..3) else {
                return Ok(None);
            };
            let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
            if len > MAX_REASON {
                return Err(FrameError::BadReason);
            }
            let Some(reason) = buf.get(3..3 + len) else {
                return Ok(None);
            };
            let reason = std::str::from_utf8(reason).map_err(|_| FrameError::BadReason)?;
            Ok(Some((Head::Abort(printable(reason)), 3 + len)))
        }
        other => Err(FrameError::UnknownType(other)),
    }
}

/// A peer's text as it may go into a log: control characters (a newline that would start a
/// forged log line, a terminal's escape sequences) escaped as Rust escapes them, the rest
/// kept, so that an abort reason is never logged as sent (what OpenSSH's `strnvis` exists to
/// prevent).
fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

/// Appends an end frame to `out`.
pub fn write_end(out: &mut Vec<u8>) {
    out.push(b'E');
}

/// A ping frame's bytes.
pub const PING: &[u8] = b"P";

/// A pong frame's bytes.
pub const PONG: &[u8] = b"Q";

/// Appends an abort frame to `out`, cutting `reason` to [`MAX_REASON`] bytes on a character
/// boundary.
pub fn write_abort(reason: &str, out: &mut Vec<u8>) {
    let mut end = reason.len().min(MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let reason = &reason[..end];
    out.push(b'A');
    // `end` is at most MAX_REASON, which fits in a u16.
    out.extend_from_slice(&(end as u16).to_be_bytes());
    out.extend_from_slice(reason.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_header_parses_back_and_needs_all_its_bytes() {
        let header = DataHeader {
            method: Method::new(Codec::Zstd, 3).unwrap(),
            raw_len: 1000,
            payload_len: 300,
        };
        let mut buf = Vec::new();
        header.write(&mut buf);
        for cut in 0..buf.len() {
            assert_eq!(parse_head(&buf[..cut]), Ok(None));
        }
        assert_eq!(
            parse_head(&buf),
            Ok(Some((Head::Data(header), DATA_HEADER_LEN)))
        );
    }

    #[test]
    fn frames_outside_the_limits_are_refused() {
        let mut buf = Vec::new();
        let big = DataHeader {
            method: Method::RAW,
            raw_len: MAX_BLOCK as u32 + 1,
            payload_len: MAX_BLOCK as u32 + 1,
        };
        big.write(&mut buf);
        assert!(matches!(
            parse_head(&buf),
            Err(FrameError::BadLength { .. })
        ));
        let raw_mismatch = [b'D', 0, 0, 0, 0, 0, 9, 0, 0, 0, 8];
        assert!(parse_head(&raw_mismatch).is_err());
        let bad_level = [b'D', 1, 7, 0, 0, 0, 9, 0, 0, 0, 8];
        assert!(matches!(
            parse_head(&bad_level),
            Err(FrameError::BadLevel(_))
        ));
        assert_eq!(parse_head(b"X"), Err(FrameError::UnknownType(b'X')));
        assert!(matches!(
            parse_head(&[b'A', 0xff, 0xff]),
            Err(FrameError::BadReason)
        ));
    }

    #[test]
    fn abort_reasons_are_cut_on_a_character_boundary() {
        let reason = "é".repeat(MAX_REASON);
        let mut buf = Vec::new();
        write_abort(&reason, &mut buf);
        let Ok(Some((Head::Abort(text), used))) = parse_head(&buf) else {
            panic!("abort frame did not parse");
        };
        assert_eq!(used, buf.len());
        assert!(text.len() <= MAX_REASON && reason.starts_with(&text));
    }

    #[test]
    fn an_abort_reason_cannot_start_a_log_line_or_reach_a_terminal() {
        let mut buf = Vec::new();
        write_abort("broken pipe\n2026-11-28 INFO forged\x1b[2J\x07 é", &mut buf);
        let Ok(Some((Head::Abort(text), _))) = parse_head(&buf) else {
            panic!("abort frame did not parse");
        };
        assert_eq!(
            text,
            "broken pipe\\n2026-11-28 INFO forged\\u{1b}[2J\\u{7} é"
        );
        assert!(!text.chars().any(char::is_control), "{text:?}");
    }
}
