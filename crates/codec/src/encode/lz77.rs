//! LZ77 match finding inside one call's input.
//!
//! Levels 1 and 2 keep one tagged 16-bit position per hash and clear (part of) their table per
//! call; level 3 keeps hash chains whose positions are tagged with a per-call `base` (see
//! [`super::scratch`]), so those larger tables never need clearing between calls. Every
//! candidate is verified byte by byte before use, so a stale or colliding entry can cost time
//! but never correctness.
//!
//! Matches are emitted as tokens (see [`Tokens`]) while the literal/length and distance
//! frequencies are counted, so the block writer needs no second pass to build its codes.
//! Literals are not tokens of their own: a run of them is one token holding its length, and
//! the writer reads the bytes from the input. The parse's miss path then touches nothing but
//! the hash table, and the run's bytes are counted in one tight loop when the run ends.

use super::tables::{dist_code, LENGTH_CODE};

mod bucket;

pub(crate) use bucket::{parse_bucket, BucketTable};

/// Largest distance deflate can express.
pub(crate) const WINDOW: usize = 32_768;
/// Shortest match worth a token here (hashes cover 4 bytes).
pub(crate) const MIN_MATCH: usize = 4;
/// Longest match deflate can express.
pub(crate) const MAX_MATCH: usize = 258;
/// Bits of the hash-head table index.
pub(crate) const HASH_BITS: u32 = 15;
/// Flag bit that marks a token as a match; a token without it is a run of literals, its length.
pub(crate) const MATCH_FLAG: u32 = 1 << 31;

/// Tokens per block (literal runs and matches), the size of the token buffer: 64 KB, which
/// stays in L2 beside the tables.
pub(crate) const MAX_TOKENS: usize = 1 << 14;
/// Symbols per block (literals plus matches) at level 1: four times [`SYMBOLS`], for speed. A
/// block also ends when its token buffer is full, which counts literal runs, not literals, so
/// the buffer need not be this large. Against [`SYMBOLS`]: 3-4% faster on web/ + canterbury/
/// at 0.07% less ratio, but 1.6% less ratio on the large corpus (a tar of mixed files), whose
/// statistics change faster than such blocks follow.
pub(crate) const MAX_SYMBOLS: usize = 1 << 16;
/// Symbols per block at levels 2 and 3: large enough to amortise building the codes and
/// writing a dynamic header, small enough for the code to follow changes in the data.
pub(crate) const SYMBOLS: usize = 1 << 14;

/// Tokens of the block being built and the symbol frequencies they imply.
pub(crate) struct Tokens {
    /// Literal run: its length, at least 1; the bytes are the block's input at the writer's
    /// cursor. Match: `MATCH_FLAG | dist_code << 23 | (dist − 1) << 8 | (len − 3)`; the
    /// distance code rides along so the writer needs no second lookup.
    buf: Box<[u32; MAX_TOKENS]>,
    len: usize,
    /// Symbols the tokens stand for (literals plus matches); a block holds at most
    /// `max_symbols`, and never fewer than its tokens.
    symbols: usize,
    /// The symbol budget of a block: [`SYMBOLS`] or [`MAX_SYMBOLS`].
    max_symbols: usize,
    /// Literal/length symbol counts (end of block not included).
    pub(crate) litlen: [u32; 286],
    /// Distance code counts.
    pub(crate) dist: [u32; 30],
}

impl Tokens {
    pub(crate) fn new() -> Tokens {
        let buf = vec![0; MAX_TOKENS]
            .into_boxed_slice()
            .try_into()
            .expect("length is MAX_TOKENS");
        Tokens {
            buf,
            len: 0,
            symbols: 0,
            max_symbols: MAX_SYMBOLS,
            litlen: [0; 286],
            dist: [0; 30],
        }
    }

    /// The tokens so far.
    pub(crate) fn list(&self) -> &[u32] {
        &self.buf[..self.len]
    }

