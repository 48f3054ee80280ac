//! Unit tests of `lz77.rs`.

use zipwire_testkit::{generate, DataKind};

use super::*;

/// Data whose parse alternates a literal and a short match, so that a block's token buffer
/// fills long before its symbol budget does.
fn literal_match_pairs(len: usize) -> Vec<u8> {
    let words = generate(DataKind::Random, 16 * 8, 1);
    let picks = generate(DataKind::Random, 2 * (len / 9 + 1), 2);
    let mut data = Vec::with_capacity(len + 9);
    for pick in picks.chunks_exact(2) {
        if data.len() >= len {
            break;
        }
        data.push(pick[0]);
        let word = usize::from(pick[1] % 16) * 8;
        data.extend_from_slice(&words[word..word + 8]);
    }
    data
}

/// Input bytes the tokens stand for.
fn covered(tokens: &Tokens) -> usize {
    let run_or_match = |&t: &u32| {
        if t & MATCH_FLAG == 0 {
            t as usize
        } else {
            (t & 0xff) as usize + 3
        }
    };
    tokens.list().iter().map(run_or_match).sum()
}

/// A block that ended because its token buffer was full: within both budgets, and its
/// tokens cover exactly the input parsed.
fn assert_ended_by_the_token_buffer(tokens: &Tokens, parsed: usize, data_len: usize) {
    assert!(parsed < data_len, "the whole input fit one block");
    assert!(tokens.list().len() <= MAX_TOKENS);
    assert!(
        tokens.list().len() + 1 >= MAX_TOKENS,
        "{} tokens",
        tokens.list().len()
    );
    assert!(tokens.symbols < MAX_SYMBOLS, "{} symbols", tokens.symbols);
    assert_eq!(covered(tokens), parsed);
}

#[test]
fn fast_parse_ends_a_block_when_its_token_buffer_is_full() {
    let data = literal_match_pairs(1 << 18);
    let mut table: Box<FastTable> = vec![0; 1 << FAST_BITS]
        .into_boxed_slice()
        .try_into()
        .expect("length matches FastTable");
    let mut tokens = Tokens::new();
    for greedy in [Greedy::Fastest, Greedy::Fast] {
        let bits = greedy.table_bits(data.len());
        table.fill(0);
        tokens.clear();
        let parsed = parse_fast(&data, 0, &mut table, (greedy, bits), &mut tokens);
        assert_ended_by_the_token_buffer(&tokens, parsed, data.len());
    }
}

proptest::proptest! {
    /// The match length is the common prefix, byte by byte, capped at `max`.
    #[test]
    fn match_len_is_the_common_prefix(
        seed in proptest::collection::vec(0u8..4, 300..700),
        a in 0usize..100,
        gap in 1usize..200,
    ) {
        // Few distinct bytes, so that common prefixes of every length occur.
        let b = a + gap;
        let max = seed.len() - b;
        let naive = (0..max).take_while(|&i| seed[a + i] == seed[b + i]).count();
        proptest::prop_assert_eq!(match_len(&seed, a, b, max), naive);
        // Copied forward byte by byte, as a match overlapping itself decodes.
        let mut repeat = seed.clone();
        for i in 0..max {
            repeat[b + i] = repeat[a + i];
        }
        proptest::prop_assert_eq!(match_len(&repeat, a, b, max), max);
    }
}

#[test]
fn room_is_the_symbol_budget_left_until_the_token_buffer_runs_out() {
    for budget in [SYMBOLS, MAX_SYMBOLS] {
        let mut tokens = Tokens::new();
        tokens.set_max_symbols(budget);
        // One-literal runs: as many tokens as symbols.
        for _ in 0..MAX_TOKENS - 2 {
            tokens.counted_literals(1);
        }
        assert_eq!(tokens.room(), budget - (MAX_TOKENS - 2));
        tokens.counted_literals(1);
        assert_eq!(tokens.room(), 1, "budget {budget}");
        tokens.counted_literals(1);
        assert_eq!(tokens.room(), 0, "budget {budget}");
    }
}

// Run with level 1's symbol budget, so the token buffer fills first; levels 2-3 use
// `SYMBOLS`, which a block reaches no later than its buffer.
#[test]
fn chain_parse_ends_a_block_when_its_token_buffer_is_full() {
    let data = literal_match_pairs(1 << 18);
    for lazy in [false, true] {
        let mut head = vec![0; 1 << HASH_BITS];
        let mut prev = vec![0; WINDOW];
        let mut tokens = Tokens::new();
        let params = ChainParams {
            depth: 8,
            nice: 64,
            lazy,
        };
        let base = WINDOW as u32 + 1;
        let parsed = parse_chain(&data, 0, (&mut head, &mut prev), base, &mut tokens, params);
        assert_ended_by_the_token_buffer(&tokens, parsed, data.len());
    }
}

#[test]
fn bucket_parse_ends_a_block_when_its_token_buffer_is_full() {
    let data = literal_match_pairs(1 << 18);
    let mut table: Box<BucketTable> = vec![[0; 2]; 1 << 12]
        .into_boxed_slice()
        .try_into()
        .expect("length matches BucketTable");
    let mut tokens = Tokens::new();
    let parsed = parse_bucket(&data, 0, &mut table, 0, &mut tokens);
    assert_ended_by_the_token_buffer(&tokens, parsed, data.len());
}
