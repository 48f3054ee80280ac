use std::io::Write;

use proptest::prelude::*;

use super::*;
use crate::format::{gzip, zlib};

fn sample(len: usize) -> Vec<u8> {
    let words: [&[u8]; 5] = [b"alpha ", b"beta ", b"gamma\n", b"delta ", b"epsilon "];
    let mut data = Vec::with_capacity(len);
    let mut x: u32 = 7;
    while data.len() < len {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        data.extend_from_slice(words[(x >> 16) as usize % words.len()]);
        data.push(x as u8);
    }
    data.truncate(len);
    data
}

/// Compresses with flate2's own writers, independent of this crate's encoders.
fn encode(format: Format, data: &[u8]) -> Vec<u8> {
    fn go<W: Write>(
        mut w: W,
        data: &[u8],
        finish: impl FnOnce(W) -> std::io::Result<Vec<u8>>,
    ) -> Vec<u8> {
        w.write_all(data).expect("writing to a Vec");
        finish(w).expect("writing to a Vec")
    }
    let level = flate2::Compression::default();
    match format {
        Format::Gzip => go(
            flate2::write::GzEncoder::new(Vec::new(), level),
            data,
            |w| w.finish(),
        ),
        Format::Zlib => go(
            flate2::write::ZlibEncoder::new(Vec::new(), level),
            data,
            |w| w.finish(),
        ),
        Format::Raw => go(
            flate2::write::DeflateEncoder::new(Vec::new(), level),
            data,
            |w| w.finish(),
        ),
    }
}

/// Feeds `wire` in `in_step`-byte windows with an `out_step`-byte output buffer; returns the
/// output and the input consumed.
fn drive(
    dec: &mut Decoder,
    wire: &[u8],
    in_step: usize,
    out_step: usize,
) -> Result<(Vec<u8>, usize), DecodeError> {
    let mut plain = Vec::new();
    let mut buf = vec![0; out_step];
    let mut pos = 0;
    loop {
        let window = &wire[pos..wire.len().min(pos + in_step)];
        let p = dec.decode(window, &mut buf)?;
        assert!(p.consumed <= window.len() && p.produced <= buf.len());
        plain.extend_from_slice(&buf[..p.produced]);
        pos += p.consumed;
        if p == (Progress {
            consumed: 0,
            produced: 0,
        }) {
            return Ok((plain, pos));
        }
    }
}

#[test]
fn every_format_decodes_byte_by_byte() {
    let data = sample(5_000);
    for format in Format::ALL {
        let wire = encode(format, &data);
        for (in_step, out_step) in [(1, 1), (1, 4096), (4096, 1), (7, 13), (1 << 20, 1 << 20)] {
            let mut dec = Decoder::new(format);
            let (plain, consumed) =
                drive(&mut dec, &wire, in_step, out_step).expect("valid stream");
            assert_eq!(plain, data, "{format} {in_step}/{out_step}");
            assert_eq!(consumed, wire.len());
            assert!(dec.is_done());
            assert_eq!(dec.finish(), Ok(()));
            assert_eq!(
                (dec.total_in(), dec.total_out()),
                (wire.len() as u64, data.len() as u64)
            );
        }
        assert_eq!(
            decompress(format, &wire, Limits::default()).as_deref(),
            Ok(&data[..])
        );
    }
}

#[test]
fn empty_payloads_and_empty_input() {
    for format in Format::ALL {
        let wire = encode(format, b"");
        assert_eq!(
            decompress(format, &wire, Limits::default()),
            Ok(Vec::new()),
            "{format}"
        );
        assert_eq!(
            decompress(format, b"", Limits::default()),
            Err(DecodeError::Truncated),
            "{format}"
        );
        let dec = Decoder::new(format);
        assert!(!dec.is_done());
        assert_eq!(dec.finish(), Err(DecodeError::Truncated));
    }
}

