//! Streaming decompression of everything `gzip -d` reads, with bounded memory: gzip (any
//! number of members), a single-member zip, pack and compress (LZW), chosen by the input's
//! magic number as gzip chooses.
//!
//! After the last gzip member, zero bytes are padding (tape blocks, as gzip accepts them
//! silently); anything else is trailing garbage, reported so the caller can warn as gzip does.
//! With [`Options::pass_through`] (`gzip -cdf`, `zcat -f`), input gzip does not recognise (all
//! of it, or what follows the last member) is copied to the output unchanged, as gzip does.

use std::io::{Read, Write};

use zipwire_codec::format::gzip::{self, HeaderError};

use crate::error::{Damage, StreamError};
use crate::member::Totals;
use crate::source::Source;
use crate::stream::{inflate_raw, Output};
pub use crate::stream::{Method, Trailing};
use crate::{lzw, unpack, unzip};

/// gzip's flag bits that no decoder handles (RFC 1952 §2.3.1: reserved; gzip names bit 5
/// "encrypted").
const FLAG_ENCRYPTED: u8 = 0x20;
const FLAGS_RESERVED: u8 = 0xc0;

/// How to decode.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Copy input that is in no known format to the output unchanged (`-c -d -f`).
    pub pass_through: bool,
}

/// What a decode found besides the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Bytes in and out.
    pub totals: Totals,
    /// What followed the last member.
    pub trailing: Trailing,
    /// The first stream's format.
    pub method: Method,
    /// Bytes of framing of the first stream (header and trailer), which gzip leaves out of
    /// its ratios.
    pub framing: u64,
    /// The first gzip header's modification time (0: none).
    pub mtime: u32,
    /// The last member's CRC-32 (0 where the format has none).
    pub crc: u32,
    /// Flag bits of a compress header that no compress sets (0: none): gzip warns of them
    /// and decodes the stream all the same.
    pub unknown_flags: u8,
}

/// Decodes `input` into `output`, calling `progress` with the running totals after each
/// write.
///
/// # Errors
///
/// [`StreamError::Damaged`] when the input is in no known format, is corrupt, fails its
/// checksum or ends early; [`StreamError::Read`]/[`StreamError::Write`] for I/O errors. Output
/// written before the error must not be trusted.
pub fn decompress<R: Read, W: Write + ?Sized>(
    input: R,
    output: &mut W,
    options: Options,
    progress: &mut dyn FnMut(Totals),
) -> Result<Decoded, StreamError> {
    let mut src = Source::new(input);
    let mut out = Output::new(output, progress);
    src.fill(4)?;
    let magic = src.available();
    let mut decoded = Decoded {
        totals: Totals::default(),
        trailing: Trailing::Nothing,
        method: Method::Deflate,
        framing: 0,
        mtime: 0,
        crc: 0,
        unknown_flags: 0,
    };
    if magic.starts_with(&unzip::MAGIC) {
        let entry = unzip::entry(&mut src, &mut out)?;
        decoded.method = entry.method;
        decoded.framing = entry.framing;
        decoded.crc = entry.crc;
        decoded.trailing = entry.trailing;
    } else if starts_member(magic) {
        members(&mut src, &mut out, options, &mut decoded)?;
    } else if options.pass_through {
        decoded.method = Method::Copy;
        copy_rest(&mut src, &mut out)?;
    } else if magic.len() == 1 && magic != [0] {
        // gzip reads a second magic byte that is not there: "unexpected end of file".
        return Err(Damage::Truncated.into());
    } else if magic.is_empty() {
        return Err(Damage::Truncated.into());
    } else {
        return Err(Damage::NotGzip.into());
    }
    decoded.totals = Totals {
        bytes_in: src.consumed(),
        bytes_out: out.written(),
    };
    Ok(decoded)
}

/// Whether `magic` starts a member of a format that may follow another member: gzip, pack or
/// compress (gzip reads these after a first member; a zip only as the whole file).
fn starts_member(magic: &[u8]) -> bool {
    [gzip::MAGIC, gzip::OLD_MAGIC, unpack::MAGIC, lzw::MAGIC]
        .iter()
        .any(|known| magic.starts_with(known))
}

