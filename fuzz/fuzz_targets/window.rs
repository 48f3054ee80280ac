//! Drive the windowed encoder with arbitrary calls: any split, any flush mode per call, resets
//! and level changes between calls. After every flush that promises it, everything given so far
//! must decode from the output so far (a streaming raw inflate); at the end, the stream decodes
//! with ours and flate2, and a raw inflate started right after each full flush decodes the rest.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use zipwire_codec::{decompress, BlockEnd, Format, Level, Limits, WindowedEncoder};

#[derive(Arbitrary, Debug)]
struct Call {
    /// Low 3 bits: the flush mode; bit 3: reset first; bits 4-5: a new level (0 keeps it).
    op: u8,
    /// Repeats `data` this many times (mod 16) so that inputs reach past the window.
    repeat: u8,
    data: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
struct Case {
    level: u8,
    calls: Vec<Call>,
    last: Vec<u8>,
}

const ENDS: [BlockEnd; 5] = [
    BlockEnd::Open,
    BlockEnd::Block,
    BlockEnd::Partial,
    BlockEnd::Sync,
    BlockEnd::Full,
];

/// Raw-inflates as much of `wire` as it can: a stream cut after a flush is not an error.
fn inflate_so_far(wire: &[u8]) -> Vec<u8> {
    let mut inflate = flate2::Decompress::new(false);
    let mut plain = Vec::new();
    loop {
        let before = (inflate.total_in(), inflate.total_out());
        let at = inflate.total_in() as usize;
        plain.reserve(64 * 1024);
        let status = inflate
            .decompress_vec(&wire[at..], &mut plain, flate2::FlushDecompress::Sync)
            .expect("flate2 on the windowed encoder's output");
        if status == flate2::Status::StreamEnd
            || (inflate.total_in(), inflate.total_out()) == before
        {
            return plain;
        }
    }
}

fn level(n: u8) -> Level {
    Level::try_from(n % 3 + 1).expect("1..=3")
}

fuzz_target!(|case: Case| {
    let mut enc = WindowedEncoder::new(level(case.level)).expect("level 1-3");
    let (mut wire, mut given, mut full_flushes) = (Vec::new(), Vec::new(), Vec::new());
    for call in case.calls.iter().take(64) {
        if call.op & 8 != 0 {
            enc.reset();
            (wire, given, full_flushes) = (Vec::new(), Vec::new(), Vec::new());
        }
        if call.op >> 4 & 3 != 0 {
            enc.set_level(level((call.op >> 4 & 3) - 1))
                .expect("level 1-3");
        }
        let input = call.data.repeat(usize::from(call.repeat % 16).max(1));
        let end = ENDS[usize::from(call.op & 7) % ENDS.len()];
        enc.encode(&input, end, &mut wire).expect("live stream");
        given.extend_from_slice(&input);
        assert_eq!(enc.total_in(), given.len() as u64);
        if matches!(end, BlockEnd::Partial | BlockEnd::Sync | BlockEnd::Full) {
            assert!(inflate_so_far(&wire) == given, "{end:?}: not all decodable");
        }
        if end == BlockEnd::Full {
            full_flushes.push((wire.len(), given.len()));
        }
    }
    enc.finish(&case.last, &mut wire).expect("live stream");
    given.extend_from_slice(&case.last);
    let ours = decompress(Format::Raw, &wire, Limits::default()).expect("our decoder");
    assert!(ours == given, "our decoder: wrong output");
    assert!(inflate_so_far(&wire) == given, "flate2: wrong output");
    for (at, given_at) in full_flushes {
        assert!(
            inflate_so_far(&wire[at..]) == given[given_at..],
            "inflate from the full flush at {at}"
        );
    }
});
