//! Cross-implementation checks: our output decodes with the system `gzip` and Python's `zlib`
//! byte for byte, and `gzip`/`pigz` output (single and multi-member) decodes with our decoder.
//!
//! A missing tool or corpus skips with a note locally and fails under `CI=true`.

use std::path::PathBuf;

use zipwire_codec::{
    compress, decompress, Decoder, Encoder, Format, Level, Limits, Scratch, StatefulEncoder,
};
use zipwire_testkit::{
    corpus_files, generate, read_corpus_file, require_tool, run_with_stdin, save_failure,
    split_input, DataKind,
};

/// Levels checked against the external decoders: every stateless level and zlib's default.
const LEVELS: [u8; 4] = [1, 2, 3, 6];

/// Decodes a batch of streams in one Python process (its start-up costs more than the work).
///
/// stdin: records of `wbits: i8, len: u32 LE, bytes`; stdout: records of `status: u8 (0 ok,
/// 1 error), len: u32 LE, decoded bytes or error text`. A stream must end exactly at its last
/// byte: an unfinished stream or trailing bytes are errors.
const PYTHON_DECODE: &str = r#"
import struct, sys, zlib
data = sys.stdin.buffer.read()
out = sys.stdout.buffer
pos = 0
while pos < len(data):
    wbits, n = struct.unpack_from('<bI', data, pos)
    pos += 5
    d = zlib.decompressobj(wbits)
    try:
        plain = d.decompress(data[pos:pos + n])
        if not d.eof:
            raise ValueError('stream not finished')
        if d.unused_data:
            raise ValueError('%d bytes after the end of the stream' % len(d.unused_data))
        status = 0
    except Exception as e:
        plain, status = str(e).encode(), 1
    pos += n
    out.write(struct.pack('<BI', status, len(plain)))
    out.write(plain)
"#;

/// One of our encodings: the input it came from and how it was made.
struct Encoded {
    label: String,
    format: Format,
    wire: Vec<u8>,
}

fn level(n: u8) -> Level {
    Level::try_from(n).expect("test levels are 1..=9")
}

/// Inputs that exist without the corpus: every data kind, edge sizes, and sizes around the
/// 64 KB stored-block limit.
fn generated_inputs() -> Vec<(String, Vec<u8>)> {
    let mut inputs = vec![
        ("empty".to_string(), Vec::new()),
        ("one byte".to_string(), vec![b'x']),
    ];
    for (i, kind) in DataKind::ALL.into_iter().enumerate() {
        let len = [70_000, 300_000, 100_000, 65_535, 150_000][i];
        inputs.push((format!("{kind:?} {len}"), generate(kind, len, i as u64 + 1)));
    }
    inputs
}

/// Call lengths to split an input of `len` bytes with: one call, 16 KiB calls, and uneven
/// calls with empty ones among them.
fn call_patterns(len: usize) -> Vec<(&'static str, Vec<usize>)> {
    let mut sixteen = vec![16 * 1024; len / (16 * 1024)];
    sixteen.push(len % (16 * 1024));
    let mut uneven = Vec::new();
    let mut left = len;
    for step in [1, 0, 7, 4093, 0, 65_536, 31] {
        let take = step.min(left);
        uneven.push(take);
        left -= take;
    }
    uneven.push(left);
    uneven.push(0);
    vec![
        ("one call", vec![len]),
        ("16 KiB calls", sixteen),
        ("uneven calls", uneven),
    ]
}

/// Encodes `calls` at `level` with whichever encoder serves it, ending with an empty `finish`.
fn encode_calls(format: Format, level: Level, calls: &[&[u8]]) -> Vec<u8> {
    let mut wire = Vec::new();
    if level.is_stateless() {
        let mut scratch = Scratch::new();
        let mut enc = Encoder::new(format, level).expect("levels 1-3 are stateless");
        for call in calls {
            enc.encode(&mut scratch, call, &mut wire)
                .expect("encode on a live stream");
        }
        enc.finish(&mut scratch, &[], &mut wire)
            .expect("first finish");
    } else {
        let mut enc = StatefulEncoder::new(format, level);
        for call in calls {
            enc.encode(call, &mut wire)
                .expect("encode on a live stream");
        }
        enc.finish(&[], &mut wire).expect("first finish");
    }
    wire
}