/// Decodes members for as long as they follow each other, then classifies the rest. As in
/// gzip, a compress stream is the last member: it has no end of its own but the input's.
fn members<R: Read, W: Write + ?Sized>(
    src: &mut Source<R>,
    out: &mut Output<'_, W>,
    options: Options,
    decoded: &mut Decoded,
) -> Result<(), StreamError> {
    let mut outbuf = Vec::new();
    let mut first = true;
    loop {
        let magic = src.available();
        let (method, member) =
            if magic.starts_with(&gzip::MAGIC) || magic.starts_with(&gzip::OLD_MAGIC) {
                if outbuf.is_empty() {
                    outbuf = vec![0; crate::stream::WRITE];
                }
                (Method::Deflate, gzip_member(src, out, &mut outbuf)?)
            } else if magic.starts_with(&unpack::MAGIC) {
                let framing = unpack::decode(src, out)?;
                (Method::Pack, Member::plain(framing))
            } else {
                let lzw = lzw::decode(src, out)?;
                decoded.unknown_flags |= lzw.unknown_flags;
                (Method::Compress, Member::plain(lzw.framing))
            };
        if first {
            decoded.method = method;
            decoded.framing = member.framing;
            decoded.mtime = member.mtime;
            first = false;
        }
        decoded.crc = member.crc;
        if method == Method::Compress {
            decoded.trailing = Trailing::Nothing;
            return Ok(());
        }
        if let Some(trailing) = after_member(src, out, options)? {
            decoded.trailing = trailing;
            return Ok(());
        }
    }
}

/// One member's header facts.
struct Member {
    framing: u64,
    mtime: u32,
    crc: u32,
}

impl Member {
    /// A member of a format with no time and no CRC-32 (pack, compress).
    fn plain(framing: u64) -> Member {
        Member {
            framing,
            mtime: 0,
            crc: 0,
        }
    }
}

/// Decodes one member: header (RFC 1952 §2.3), raw deflate, then the trailer's CRC-32 and
/// ISIZE, checked in that order as gzip does so its messages match.
fn gzip_member<R: Read, W: Write + ?Sized>(
    src: &mut Source<R>,
    out: &mut Output<'_, W>,
    outbuf: &mut [u8],
) -> Result<Member, StreamError> {
    let (header, header_len) = loop {
        match gzip::parse_legacy_header(src.available()) {
            Ok(Some(parsed)) => break parsed,
            Ok(None) => {
                if !src.refill()? {
                    return Err(Damage::Truncated.into());
                }
            }
            Err(HeaderError::Invalid) => return Err(header_problem(src.available()).into()),
            Err(HeaderError::Checksum { stored, computed }) => {
                return Err(Damage::HeaderChecksum { stored, computed }.into())
            }
        }
    };
    src.consume(header_len);
    let (crc, length) = inflate_raw(src, out, outbuf)?;
    if src.fill(8)? < 8 {
        return Err(Damage::Truncated.into());
    }
    let trailer = src.available();
    let word = |at: usize| {
        let mut bytes = [0; 4];
        if let Some(src) = trailer.get(at..at + 4) {
            bytes.copy_from_slice(src);
        }
        u32::from_le_bytes(bytes)
    };
    let (stored_crc, stored_len) = (word(0), word(4));
    // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1).
    match (stored_crc == crc, stored_len == length as u32) {
        (false, false) => return Err(Damage::CrcAndLength.into()),
        (false, true) => return Err(Damage::Crc.into()),
        (true, false) => return Err(Damage::Length.into()),
        (true, true) => {}
    }
    src.consume(8);
    Ok(Member {
        framing: header_len as u64 + 8,
        mtime: header.mtime,
        crc,
    })
}

/// gzip's message for a header the codec refused.
fn header_problem(header: &[u8]) -> Damage {
    match (header.get(2), header.get(3)) {
        (Some(&method), _) if method != 8 => {
            Damage::Unsupported(format!("unknown method {method} -- not supported"))
        }
        (_, Some(&flags)) if flags & FLAG_ENCRYPTED != 0 => {
            Damage::Refused("is encrypted -- not supported".to_owned())
        }
        (_, Some(&flags)) if flags & FLAGS_RESERVED != 0 => {
            Damage::Refused(format!("has flags 0x{flags:x} -- not supported"))
        }
        _ => Damage::Corrupt,
    }
}

