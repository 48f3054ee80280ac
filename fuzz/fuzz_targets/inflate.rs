//! The decoder on arbitrary bytes, with arbitrary limits, one shot and in arbitrary chunks
//! into an arbitrarily small output buffer: it must never panic or loop, must respect its
//! limits, and the two ways of decoding must agree; what it accepts, flate2 must decode to the
//! same bytes.

#![no_main]

use std::io::Read;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use zipwire_codec::{decompress, Decoder, Format, Limits};

#[derive(Arbitrary, Debug)]
struct Case {
    format: u8,
    max_output: Option<u32>,
    max_ratio: Option<u16>,
    /// Input bytes per `decode` call (0 is taken as 1).
    chunk: u16,
    /// Output buffer size per `decode` call (0 is taken as 1).
    window: u16,
    data: Vec<u8>,
}

fuzz_target!(|case: Case| {
    let format = Format::ALL[usize::from(case.format) % Format::ALL.len()];
    let limits = Limits {
        max_output: case.max_output.map(u64::from),
        max_ratio: case.max_ratio.map(u64::from),
    };
    let one_shot = decompress(format, &case.data, limits);
    if let (Ok(plain), Some(max)) = (&one_shot, limits.max_output) {
        assert!(plain.len() as u64 <= max, "one shot passed max_output");
    }

    let chunked = decode_chunked(format, limits, &case);
    if let (Ok((plain, _)), Some(max)) = (&chunked, limits.max_output) {
        assert!(plain.len() as u64 <= max, "chunked passed max_output");
    }

    // The ratio limit depends on how much input had been taken when output appeared, which
    // differs between the two ways; without it they must agree on everything one shot accepts.
    if let Ok(plain) = &one_shot {
        if limits.max_ratio.is_none() {
            match &chunked {
                Ok((chunked_plain, consumed)) => {
                    assert_eq!(chunked_plain, plain, "chunked and one shot disagree");
                    assert_eq!(
                        *consumed,
                        case.data.len(),
                        "chunked left input that one shot took"
                    );
                }
                Err(e) => panic!("one shot decoded, chunked failed: {e}"),
            }
        }
        if limits.max_output.is_none() && limits.max_ratio.is_none() {
            let theirs = flate2_decode(format, &case.data);
            assert_eq!(
                theirs.as_ref().ok(),
                Some(plain),
                "flate2 disagrees with an accepted stream"
            );
        }
    }
});

/// Decodes in `case.chunk`-byte pieces into a `case.window`-byte buffer; returns the output
/// and the input consumed.
fn decode_chunked(format: Format, limits: Limits, case: &Case) -> Result<(Vec<u8>, usize), String> {
    let chunk = usize::from(case.chunk).max(1);
    let mut window = vec![0; usize::from(case.window).max(1)];
    let mut decoder = Decoder::new(format).with_limits(limits);
    let mut plain = Vec::new();
    let mut pos = 0;
    loop {
        let piece = &case.data[pos..(pos + chunk).min(case.data.len())];
        let progress = decoder
            .decode(piece, &mut window)
            .map_err(|e| e.to_string())?;
        assert!(progress.consumed <= piece.len() && progress.produced <= window.len());
        plain.extend_from_slice(&window[..progress.produced]);
        pos += progress.consumed;
        if progress.consumed == 0 && progress.produced == 0 {
            // Nothing more to do: the input is used up and drained, or the stream has ended
            // and the rest is trailing data.
            break;
        }
    }
    decoder.finish().map_err(|e| e.to_string())?;
    Ok((plain, pos))
}

fn flate2_decode(format: Format, data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut plain = Vec::new();
    match format {
        Format::Gzip => flate2::read::MultiGzDecoder::new(data).read_to_end(&mut plain)?,
        Format::Zlib => flate2::read::ZlibDecoder::new(data).read_to_end(&mut plain)?,
        Format::Raw => flate2::read::DeflateDecoder::new(data).read_to_end(&mut plain)?,
    };
    Ok(plain)
}