#[test]
fn gzip_header_with_every_optional_field() {
    let data = sample(1_000);
    let header = gzip::Header {
        mtime: 1_700_000_000,
        name: Some(b"file.txt".to_vec()),
        comment: Some(b"a comment".to_vec()),
        extra: Some(vec![b'A', b'B', 2, 0, 1, 2]),
        is_text: true,
        xfl: 0,
        os: 3,
    };
    let mut wire = header.to_bytes();
    // Set FHCRC by hand: the writer does not emit it.
    wire[3] |= 0x02;
    let crc = crc32fast::hash(&wire) as u16;
    wire.extend_from_slice(&crc.to_le_bytes());
    wire.extend_from_slice(&encode(Format::Raw, &data));
    wire.extend_from_slice(&gzip::trailer(crc32fast::hash(&data), data.len() as u32));
    let mut dec = Decoder::new(Format::Gzip);
    assert_eq!(drive(&mut dec, &wire, 1, 1), Ok((data.clone(), wire.len())));
    assert_eq!(dec.finish(), Ok(()));
}

#[test]
fn a_long_gzip_name_fed_a_byte_at_a_time_is_parsed_in_linear_time() {
    // Parsing the header from its start on every call would take 4.4 s for this 120 KB name
    // a byte at a time (113 µs whole), a CPU cost a peer sending one-byte segments could
    // choose. It takes about a millisecond; 1 s leaves room for a slow machine.
    let data = sample(1_000);
    let header = gzip::Header {
        name: Some(vec![b'a'; 120_000]),
        ..gzip::Header::minimal(1)
    };
    let mut wire = header.to_bytes();
    wire.extend_from_slice(&encode(Format::Raw, &data));
    wire.extend_from_slice(&gzip::trailer(crc32fast::hash(&data), data.len() as u32));
    let started = std::time::Instant::now();
    let mut dec = Decoder::new(Format::Gzip);
    let mut produced = Vec::new();
    for byte in wire.chunks(1) {
        let consumed = dec.decode_to_vec(byte, &mut produced).expect("decodes");
        assert_eq!(consumed, 1);
    }
    let elapsed = started.elapsed();
    assert_eq!(produced, data);
    assert!(dec.is_done());
    assert!(
        elapsed < std::time::Duration::from_secs(1),
        "{elapsed:?} for {} bytes",
        wire.len()
    );
}

#[test]
fn multi_member_gzip() {
    let (a, b) = (sample(3_000), b"second member".to_vec());
    let mut wire = encode(Format::Gzip, &a);
    let first_len = wire.len();
    wire.extend_from_slice(&encode(Format::Gzip, b""));
    wire.extend_from_slice(&encode(Format::Gzip, &b));
    let both = [a.clone(), b].concat();
    for step in [1, 2, 3, 10, wire.len()] {
        let mut dec = Decoder::new(Format::Gzip);
        assert_eq!(
            drive(&mut dec, &wire, step, step),
            Ok((both.clone(), wire.len())),
            "step {step}"
        );
        assert_eq!(dec.finish(), Ok(()));
    }
    assert_eq!(decompress(Format::Gzip, &wire, Limits::default()), Ok(both));

    let mut dec = Decoder::new(Format::Gzip).multi_member(false);
    let mut out = Vec::new();
    assert_eq!(dec.decode_to_vec(&wire, &mut out), Ok(first_len));
    assert_eq!(out, a);
    assert!(dec.is_done());
}

