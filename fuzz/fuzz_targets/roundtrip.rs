//! Encode arbitrary chunks one call each, at any format and level 1-9, and decode with ours
//! and flate2: both must give back the input. Also checks, per call, that everything sent so
//! far decodes at once (each call ends byte-aligned with a sync flush), and for levels 1-3
//! that a `Scratch` shared with another stream changes nothing in the output.

#![no_main]

use std::io::Read;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use zipwire_codec::{
    decompress, Decoder, Encoder, Format, Level, Limits, Scratch, StatefulEncoder,
};

#[derive(Arbitrary, Debug)]
struct Case {
    format: u8,
    level: u8,
    /// Whether the last chunk goes to `finish` (else `finish` gets an empty input).
    finish_with_last: bool,
    chunks: Vec<Vec<u8>>,
}

fuzz_target!(|case: Case| {
    let format = Format::ALL[usize::from(case.format) % Format::ALL.len()];
    let level = Level::try_from(case.level % 9 + 1).expect("1..=9");
    let (body, last) = match case.chunks.split_last() {
        Some((last, body)) if case.finish_with_last => (body, &last[..]),
        _ => (&case.chunks[..], &[][..]),
    };
    let input: Vec<u8> = case.chunks.concat();

    let mut wire = Vec::new();
    let mut decoder = Decoder::new(format);
    let mut streamed = Vec::new();
    let mut fed = 0;
    let mut sent = |wire: &[u8], from: usize, fed: usize, streamed: &mut Vec<u8>| {
        let consumed = decoder
            .decode_to_vec(&wire[from..], streamed)
            .expect("our decoder on our output");
        assert_eq!(consumed, wire.len() - from);
        assert_eq!(
            streamed.len(),
            fed,
            "a call's output did not decode at once"
        );
    };
    if level.is_stateless() {
        let mut scratch = Scratch::new();
        let mut shared = Scratch::new();
        let mut enc = Encoder::new(format, level).expect("stateless level");
        // A second stream taking turns with the first on `shared`, fed the same data.
        let mut twin = Encoder::new(format, level).expect("stateless level");
        let mut twin_wire = Vec::new();
        for chunk in body {
            let from = wire.len();
            enc.encode(&mut scratch, chunk, &mut wire)
                .expect("live stream");
            twin.encode(&mut shared, chunk, &mut twin_wire)
                .expect("live stream");
            fed += chunk.len();
            sent(&wire, from, fed, &mut streamed);
            // Something else through the shared scratch between the twin's calls.
            let mut other = Encoder::new(Format::Raw, level).expect("stateless level");
            other
                .finish(&mut shared, &chunk[..chunk.len() / 2], &mut Vec::new())
                .expect("fresh");
        }
        enc.finish(&mut scratch, last, &mut wire)
            .expect("first finish");
        twin.finish(&mut shared, last, &mut twin_wire)
            .expect("first finish");
        assert_eq!(
            wire, twin_wire,
            "output depends on what the scratch did before"
        );
    } else {
        let mut enc = StatefulEncoder::new(format, level);
        for chunk in body {
            let from = wire.len();
            enc.encode(chunk, &mut wire).expect("live stream");
            fed += chunk.len();
            sent(&wire, from, fed, &mut streamed);
        }
        enc.finish(last, &mut wire).expect("first finish");
    }

    assert_eq!(
        decompress(format, &wire, Limits::default()).as_deref(),
        Ok(&input[..]),
        "ours"
    );
    assert_eq!(
        flate2_decode(format, &wire).ok().as_deref(),
        Some(&input[..]),
        "flate2"
    );
});

fn flate2_decode(format: Format, data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut plain = Vec::new();
    match format {
        Format::Gzip => flate2::read::MultiGzDecoder::new(data).read_to_end(&mut plain)?,
        Format::Zlib => flate2::read::ZlibDecoder::new(data).read_to_end(&mut plain)?,
        Format::Raw => flate2::read::DeflateDecoder::new(data).read_to_end(&mut plain)?,
    };
    Ok(plain)
}
