//! The `inflate` target's body: the decoder on arbitrary bytes and limits, one shot and in
//! chunks.

use crate::{decompress, Decoder, Format, Limits};

use super::flate2_decode;

/// One `inflate` input: a stream, the limits to decode it under, and how to cut it up.
#[derive(Debug)]
pub struct InflateCase {
    /// The format, as an index into [`Format::ALL`] (modulo its length).
    pub format: u8,
    /// [`Limits::max_output`].
    pub max_output: Option<u32>,
    /// [`Limits::max_ratio`].
    pub max_ratio: Option<u16>,
    /// Input bytes per `decode` call (0 is taken as 1).
    pub chunk: u16,
    /// Output buffer size per `decode` call (0 is taken as 1).
    pub window: u16,
    /// The stream.
    pub data: Vec<u8>,
}

/// By hand rather than derived, so that the stream is the input's tail byte for byte: a seed
/// is then the header fields followed by a real gzip, zlib or raw stream (`fuzz/seed.sh`).
/// The derived form reads a collection's length from the input's end instead, which turns
/// such a seed into an empty stream.
#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for InflateCase {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let mut case = InflateCase::head(u)?;
        case.data = u.arbitrary()?;
        Ok(case)
    }

    fn arbitrary_take_rest(mut u: arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let mut case = InflateCase::head(&mut u)?;
        case.data = u.take_rest().to_vec();
        Ok(case)
    }
}

#[cfg(feature = "arbitrary")]
impl InflateCase {
    /// Every field but the stream, in declaration order.
    fn head(u: &mut arbitrary::Unstructured<'_>) -> arbitrary::Result<InflateCase> {
        Ok(InflateCase {
            format: u.arbitrary()?,
            max_output: u.arbitrary()?,
            max_ratio: u.arbitrary()?,
            chunk: u.arbitrary()?,
            window: u.arbitrary()?,
            data: Vec::new(),
        })
    }
}

/// The decoder on arbitrary bytes, with arbitrary limits, one shot and in arbitrary chunks
/// into an arbitrarily small output buffer: it must never panic or loop, must respect its
/// limits, and the two ways of decoding must agree; what it accepts, flate2 must decode to the
/// same bytes.
///
/// # Panics
///
/// When an invariant does not hold.
pub fn inflate(case: &InflateCase) {
    let format = Format::ALL[usize::from(case.format) % Format::ALL.len()];
    let limits = Limits {
        max_output: case.max_output.map(u64::from),
        max_ratio: case.max_ratio.map(u64::from),
    };
    let one_shot = decompress(format, &case.data, limits);
    if let (Ok(plain), Some(max)) = (&one_shot, limits.max_output) {
        assert!(plain.len() as u64 <= max, "one shot passed max_output");
    }

    let chunked = decode_chunked(format, limits, case);
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
}

/// Decodes in `case.chunk`-byte pieces into a `case.window`-byte buffer; returns the output
/// and the input consumed.
fn decode_chunked(
    format: Format,
    limits: Limits,
    case: &InflateCase,
) -> Result<(Vec<u8>, usize), String> {
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

#[cfg(test)]
mod tests {
    use super::{inflate, InflateCase};
    use crate::{compress, Format, Level};

    fn case(format: u8, data: Vec<u8>) -> InflateCase {
        InflateCase {
            format,
            max_output: None,
            max_ratio: None,
            chunk: 7,
            window: 5,
            data,
        }
    }

    /// The layout `fuzz/seed.sh` writes: format 0 (gzip), no limits, chunk and window 4096
    /// (u16 little-endian), then the stream, which must reach the case whole.
    #[cfg(feature = "arbitrary")]
    #[test]
    fn a_seed_s_stream_is_the_input_s_tail() {
        use arbitrary::{Arbitrary, Unstructured};
        let wire = compress(Format::Gzip, Level::DEFAULT, &b"hello, world. ".repeat(20));
        let mut seed = vec![0, 0, 0, 0x00, 0x10, 0x00, 0x10];
        seed.extend_from_slice(&wire);
        let case = InflateCase::arbitrary_take_rest(Unstructured::new(&seed)).expect("a case");
        let head = (case.format, case.max_output, case.max_ratio);
        assert_eq!(head, (0, None, None));
        assert_eq!((case.chunk, case.window), (4096, 4096));
        assert_eq!(case.data, wire);
    }

    #[test]
    fn valid_truncated_limited_and_empty_streams_pass() {
        let plain = b"hello, hello, hello world, ".repeat(40);
        for (index, format) in Format::ALL.into_iter().enumerate() {
            let format_byte = u8::try_from(index).expect("three formats");
            let wire = compress(format, Level::DEFAULT, &plain);
            inflate(&case(format_byte, wire.clone()));
            inflate(&case(format_byte, wire[..wire.len() / 2].to_vec()));
            inflate(&case(format_byte, Vec::new()));
            inflate(&InflateCase {
                max_output: Some(100),
                max_ratio: Some(2),
                ..case(format_byte, wire)
            });
        }
        inflate(&case(0, b"not a gzip stream".to_vec()));
    }
}