#[test]
fn trailing_bytes_are_left_unconsumed() {
    let data = sample(2_000);
    for format in Format::ALL {
        let stream = encode(format, &data);
        for tail in [&b"garbage"[..], &[0; 512], &[0x1f], &[0x1f, 0x8c, 0]] {
            let wire = [&stream[..], tail].concat();
            let mut dec = Decoder::new(format);
            let mut out = Vec::new();
            // A lone 0x1f after a gzip member is taken while the decoder waits to see the
            // next byte.
            let gzip = format == Format::Gzip;
            let held = usize::from(gzip && tail == [0x1f]);
            assert_eq!(
                dec.decode_to_vec(&wire, &mut out),
                Ok(stream.len() + held),
                "{format} {tail:?}"
            );
            assert_eq!(out, data);
            // A lone 0x1f at the end is a next member cut after its first byte (gzip:
            // "unexpected end of file"), not garbage.
            let cut = gzip && tail == [0x1f];
            let ended = if cut {
                Err(DecodeError::Truncated)
            } else {
                Ok(())
            };
            assert_eq!(dec.finish(), ended, "{format} {tail:?}");
            let offset = stream.len() as u64;
            let whole = if cut {
                DecodeError::Truncated
            } else {
                DecodeError::Corrupt { offset }
            };
            assert_eq!(decompress(format, &wire, Limits::default()), Err(whole));
            // Byte by byte, any 0x1f after a gzip member arrives alone.
            let mut dec = Decoder::new(format);
            let (plain, consumed) = drive(&mut dec, &wire, 1, 1).expect("valid stream");
            assert_eq!(plain, data);
            let held = usize::from(gzip && tail.first() == Some(&0x1f));
            assert_eq!(consumed, stream.len() + held, "{format} {tail:?}");
            assert_eq!(dec.finish(), ended, "{format} {tail:?}");
            // Nothing is lost: the byte taken is handed back once it is known to trail.
            let trailing = [dec.held_trailing(), &wire[consumed..]].concat();
            let expected: &[u8] = if cut { &[] } else { tail };
            assert_eq!(trailing, expected, "{format} {tail:?}");
        }
    }
    // A second gzip magic followed by a broken header is a broken member, not garbage.
    let wire = [&encode(Format::Gzip, &data)[..], &[0x1f, 0x8b, 9]].concat();
    let len = wire.len() as u64 - 3;
    assert_eq!(
        decompress(Format::Gzip, &wire, Limits::default()),
        Err(DecodeError::Corrupt { offset: len })
    );
}

#[test]
fn every_cut_point_is_truncated() {
    let data = sample(600);
    for format in Format::ALL {
        let wire = encode(format, &data);
        for cut in 0..wire.len() {
            let mut dec = Decoder::new(format);
            let mut out = Vec::new();
            assert_eq!(
                dec.decode_to_vec(&wire[..cut], &mut out),
                Ok(cut),
                "{format} cut {cut}"
            );
            assert!(!dec.is_done());
            assert_eq!(
                dec.finish(),
                Err(DecodeError::Truncated),
                "{format} cut {cut}"
            );
            assert_eq!(
                decompress(format, &wire[..cut], Limits::default()),
                Err(DecodeError::Truncated)
            );
            // The rest completes the stream.
            assert_eq!(
                dec.decode_to_vec(&wire[cut..], &mut out),
                Ok(wire.len() - cut)
            );
            assert_eq!((dec.finish(), &out), (Ok(()), &data));
        }
    }
}

#[test]
fn bit_flips_never_give_wrong_data() {
    let data = sample(400);
    for format in [Format::Gzip, Format::Zlib] {
        let wire = encode(format, &data);
        for at in 0..wire.len() {
            for bit in [0, 3, 7] {
                let mut bad = wire.clone();
                bad[at] ^= 1 << bit;
                match decompress(format, &bad, Limits::default()) {
                    // Flips in gzip's MTIME, XFL or OS bytes change nothing that is checked.
                    Ok(plain) => assert_eq!(plain, data, "{format} byte {at} bit {bit}"),
                    Err(DecodeError::Corrupt { offset }) => assert!(offset <= bad.len() as u64),
                    Err(DecodeError::ChecksumMismatch { .. } | DecodeError::Truncated) => {}
                    Err(other) => panic!("{format} byte {at} bit {bit}: {other:?}"),
                }
            }
        }
    }
}

