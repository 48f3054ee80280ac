//! The bucket matcher of the windowed level 3: per hash of a 5-byte string, the four newest
//! positions, each tagged with 16 more bits of the string's hash, and the last match's
//! distance; greedy.
//!
//! # Why not hash chains
//!
//! The windowed level 3 serves zlib's levels 4-6 in the drop-in zlib, and so `scp -C` (OpenSSH
//! asks for level 6 and flushes after every packet). With hash chains (8 candidates, lazy) the
//! search took 78% of an `scp -C` client's CPU. Chains walk a linked list of dependent loads
//! and insert every position; a bucket holds its candidates side by side in one 16-byte entry,
//! read in one load, and its tags reject most wrong candidates without loading their bytes.
//! On large/ in flushed 1-16 KB packets (`window_bench`, one core, 2026-11-26, one run per
//! row on a quiet machine; zlib-rs level 6 ran beside every one at 81-83 MB/s):
//!
//! | matcher                                             | ratio | MB/s |
//! |-----------------------------------------------------|------:|-----:|
//! | chains, 8 candidates, lazy (as zlib)                | 4.125 |   97 |
//! | chains, 4 candidates, greedy                        | 3.988 |  154 |
//! | chains, 1 candidate, greedy                         | 3.755 |  179 |
//! | buckets of 4, greedy, last distance too (this one)  | 4.003 |  197 |
//! | the same without the last distance                  | 3.976 |  211 |
//! | buckets of 4, lazy below 6 bytes                    | 3.994 |  203 |
//! | buckets of 8 (2,048 of them)                        | 4.030 |  160 |
//! | buckets of 2                                        | 3.824 |  250 |
//! | zlib-rs level 6                                     | 4.322 |   82 |
//!
//! So 0.93 of zlib level 6's ratio at 2.4 times its speed (on web/ + canterbury/: 0.92, 2.3
//! times). The JSON alone keeps 0.83 of zlib's ratio (the chains: 0.85): its long repeats
//! suit zlib's 128-deep chains. The choices measured with it: a 5-byte hash (4 bytes: 3.961
//! at 8% less speed; 6: 3.886), insertion of a match's first 8 positions and its last 2 (4
//! and 2: 0.6% less ratio at the same speed), a 32-byte match ending the search (no limit:
//! 3% slower for 0.3% more ratio; but see below), and three positions hashed from one load per step, as
//! level 2 does (5% slower here: the step's candidates are too many to check without
//! branches).
//!
//! Measured the same day, these make the matcher faster without finding less (`window_bench
//! --only "windowed 3"` on large/, builds alternating, medians of 3-4 rounds): candidates from
//! a mask of agreeing tags (+6%), literals counted as the parse passes them (+1.5%), a bucket
//! kept as two whole words (+2.3%), all three byte for byte the same output; then the last
//! distance tried before the bucket (+3%, ratio 4.006 on large/, 5.060 on web/ +
//! canterbury/): 198 to 223 MB/s in all. With the last distance first, a 64-byte match ends
//! the search at no cost in speed: ratio 4.015 and 5.066 (128 bytes: 4.017, 1% slower; no
//! limit: 4.018, 2% slower).
//!
//! Positions are stored modulo 2^16 with the caller's `origin`, as in
//! [`super::parse_fast_windowed`]: entries stay valid from call to call without clearing, and a
//! stale or aliased one is caught by the window check and the byte comparison.

use super::{end_literals, match_length, read_u64, Tokens, MIN_MATCH, WINDOW};

/// Bits of the bucket index: 4,096 buckets.
const BUCKET_BITS: u32 = 12;
/// Positions per bucket, newest first.
const WAYS: usize = 4;
/// Bytes each hash covers.
const HASH_BYTES: u32 = 5;
/// Positions after a match's start that are inserted (its last two are too).
const INSERT: usize = 8;
/// A match this long ends the search of a position.
const NICE: usize = 64;

/// The bucket matcher's table: 4,096 buckets of four tagged positions, 64 KB. Each entry is
/// a position (mod 2^16, low half) and 16 more bits of its string's hash (high half). A
/// bucket is two words, ways 0 and 2 in the first and 1 and 3 in the second, so that an
/// insertion writes whole words and reads none back at an offset (see [`insert`]).
pub(crate) type BucketTable = [[u64; WAYS / 2]; 1 << BUCKET_BITS];