/// Every format × level × call pattern of `input`.
fn encode_all_ways(name: &str, input: &[u8], formats: &[Format]) -> Vec<Encoded> {
    let mut encoded = Vec::new();
    for &format in formats {
        for n in LEVELS {
            for (how, lengths) in call_patterns(input.len()) {
                let calls = split_input(input, &lengths);
                encoded.push(Encoded {
                    label: format!("{name}: {format} level {n}, {how}"),
                    format,
                    wire: encode_calls(format, level(n), &calls),
                });
            }
        }
    }
    encoded
}

/// Runs Python's zlib over all `encoded` streams in one process.
fn python_decode_all(encoded: &[Encoded]) -> Vec<Result<Vec<u8>, String>> {
    let mut request = Vec::new();
    for e in encoded {
        let wbits: i8 = match e.format {
            Format::Gzip => 31,
            Format::Zlib => 15,
            Format::Raw => -15,
        };
        request.extend_from_slice(&wbits.to_le_bytes());
        request.extend_from_slice(
            &u32::try_from(e.wire.len())
                .expect("test streams < 4 GiB")
                .to_le_bytes(),
        );
        request.extend_from_slice(&e.wire);
    }
    let reply = match run_with_stdin("python3", &["-c", PYTHON_DECODE], &request) {
        Ok(reply) => reply,
        Err(e) => return encoded.iter().map(|_| Err(e.clone())).collect(),
    };
    let mut results = Vec::new();
    let mut rest = &reply[..];
    while let [status, a, b, c, d, tail @ ..] = rest {
        let len = u32::from_le_bytes([*a, *b, *c, *d]) as usize;
        let Some((payload, tail)) = tail.split_at_checked(len) else {
            break;
        };
        results.push(match status {
            0 => Ok(payload.to_vec()),
            _ => Err(format!("python zlib: {}", String::from_utf8_lossy(payload))),
        });
        rest = tail;
    }
    results.resize_with(
        encoded.len(),
        || Err("python reply ended early".to_string()),
    );
    results
}

/// Checks our encodings of `input` against `gzip -dc` and Python's zlib; returns failures.
fn check_external_decoders(name: &str, input: &[u8], formats: &[Format]) -> Vec<String> {
    let encoded = encode_all_ways(name, input, formats);
    let mut failures = Vec::new();
    let mut record = |label: &str, wire: &[u8], problem: String| {
        let saved = save_failure(label, wire);
        failures.push(format!(
            "{label}: {problem} (compressed stream saved to {})",
            saved.display()
        ));
    };
    for (e, result) in encoded.iter().zip(python_decode_all(&encoded)) {
        match result {
            Ok(plain) if plain == input => {}
            Ok(plain) => record(
                &e.label,
                &e.wire,
                format!(
                    "python zlib decoded {} bytes, want {}",
                    plain.len(),
                    input.len()
                ),
            ),
            Err(problem) => record(&e.label, &e.wire, problem),
        }
    }
    for e in encoded.iter().filter(|e| e.format == Format::Gzip) {
        match run_with_stdin("gzip", &["-dc"], &e.wire) {
            Ok(plain) if plain == input => {}
            Ok(plain) => record(
                &e.label,
                &e.wire,
                format!(
                    "gzip -dc decoded {} bytes, want {}",
                    plain.len(),
                    input.len()
                ),
            ),
            Err(problem) => record(&e.label, &e.wire, problem),
        }
    }
    failures
}

/// Decodes with our streaming [`Decoder`], feeding `chunk` bytes at a time; every byte must
/// belong to the stream.
fn decode_streaming(format: Format, wire: &[u8], chunk: usize) -> Result<Vec<u8>, String> {
    let mut decoder = Decoder::new(format);
    let mut plain = Vec::new();
    let mut fed = 0;
    for piece in wire.chunks(chunk) {
        let consumed = decoder
            .decode_to_vec(piece, &mut plain)
            .map_err(|e| e.to_string())?;
        if consumed != piece.len() {
            return Err(format!(
                "stream ended at input byte {}, {} bytes early",
                fed + consumed,
                wire.len() - fed - consumed
            ));
        }
        fed += consumed;
    }
    decoder.finish().map_err(|e| e.to_string())?;
    Ok(plain)
}

