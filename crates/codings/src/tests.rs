//! Unit tests of the codings: every stream decodes with the reference decoders (the `zstd`
//! crate's, the `brotli` crate's, zipwire's own inflate), whatever its chunking; a sync flush
//! makes everything so far decodable; step-down stays decodable; windows stay bounded.

use std::io::Read;

use proptest::prelude::*;
use zipwire_codec::{Format, Level, Limits};
use zipwire_testkit::{corpus_files, data_and_splits, read_corpus_file, split_input};

use super::*;

/// One encoder of each coding the proxy produces, at `level_hint` where it applies.
fn encoders(length: Option<u64>) -> Vec<(Coding, BodyEncoder)> {
    vec![
        (Coding::Gzip, BodyEncoder::new(Format::Gzip, Level::FAST)),
        (Coding::Gzip, BodyEncoder::new(Format::Gzip, Level::DEFAULT)),
        (Coding::Deflate, BodyEncoder::new(Format::Zlib, Level::FAST)),
        (
            Coding::Zstd,
            ZstdEncoder::new(ZstdLevel::DEFAULT, window_log_for(length)).into(),
        ),
        (
            Coding::Zstd,
            ZstdEncoder::new(ZstdLevel::new(3).expect("level"), window_log_for(length)).into(),
        ),
        (
            Coding::Br,
            BrotliEncoder::new(BrotliLevel::DEFAULT, window_log_for(length)).into(),
        ),
        (
            Coding::Br,
            BrotliEncoder::new(BrotliLevel::new(1).expect("level"), window_log_for(length)).into(),
        ),
    ]
}

/// The whole stream decoded with the reference decoder of `coding`.
fn decode(coding: Coding, wire: &[u8]) -> Vec<u8> {
    match coding {
        Coding::Gzip => {
            zipwire_codec::decompress(Format::Gzip, wire, Limits::default()).expect("valid gzip")
        }
        Coding::Deflate => {
            zipwire_codec::decompress(Format::Zlib, wire, Limits::default()).expect("valid zlib")
        }
        Coding::Zstd => ::zstd::stream::decode_all(wire).expect("valid zstd"),
        Coding::Br => {
            let mut plain = Vec::new();
            ::brotli::Decompressor::new(wire, 4096)
                .read_to_end(&mut plain)
                .expect("valid brotli");
            plain
        }
    }
}

/// What a streaming decoder gives for a stream cut short at `wire`'s end: everything it can
/// decode so far.
fn decode_prefix(coding: Coding, wire: &[u8]) -> Vec<u8> {
    let mut reader: Box<dyn Read + '_> = match coding {
        Coding::Zstd => Box::new(::zstd::stream::read::Decoder::new(wire).expect("decoder")),
        Coding::Br => Box::new(::brotli::Decompressor::new(wire, 4096)),
        Coding::Gzip => Box::new(flate2::read::MultiGzDecoder::new(wire)),
        Coding::Deflate => Box::new(flate2::read::ZlibDecoder::new(wire)),
    };
    let mut plain = Vec::new();
    let mut buf = [0u8; 1024];
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        plain.extend_from_slice(&buf[..n]);
    }
    plain
}

/// Encodes `calls` as a body would: every call but the last with `flush`, then finish.
fn encode_calls(encoder: &mut BodyEncoder, calls: &[&[u8]], flush: Flush) -> Vec<u8> {
    let encoder = encoder.as_encode_mut();
    let mut wire = Vec::new();
    let Some((last, rest)) = calls.split_last() else {
        encoder.finish(&[], &mut wire).expect("finish");
        return wire;
    };
    for call in rest {
        encoder.encode(call, flush, &mut wire).expect("encode");
    }
    encoder.finish(last, &mut wire).expect("finish");
    wire
}