#[test]
fn checksum_and_length_mismatches_are_typed() {
    let data = b"checksummed".to_vec();
    let mut wire = encode(Format::Gzip, &data);
    let n = wire.len();
    wire[n - 1] ^= 1; // ISIZE's top byte
    let expected = (data.len() as u32) ^ (1 << 24);
    let err = DecodeError::ChecksumMismatch {
        expected,
        actual: data.len() as u32,
    };
    assert_eq!(decompress(Format::Gzip, &wire, Limits::default()), Err(err));

    let mut wire = encode(Format::Zlib, &data);
    let n = wire.len();
    wire[n - 1] ^= 1;
    let actual = adler2::adler32_slice(&data);
    assert_eq!(
        decompress(Format::Zlib, &wire, Limits::default()),
        Err(DecodeError::ChecksumMismatch {
            expected: actual ^ 1,
            actual
        })
    );

    // Errors are sticky.
    let mut dec = Decoder::new(Format::Zlib);
    let mut out = Vec::new();
    assert!(dec.decode_to_vec(&wire, &mut out).is_err());
    assert!(dec.decode(&[], &mut [0; 8]).is_err());
    assert!(dec.finish().is_err() && !dec.is_done());
}

#[test]
fn bad_zlib_headers_are_corrupt_at_offset_zero() {
    for header in [[0x78, 0xbb], [0x79, 0x9c], [0x78, 0x9d], [0x88, 0x98]] {
        let err = decompress(
            Format::Zlib,
            &[header[0], header[1], 3, 0],
            Limits::default(),
        );
        assert_eq!(err, Err(DecodeError::Corrupt { offset: 0 }), "{header:?}");
    }
    assert_eq!(
        decompress(Format::Gzip, b"PK\x03\x04", Limits::default()),
        Err(DecodeError::Corrupt { offset: 0 })
    );
}

/// 10 MB of zeros as a gzip bomb, built from repeated sync-flushed blocks so the test does
/// not spend its time compressing: after the first block, each 64 KiB of zeros encodes to
/// the same bytes.
fn zero_bomb(megabytes: usize) -> (Vec<u8>, usize) {
    let chunk = vec![0u8; 64 * 1024];
    let level = crate::Level::try_from(6).expect("valid level");
    let mut enc = crate::StatefulEncoder::new(Format::Raw, level);
    let (mut first, mut second, mut third) = (Vec::new(), Vec::new(), Vec::new());
    enc.encode(&chunk, &mut first).expect("open stream");
    enc.encode(&chunk, &mut second).expect("open stream");
    enc.encode(&chunk, &mut third).expect("open stream");
    assert_eq!(
        second, third,
        "zeros after the first chunk should encode identically"
    );
    let chunks = megabytes * 16;
    let mut wire = gzip::minimal_header(6).to_vec();
    wire.extend_from_slice(&first);
    for _ in 1..chunks {
        wire.extend_from_slice(&second);
    }
    let mut end = Vec::new();
    enc.finish(&[], &mut end).expect("open stream");
    wire.extend_from_slice(&end);
    let len = chunks * chunk.len();
    let mut crc = crc32fast::Hasher::new();
    for _ in 0..chunks {
        crc.update(&chunk);
    }
    wire.extend_from_slice(&gzip::trailer(crc.finalize(), len as u32));
    (wire, len)
}

#[test]
fn limits_stop_a_bomb() {
    let (bomb, len) = zero_bomb(10);
    assert!(bomb.len() * 500 < len, "{} bytes", bomb.len());

    let limits = Limits {
        max_output: Some(1 << 20),
        max_ratio: None,
    };
    let mut dec = Decoder::new(Format::Gzip).with_limits(limits);
    let mut out = Vec::new();
    assert_eq!(
        dec.decode_to_vec(&bomb, &mut out),
        Err(DecodeError::LimitExceeded { limit: 1 << 20 })
    );
    assert!(dec.total_out() <= (1 << 20) + 1 && out.len() <= 1 << 20);

    let limits = Limits {
        max_output: None,
        max_ratio: Some(100),
    };
    match decompress(Format::Gzip, &bomb, limits) {
        Err(DecodeError::LimitExceeded { limit }) => assert!(limit <= 100 * bomb.len() as u64),
        other => panic!("{:?}", other.map(|v| v.len())),
    }

    // Exactly at the limit is fine, one byte under is not; same with 1-byte buffers.
    let exact = Limits {
        max_output: Some(len as u64),
        max_ratio: Some(2_000),
    };
    assert_eq!(
        decompress(Format::Gzip, &bomb, exact).map(|v| v.len()),
        Ok(len)
    );
    let under = Limits {
        max_output: Some(len as u64 - 1),
        max_ratio: None,
    };
    assert_eq!(
        decompress(Format::Gzip, &bomb, under),
        Err(DecodeError::LimitExceeded {
            limit: len as u64 - 1
        })
    );
}