/// Checks that `wire` decodes to `input` with our decoder, one shot and streaming.
fn check_ours(label: &str, wire: &[u8], input: &[u8]) -> Result<(), String> {
    let one_shot = decompress(Format::Gzip, wire, Limits::default()).map_err(|e| e.to_string());
    let streamed = decode_streaming(Format::Gzip, wire, 4093);
    for (how, result) in [
        ("decompress", one_shot),
        ("Decoder in 4093-byte pieces", streamed),
    ] {
        match result {
            Ok(plain) if plain == input => {}
            Ok(plain) => {
                return Err(format!(
                    "{label}: {how} gave {} bytes, want {}",
                    plain.len(),
                    input.len()
                ))
            }
            Err(e) => return Err(format!("{label}: {how}: {e}")),
        }
    }
    Ok(())
}

fn external_inputs() -> Vec<(String, Vec<u8>)> {
    let mut inputs = generated_inputs();
    let files: Vec<PathBuf> = ["canterbury", "web", "incompressible"]
        .iter()
        .flat_map(|dir| corpus_files(dir))
        .collect();
    for path in files {
        inputs.push((
            path.display().to_string(),
            read_corpus_file(&path, usize::MAX),
        ));
    }
    inputs
}

#[test]
fn our_output_decodes_with_gzip_and_python_zlib() {
    if !require_tool("gzip") || !require_tool("python3") {
        return;
    }
    let mut failures = Vec::new();
    for (name, input) in generated_inputs() {
        failures.extend(check_external_decoders(&name, &input, &Format::ALL));
    }
    // The corpus adds real text, markup and binaries, in gzip only to keep the run short.
    for path in corpus_files("canterbury") {
        let input = read_corpus_file(&path, usize::MAX);
        failures.extend(check_external_decoders(
            &path.display().to_string(),
            &input,
            &[Format::Gzip],
        ));
    }
    assert!(
        failures.is_empty(),
        "{} external decodes failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn gzip_and_pigz_output_decodes_with_ours() {
    let tools: Vec<(&str, &[&str])> = vec![
        ("gzip", &["-1", "-c"]),
        ("gzip", &["-6", "-c"]),
        ("gzip", &["-9", "-c"]),
        ("pigz", &["-c"]),
    ];
    let available: Vec<_> = tools
        .into_iter()
        .filter(|(tool, _)| require_tool(tool))
        .collect();
    let mut failures = Vec::new();
    for (name, input) in external_inputs() {
        for (tool, args) in &available {
            let label = format!("{name}: {tool} {}", args.join(" "));
            match run_with_stdin(tool, args, &input) {
                Ok(wire) => {
                    if let Err(problem) = check_ours(&label, &wire, &input) {
                        let saved = save_failure(tool, &wire);
                        failures.push(format!(
                            "{problem} (compressed stream saved to {})",
                            saved.display()
                        ));
                    }
                }
                Err(problem) => failures.push(format!("{label}: {problem}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} decodes failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn multi_member_gzip_decodes_as_the_concatenation() {
    let first = generate(DataKind::Text, 40_000, 11);
    let second = generate(DataKind::Binary, 70_000, 12);
    let want = [first.as_slice(), second.as_slice()].concat();

    let mut members = vec![
        (
            "ours + ours",
            [
                compress(Format::Gzip, level(1), &first),
                compress(Format::Gzip, level(6), &second),
            ]
            .concat(),
        ),
        (
            "empty + ours",
            [
                compress(Format::Gzip, level(2), b""),
                compress(Format::Gzip, level(3), &want),
            ]
            .concat(),
        ),
    ];
    let gzip = require_tool("gzip");
    if gzip {
        let theirs = run_with_stdin("gzip", &["-c"], &second).expect("gzip -c of generated data");
        members.push((
            "ours + gzip",
            [compress(Format::Gzip, level(1), &first), theirs].concat(),
        ));
    }
    for (how, wire) in members {
        assert_eq!(check_ours(how, &wire, &want), Ok(()));
        if gzip {
            let plain =
                run_with_stdin("gzip", &["-dc"], &wire).expect("gzip -dc of a multi-member stream");
            assert!(
                plain == want,
                "{how}: gzip -dc gave {} bytes, want {}",
                plain.len(),
                want.len()
            );
        }
    }
}
