//! RFC 1952 gzip framing: the member header (written and parsed) and the CRC-32/ISIZE trailer.

/// `FLG` bits of RFC 1952 §2.3.1.
const FTEXT: u8 = 0x01;
const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;
const FRESERVED: u8 = 0xe0;

/// The two magic bytes every gzip member starts with.
pub const MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The magic of gzip 0.5 and earlier, which GNU gzip still reads (see
/// [`parse_legacy_header`]).
pub const OLD_MAGIC: [u8; 2] = [0x1f, 0x9e];

/// Longest header the parser accepts (name, comment and extra field together); a header that
/// claims more is treated as corrupt rather than buffered without bound. Room for the largest
/// extra field RFC 1952 allows (65,535 bytes: dictzip's chunk tables come near it) and some
/// 60 KiB of name and comment besides; gzip itself reads comments of any length, and names up
/// to its path limit.
pub const MAX_HEADER_LEN: usize = 128 * 1024;

/// Operating system byte written into headers: 3 = Unix, as gzip on Linux writes.
const OS_UNIX: u8 = 3;

/// A gzip member header: the fields a writer sets and a reader reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Modification time of the original file, seconds since the epoch (0 = none).
    pub mtime: u32,
    /// Original file name, without directory, as raw bytes (no NUL).
    pub name: Option<Vec<u8>>,
    /// Free-form comment (no NUL).
    pub comment: Option<Vec<u8>>,
    /// The FEXTRA field's payload.
    pub extra: Option<Vec<u8>>,
    /// The FTEXT hint.
    pub is_text: bool,
    /// The XFL byte: 2 = best compression, 4 = fastest.
    pub xfl: u8,
    /// The OS byte.
    pub os: u8,
}

impl Header {
    /// A header with no name or time, the one a streaming encoder writes.
    pub fn minimal(level: u8) -> Header {
        Header {
            xfl: xfl_for_level(level),
            os: OS_UNIX,
            ..Header::default()
        }
    }

    /// Serialises the header. Name and comment are cut at their first NUL, which RFC 1952
    /// forbids inside them, and an extra field at 65,535 bytes, the most its 16-bit length
    /// can say.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut flg = 0;
        if self.is_text {
            flg |= FTEXT;
        }
        if self.extra.is_some() {
            flg |= FEXTRA;
        }
        if self.name.is_some() {
            flg |= FNAME;
        }
        if self.comment.is_some() {
            flg |= FCOMMENT;
        }
        let mut out = Vec::with_capacity(10);
        out.extend_from_slice(&MAGIC);
        out.push(8); // CM = deflate
        out.push(flg);
        out.extend_from_slice(&self.mtime.to_le_bytes());
        out.push(self.xfl);
        out.push(self.os);
        if let Some(extra) = &self.extra {
            let len = extra.len().min(usize::from(u16::MAX));
            out.extend_from_slice(&(len as u16).to_le_bytes());
            out.extend_from_slice(&extra[..len]);
        }
        for field in [&self.name, &self.comment].into_iter().flatten() {
            let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
            out.extend_from_slice(&field[..end]);
            out.push(0);
        }
        out
    }
}

/// XFL as gzip sets it: 4 for the fastest level, 2 for the best, 0 otherwise.
pub fn xfl_for_level(level: u8) -> u8 {
    match level {
        0..=1 => 4,
        9 => 2,
        _ => 0,
    }
}

/// The minimal 10-byte header: no name, no time, Unix.
pub fn minimal_header(level: u8) -> [u8; 10] {
    [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl_for_level(level), OS_UNIX]
}

/// The 8-byte trailer: CRC-32 and the input length modulo 2^32, both little-endian.
pub fn trailer(crc: u32, isize: u32) -> [u8; 8] {
    let mut t = [0; 8];
    t[..4].copy_from_slice(&crc.to_le_bytes());
    t[4..].copy_from_slice(&isize.to_le_bytes());
    t
}

/// Why a header could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderError {
    /// The bytes are not a gzip header (magic, method, reserved flags, size cap).
    Invalid,
    /// The header's CRC-16 (`FHCRC`) disagrees with the header's bytes.
    Checksum {
        /// The value in the header.
        stored: u16,
        /// The low 16 bits of the CRC-32 of the header's bytes before it.
        computed: u16,
    },
}