#[test]
fn limits_with_small_buffers() {
    let data = sample(2_000);
    let wire = encode(Format::Zlib, &data);
    for max in [0, 1, 999, 1_999, 2_000] {
        let limits = Limits {
            max_output: Some(max),
            max_ratio: None,
        };
        let mut dec = Decoder::new(Format::Zlib).with_limits(limits);
        let result = drive(&mut dec, &wire, 3, 1);
        if max as usize >= data.len() {
            assert_eq!(result, Ok((data.clone(), wire.len())));
        } else {
            assert_eq!(result, Err(DecodeError::LimitExceeded { limit: max }));
        }
    }
    // The ratio allowance lets small, very compressible streams through.
    let zeros = vec![0; Limits::RATIO_ALLOWANCE as usize];
    let wire = encode(Format::Raw, &zeros);
    let limits = Limits {
        max_output: None,
        max_ratio: Some(1),
    };
    assert_eq!(decompress(Format::Raw, &wire, limits), Ok(zeros));
}

#[test]
fn decodes_the_stateful_encoder() {
    let data = sample(100_000);
    for format in Format::ALL {
        let level = crate::Level::try_from(6).expect("valid level");
        let mut enc = crate::StatefulEncoder::new(format, level);
        let mut wire = Vec::new();
        for chunk in data.chunks(9_999) {
            enc.encode(chunk, &mut wire).expect("open stream");
        }
        enc.finish(&[], &mut wire).expect("open stream");
        assert_eq!(
            decompress(format, &wire, Limits::default()).as_deref(),
            Ok(&data[..]),
            "{format}"
        );
    }
}

fn format_strategy() -> impl Strategy<Value = Format> {
    prop::sample::select(Format::ALL.to_vec())
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_bytes(
        format in format_strategy(),
        bytes in prop::collection::vec(any::<u8>(), 0..2_000),
        step in 1usize..64,
    ) {
        let _ = decompress(format, &bytes, Limits::default());
        let limits = Limits { max_output: Some(1 << 16), max_ratio: Some(50) };
        let mut dec = Decoder::new(format).with_limits(limits);
        let _ = drive(&mut dec, &bytes, step, step);
        let _ = dec.finish();
    }

    #[test]
    fn never_panics_after_a_valid_header(
        format in format_strategy(),
        body in prop::collection::vec(any::<u8>(), 0..2_000),
        step in 1usize..64,
    ) {
        let mut bytes = match format {
            Format::Gzip => gzip::minimal_header(6).to_vec(),
            Format::Zlib => zlib::header(6).to_vec(),
            Format::Raw => Vec::new(),
        };
        bytes.extend_from_slice(&body);
        let _ = decompress(format, &bytes, Limits::default());
        let mut dec = Decoder::new(format);
        let _ = drive(&mut dec, &bytes, step, step + 1);
    }

    #[test]
    fn random_data_round_trips_in_random_steps(
        format in format_strategy(),
        data in prop::collection::vec(0u8..4, 0..5_000),
        in_step in 1usize..300,
        out_step in 1usize..300,
    ) {
        let wire = encode(format, &data);
        let mut dec = Decoder::new(format);
        prop_assert_eq!(drive(&mut dec, &wire, in_step, out_step), Ok((data, wire.len())));
        prop_assert_eq!(dec.finish(), Ok(()));
    }
}