    /// Symbols the block can still take; parsers stop before pending literals reach it. At
    /// most one once the token buffer lacks room for a literal run and a match (the most one
    /// step of a parse pushes), so only a step without pending literals can run; none once the
    /// buffer is full. With a budget of [`MAX_TOKENS`] symbols this is exactly the budget left,
    /// since a block never holds more tokens than symbols.
    #[inline(always)]
    fn room(&self) -> usize {
        let symbols = self.max_symbols - self.symbols;
        match MAX_TOKENS - self.len {
            0 => 0,
            1 => symbols.min(1),
            _ => symbols,
        }
    }

    #[inline(always)]
    fn push(&mut self, token: u32) {
        debug_assert!(self.len < MAX_TOKENS);
        // The parsers stay within `room` before every push; the mask keeps the index provably
        // in bounds without a second check.
        self.buf[self.len & (MAX_TOKENS - 1)] = token;
        self.len += 1;
    }

    /// Sets the symbol budget of the blocks that follow (at most [`MAX_SYMBOLS`]); call it on an
    /// empty block.
    pub(crate) fn set_max_symbols(&mut self, max_symbols: usize) {
        debug_assert!(self.symbols == 0 && max_symbols <= MAX_SYMBOLS);
        self.max_symbols = max_symbols.min(MAX_SYMBOLS);
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.symbols = 0;
        self.litlen = [0; 286];
        self.dist = [0; 30];
    }

    /// A run of literals (nothing for an empty one); at most [`Self::room`] of them.
    #[inline(always)]
    fn literals(&mut self, bytes: &[u8]) {
        self.count(bytes);
        self.counted_literals(bytes.len());
    }

    /// A run of `len` literals whose bytes the parse has already counted with
    /// [`Self::count`]; at most [`Self::room`] of them.
    #[inline(always)]
    fn counted_literals(&mut self, len: usize) {
        if len == 0 {
            return;
        }
        debug_assert!(len <= self.room());
        self.push(len as u32);
        self.symbols += len;
    }

    /// Counts literal bytes for a later [`Self::counted_literals`].
    #[inline(always)]
    fn count(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.litlen[usize::from(b)] += 1;
        }
    }

    #[inline(always)]
    fn matched(&mut self, len: usize, dist: usize) {
        debug_assert!((3..=MAX_MATCH).contains(&len) && (1..=WINDOW).contains(&dist));
        let (l3, d1) = ((len - 3) as u32, (dist - 1) as u32);
        let dc = dist_code(d1);
        self.push(MATCH_FLAG | (dc as u32) << 23 | d1 << 8 | l3);
        self.symbols += 1;
        self.litlen[257 + usize::from(LENGTH_CODE[l3 as usize])] += 1;
        self.dist[dc] += 1;
    }
}

/// Parameters of the hash-chain matcher.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChainParams {
    /// Candidates examined per position.
    pub(crate) depth: u32,
    /// A match this long ends the search.
    pub(crate) nice: usize,
    /// Whether to try one position later before taking a match (lazy evaluation).
    pub(crate) lazy: bool,
}

#[inline(always)]
fn read_u32(data: &[u8], pos: usize) -> u32 {
    let bytes: [u8; 4] = data[pos..pos + 4].try_into().expect("4-byte slice");
    u32::from_le_bytes(bytes)
}

#[inline(always)]
fn read_u64(data: &[u8], pos: usize) -> u64 {
    let bytes: [u8; 8] = data[pos..pos + 8].try_into().expect("8-byte slice");
    u64::from_le_bytes(bytes)
}

#[inline(always)]
fn hash4(word: u32) -> usize {
    (word.wrapping_mul(0x9e37_79b1) >> 16) as usize
}

