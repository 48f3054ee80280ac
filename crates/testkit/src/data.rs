//! Test data: inputs of several kinds, made deterministically from a seed or by proptest,
//! and the call lengths that cut them.

use proptest::collection::vec;
use proptest::prelude::*;
use zipwire_adapt::rng::SplitMix64;

/// Largest input [`data`] produces.
pub const MAX_DATA_LEN: usize = 200_000;
/// The kinds of data [`data`] and [`generate`] produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataKind {
    /// Uniformly random bytes: incompressible.
    Random,
    /// A short pattern repeated with rare mutations, and runs of one byte.
    Repetitive,
    /// Words from a small vocabulary separated by spaces, punctuation and newlines.
    Text,
    /// Fixed-size little-endian records with counters and small integers.
    Binary,
    /// Segments of the other kinds one after another.
    Mixed,
}

impl DataKind {
    /// All kinds, for table tests.
    pub const ALL: [DataKind; 5] = [
        DataKind::Random,
        DataKind::Repetitive,
        DataKind::Text,
        DataKind::Binary,
        DataKind::Mixed,
    ];
}

/// Deterministically generates `len` bytes of `kind` from `seed`.
pub fn generate(kind: DataKind, len: usize, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix64::new(seed);
    let mut out = Vec::with_capacity(len);
    fill(kind, len, &mut rng, &mut out);
    debug_assert_eq!(out.len(), len);
    out
}

/// A generated input: its bytes and the recipe that made them.
///
/// Dereferences to `[u8]`. Its `Debug` prints the recipe and the first bytes rather than every
/// byte, so a failing proptest case stays readable and can be rebuilt with [`generate`].
#[derive(Clone, PartialEq, Eq)]
pub struct Data {
    kind: DataKind,
    seed: u64,
    bytes: Vec<u8>,
}

impl Data {
    /// Generates `len` bytes of `kind` from `seed` (as [`generate`] does).
    pub fn new(kind: DataKind, len: usize, seed: u64) -> Data {
        Data {
            kind,
            seed,
            bytes: generate(kind, len, seed),
        }
    }

    /// The kind of data.
    pub fn kind(&self) -> DataKind {
        self.kind
    }

    /// The seed it was generated from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes, owned.
    pub fn into_vec(self) -> Vec<u8> {
        self.bytes
    }
}

impl std::ops::Deref for Data {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head = &self.bytes[..self.bytes.len().min(32)];
        write!(
            f,
            "generate(DataKind::{:?}, {}, {:#x}) /* starts {:02x?} */",
            self.kind,
            self.bytes.len(),
            self.seed,
            head
        )
    }
}

/// Inputs of every [`DataKind`], 0 to [`MAX_DATA_LEN`] bytes, weighted toward small sizes.
///
/// Bytes are expanded from a (kind, length, seed) triple, so generation is fast, shrinking
/// works on the length, and a failing case prints as the [`generate`] call that rebuilds it.
pub fn data() -> BoxedStrategy<Data> {
    data_up_to(MAX_DATA_LEN)
}

/// Like [`data`], with at most `max` bytes.
pub fn data_up_to(max: usize) -> BoxedStrategy<Data> {
    (kind(), length(max), any::<u64>())
        .prop_map(|(kind, len, seed)| Data::new(kind, len, seed))
        .boxed()
}

/// Like [`data_up_to`], of one kind only (say, [`DataKind::Random`] for incompressible input).
pub fn data_of(kind: DataKind, max: usize) -> BoxedStrategy<Data> {
    (length(max), any::<u64>())
        .prop_map(move |(len, seed)| Data::new(kind, len, seed))
        .boxed()
}

/// Any [`DataKind`].
pub fn kind() -> BoxedStrategy<DataKind> {
    prop_oneof![
        Just(DataKind::Random),
        Just(DataKind::Repetitive),
        Just(DataKind::Text),
        Just(DataKind::Binary),
        Just(DataKind::Mixed),
    ]
    .boxed()
}

/// Lengths up to `max`: mostly under 4 KB, some up to 64 KB, a few beyond.
pub fn length(max: usize) -> BoxedStrategy<usize> {
    let cap = |n: usize| n.min(max);
    prop_oneof![
        1 => Just(0),
        4 => 1..=cap(256).max(1),
        4 => cap(256)..=cap(4096),
        2 => cap(4096)..=cap(65_536),
        1 => cap(65_536)..=max,
    ]
    .prop_map(move |n| n.min(max))
    .boxed()
}