/// Parses a gzip header from the start of `buf`.
///
/// Returns `Ok(None)` when `buf` ends inside the header (call again with more bytes),
/// `Ok(Some((header, len)))` with the header's length in bytes, or an error for bytes that are
/// not a gzip header.
///
/// # Errors
///
/// [`HeaderError::Invalid`] for a wrong magic or method, reserved flag bits or a header longer
/// than [`MAX_HEADER_LEN`]; [`HeaderError::Checksum`] for a header CRC that does not match.
pub fn parse_header(buf: &[u8]) -> Result<Option<(Header, usize)>, HeaderError> {
    parse_header_after(buf, &MAGIC)
}

/// [`parse_header`] that also takes a member starting with [`OLD_MAGIC`], as GNU gzip's
/// decompressor does (a file tool reads what gzip reads; a stream decoder such as zlib's, and
/// [`parse_header`], takes only [`MAGIC`]).
///
/// # Errors
///
/// As [`parse_header`].
pub fn parse_legacy_header(buf: &[u8]) -> Result<Option<(Header, usize)>, HeaderError> {
    let magic = if buf.starts_with(&OLD_MAGIC) {
        OLD_MAGIC
    } else {
        MAGIC
    };
    parse_header_after(buf, &magic)
}

fn parse_header_after(buf: &[u8], magic: &[u8; 2]) -> Result<Option<(Header, usize)>, HeaderError> {
    progress(buf, magic).map(Result::ok)
}

/// What a header cut short waits for before a new parse can end otherwise: a caller fed it
/// piece by piece parses it again only once that has come. Parsing a name sent a byte at a
/// time from its start on every byte would be quadratic in its length (seconds for a 120 KB
/// name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Awaiting {
    /// The buffer to reach this many bytes.
    Length(usize),
    /// A zero byte, the end of the name or the comment.
    Nul,
}

impl Awaiting {
    /// Whether `buf`, which held `seen` bytes when it was last parsed, may now parse
    /// differently.
    pub(crate) fn has_come(self, buf: &[u8], seen: usize) -> bool {
        match self {
            Awaiting::Length(len) => buf.len() >= len,
            Awaiting::Nul => {
                buf.len() > MAX_HEADER_LEN || buf.get(seen..).is_some_and(|new| new.contains(&0))
            }
        }
    }
}

/// [`parse_header`], saying what a header cut short waits for.
pub(crate) fn parse_header_progress(
    buf: &[u8],
) -> Result<Result<(Header, usize), Awaiting>, HeaderError> {
    progress(buf, &MAGIC)
}

