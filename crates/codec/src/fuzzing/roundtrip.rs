//! The `roundtrip` target's body: the encoders on arbitrary chunks, decoded back with ours and
//! flate2.

use crate::{decompress, Decoder, Encoder, Format, Level, Limits, Scratch, StatefulEncoder};

use super::flate2_decode;

/// One `roundtrip` input: the chunks to encode one call each, and the stream's settings.
#[derive(Debug)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct RoundtripCase {
    /// The format, as an index into [`Format::ALL`] (modulo its length).
    pub format: u8,
    /// The level, as 1 + this modulo 9.
    pub level: u8,
    /// Whether the last chunk goes to `finish` (else `finish` gets an empty input).
    pub finish_with_last: bool,
    /// The input, one encoder call per chunk.
    pub chunks: Vec<Vec<u8>>,
}

/// Encodes arbitrary chunks one call each, at any format and level 1-9, and decodes with ours
/// and flate2: both must give back the input. Also checks, per call, that everything sent so
/// far decodes at once (each call ends byte-aligned with a sync flush), and for levels 1-3
/// that a [`Scratch`] shared with another stream changes nothing in the output.
///
/// # Panics
///
/// When an invariant does not hold.
pub fn roundtrip(case: &RoundtripCase) {
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
}

#[cfg(test)]
mod tests {
    use super::{roundtrip, RoundtripCase};

    #[test]
    fn chunks_at_every_format_and_level_round_trip() {
        let text = b"hello, hello, hello world, ".repeat(40);
        let chunks = vec![text[..100].to_vec(), Vec::new(), text[100..].to_vec()];
        for format in 0..3 {
            for level in 0..9 {
                for finish_with_last in [false, true] {
                    roundtrip(&RoundtripCase {
                        format,
                        level,
                        finish_with_last,
                        chunks: chunks.clone(),
                    });
                }
            }
            roundtrip(&RoundtripCase {
                format,
                level: 0,
                finish_with_last: true,
                chunks: Vec::new(),
            });
        }
    }
}
