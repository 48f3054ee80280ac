//! Unit tests of `member.rs`.

use super::*;
use zipwire_codec::{decompress, Limits};
use zipwire_testkit::{generate, DataKind};

/// Options for gzip level `level` (with the smallest header) on `threads` threads.
pub(super) fn options(level: u8, threads: usize, block_size: usize) -> MemberOptions {
    MemberOptions {
        level: Level::try_from(level).unwrap(),
        threads,
        header: gzip::Header::minimal(level),
        block_size,
    }
}

fn member(data: &[u8], level: u8, threads: usize) -> Vec<u8> {
    let options = options(level, threads, BLOCK);
    let mut out = Vec::new();
    let totals = compress(data, &mut out, &options, &mut |_| {}).unwrap();
    assert_eq!(totals.bytes_in, data.len() as u64);
    assert_eq!(totals.bytes_out, out.len() as u64);
    out
}

#[test]
fn written_outputs_are_kept_only_where_jobs_reuse_them() {
    // Each written block's output buffer comes back to `next_job`. Stateless levels
    // reuse it for the next job; stateful ones never do, so keeping it would hold the
    // whole output until the member ends.
    let data = generate(DataKind::Random, 40_000, 44);
    for stateful in [false, true] {
        let mut input = &data[..];
        let mut blocks = Blocks::new(&mut input, 1000, stateful);
        let (mut buffer, mut out) = (blocks.input_buffer(), blocks.output_buffer());
        // Spares another member left in the process-wide pool.
        let before = blocks.spare_outputs.len();
        let mut jobs = 0;
        while let Some(job) = blocks.next_job(buffer, out).unwrap() {
            jobs += 1;
            buffer = job.data;
            // What `Sink::write` hands back: this block's output, written into.
            out = vec![7; 1000];
            assert!(blocks.spare_outputs.len() <= before, "stateful {stateful}");
        }
        assert_eq!(jobs, 40);
        let kept = blocks.spare_outputs.len() - before;
        assert_eq!(kept, usize::from(!stateful), "stateful {stateful}");
    }
}

#[test]
fn a_member_does_not_depend_on_the_buffers_an_earlier_one_left() {
    // Buffers go from one member to the next (`spare`): full of random bytes or of text,
    // and longer than the next member's blocks, they must change nothing in its output.
    let noise = generate(DataKind::Random, 3 * BLOCK + 5000, 41);
    let text = generate(DataKind::Text, 3 * BLOCK + 7000, 42);
    let data = generate(DataKind::Text, 2 * BLOCK + 123, 43);
    for (level, threads) in [(1, 2), (1, 1), (6, 2)] {
        member(&noise, level, threads);
        let after_noise = member(&data, level, threads);
        member(&text, 9 - level, threads);
        let after_text = member(&data, level, threads);
        assert!(after_noise == after_text, "-{level} -p{threads}");
        let plain = decompress(Format::Gzip, &after_text, Limits::default()).unwrap();
        assert!(plain == data, "-{level} -p{threads} round trip");
    }
}

#[test]
fn gzip_one_and_two_use_the_codecs_level_two() {
    let data = generate(DataKind::Text, BLOCK + 4_321, 3);
    let deflate = |level: u8| {
        let out = member(&data, level, 1);
        out[10..].to_vec() // after the minimal header
    };
    let codec_two = {
        let mut encoder = Encoder::new(Format::Raw, Level::FAST).unwrap();
        let mut out = Vec::new();
        let mut scratch = Scratch::new();
        encoder
            .encode(&mut scratch, &data[..BLOCK], &mut out)
            .unwrap();
        encoder
            .finish(&mut scratch, &data[BLOCK..], &mut out)
            .unwrap();
        out
    };
    for level in [1, 2] {
        let body = deflate(level);
        assert!(body.starts_with(&codec_two), "-{level}");
    }
    assert!(!deflate(3).starts_with(&codec_two));
}

