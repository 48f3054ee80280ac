//! Round trips: every format × level × way of splitting the input into calls, decoded by this
//! crate and by flate2; every corpus file; and the expansion bound on incompressible input.

use std::io::Read;
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use zipwire_codec::{
    compress, decompress, Encoder, Format, Level, Limits, Scratch, StatefulEncoder,
};
use zipwire_testkit::{
    corpus_files, corpus_subdirs, data_and_splits, data_up_to, read_corpus_file, save_failure,
    split_input, Data, DataKind,
};

/// Inputs for the split-call properties: mostly small, a few up to 200 KB.
const MAX_PROP_LEN: usize = 200_000;

/// How much of each `large/` corpus file is used.
const LARGE_PREFIX: usize = 4 << 20;

/// Calls into the encoder when round-tripping corpus files in pieces.
const CORPUS_CALL: usize = 16 * 1024;

/// 64 cases per property keeps the suite around a minute in release mode on two cores;
/// regressions are kept next to this file.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 64,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

fn level(n: u8) -> Level {
    Level::try_from(n).expect("test levels are 1..=9")
}

fn format() -> impl Strategy<Value = Format> {
    prop::sample::select(Format::ALL.to_vec())
}

/// Encodes `calls` with the stateless encoder; the last call goes to `finish` when
/// `finish_with_last`, else `finish` gets an empty input.
fn encode_stateless(
    format: Format,
    level: Level,
    calls: &[&[u8]],
    finish_with_last: bool,
) -> Vec<u8> {
    let mut scratch = Scratch::new();
    let mut enc = Encoder::new(format, level).expect("levels 1-3 are stateless");
    let mut wire = Vec::new();
    let (body, last) = match calls.split_last() {
        Some((last, body)) if finish_with_last => (body, *last),
        _ => (calls, &[][..]),
    };
    for call in body {
        enc.encode(&mut scratch, call, &mut wire)
            .expect("encode on a live stream");
    }
    enc.finish(&mut scratch, last, &mut wire)
        .expect("first finish");
    wire
}

/// As [`encode_stateless`], with the stateful encoder.
fn encode_stateful(
    format: Format,
    level: Level,
    calls: &[&[u8]],
    finish_with_last: bool,
) -> Vec<u8> {
    let mut enc = StatefulEncoder::new(format, level);
    let mut wire = Vec::new();
    let (body, last) = match calls.split_last() {
        Some((last, body)) if finish_with_last => (body, *last),
        _ => (calls, &[][..]),
    };
    for call in body {
        enc.encode(call, &mut wire)
            .expect("encode on a live stream");
    }
    enc.finish(last, &mut wire).expect("first finish");
    wire
}

/// Encodes with whichever encoder serves `level`.
fn encode(format: Format, level: Level, calls: &[&[u8]], finish_with_last: bool) -> Vec<u8> {
    if level.is_stateless() {
        encode_stateless(format, level, calls, finish_with_last)
    } else {
        encode_stateful(format, level, calls, finish_with_last)
    }
}

/// Decodes with flate2 (zlib-rs), independently of this crate's decoder.
fn flate2_decode(format: Format, wire: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut plain = Vec::new();
    match format {
        Format::Gzip => flate2::read::MultiGzDecoder::new(wire).read_to_end(&mut plain)?,
        Format::Zlib => flate2::read::ZlibDecoder::new(wire).read_to_end(&mut plain)?,
        Format::Raw => flate2::read::DeflateDecoder::new(wire).read_to_end(&mut plain)?,
    };
    Ok(plain)
}

/// Checks that `wire` decodes to `input` with both decoders; describes the first problem.
fn check_decodes(format: Format, wire: &[u8], input: &[u8]) -> Result<(), String> {
    match decompress(format, wire, Limits::default()) {
        Ok(plain) if plain == input => {}
        Ok(plain) => return Err(format!("zipwire decoder: {}", mismatch(&plain, input))),
        Err(e) => return Err(format!("zipwire decoder: {e}")),
    }
    match flate2_decode(format, wire) {
        Ok(plain) if plain == input => Ok(()),
        Ok(plain) => Err(format!("flate2 decoder: {}", mismatch(&plain, input))),
        Err(e) => Err(format!("flate2 decoder: {e}")),
    }
}

/// Describes how `got` differs from `want` without printing either.
fn mismatch(got: &[u8], want: &[u8]) -> String {
    let first = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    format!(
        "decoded {} bytes, want {}, first difference at byte {first}",
        got.len(),
        want.len()
    )
}