/// Greedy parse over a [`BucketTable`] kept across calls: `data[..pos]` is history the parse
/// may match into, and `origin` is the stream offset of `data[0]` modulo 2^16, added to every
/// position stored or looked up. Parses from `pos` until `tokens` is full or the input ends,
/// and returns the position reached.
pub(crate) fn parse_bucket(
    data: &[u8],
    mut pos: usize,
    table: &mut BucketTable,
    origin: u16,
    tokens: &mut Tokens,
) -> usize {
    let origin = usize::from(origin);
    let len = data.len();
    // Leave room for 16-byte reads at `pos`; the tail goes out as literals.
    let limit = len.saturating_sub(16);
    let mut lit_start = pos;
    // The parse stops where the literals since the last match would overfill the block.
    let mut stop = limit.min(lit_start + tokens.room());
    let mut rep = 0usize;
    while pos < stop {
        let (h, e) = entry(data, pos, origin);
        let cands = insert(table, h, e);
        // The last match's distance is a fifth candidate, tried first: structured data (JSON,
        // tables) repeats at a stride, and the bucket's newest positions often miss it. A bucket
        // candidate must be longer to replace it. (Tried after the bucket instead: 3% slower; ratio
        // 4.003 against 4.006 on large/, 5.073 against 5.060 on web/ + canterbury/.)
        let (mut mlen, mut dist) = match extend(data, pos, rep, MIN_MATCH - 1) {
            Some(l) => (l, rep),
            None => (MIN_MATCH - 1, 0),
        };
        if mlen < NICE {
            (mlen, dist) = longest(data, cands, e, (pos, origin), (mlen, dist));
        }
        if dist == 0 {
            // Counted as the parse passes it: a loop over the run when it ends would exit at
            // a coin toss per match.
            tokens.litlen[usize::from(data[pos])] += 1;
            pos += 1;
            // After 64 misses in a row, skip ahead further the longer the run, as the greedy
            // levels do: data that does not match is probably not going to.
            let misses = pos - lit_start;
            if misses > 64 {
                let skip_to = (pos + ((misses - 64) >> 4).min(32)).min(stop);
                tokens.count(&data[pos..skip_to]);
                pos = skip_to;
            }
            continue;
        }
        tokens.counted_literals(pos - lit_start);
        tokens.matched(mlen, dist);
        rep = dist;
        let end = pos + mlen;
        let last = end.min(limit);
        let head_end = (pos + INSERT).min(last);
        for p in (pos + 1..head_end).chain(last.saturating_sub(2).max(head_end)..last) {
            let (h, e) = entry(data, p, origin);
            insert(table, h, e);
        }
        pos = end;
        lit_start = pos;
        stop = limit.min(lit_start + tokens.room());
    }
    end_literals(data, pos, (lit_start, pos), pos >= limit, tokens)
}

/// The bucket index and the entry of position `p` (`p + 8 <= data.len()`).
#[inline(always)]
fn entry(data: &[u8], p: usize, origin: usize) -> (usize, u32) {
    let key = (read_u64(data, p) << (64 - 8 * HASH_BYTES)).wrapping_mul(0xcf1b_bcdc_b7a5_6463);
    let tag = (key >> 16) as u32 & 0xffff_0000;
    let index = (key >> (64 - BUCKET_BITS)) as usize;
    (index, tag | (p.wrapping_add(origin) as u32 & 0xffff))
}

/// Puts entry `e` first in bucket `h`, dropping the oldest; returns the bucket as it was.
#[inline(always)]
fn insert(table: &mut BucketTable, h: usize, e: u32) -> [u32; WAYS] {
    // Ways 0 and 2 in the first word, 1 and 3 in the second (low half first): the new way 0
    // is `e`, way 2 the old way 1, and the second word is the old first word as it was. With
    // ways 0-1 and 2-3 in the words instead, the shifted second word was read back at an
    // offset of 4 bytes, across two stores (2.3% slower).
    let [a, b] = table[h];
    table[h] = [b << 32 | u64::from(e), a];
    [a as u32, b as u32, (a >> 32) as u32, (b >> 32) as u32]
}

/// The longest match at `p` among `best` (a length and distance found already; distance 0
/// for none) and the bucket's candidates whose tag equals `e`'s, the earlier on a tie (`best`,
/// then the newest candidate): `(length, distance)`, distance 0 if none reaches
/// [`MIN_MATCH`]. `p + 16 <= data.len()`.
#[inline(always)]
fn longest(
    data: &[u8],
    cands: [u32; WAYS],
    e: u32,
    (p, origin): (usize, usize),
    mut best: (usize, usize),
) -> (usize, usize) {
    let here = p.wrapping_add(origin) as u16;
    // Which candidates' tags agree, as one mask: one branch on "none" and one per candidate
    // worth measuring, where a branch per candidate mispredicted in turn (6% of the windowed
    // level 3's speed on large/).
    let mut agree = 0u32;
    for (i, c) in cands.iter().enumerate() {
        agree |= u32::from((c ^ e) < 0x10000) << i;
    }
    while agree != 0 {
        let c = cands[agree.trailing_zeros() as usize & (WAYS - 1)];
        agree &= agree - 1;
        let d = usize::from(here.wrapping_sub(c as u16));
        if let Some(l) = extend(data, p, d, best.0) {
            best = (l, d);
            if l >= NICE {
                break;
            }
        }
    }
    best
}