#[test]
fn output_is_identical_for_any_thread_count_and_decodes() {
    let mut data = generate(DataKind::Text, 3 * BLOCK + 12_345, 7);
    data.extend(generate(DataKind::Random, BLOCK / 2, 8));
    for level in [1, 3, 6] {
        let one = member(&data, level, 1);
        for threads in [2, 3, 8] {
            assert!(
                one == member(&data, level, threads),
                "level {level} ×{threads}"
            );
        }
        assert_eq!(
            decompress(Format::Gzip, &one, Limits::default()).unwrap(),
            data
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Many small blocks: every seam (sync markers, the final block, combined CRC-32s,
    /// dictionaries at 4-9) decodes with flate2 and gives the same bytes for any thread
    /// count.
    #[test]
    fn small_blocks_stitch_into_one_valid_member(
        input in zipwire_testkit::data_up_to(120_000),
        block_size in 1usize..40_000,
        level in proptest::sample::select(vec![1u8, 2, 3, 4, 6, 9]),
    ) {
        let member = |threads| {
            let options = options(level, threads, block_size);
            let mut out = Vec::new();
            compress(&input[..], &mut out, &options, &mut |_| {}).unwrap();
            out
        };
        let one = member(1);
        proptest::prop_assert!(one == member(3));
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&one[..]), &mut plain)
            .unwrap();
        proptest::prop_assert!(plain == *input);
    }
}

#[test]
fn block_boundaries_and_empty_input_round_trip() {
    for len in [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK] {
        let data = generate(DataKind::Binary, len, len as u64);
        for level in [1, 9] {
            let wire = member(&data, level, 2);
            let back = decompress(Format::Gzip, &wire, Limits::default()).unwrap();
            assert!(back == data, "len {len} level {level}");
        }
    }
}

#[test]
fn a_stateful_block_does_not_depend_on_the_spare_buffer_it_gets() {
    // zlib writes a second sync marker when a flush fills its output room exactly, so a
    // spare buffer of just the output's size would change the bytes.
    let data = generate(DataKind::Random, 200_000, 12);
    let job = |out| Job {
        data: data.clone(),
        out,
        dictionary: Vec::new(),
        last: false,
    };
    let mut worker = Worker::new(Level::try_from(6).unwrap());
    let fresh = worker.run(job(Vec::new())).0.deflate;
    for room in [
        fresh.len() - 1,
        fresh.len(),
        fresh.len() + 1,
        2 * fresh.len(),
    ] {
        let spare = Vec::with_capacity(room);
        assert!(worker.run(job(spare)).0.deflate == fresh, "room {room}");
    }
}

#[test]
fn short_and_interrupted_reads_change_nothing() {
    /// Hands out 1-7 bytes per read, and an interruption before every fifth read.
    struct Trickle<'a> {
        data: &'a [u8],
        calls: usize,
    }
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls % 5 == 0 {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(self.data.len()).min(1 + self.calls % 7);
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }
    let data = generate(DataKind::Text, 20_000, 5);
    for (level, threads, block_size) in [(1, 1, 3_000), (1, 2, 3_000), (6, 2, 4_096)] {
        let options = options(level, threads, block_size);
        let run = |input: &mut (dyn Read + Send)| {
            let mut out = Vec::new();
            compress(input, &mut out, &options, &mut |_| {}).unwrap();
            out
        };
        let whole = run(&mut &data[..]);
        let trickled = run(&mut Trickle {
            data: &data,
            calls: 0,
        });
        assert!(whole == trickled, "level {level} ×{threads}");
    }
}

#[test]
fn a_read_error_is_reported_as_such() {
    struct Failing(usize);
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::other("disk on fire"));
            }
            let n = buf.len().min(self.0);
            buf[..n].fill(b'a');
            self.0 -= n;
            Ok(n)
        }
    }
    // Whole blocks, and (with several threads, every one of which must stop) small blocks
    // failing at, just past and well after a block's end.
    let cases = [(1, BLOCK, 3 * BLOCK)]
        .into_iter()
        .chain([5_000, 16_384, 16_385, 100_000].map(|left| (6, 16_384, left)));
    for (level, block_size, left) in cases {
        for threads in [1, 2, 3, 8] {
            let options = options(level, threads, block_size);
            let mut out = Vec::new();
            let result = compress(Failing(left), &mut out, &options, &mut |_| {});
            assert!(
                matches!(result, Err(StreamError::Read(_))),
                "-{level} -p{threads} after {left}: {result:?}"
            );
            // Nothing that looks like a complete member was written.
            assert!(decompress(Format::Gzip, &out, Limits::default()).is_err());
        }
    }
}