fn progress(buf: &[u8], magic: &[u8; 2]) -> Result<Result<(Header, usize), Awaiting>, HeaderError> {
    // Check what is there before asking for more, so garbage fails fast.
    for (i, &want) in magic.iter().chain(&[8u8]).enumerate() {
        match buf.get(i) {
            Some(&b) if b != want => return Err(HeaderError::Invalid),
            None => return Ok(Err(Awaiting::Length(i + 1))),
            _ => {}
        }
    }
    if buf.get(3).is_some_and(|&flg| flg & FRESERVED != 0) {
        return Err(HeaderError::Invalid);
    }
    if buf.len() < 10 {
        return Ok(Err(Awaiting::Length(10)));
    }
    let flg = buf[3];
    let mut header = Header {
        mtime: u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]),
        is_text: flg & FTEXT != 0,
        xfl: buf[8],
        os: buf[9],
        ..Header::default()
    };
    let mut pos = 10;
    if flg & FEXTRA != 0 {
        let Some(len) = buf.get(pos..pos + 2) else {
            return Ok(Err(Awaiting::Length(pos + 2)));
        };
        let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
        let Some(extra) = buf.get(pos + 2..pos + 2 + len) else {
            return Ok(Err(Awaiting::Length(pos + 2 + len)));
        };
        header.extra = Some(extra.to_vec());
        pos += 2 + len;
    }
    for (bit, slot) in [(FNAME, &mut header.name), (FCOMMENT, &mut header.comment)] {
        if flg & bit != 0 {
            let rest = &buf[pos..];
            match rest.iter().position(|&b| b == 0) {
                Some(end) => {
                    *slot = Some(rest[..end].to_vec());
                    pos += end + 1;
                }
                None if buf.len() > MAX_HEADER_LEN => return Err(HeaderError::Invalid),
                None => return Ok(Err(Awaiting::Nul)),
            }
        }
    }
    if flg & FHCRC != 0 {
        let Some(crc) = buf.get(pos..pos + 2) else {
            return Ok(Err(Awaiting::Length(pos + 2)));
        };
        let stored = u16::from_le_bytes([crc[0], crc[1]]);
        let computed = crc32fast::hash(&buf[..pos]) as u16;
        if computed != stored {
            return Err(HeaderError::Checksum { stored, computed });
        }
        pos += 2;
    }
    if pos > MAX_HEADER_LEN {
        return Err(HeaderError::Invalid);
    }
    Ok(Ok((header, pos)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_header_round_trips_at_every_split() {
        let header = Header {
            mtime: 0x1234_5678,
            name: Some(b"index.html".to_vec()),
            comment: Some(b"hello".to_vec()),
            extra: Some(vec![1, 2, 3, 4]),
            is_text: true,
            xfl: 2,
            os: 3,
        };
        let bytes = header.to_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(parse_header(&bytes[..cut]), Ok(None), "cut at {cut}");
        }
        let mut with_body = bytes.clone();
        with_body.extend_from_slice(b"\x03\x00");
        assert_eq!(parse_header(&with_body), Ok(Some((header, bytes.len()))));
    }

    #[test]
    fn a_header_cut_short_parses_no_differently_until_what_it_awaits_has_come() {
        // What lets the decoder skip parsing again: for every cut, every longer cut that
        // `has_come` says nothing for is still cut short (never done, never an error).
        let header = Header {
            mtime: 7,
            name: Some(b"name.txt".to_vec()),
            comment: Some(b"comment".to_vec()),
            extra: Some(vec![9; 5]),
            ..Header::default()
        };
        let mut bytes = header.to_bytes();
        bytes[3] |= FHCRC;
        let crc = crc32fast::hash(&bytes) as u16;
        bytes.extend_from_slice(&crc.to_le_bytes());
        assert!(matches!(parse_header_progress(&bytes), Ok(Ok((_, n))) if n == bytes.len()));
        for seen in 0..bytes.len() {
            let Ok(Err(awaiting)) = parse_header_progress(&bytes[..seen]) else {
                panic!("cut at {seen} is not short");
            };
            for later in seen + 1..=bytes.len() {
                if !awaiting.has_come(&bytes[..later], seen) {
                    let again = parse_header_progress(&bytes[..later]);
                    assert!(matches!(again, Ok(Err(_))), "{seen} -> {later}: {again:?}");
                }
            }
        }
    }

    #[test]
    fn minimal_header_matches_the_serialised_form() {
        assert_eq!(Header::minimal(1).to_bytes(), minimal_header(1).to_vec());
        let (parsed, len) = parse_header(&minimal_header(6)).unwrap().unwrap();
        assert_eq!((parsed.mtime, parsed.name, len), (0, None, 10));
    }

    #[test]
    fn header_crc_is_checked() {
        let mut bytes = minimal_header(1).to_vec();
        bytes[3] |= FHCRC;
        let crc = crc32fast::hash(&bytes) as u16;
        let mut good = bytes.clone();
        good.extend_from_slice(&crc.to_le_bytes());
        assert!(matches!(parse_header(&good), Ok(Some((_, 12)))));
        let mut bad = bytes;
        bad.extend_from_slice(&(crc ^ 1).to_le_bytes());
        assert_eq!(
            parse_header(&bad),
            Err(HeaderError::Checksum {
                stored: crc ^ 1,
                computed: crc
            })
        );
    }

    #[test]
    fn garbage_fails_fast() {
        assert_eq!(parse_header(b"\x1f\x8c"), Err(HeaderError::Invalid));
        assert_eq!(parse_header(b"\x1f\x8b\x07"), Err(HeaderError::Invalid));
        assert_eq!(parse_header(b"\x1f\x8b\x08\x80"), Err(HeaderError::Invalid)); // reserved flag
        assert_eq!(parse_header(b"PK"), Err(HeaderError::Invalid));
    }

    #[test]
    fn the_largest_extra_field_with_a_name_and_comment_is_read() {
        let header = Header {
            extra: Some(vec![7; 65_535]),
            name: Some(vec![b'n'; 30_000]),
            comment: Some(vec![b'c'; 30_000]),
            ..Header::minimal(6)
        };
        let bytes = header.to_bytes();
        assert_eq!(parse_header(&bytes), Ok(Some((header, bytes.len()))));
    }

    #[test]
    fn endless_name_is_refused_not_buffered() {
        let mut bytes = minimal_header(1).to_vec();
        bytes[3] |= FNAME;
        bytes.resize(MAX_HEADER_LEN + 20, b'a');
        assert_eq!(parse_header(&bytes), Err(HeaderError::Invalid));
    }
}