/// Ways to cut an input of `len` bytes into calls: the returned lengths sum to `len`.
///
/// Mixes one big call, random cuts, random cuts with empty calls inserted, and (for inputs up
/// to 512 bytes) one byte per call.
pub fn splits(len: usize) -> BoxedStrategy<Vec<usize>> {
    let one_call = Just(vec![len]);
    let random = vec(0..=len, 1..16).prop_map(move |cuts| lengths_from_cuts(len, cuts));
    let with_empty =
        (vec(0..=len, 0..8), vec(any::<usize>(), 1..4)).prop_map(move |(cuts, empties)| {
            let mut lengths = lengths_from_cuts(len, cuts);
            for at in empties {
                let at = at % (lengths.len() + 1);
                lengths.insert(at, 0);
            }
            lengths
        });
    if len <= 512 {
        // One byte per call; an empty input is still one (empty) call.
        let bytewise = if len == 0 { vec![0] } else { vec![1; len] };
        prop_oneof![
            1 => Just(bytewise),
            3 => random,
            2 => with_empty,
            2 => one_call,
        ]
        .boxed()
    } else {
        prop_oneof![3 => random, 2 => with_empty, 2 => one_call].boxed()
    }
}

/// An input and a way to split it, for round-trip properties.
pub fn data_and_splits(max: usize) -> BoxedStrategy<(Data, Vec<usize>)> {
    data_up_to(max)
        .prop_flat_map(|input| {
            let len = input.len();
            (Just(input), splits(len))
        })
        .boxed()
}

/// Cuts `input` into consecutive slices of the given lengths.
///
/// # Panics
///
/// If the lengths do not sum to `input.len()` (a bug in the test, not in data).
pub fn split_input<'a>(input: &'a [u8], lengths: &[usize]) -> Vec<&'a [u8]> {
    assert_eq!(
        lengths.iter().sum::<usize>(),
        input.len(),
        "split lengths must cover the input"
    );
    let mut rest = input;
    lengths
        .iter()
        .map(|&n| {
            let (head, tail) = rest.split_at(n);
            rest = tail;
            head
        })
        .collect()
}

fn lengths_from_cuts(len: usize, mut cuts: Vec<usize>) -> Vec<usize> {
    cuts.sort_unstable();
    let mut lengths = Vec::with_capacity(cuts.len() + 1);
    let mut prev = 0;
    for cut in cuts {
        lengths.push(cut - prev);
        prev = cut;
    }
    lengths.push(len - prev);
    lengths
}

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "a",
    "to",
    "in",
    "is",
    "you",
    "that",
    "it",
    "he",
    "was",
    "for",
    "on",
    "are",
    "as",
    "with",
    "his",
    "they",
    "at",
    "be",
    "this",
    "have",
    "from",
    "compression",
    "proxy",
    "stream",
    "header",
    "encoding",
    "gzip",
    "deflate",
    "window",
    "<div>",
    "</div>",
    "{\"id\":",
    "\"name\":",
    "null,",
    "true,",
    "0",
    "42",
    "2026-05-19T08:00:00Z",
];