/// Looks at what follows a member: `None` when another member starts there, else what the
/// rest is (copied first with pass-through).
///
/// # Errors
///
/// [`Damage::Truncated`] for one byte other than zero, as gzip reads the second byte of the
/// next member's magic and finds the end of the file: a file cut just after a member's
/// first byte is not a success with a warning.
fn after_member<R: Read, W: Write + ?Sized>(
    src: &mut Source<R>,
    out: &mut Output<'_, W>,
    options: Options,
) -> Result<Option<Trailing>, StreamError> {
    let rest = src.fill(2)?;
    if rest == 0 {
        return Ok(Some(Trailing::Nothing));
    }
    if starts_member(src.available()) {
        return Ok(None);
    }
    if options.pass_through {
        copy_rest(src, out)?;
        return Ok(Some(Trailing::Copied));
    }
    if rest == 1 && src.available() != [0] {
        return Err(Damage::Truncated.into());
    }
    let mut zeros = true;
    loop {
        let chunk = src.available();
        zeros &= chunk.iter().all(|&b| b == 0);
        let n = chunk.len();
        src.consume(n);
        if !zeros || !src.refill()? {
            break;
        }
    }
    Ok(Some(if zeros {
        Trailing::Zeros
    } else {
        Trailing::Garbage
    }))
}