/// Length of the common prefix of `data[a..]` and `data[b..]` (`a < b`), at most `max`, with
/// `b + max <= data.len()`.
#[inline(always)]
fn match_len(data: &[u8], a: usize, b: usize, max: usize) -> usize {
    let mut len = 0;
    // Sixteen bytes per branch: a long match costs half the branches. On web/ + canterbury/
    // against eight per branch: level 1 +2%, level 2 +1%. An AVX2 loop of 32 bytes per
    // branch (chosen at run time) measured no faster than this one, so there is none.
    while len + 16 <= max {
        let x = read_u64(data, a + len) ^ read_u64(data, b + len);
        let y = read_u64(data, a + len + 8) ^ read_u64(data, b + len + 8);
        if x | y != 0 {
            let z = if x == 0 { y } else { x };
            return len + (x == 0) as usize * 8 + (z.trailing_zeros() / 8) as usize;
        }
        len += 16;
    }
    while len + 8 <= max {
        let x = read_u64(data, a + len) ^ read_u64(data, b + len);
        if x != 0 {
            return len + (x.trailing_zeros() / 8) as usize;
        }
        len += 8;
    }
    while len < max && data[a + len] == data[b + len] {
        len += 1;
    }
    len
}

/// Hash-chain parse (level 3): `depth` candidates per position, optional lazy
/// evaluation, every position inserted. Same contract as [`parse_fast`]; the tables are the
/// hash heads and the chain links (one per window position).
pub(crate) fn parse_chain(
    data: &[u8],
    mut pos: usize,
    (head, prev): (&mut [u32], &mut [u32]),
    base: u32,
    tokens: &mut Tokens,
    params: ChainParams,
) -> usize {
    let len = data.len();
    let limit = len.saturating_sub(MIN_MATCH);
    let head_mask = head.len() - 1;
    let prev_mask = prev.len() - 1;
    let insert = |pos: usize, head: &mut [u32], prev: &mut [u32]| {
        let h = hash4(read_u32(data, pos)) & head_mask;
        let here = base.wrapping_add(pos as u32);
        prev[here as usize & prev_mask] = head[h];
        head[h] = here;
    };
    let find = |pos: usize, prev: &[u32], min_len: usize| -> (usize, usize) {
        let here = base.wrapping_add(pos as u32);
        let max = (len - pos).min(MAX_MATCH);
        let (mut best_len, mut best_dist) = (min_len.max(MIN_MATCH - 1), 0);
        // The head entry was just replaced by `pos` itself: start from its chain link.
        let mut cand = prev[here as usize & prev_mask];
        for _ in 0..params.depth {
            let dist = here.wrapping_sub(cand) as usize;
            if dist.wrapping_sub(1) >= pos.min(WINDOW) {
                break;
            }
            let at = pos - dist;
            if best_len < max && data[at + best_len] == data[pos + best_len] {
                let l = match_len(data, at, pos, max);
                if l > best_len {
                    best_len = l;
                    best_dist = dist;
                    if l >= params.nice || l == max {
                        break;
                    }
                }
            }
            cand = prev[cand as usize & prev_mask];
        }
        if best_dist == 0 {
            (0, 0)
        } else {
            (best_len, best_dist)
        }
    };
    // Literals since the last match: `data[lit_start..pos]`, written as one run.
    let mut lit_start = pos;
    while pos < limit && pos - lit_start < tokens.room() {
        insert(pos, head, prev);
        let mut next_inserted = false;
        let (mut mlen, mut dist) = find(pos, prev, 0);
        if mlen < MIN_MATCH {
            pos += 1;
            continue;
        }
        if params.lazy && mlen < params.nice {
            // Take a literal while the next position offers a longer match (and the block
            // has room for that literal and the match).
            while pos + 1 < limit && pos + 2 - lit_start <= tokens.room() {
                insert(pos + 1, head, prev);
                next_inserted = true;
                let (l1, d1) = find(pos + 1, prev, mlen);
                if l1 > mlen {
                    pos += 1;
                    mlen = l1;
                    dist = d1;
                    next_inserted = false;
                } else {
                    break;
                }
            }
        }
        tokens.literals(&data[lit_start..pos]);
        tokens.matched(mlen, dist);
        // Insert the covered positions (the lazy step may already have inserted `pos + 1`).
        let first = if next_inserted { pos + 2 } else { pos + 1 };
        let end = (pos + mlen).min(limit);
        for p in first..end {
            insert(p, head, prev);
        }
        pos += mlen;
        lit_start = pos;
    }
    end_literals(data, pos, (lit_start, lit_start), pos >= limit, tokens)
}

