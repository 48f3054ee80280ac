//! The windowed encoder against zlib's streaming contract: any split of the input into calls,
//! any flush mode per call, resets and level changes between calls; what each flush promises
//! holds for a streaming inflate (flate2), and the whole stream decodes with both decoders.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use zipwire_codec::{decompress, BlockEnd, Format, Level, Limits, WindowedEncoder};
use zipwire_testkit::{data_and_splits, generate, split_input, DataKind};

/// Inputs up to 200 KB, so that histories slide several times.
const MAX_PROP_LEN: usize = 200_000;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 64,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

const ENDS: [BlockEnd; 5] = [
    BlockEnd::Open,
    BlockEnd::Block,
    BlockEnd::Partial,
    BlockEnd::Sync,
    BlockEnd::Full,
];

/// What happens before a call.
#[derive(Clone, Copy, Debug)]
enum Step {
    Nothing,
    Reset,
    SetLevel(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => Just(Step::Nothing),
        1 => Just(Step::Reset),
        2 => (1..=3u8).prop_map(Step::SetLevel),
    ]
}

fn level(n: u8) -> Level {
    Level::try_from(n).expect("test levels are 1-3")
}

/// Inflates as much of `wire` as it can, as a streaming raw inflate fed everything so far: a
/// stream cut after a flush is not an error, only the data after the cut is missing.
fn inflate_so_far(wire: &[u8]) -> Result<Vec<u8>, String> {
    let mut inflate = flate2::Decompress::new(false);
    let mut plain = Vec::new();
    loop {
        let before = (inflate.total_in(), inflate.total_out());
        let at = inflate.total_in() as usize;
        plain.reserve(64 * 1024);
        let status = inflate
            .decompress_vec(&wire[at..], &mut plain, flate2::FlushDecompress::Sync)
            .map_err(|e| format!("flate2 at input byte {}: {e}", inflate.total_in()))?;
        if status == flate2::Status::StreamEnd
            || (inflate.total_in(), inflate.total_out()) == before
        {
            return Ok(plain);
        }
    }
}

/// One stream's output and what it must decode to: a reset starts a new one.
#[derive(Default)]
struct Stream {
    wire: Vec<u8>,
    given: Vec<u8>,
    /// After each full flush: (output bytes, input bytes) so far.
    full_flushes: Vec<(usize, usize)>,
}

impl Stream {
    fn check_whole(&self) -> Result<(), String> {
        let ours = decompress(Format::Raw, &self.wire, Limits::default())
            .map_err(|e| format!("zipwire decoder: {e}"))?;
        prop_check(ours == self.given, "zipwire decoder: wrong output")?;
        let theirs = inflate_so_far(&self.wire)?;
        prop_check(theirs == self.given, "flate2: wrong output")?;
        for &(at, given_at) in &self.full_flushes {
            // A raw inflate started right after a full flush has an empty window.
            let rest = inflate_so_far(&self.wire[at..])?;
            prop_check(
                rest == self.given[given_at..],
                &format!("inflate from the full flush at output byte {at}"),
            )?;
        }
        Ok(())
    }
}

fn prop_check(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(what.to_string())
    }
}

/// Runs the calls; checks every flush's promise as it goes and every stream at its end.
fn run_calls(
    first_level: u8,
    calls: &[&[u8]],
    plan: &[(usize, Step)],
    finish_with_last: bool,
) -> Result<(), String> {
    let mut enc = WindowedEncoder::new(level(first_level)).map_err(|e| e.to_string())?;
    let mut stream = Stream::default();
    let (body, last) = match calls.split_last() {
        Some((last, body)) if finish_with_last => (body, *last),
        _ => (calls, &[][..]),
    };
    for (i, call) in body.iter().enumerate() {
        let (end, step) = plan[i % plan.len()];
        let end = ENDS[end];
        match step {
            Step::Nothing => {}
            Step::Reset => {
                enc.reset();
                stream = Stream::default();
            }
            Step::SetLevel(n) => enc.set_level(level(n)).map_err(|e| e.to_string())?,
        }
        enc.encode(call, end, &mut stream.wire)
            .map_err(|e| e.to_string())?;
        stream.given.extend_from_slice(call);
        prop_check(
            enc.total_in() == stream.given.len() as u64,
            "total_in counts every byte since the reset",
        )?;
        if matches!(end, BlockEnd::Partial | BlockEnd::Sync | BlockEnd::Full) {
            let so_far = inflate_so_far(&stream.wire)?;
            prop_check(
                so_far == stream.given,
                &format!("call {i} ({end:?}): the output so far decodes to the input so far"),
            )?;
        }
        if matches!(end, BlockEnd::Sync | BlockEnd::Full) {
            prop_check(
                stream.wire.ends_with(&[0, 0, 0xff, 0xff]),
                "a sync or full flush ends with an empty stored block",
            )?;
        }
        if end == BlockEnd::Full {
            stream
                .full_flushes
                .push((stream.wire.len(), stream.given.len()));
        }
    }
    enc.finish(last, &mut stream.wire)
        .map_err(|e| e.to_string())?;
    stream.given.extend_from_slice(last);
    stream.check_whole()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_calls_flushes_resets_and_levels_round_trip(
        (data, lengths) in data_and_splits(MAX_PROP_LEN),
        first_level in 1..=3u8,
        plan in prop::collection::vec((0..ENDS.len(), step()), 1..12),
        finish_with_last in any::<bool>(),
    ) {
        let calls = split_input(data.as_bytes(), &lengths);
        if let Err(problem) = run_calls(first_level, &calls, &plan, finish_with_last) {
            return Err(TestCaseError::fail(format!("{data:?} {lengths:?}: {problem}")));
        }
    }
}

/// Packets as an SSH connection sends them: each one repeats much of what came before, and
/// each is followed by a partial flush. Every level must do much better than the packets
/// compressed alone, which is what the stateless encoder does (on this data, 512-byte packets
/// with the window come out 30-40% smaller, about zlib level 1's size).
#[test]
fn small_flushed_packets_match_into_earlier_packets() {
    let data = generate(DataKind::Text, 64 * 1024, 11);
    for n in 1..=3 {
        let mut alone = 0;
        let mut windowed = WindowedEncoder::new(level(n)).expect("level 1-3");
        let mut wire = Vec::new();
        for packet in data.chunks(512) {
            let mut single = WindowedEncoder::new(level(n)).expect("level 1-3");
            let mut out = Vec::new();
            single
                .encode(packet, BlockEnd::Partial, &mut out)
                .expect("live");
            alone += out.len();
            windowed
                .encode(packet, BlockEnd::Partial, &mut wire)
                .expect("live");
        }
        windowed.finish(&[], &mut wire).expect("live");
        assert!(
            wire.len() * 4 < alone * 3,
            "level {n}: {} bytes with the window, {alone} without",
            wire.len()
        );
        assert_eq!(inflate_so_far(&wire).expect("valid"), data);
    }
}