/// Copies everything left in `src` to `out` unchanged.
fn copy_rest<R: Read, W: Write + ?Sized>(
    src: &mut Source<R>,
    out: &mut Output<'_, W>,
) -> Result<(), StreamError> {
    loop {
        let n = src.available().len();
        if n == 0 && !src.refill()? {
            return Ok(());
        }
        let n = src.available().len();
        let consumed = src.consumed() + n as u64;
        out.write(src.available(), consumed)?;
        src.consume(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zipwire_codec::{compress, Format, Level};

    fn run_with(input: &[u8], options: Options) -> Result<(Vec<u8>, Decoded), StreamError> {
        let mut out = Vec::new();
        let decoded = decompress(input, &mut out, options, &mut |_| {})?;
        assert_eq!(decoded.totals.bytes_out, out.len() as u64);
        Ok((out, decoded))
    }

    fn run(input: &[u8]) -> Result<(Vec<u8>, Trailing), StreamError> {
        run_with(input, Options::default()).map(|(out, d)| (out, d.trailing))
    }

    #[test]
    fn members_padding_and_garbage() {
        let data = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 3 << 20, 1);
        let one = compress(Format::Gzip, Level::FASTEST, &data);
        let mut two = one.clone();
        two.extend_from_slice(&compress(Format::Gzip, Level::DEFAULT, b"tail"));
        let mut want = data.clone();
        want.extend_from_slice(b"tail");
        assert_eq!(run(&two).unwrap(), (want.clone(), Trailing::Nothing));

        let mut padded = two.clone();
        padded.extend(std::iter::repeat_n(0, 600_000));
        assert_eq!(run(&padded).unwrap(), (want.clone(), Trailing::Zeros));

        // One byte after a member is the start of a member cut short, unless it is zero.
        for (stray, want_err) in [(0x1f, true), (b'A', true), (0, false)] {
            let mut cut = two.clone();
            cut.push(stray);
            match run(&cut) {
                Err(StreamError::Damaged(Damage::Truncated)) if want_err => {}
                Ok((out, Trailing::Zeros)) if !want_err => assert_eq!(out, want),
                other => panic!("{stray:#x}: {:?}", other.map(|(_, t)| t)),
            }
        }

        let mut junk = two.clone();
        junk.extend_from_slice(b"\0\0junk");
        assert_eq!(run(&junk).unwrap(), (want.clone(), Trailing::Garbage));

        // Pass-through copies what follows, zeros included, as gzip -cdf does.
        let copy = Options { pass_through: true };
        let (out, decoded) = run_with(&junk, copy).unwrap();
        assert_eq!(decoded.trailing, Trailing::Copied);
        assert_eq!(&out[..want.len()], &want[..]);
        assert_eq!(&out[want.len()..], b"\0\0junk");
        let (out, decoded) = run_with(b"plain text", copy).unwrap();
        assert_eq!(
            (out.as_slice(), decoded.method),
            (&b"plain text"[..], Method::Copy)
        );
        assert_eq!(run_with(b"", copy).unwrap().0, b"");
    }

    #[test]
    fn the_old_gzip_magic_is_a_member_alone_and_after_another() {
        // gzip 0.5 and earlier wrote 1f 9e; GNU gzip still reads it, and a member with it
        // after another one is data, not trailing garbage to drop.
        let old = |data: &[u8]| {
            let mut member = compress(Format::Gzip, Level::DEFAULT, data);
            member[1] = 0x9e;
            member
        };
        assert_eq!(
            run(&old(b"first")).unwrap(),
            (b"first".to_vec(), Trailing::Nothing)
        );
        let mut two = compress(Format::Gzip, Level::FASTEST, b"first ");
        two.extend_from_slice(&old(b"second"));
        assert_eq!(
            run(&two).unwrap(),
            (b"first second".to_vec(), Trailing::Nothing)
        );
        // Damage in it is still damage.
        let mut bad = old(b"second");
        let at = bad.len() - 6;
        bad[at] ^= 1;
        assert!(matches!(run(&bad), Err(StreamError::Damaged(Damage::Crc))));
    }

    #[test]
    fn damage_is_told_apart() {
        let wire = compress(Format::Gzip, Level::FASTEST, &vec![7u8; 100_000]);
        let kind = |input: &[u8]| match run(input) {
            Err(StreamError::Damaged(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(kind(b""), Damage::Truncated);
        assert_eq!(kind(b"\x1f"), Damage::Truncated);
        assert_eq!(kind(b"plain text"), Damage::NotGzip);
        assert_eq!(kind(&wire[..5]), Damage::Truncated);
        assert_eq!(kind(&wire[..wire.len() - 3]), Damage::Truncated);
        let flip = |at: usize| {
            let mut bad = wire.clone();
            bad[at] ^= 1;
            bad
        };
        assert_eq!(kind(&flip(wire.len() - 6)), Damage::Crc);
        assert_eq!(kind(&flip(wire.len() - 2)), Damage::Length);
        let mut method = wire.clone();
        method[2] = 7;
        assert_eq!(
            kind(&method),
            Damage::Unsupported("unknown method 7 -- not supported".into())
        );
        let mut corrupt = wire.clone();
        corrupt[10] = 0xff; // block type 3 is reserved (RFC 1951 §3.2.3)
        assert_eq!(kind(&corrupt), Damage::Corrupt);
    }

    #[test]
    fn a_compress_stream_of_fewer_than_nine_bits_decodes_as_gzip_decodes_it() {
        // 5 bits, block mode, one 9-bit code: 0xf8, as `gzip -dc` prints. More than 16 bits
        // is refused, as by gzip.
        assert_eq!(run(b"\x1f\x9d\x85\xf8\xae").unwrap().0, [0xf8]);
        assert!(matches!(
            run(b"\x1f\x9d\x91\xf8\xae"),
            Err(StreamError::Damaged(Damage::Unsupported(_)))
        ));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Any bytes after any magic number: an answer, never a panic or a hang.
        #[test]
        fn arbitrary_input_never_panics(
            magic in proptest::sample::select(vec![
                // gzip, zip (deflated and stored, no flags), compress (16 bits in block mode,
                // 12 bits without), pack (longest code 8), and none.
                &b"\x1f\x8b\x08\x00"[..],
                b"PK\x03\x04\x14\x00\x00\x00\x08\x00",
                b"PK\x03\x04\x0a\x00\x00\x00\x00\x00",
                b"\x1f\x9d\x90",
                b"\x1f\x9d\x0c",
                b"\x1f\x9d\x85",
                b"\x1f\x1e\x00\x00\x01\x00\x08",
                b"",
            ]),
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000),
            pass_through in proptest::prelude::any::<bool>(),
        ) {
            let mut input = magic.to_vec();
            input.extend_from_slice(&body);
            let _ = run_with(&input, Options { pass_through });
        }
    }
}