/// Ends a parse: the pending run of literals `data[lit_start..pos]`, of which the parse has
/// counted `data[lit_start..counted]`, is written, extended to the end of the input when the
/// parse got as far as it can probe (as far as the block has room). Returns the position
/// reached.
#[inline(always)]
fn end_literals(
    data: &[u8],
    mut pos: usize,
    (lit_start, counted): (usize, usize),
    at_end: bool,
    tokens: &mut Tokens,
) -> usize {
    if at_end {
        pos = data.len().min(lit_start + tokens.room());
    }
    tokens.count(&data[counted..pos]);
    tokens.counted_literals(pos - lit_start);
    pos
}

/// Length of the match at `pos`, `dist` back, whose first 8 bytes XOR to `x` (at least the
/// first 4 equal); `pos + 16 <= data.len()`.
#[inline(always)]
fn match_length(data: &[u8], pos: usize, dist: usize, x: u64) -> usize {
    // Measure 16 bytes without a branch on the first 8: about half the matches here are
    // shorter than 8, so that branch would be a coin toss.
    let y = read_u64(data, pos - dist + 8) ^ read_u64(data, pos + 8);
    let z = if x == 0 { y } else { x };
    let best = (x == 0) as usize * 8 + (z.trailing_zeros() / 8) as usize;
    if best < 16 {
        return best;
    }
    let max = (data.len() - pos).min(MAX_MATCH);
    16 + match_len(data, pos - dist + 16, pos + 16, max - 16)
}

/// Bits of the largest greedy table index (8,192 entries of 32 bits: 32 KB, L1's size).
pub(crate) const FAST_BITS: u32 = 13;

/// The two greedy matchers: one tagged position per hash, no chains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Greedy {
    /// Level 1: at most 4,096 entries (16 KB) over 7-byte strings, and one insertion per
    /// match. Against [`Greedy::Fast`] on web/ + canterbury/: 13% faster at 3.3% less ratio
    /// (4.52 against 4.67). The smaller table leaves L1 to the input and the tokens; the longer
    /// string makes fewer, longer matches, and each match costs far more than a literal.
    Fastest,
    /// Level 2: at most 8,192 entries (32 KB) over 6-byte strings. Six, not four: with one
    /// entry per hash, the newest position of a 6-byte string is much more often a long match
    /// than that of a 4-byte string (ratio 4.71 against 4.38 at the same speed).
    Fast,
}

impl Greedy {
    /// The table bits a call of `input_len` bytes uses (10, 12 or 13): small inputs get a
    /// small table, so that clearing it stays cheap. The caller clears this many entries.
    pub(crate) fn table_bits(self, input_len: usize) -> u32 {
        let wanted = usize::BITS - input_len.leading_zeros();
        match (wanted, self) {
            (..=10, _) => 10,
            (11 | 12, _) | (_, Greedy::Fastest) => 12,
            (_, Greedy::Fast) => FAST_BITS,
        }
    }
}

/// Greedy table: per hash of a string, the newest position (mod 2^16, low half) and 16 more
/// bits of the string's hash (high half), which reject most wrong candidates unread.
pub(crate) type FastTable = [u32; 1 << FAST_BITS];

