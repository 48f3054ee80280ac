//! The `window` target's body: the windowed encoder driven by arbitrary calls.

use crate::{decompress, BlockEnd, Format, Level, Limits, WindowedEncoder};

/// One call on the encoder in a [`WindowCase`].
#[derive(Debug)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct WindowCall {
    /// Low 3 bits: the flush mode; bit 3: reset first; bits 4-5: a new level (0 keeps it).
    pub op: u8,
    /// Repeats `data` this many times (mod 16) so that inputs reach past the window.
    pub repeat: u8,
    /// The call's input, before repeating.
    pub data: Vec<u8>,
}

/// One `window` input: a level, the calls (the first 64 are made), and `finish`'s input.
#[derive(Debug)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct WindowCase {
    /// The first level, as 1 + this modulo 3.
    pub level: u8,
    /// The calls before `finish`.
    pub calls: Vec<WindowCall>,
    /// `finish`'s input.
    pub last: Vec<u8>,
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

/// Drives the windowed encoder with arbitrary calls: any split, any flush mode per call,
/// resets and level changes between calls. After every flush that promises it, everything
/// given so far must decode from the output so far (a streaming raw inflate); at the end, the
/// stream decodes with ours and flate2, and a raw inflate started right after each full flush
/// decodes the rest.
///
/// # Panics
///
/// When an invariant does not hold.
pub fn window(case: &WindowCase) {
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
}

#[cfg(test)]
mod tests {
    use super::{window, WindowCall, WindowCase};

    #[test]
    fn every_flush_mode_reset_and_level_change_pass() {
        let text = b"hello, hello, hello world, ".repeat(40);
        // Flush modes 0-4, then a reset, then level changes with a full and a sync flush.
        let ops = [0, 1, 2, 3, 4, 8 | 3, 0x10 | 4, 0x30 | 3, 0x20];
        let calls = ops
            .iter()
            .enumerate()
            .map(|(i, &op)| WindowCall {
                op,
                repeat: u8::try_from(i).expect("few calls") * 3,
                data: text[i * 50..i * 50 + 100].to_vec(),
            })
            .collect();
        for level in 0..3 {
            window(&WindowCase {
                level,
                calls: Vec::new(),
                last: Vec::new(),
            });
        }
        window(&WindowCase {
            level: 1,
            calls,
            last: text,
        });
    }
}