/// The length of the match at `p`, `d` back, if `d` is within reach and the match is longer
/// than `than` (at least [`MIN_MATCH`]). `p + 16 <= data.len()`.
#[inline(always)]
fn extend(data: &[u8], p: usize, d: usize, than: usize) -> Option<usize> {
    if d.wrapping_sub(1) >= p.min(WINDOW) || p + than >= data.len() {
        return None;
    }
    // Only a candidate that also matches the byte after the best so far can beat it.
    if data[p - d + than] != data[p + than] {
        return None;
    }
    let x = read_u64(data, p - d) ^ read_u64(data, p);
    if x as u32 != 0 {
        return None;
    }
    let l = match_length(data, p, d, x);
    (l > than).then_some(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::lz77::MATCH_FLAG;

    fn empty_table() -> Box<BucketTable> {
        vec![[0; WAYS / 2]; 1 << BUCKET_BITS]
            .into_boxed_slice()
            .try_into()
            .expect("length matches BucketTable")
    }

    /// Replays the tokens over `data[start..]` with `data[..start]` as history.
    fn replay(data: &[u8], start: usize, tokens: &Tokens) -> Vec<u8> {
        let mut out = data[..start].to_vec();
        for &t in tokens.list() {
            if t & MATCH_FLAG == 0 {
                let at = out.len();
                out.extend_from_slice(&data[at..at + t as usize]);
            } else {
                let (len, dist) = ((t & 0xff) as usize + 3, ((t >> 8) & 0x7fff) as usize + 1);
                for _ in 0..len {
                    out.push(out[out.len() - dist]);
                }
            }
        }
        out
    }

    #[test]
    fn tokens_rebuild_the_input_and_matches_reach_into_the_history() {
        let text = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 40_000, 3);
        // The second half repeats the first: with the first half as history, the parse of the
        // second is almost all matches.
        let data = [&text[..20_000], &text[..20_000]].concat();
        let mut table = empty_table();
        let mut tokens = Tokens::new();
        tokens.set_max_symbols(super::super::SYMBOLS);
        let mut second_half_tokens = 0;
        // The first half fills the table, then the second half matches into it.
        for (from, to) in [(0, 20_000), (20_000, 40_000)] {
            let mut pos = from;
            while pos < to {
                tokens.clear();
                let start = pos;
                pos = parse_bucket(&data[..to], pos, &mut table, 0, &mut tokens);
                assert!(pos > start, "the parse moves on");
                assert_eq!(replay(&data[..pos], start, &tokens), &data[..pos]);
                if from > 0 {
                    second_half_tokens += tokens.list().len();
                }
            }
        }
        // 20 KB of repeat in matches of up to 258 bytes: under 200 tokens.
        assert!(second_half_tokens < 200, "{second_half_tokens} tokens");
    }

    #[test]
    fn literal_counts_are_those_of_the_tokens() {
        // Text (short runs between matches), then random bytes (long runs, skipped ahead),
        // then text again, in blocks that end on their token and symbol budgets.
        let text = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 30_000, 5);
        let noise = zipwire_testkit::generate(zipwire_testkit::DataKind::Random, 30_000, 6);
        let data = [&text[..], &noise[..], &text[..15_000]].concat();
        let mut table = empty_table();
        let mut tokens = Tokens::new();
        tokens.set_max_symbols(super::super::SYMBOLS);
        let mut pos = 0;
        let mut blocks = 0;
        while pos < data.len() {
            tokens.clear();
            let start = pos;
            pos = parse_bucket(&data, pos, &mut table, 0, &mut tokens);
            let mut litlen = [0u32; 256];
            let mut at = start;
            for &t in tokens.list() {
                if t & MATCH_FLAG == 0 {
                    for &b in &data[at..at + t as usize] {
                        litlen[usize::from(b)] += 1;
                    }
                    at += t as usize;
                } else {
                    at += (t & 0xff) as usize + 3;
                }
            }
            assert_eq!(at, pos, "the tokens cover the parse");
            assert_eq!(&tokens.litlen[..256], &litlen[..], "block at {start}");
            blocks += 1;
        }
        assert!(blocks >= 3, "{blocks} blocks");
    }

    #[test]
    fn a_stale_table_costs_ratio_never_correctness() {
        // Entries left by another stream (another origin, other bytes) must be rejected.
        let other = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 70_000, 9);
        let data = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 70_000, 10);
        let mut table = empty_table();
        let mut tokens = Tokens::new();
        for (input, origin) in [(&other, 12_345u16), (&data, 0)] {
            let mut pos = 0;
            while pos < input.len() {
                tokens.clear();
                let start = pos;
                pos = parse_bucket(input, pos, &mut table, origin, &mut tokens);
                assert_eq!(replay(&input[..pos], start, &tokens), &input[..pos]);
            }
        }
    }
}