/// Greedy parse over a table of one tagged 16-bit position per hash (levels 1 and 2). Parses
/// from `pos` until `tokens` is full or the input ends, and returns the position reached.
///
/// Entries are positions within `data` modulo 2^16 and are not tagged: an entry may be stale
/// (from an earlier block, or more than 64 KB back), so every candidate is bounds-checked
/// against the window and compared byte by byte before use. The caller clears the first
/// `1 << bits` entries at the start of each call, with `bits` from [`Greedy::table_bits`], so
/// output never depends on earlier calls. Of a match's positions, level 2 inserts the first
/// after its start and its last two, level 1 only the last: more insertions cost time and,
/// with one entry per hash, even lose ratio on long runs. Matches start at 4 bytes, whatever
/// the hash covers.
pub(crate) fn parse_fast(
    data: &[u8],
    pos: usize,
    table: &mut FastTable,
    (greedy, bits): (Greedy, u32),
    tokens: &mut Tokens,
) -> usize {
    // The table size and the hashed length are constants of each copy: a variable shift would
    // hold one more register (and `cl`) in a loop that already spills.
    let t = tokens;
    match (greedy, bits) {
        (Greedy::Fastest, ..=10) => parse_fast_sized::<10, 7, false, false>(data, pos, table, 0, t),
        (Greedy::Fastest, _) => parse_fast_sized::<12, 7, false, false>(data, pos, table, 0, t),
        (Greedy::Fast, ..=10) => parse_fast_sized::<10, 6, true, false>(data, pos, table, 0, t),
        (Greedy::Fast, 11 | 12) => parse_fast_sized::<12, 6, true, false>(data, pos, table, 0, t),
        (Greedy::Fast, _) => parse_fast_sized::<FAST_BITS, 6, true, false>(data, pos, table, 0, t),
    }
}

/// [`parse_fast`] over a table kept across calls (the windowed encoder's): `data[..pos]` is
/// history the parse may match into, and `origin` is the stream offset of `data[0]` modulo
/// 2^16, added to every position stored or looked up, so that entries stored by earlier calls
/// (whose `data` started elsewhere in the stream) keep their distances. Always the largest
/// table of the level: the table is not cleared per call. Stale entries are harmless, as in
/// [`parse_fast`]: every candidate is checked against `data` before use.
pub(crate) fn parse_fast_windowed(
    data: &[u8],
    pos: usize,
    table: &mut FastTable,
    (greedy, origin): (Greedy, u16),
    tokens: &mut Tokens,
) -> usize {
    let (o, t) = (origin, tokens);
    match greedy {
        Greedy::Fastest => parse_fast_sized::<12, 7, false, true>(data, pos, table, o, t),
        Greedy::Fast => parse_fast_sized::<FAST_BITS, 6, true, true>(data, pos, table, o, t),
    }
}

#[inline(always)]
fn parse_fast_sized<
    const BITS: u32,
    const HASH_BYTES: u32,
    const INSERT_ALL: bool,
    const WINDOWED: bool,