/// The expansion bound every stateless level must keep: stored-block framing of 5 bytes per
/// 65,535 input bytes plus header, empty final block and trailer.
fn expansion_bound(len: usize) -> usize {
    len + 5 * len.div_ceil(65_535) + 32
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn stateless_levels_round_trip_in_any_split(
        (input, lengths) in data_and_splits(MAX_PROP_LEN),
        format in format(),
        n in 1u8..=3,
        finish_with_last in any::<bool>(),
    ) {
        let calls = split_input(&input, &lengths);
        let wire = encode_stateless(format, level(n), &calls, finish_with_last);
        if let Err(problem) = check_decodes(format, &wire, &input) {
            return Err(TestCaseError::fail(format!("{format} level {n}, {} calls: {problem}", calls.len())));
        }
    }

    #[test]
    fn stateful_levels_round_trip_in_any_split(
        (input, lengths) in data_and_splits(MAX_PROP_LEN),
        format in format(),
        n in 4u8..=9,
        finish_with_last in any::<bool>(),
    ) {
        let calls = split_input(&input, &lengths);
        let wire = encode_stateful(format, level(n), &calls, finish_with_last);
        if let Err(problem) = check_decodes(format, &wire, &input) {
            return Err(TestCaseError::fail(format!("{format} level {n}, {} calls: {problem}", calls.len())));
        }
    }

    #[test]
    fn one_shot_compress_round_trips_at_every_level(
        input in data_up_to(MAX_PROP_LEN),
        format in format(),
        n in 1u8..=9,
    ) {
        let wire = compress(format, level(n), &input);
        if let Err(problem) = check_decodes(format, &wire, &input) {
            return Err(TestCaseError::fail(format!("{format} level {n}: {problem}")));
        }
    }

    #[test]
    fn random_input_never_expands_past_the_bound(
        input in (0usize..200_000, any::<u64>()).prop_map(|(len, seed)| Data::new(DataKind::Random, len, seed)),
        format in format(),
        n in 1u8..=3,
    ) {
        let wire = compress(format, level(n), &input);
        prop_assert!(
            wire.len() <= expansion_bound(input.len()),
            "{format} level {n}: {} bytes in, {} out, bound {}",
            input.len(), wire.len(), expansion_bound(input.len())
        );
    }
}

#[test]
fn empty_input_round_trips_in_every_format_and_level() {
    for format in Format::ALL {
        for n in 1..=9 {
            for calls in [
                &[][..],
                &[&b""[..]][..],
                &[&b""[..], &b""[..], &b""[..]][..],
            ] {
                for finish_with_last in [false, true] {
                    let wire = encode(format, level(n), calls, finish_with_last);
                    if let Err(problem) = check_decodes(format, &wire, b"") {
                        panic!("{format} level {n}, {} calls: {problem}", calls.len());
                    }
                }
            }
        }
    }
}

#[test]
fn every_corpus_file_round_trips_in_gzip() {
    let mut failures = Vec::new();
    for subdir in corpus_subdirs() {
        let max = if subdir == "large" {
            LARGE_PREFIX
        } else {
            usize::MAX
        };
        for path in corpus_files(&subdir) {
            let input = read_corpus_file(&path, max);
            for n in [1, 2, 3, 6] {
                failures.extend(corpus_round_trip(&path, &input, level(n)));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} corpus round trips failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Round-trips one corpus file in one call and in [`CORPUS_CALL`]-byte calls; saves the input
/// and describes each failure.
fn corpus_round_trip(path: &Path, input: &[u8], level: Level) -> Vec<String> {
    let mut failures = Vec::new();
    let name = path
        .file_name()
        .map_or_else(|| "corpus".into(), |n| n.to_string_lossy().into_owned());
    let chunked: Vec<&[u8]> = input.chunks(CORPUS_CALL).collect();
    let one_call = compress(Format::Gzip, level, input);
    for (how, wire) in [
        ("one call", one_call),
        ("16 KiB calls", encode(Format::Gzip, level, &chunked, false)),
    ] {
        if let Err(problem) = check_decodes(Format::Gzip, &wire, input) {
            let saved = save_failure(&format!("{name}-level{level}"), input);
            failures.push(format!(
                "{} (level {level}, {how}): {problem}; input saved to {}",
                path.display(),
                saved.display()
            ));
        }
    }
    failures
}

#[test]
fn incompressible_corpus_never_expands_past_the_bound() {
    let mut failures = Vec::new();
    for path in corpus_files("incompressible") {
        let input = read_corpus_file(&path, usize::MAX);
        for format in Format::ALL {
            for n in 1..=3 {
                let wire = compress(format, level(n), &input);
                let bound = expansion_bound(input.len());
                if wire.len() > bound {
                    failures.push(format!(
                        "{} ({format} level {n}): {} bytes in, {} out, bound {bound}",
                        path.display(),
                        input.len(),
                        wire.len()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "expansion bound broken:\n{}",
        failures.join("\n")
    );
}