fn fill(kind: DataKind, len: usize, rng: &mut SplitMix64, out: &mut Vec<u8>) {
    let end = out.len() + len;
    match kind {
        DataKind::Random => {
            while out.len() < end {
                let word = rng.next_u64().to_le_bytes();
                let take = (end - out.len()).min(8);
                out.extend_from_slice(&word[..take]);
            }
        }
        DataKind::Repetitive => {
            let pattern: Vec<u8> = (0..rng.below(64) + 1)
                .map(|_| rng.next_u64() as u8)
                .collect();
            while out.len() < end {
                if rng.below(8) == 0 {
                    let run = rng.below(300) + 1;
                    let byte = rng.next_u64() as u8;
                    out.extend(std::iter::repeat_n(byte, run));
                } else {
                    out.extend_from_slice(&pattern);
                    if rng.below(16) == 0 {
                        out.push(rng.next_u64() as u8);
                    }
                }
            }
        }
        DataKind::Text => {
            let mut words_on_line = 0;
            while out.len() < end {
                out.extend_from_slice(WORDS[rng.below(WORDS.len())].as_bytes());
                words_on_line += 1;
                match rng.below(20) {
                    0 => out.extend_from_slice(b". "),
                    1 => out.extend_from_slice(b", "),
                    _ if words_on_line > 8 + rng.below(6) => {
                        out.push(b'\n');
                        words_on_line = 0;
                    }
                    _ => out.push(b' '),
                }
            }
        }
        DataKind::Binary => {
            let mut id = rng.next_u64() as u32 & 0xffff;
            let tag: [u8; 4] = (rng.next_u64() as u32).to_le_bytes();
            while out.len() < end {
                id = id.wrapping_add(1);
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&(rng.below(100) as u16).to_le_bytes());
                out.push(rng.below(4) as u8);
                out.push(0);
                out.extend_from_slice(&tag);
                out.extend_from_slice(&(rng.below(1000) as i32 - 500).to_le_bytes());
            }
        }
        DataKind::Mixed => {
            while out.len() < end {
                let segment = (rng.below(8192) + 1).min(end - out.len());
                let kind = [
                    DataKind::Random,
                    DataKind::Repetitive,
                    DataKind::Text,
                    DataKind::Binary,
                ][rng.below(4)];
                fill(kind, segment, rng, out);
            }
        }
    }
    out.truncate(end);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_gives_the_exact_length_for_every_kind() {
        for kind in DataKind::ALL {
            for len in [0, 1, 7, 100, 4097, 70_000] {
                assert_eq!(generate(kind, len, 3).len(), len, "{kind:?} {len}");
            }
        }
    }

    #[test]
    fn generate_is_deterministic_and_seeded() {
        assert_eq!(
            generate(DataKind::Mixed, 5000, 1),
            generate(DataKind::Mixed, 5000, 1)
        );
        assert_ne!(
            generate(DataKind::Random, 64, 1),
            generate(DataKind::Random, 64, 2)
        );
    }

    #[test]
    fn data_debug_prints_the_recipe_not_the_bytes() {
        let shown = format!("{:?}", Data::new(DataKind::Random, 100_000, 0x2a));
        assert!(
            shown.starts_with("generate(DataKind::Random, 100000, 0x2a)"),
            "{shown}"
        );
        assert!(shown.len() < 300, "{shown}");
    }

    #[test]
    fn text_looks_like_text() {
        let text = generate(DataKind::Text, 10_000, 9);
        assert!(text.iter().all(|b| b.is_ascii()));
        assert!(text.contains(&b'\n') && text.contains(&b' '));
    }

    #[test]
    fn split_input_covers_the_input_in_order() {
        let input: Vec<u8> = (0..10).collect();
        let parts = split_input(&input, &[0, 3, 0, 7]);
        assert_eq!(parts.len(), 4);
        assert_eq!(parts.concat(), input);
        assert!(parts[0].is_empty() && parts[2].is_empty());
    }

    #[test]
    #[should_panic(expected = "must cover")]
    fn split_input_rejects_lengths_that_do_not_sum() {
        split_input(b"abc", &[1, 1]);
    }

    #[test]
    fn cuts_become_lengths() {
        assert_eq!(lengths_from_cuts(10, vec![7, 2, 2]), vec![2, 0, 5, 3]);
        assert_eq!(lengths_from_cuts(0, vec![]), vec![0]);
    }

    proptest! {
        #[test]
        fn splits_always_sum_to_the_length((len, lengths) in (0usize..2000).prop_flat_map(|n| (Just(n), splits(n)))) {
            prop_assert_eq!(lengths.iter().sum::<usize>(), len);
            prop_assert!(!lengths.is_empty());
        }

        #[test]
        fn data_respects_its_cap(input in data_up_to(1000)) {
            prop_assert!(input.len() <= 1000);
        }

        #[test]
        fn data_rebuilds_from_its_recipe(input in data_of(DataKind::Mixed, 10_000)) {
            prop_assert_eq!(input.kind(), DataKind::Mixed);
            prop_assert_eq!(generate(input.kind(), input.len(), input.seed()), input.as_bytes());
        }
    }
}