>(
    data: &[u8],
    mut pos: usize,
    table: &mut FastTable,
    origin: u16,
    tokens: &mut Tokens,
) -> usize {
    let bits = BITS;
    // Stateless copies store positions within `data` as they are (the constant folds away).
    let origin = if WINDOWED { usize::from(origin) } else { 0 };
    let len = data.len();
    // Leave room for 16-byte reads at `pos`; the tail goes out as literals.
    let limit = len.saturating_sub(16);
    let shift = 64 - bits;
    // One multiply per position gives both the table index (its top bits) and a 16-bit tag
    // (bits 32-47), stored beside the position. A candidate whose tag differs is rejected
    // without loading its bytes, so the branch on "match or not" waits for one load (the
    // table's) instead of two (the table's, then the candidate's); that branch is a coin toss
    // and is mispredicted about once per match.
    let key = |word: u64| (word << (64 - 8 * HASH_BYTES)).wrapping_mul(0xcf1b_bcdc_b7a5_6463);
    let index = |k: u64| (k >> shift) as usize & ((1 << FAST_BITS) - 1);
    let tag = |k: u64| (k >> 16) as u32 & 0xffff_0000;
    let entry = |word: u64, p: usize| {
        let k = key(word);
        (index(k), tag(k) | (p.wrapping_add(origin) as u32 & 0xffff))
    };
    // Literals since the last match are `data[lit_start..pos]`; the parse stops where they
    // would overfill the block (`stop` moves on with each match).
    let mut lit_start = pos;
    let mut stop = limit.min(lit_start + tokens.room());
    // Three positions per step: their keys come from one load and the three table lookups are
    // in flight at once; a position is probed only when the ones before it have no match. A
    // match at `pos + 2` leaves two literals, so the step needs room for them and the match.
    // (Two positions per step: 6% slower, ratio 4.65 against 4.67 on web/ + canterbury/; four:
    // slower again. The three probes are written out: as one closure they ran 2-3% slower.)
    while pos + 2 < stop {
        let cur = read_u64(data, pos);
        let ((h0, e0), (h1, e1)) = (entry(cur, pos), entry(cur >> 8, pos + 1));
        // A 7-byte string at `pos + 2` reaches past `cur`: it takes a load of its own.
        let third = if HASH_BYTES <= 6 {
            cur >> 16
        } else {
            read_u64(data, pos + 2)
        };
        let (h2, e2) = entry(third, pos + 2);
        let c0 = table[h0];
        table[h0] = e0;
        let c1 = table[h1];
        table[h1] = e1;
        let c2 = table[h2];
        table[h2] = e2;
        let mut at = pos;
        let mut found = None;
        let d0 = usize::from((pos.wrapping_add(origin) as u16).wrapping_sub(c0 as u16));
        if (c0 ^ e0) < 0x10000 && d0.wrapping_sub(1) < pos.min(WINDOW) {
            let x = read_u64(data, pos - d0) ^ cur;
            if x as u32 == 0 {
                found = Some((d0, x));
            }
        }
        if found.is_none() {
            at = pos + 1;
            let d1 = usize::from((at.wrapping_add(origin) as u16).wrapping_sub(c1 as u16));
            if (c1 ^ e1) < 0x10000 && d1.wrapping_sub(1) < at.min(WINDOW) {
                let x = read_u64(data, at - d1) ^ read_u64(data, at);
                if x as u32 == 0 {
                    found = Some((d1, x));
                }
            }
        }
        if found.is_none() {
            at = pos + 2;
            let d2 = usize::from((at.wrapping_add(origin) as u16).wrapping_sub(c2 as u16));
            if (c2 ^ e2) < 0x10000 && d2.wrapping_sub(1) < at.min(WINDOW) {
                let x = read_u64(data, at - d2) ^ read_u64(data, at);
                if x as u32 == 0 {
                    found = Some((d2, x));
                }
            }
        }
        if let Some((dist, x)) = found {
            let best = match_length(data, at, dist, x);
            // The positions before `at` are literals.
            tokens.litlen[(cur & 0xff) as usize] += u32::from(at > pos);
            tokens.litlen[(cur >> 8 & 0xff) as usize] += u32::from(at > pos + 1);
            tokens.counted_literals(at - lit_start);
            tokens.matched(best, dist);
            let end = at + best;
            if end + 8 < limit {
                // Level 2 inserts the position after the match's start (new only for a match
                // at `pos + 2`; without a branch, the others store what the entry already
                // holds) and the match's last two. Level 1 inserts only the last: 4% faster
                // for 0.3% less ratio on web/ + canterbury/ (none at all: 1% faster again, for
                // 0.5% less).
                let w = read_u64(data, end - 2);
                if INSERT_ALL {
                    for (word, p) in [(read_u64(data, at + 1), at + 1), (w, end - 2)] {
                        let (h, e) = entry(word, p);
                        table[h] = e;
                    }
                }
                let (h, e) = entry(w >> 8, end - 1);
                table[h] = e;
            }
            pos = end;
            lit_start = pos;
            stop = limit.min(lit_start + tokens.room());
            continue;
        }
        // The three positions are literals now, whatever comes next: counting them here spares
        // the run a counting loop of its own, whose exit would be a coin toss per match.
        tokens.litlen[(cur & 0xff) as usize] += 1;
        tokens.litlen[(cur >> 8 & 0xff) as usize] += 1;
        tokens.litlen[(cur >> 16 & 0xff) as usize] += 1;
        pos += 3;
        // After 64 misses in a row, skip ahead further the longer the run: data that does
        // not match is probably not going to.
        let misses = pos - lit_start;
        if misses > 64 {
            let skip_to = (pos + ((misses - 64) >> 4).min(32)).min(stop);
            tokens.count(&data[pos..skip_to]);
            pos = skip_to;
        }
    }
    // Positions from `limit - 2` on cannot take a three-position step.
    end_literals(data, pos, (lit_start, pos), pos + 2 >= limit, tokens)
}

#[cfg(test)]
mod tests;