#[test]
fn corpus_files_round_trip_in_every_coding() {
    let files = corpus_files("web");
    for path in files.iter().take(12) {
        let data = read_corpus_file(path, 1 << 20);
        for (coding, mut encoder) in encoders(Some(data.len() as u64)) {
            // As a body cuts a long page: calls of 64 KiB, the last one finishing.
            let calls: Vec<&[u8]> = data.chunks(64 * 1024).collect();
            let wire = encode_calls(&mut encoder, &calls, Flush::Continue);
            assert!(
                decode(coding, &wire) == data,
                "{coding} {}: does not round-trip",
                path.display()
            );
            if data.len() > 4096 {
                assert!(
                    wire.len() < data.len(),
                    "{coding} {}: not compressed",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn a_sync_flush_makes_everything_so_far_decodable() {
    let head = b"<html><head><title>zipwire</title></head><body><p>first bytes</p>".repeat(20);
    let tail = b"<p>the rest, later</p></body></html>".repeat(20);
    for (coding, mut encoder) in encoders(None) {
        let encoder = encoder.as_encode_mut();
        let mut wire = Vec::new();
        encoder
            .encode(&head, Flush::Sync, &mut wire)
            .expect("encode");
        assert_eq!(decode_prefix(coding, &wire), head, "{coding}: flushed part");
        encoder.finish(&tail, &mut wire).expect("finish");
        assert_eq!(
            decode(coding, &wire),
            [&head[..], &tail[..]].concat(),
            "{coding}"
        );
    }
}

#[test]
fn step_down_sends_the_rest_uncompressed_and_stays_decodable() {
    let data = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 300_000, 7);
    let (before, after) = data.split_at(100_000);
    for (coding, mut encoder) in encoders(None) {
        let encoder = encoder.as_encode_mut();
        let mut wire = Vec::new();
        encoder
            .encode(before, Flush::Continue, &mut wire)
            .expect("encode");
        encoder.encode(&[], Flush::Sync, &mut wire).expect("flush");
        let compressed = wire.len();
        encoder.step_down(true);
        let (middle, last) = after.split_at(150_000);
        encoder
            .encode(middle, Flush::Continue, &mut wire)
            .expect("encode");
        encoder.finish(last, &mut wire).expect("finish");
        assert!(
            wire.len() - compressed >= after.len(),
            "{coding}: compressed after the step-down"
        );
        if encoder.is_windowed() {
            assert_eq!(
                encoder.memory(),
                0,
                "{coding}: state kept after the step-down"
            );
        }
        assert_eq!(decode(coding, &wire), data, "{coding}");
    }
}

#[test]
fn step_down_before_the_first_call_still_makes_a_valid_stream() {
    let count = encoders(None).len();
    for i in 0..count {
        let (coding, mut encoder) = encoders(None).swap_remove(i);
        let encoder = encoder.as_encode_mut();
        encoder.step_down(true);
        let mut wire = Vec::new();
        encoder
            .encode(b"abc", Flush::Sync, &mut wire)
            .expect("encode");
        encoder.finish(b"def", &mut wire).expect("finish");
        assert_eq!(decode(coding, &wire), b"abcdef", "{coding}");
        let (_, mut fresh) = encoders(None).swap_remove(i);
        fresh.as_encode_mut().step_down(true);
        let mut empty = Vec::new();
        fresh
            .as_encode_mut()
            .finish(&[], &mut empty)
            .expect("finish");
        assert_eq!(decode(coding, &empty), b"", "{coding}: empty");
    }
}

#[test]
fn a_finished_stream_refuses_more() {
    for (coding, mut encoder) in encoders(Some(3)) {
        let encoder = encoder.as_encode_mut();
        let mut wire = Vec::new();
        encoder.finish(b"abc", &mut wire).expect("finish");
        assert!(encoder.finish(b"", &mut wire).is_err(), "{coding}");
        assert!(
            encoder.encode(b"x", Flush::Sync, &mut wire).is_err(),
            "{coding}"
        );
    }
}

/// RFC 9659: a zstd window over 8 MiB may be refused; the window is set explicitly, so even
/// a level whose default window is larger (3: 2 MiB) stays at [`MAX_WINDOW_LOG`].
#[test]
fn zstd_frames_announce_a_bounded_window() {
    let data = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 200_000, 3);
    for level in [1, 3, 9, 19] {
        let mut encoder = ZstdEncoder::new(ZstdLevel::new(level).expect("level"), MAX_WINDOW_LOG);
        let mut wire = Vec::new();
        encoder
            .encode(&data, Flush::Sync, &mut wire)
            .expect("encode");
        encoder.finish(&[], &mut wire).expect("finish");
        assert_eq!(wire[..4], 0xFD2F_B528_u32.to_le_bytes());
        let descriptor = wire[4];
        assert_eq!(
            descriptor & 0x20,
            0,
            "level {level}: single segment, no window field"
        );
        let exponent = u32::from(wire[5] >> 3);
        let mantissa = u64::from(wire[5] & 7);
        let base = 1u64 << (10 + exponent);
        let window = base + base / 8 * mantissa;
        assert!(
            window <= 1 << MAX_WINDOW_LOG,
            "level {level}: window {window}"
        );
        assert_eq!(descriptor & 0x04, 0, "level {level}: checksum flag set");
        assert_eq!(decode(Coding::Zstd, &wire), data);
    }
}

#[test]
fn window_logs_follow_the_body() {
    assert_eq!(window_log_for(None), MAX_WINDOW_LOG);
    assert_eq!(window_log_for(Some(0)), MIN_WINDOW_LOG);
    assert_eq!(window_log_for(Some(1024)), 10);
    assert_eq!(window_log_for(Some(1025)), 11);
    assert_eq!(window_log_for(Some(76_799)), 17);
    assert_eq!(window_log_for(Some(1 << 30)), MAX_WINDOW_LOG);
}

#[test]
fn memory_grows_with_the_window_and_is_zero_for_stateless_gzip() {
    let all = [Coding::Gzip, Coding::Zstd, Coding::Br];
    const COALESCE: usize = 64 * 1024;
    let new = |gzip| {
        Codings::new(
            gzip,
            ZstdLevel::DEFAULT,
            BrotliLevel::DEFAULT,
            &all,
            COALESCE,
        )
    };
    let codings = new(Level::FAST);
    assert_eq!(codings.memory(Coding::Gzip, None), 0);
    for coding in [Coding::Zstd, Coding::Br] {
        // One call: no state of its own, only the gathered body past one call.
        assert_eq!(codings.memory(coding, Some(2_000)), 0, "{coding}");
        assert_eq!(
            codings.memory(coding, Some(100_000)),
            100_000 - COALESCE,
            "{coding}"
        );
        let small = codings.memory(coding, Some(200_000));
        let large = codings.memory(coding, None);
        assert!(
            small > 0 && large >= small,
            "{coding}: {small} then {large}"
        );
        assert!(
            large > 1 << MAX_WINDOW_LOG,
            "{coding}: {large} holds no window"
        );
    }
    let stateful = new(Level::DEFAULT);
    assert!(stateful.memory(Coding::Gzip, None) > 200_000);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any chunking of any input, with or without flushes, gives a stream that decodes to
    /// the input, in every coding.
    #[test]
    fn any_chunking_decodes(
        (data, splits) in data_and_splits(100_000),
        sync in any::<bool>(),
        known in any::<bool>(),
    ) {
        let input = data.as_bytes();
        let calls = split_input(input, &splits);
        let length = known.then_some(input.len() as u64);
        let flush = if sync { Flush::Sync } else { Flush::Continue };
        for (coding, mut encoder) in encoders(length) {
            let wire = encode_calls(&mut encoder, &calls, flush);
            prop_assert!(decode(coding, &wire) == input, "{} does not round-trip", coding);
        }
    }
}
