//! The first entry of a zip file, as `gzip -d` reads it: stored or deflated, checked against
//! its CRC-32 and sizes (PKWARE APPNOTE 6.3.10 §4.3.7 local header, §4.3.9 data descriptor).
//!
//! Only the local header is read, so a zip arriving on a pipe decodes as it streams; the
//! central directory after the entry is ignored. Deflate comes from the codec's raw decoder.

use std::io::{Read, Write};

use crate::error::{Damage, StreamError};
use crate::source::Source;
use crate::stream::{inflate_raw, Method, Output, Trailing, WRITE};

/// A local file header's signature.
pub(crate) const MAGIC: [u8; 4] = *b"PK\x03\x04";
/// The optional signature of a data descriptor.
const DESCRIPTOR: [u8; 4] = *b"PK\x07\x08";
/// Fixed part of the local header.
const HEADER: usize = 30;
/// General purpose flags: bit 0 encrypted, bit 3 sizes and CRC in a data descriptor.
const FLAG_ENCRYPTED: u16 = 1;
const FLAG_DESCRIPTOR: u16 = 1 << 3;

/// What the entry was.
pub(crate) struct Entry {
    pub(crate) method: Method,
    pub(crate) framing: u64,
    pub(crate) crc: u32,
    pub(crate) trailing: Trailing,
}

/// Decodes the first entry of the zip file in `src`.
pub(crate) fn entry<R: Read, W: Write + ?Sized>(
    src: &mut Source<R>,
    out: &mut Output<'_, W>,
) -> Result<Entry, StreamError> {
    if src.fill(HEADER)? < HEADER {
        return Err(Damage::Truncated.into());
    }
    let header = src.available();
    let u16_at = |at: usize| u16::from_le_bytes([header[at], header[at + 1]]);
    let u32_at = |at: usize| {
        u32::from_le_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let flags = u16_at(6);
    let method = u16_at(8);
    let (mut crc, packed, mut plain) = (u32_at(14), u32_at(18), u32_at(22));
    let skip = HEADER + usize::from(u16_at(26)) + usize::from(u16_at(28));
    let method = match method {
        0 => Method::Stored,
        8 => Method::Deflate,
        _ => {
            return Err(Damage::Unsupported(
                "first entry not deflated or stored -- use unzip".to_owned(),
            )
            .into())
        }
    };
    if flags & FLAG_ENCRYPTED != 0 {
        return Err(Damage::Unsupported("encrypted file -- use unzip".to_owned()).into());
    }
    let descriptor = flags & FLAG_DESCRIPTOR != 0;
    if src.fill(skip)? < skip {
        return Err(Damage::Truncated.into());
    }
    src.consume(skip);
    let mut framing = skip as u64;
    let (actual_crc, length) = match method {
        // A stored entry's end is known only from the header's size.
        Method::Stored if descriptor => return Err(Damage::Corrupt.into()),
        Method::Stored => stored(src, out, u64::from(packed))?,
        _ => inflate_raw(src, out, &mut vec![0; WRITE])?,
    };
    if descriptor {
        // The descriptor's signature is optional (APPNOTE §4.3.9.3).
        if src.fill(16)? >= 4 && src.available().starts_with(&DESCRIPTOR) {
            src.consume(4);
            framing += 4;
        }
        if src.fill(12)? < 12 {
            return Err(Damage::Truncated.into());
        }
        let d = src.available();
        let word = |at: usize| u32::from_le_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
        (crc, plain) = (word(0), word(8));
        src.consume(12);
        framing += 12;
    }
    if crc != actual_crc {
        return Err(Damage::Crc.into());
    }
    // Sizes are modulo 2^32 here: zip64's 8-byte sizes are not read, as gzip does not. The
    // compressed size is not held against the data either, as gzip does not: deflate ends
    // itself, and a stored entry was read by that size.
    if plain != length as u32 {
        return Err(Damage::Length.into());
    }
    let more = src.fill(4)? >= 4 && src.available().starts_with(&MAGIC);
    // The rest (the central directory) is not data: leave it unread.
    Ok(Entry {
        method,
        framing,
        crc,
        trailing: if more {
            Trailing::MoreEntries
        } else {
            Trailing::Nothing
        },
    })
}

/// Copies a stored entry of `size` bytes.
fn stored<R: Read, W: Write + ?Sized>(
    src: &mut Source<R>,
    out: &mut Output<'_, W>,
    size: u64,
) -> Result<(u32, u64), StreamError> {
    let mut crc = crc32fast::Hasher::new();
    let mut left = size;
    while left > 0 {
        if src.available().is_empty() && !src.refill()? {
            return Err(Damage::Truncated.into());
        }
        let n = src
            .available()
            .len()
            .min(usize::try_from(left).unwrap_or(usize::MAX));
        let chunk = src.available().get(..n).unwrap_or_default();
        crc.update(chunk);
        out.write(chunk, src.consumed() + n as u64)?;
        src.consume(n);
        left -= n as u64;
    }
    Ok((crc.finalize(), size))
}
