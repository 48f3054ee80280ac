//! Length-limited canonical Huffman codes.
//!
//! Code lengths come from Moffat and Katajainen's in-place minimum-redundancy algorithm over
//! the symbols sorted by frequency, then lengths past the limit are folded back with the Kraft
//! sum adjustment miniz uses. Both are linear after the sort, and the sort is mostly a
//! counting sort, which matters because the stateless encoder builds three codes for every
//! block.

/// Longest code a deflate literal/length or distance code may use.
pub(crate) const MAX_CODE_LEN: u32 = 15;
/// Longest literal/length code this encoder builds: one short of deflate's 15, so that four
/// literals (56 bits) fit the bit writer between flushes. Costs well under 0.1% of ratio.
pub(crate) const MAX_LITLEN_CODE_LEN: u32 = 14;
/// Longest code the code-length alphabet may use.
pub(crate) const MAX_CODELEN_CODE_LEN: u32 = 7;

/// Largest alphabet a code is built for: deflate's literal/length alphabet, 286 symbols.
const MAX_SYMBOLS: usize = 288;

/// Working arrays for building codes, kept between blocks (per thread, like the rest of the
/// block writer) so that building a code zeroes nothing: every slot is written before it is
/// read. Zeroing them per code was 1% of `zipwire compress -1`.
pub(crate) struct CodeBuilder {
    keys: [u64; MAX_SYMBOLS],
    weights: [u32; MAX_SYMBOLS],
    starts: [u16; MAX_SYMBOLS + 1],
}

impl CodeBuilder {
    /// A builder.
    pub(crate) fn new() -> CodeBuilder {
        CodeBuilder {
            keys: [0; MAX_SYMBOLS],
            weights: [0; MAX_SYMBOLS],
            starts: [0; MAX_SYMBOLS + 1],
        }
    }

    /// Computes code lengths (at most `limit`) for `freqs` (at most [`MAX_SYMBOLS`]), into
    /// `lens` (same length).
    ///
    /// Symbols with frequency 0 get length 0. When fewer than two symbols are used, one or two
    /// get length 1 so that the code is complete, which every inflater accepts.
    pub(crate) fn lengths(&mut self, freqs: &[u32], limit: u32, lens: &mut [u8]) {
        debug_assert_eq!(freqs.len(), lens.len());
        debug_assert!(freqs.len() <= MAX_SYMBOLS);
        lens.fill(0);
        let n = self.sort(freqs);
        let keys = &self.keys[..n];
        if n < 2 {
            // A lone symbol (or none): pair it with a neighbour so both get 1-bit codes.
            let used = keys.first().map_or(0, |&k| (k & 0xffff) as usize);
            let other = if used == 0 { 1 } else { 0 };
            lens[used] = 1;
            lens[other] = 1;
            return;
        }
        let a = &mut self.weights[..n];
        for (slot, key) in a.iter_mut().zip(keys) {
            *slot = (key >> 16) as u32;
        }
        minimum_redundancy(a);
        // a[i] is now the length of the i-th least frequent symbol; count per length.
        let mut count = [0u32; 33];
        for &len in a.iter() {
            count[len.min(32) as usize] += 1;
        }
        enforce_limit(&mut count, limit);
        // Hand the shortest lengths to the most frequent symbols.
        let mut next = n;
        for len in 1..=limit {
            for _ in 0..count[len as usize] {
                next -= 1;
                lens[(keys[next] & 0xffff) as usize] = len as u8;
            }
        }
    }

    /// Fills `keys` with `frequency << 16 | symbol` for the used symbols of `freqs`, in
    /// ascending order (ties by symbol, so the code is deterministic), and returns how many.
    ///
    /// A counting sort on the frequency, capped at the alphabet's size, then a comparison sort of
    /// the last bucket alone (the few symbols at least that frequent), as libdeflate sorts its
    /// symbols: `sort_unstable` over all the keys was a quarter of building a block's codes, which
    /// the stateless encoder does for every block (16,384 symbols at levels 2-3).
    fn sort(&mut self, freqs: &[u32]) -> usize {
        let (keys, starts) = (&mut self.keys, &mut self.starts);
        let cap = freqs.len();
        let bucket = |f: u32| (f as usize).min(cap);
        starts[..=cap].fill(0);
        for &f in freqs {
            starts[bucket(f)] += 1;
        }
        let capped = usize::from(starts[cap]);
        // Bucket 0 (unused symbols) gets no room: used symbols start at 0.
        let mut at = 0u16;
        for count in &mut starts[1..=cap] {
            (*count, at) = (at, at + *count);
        }
        for (sym, &f) in freqs.iter().enumerate() {
            if f > 0 {
                let slot = &mut starts[bucket(f)];
                keys[usize::from(*slot)] = (u64::from(f) << 16) | sym as u64;
                *slot += 1;
            }
        }
        let n = usize::from(at);
        // The last bucket holds every frequency from `cap` up, in symbol order: sort it by key.
        keys[n - capped..n].sort_unstable();
        n
    }
}

/// Computes code lengths with a fresh [`CodeBuilder`] (see [`CodeBuilder::lengths`]).
#[cfg(test)]
pub(crate) fn code_lengths(freqs: &[u32], limit: u32, lens: &mut [u8]) {
    CodeBuilder::new().lengths(freqs, limit, lens);
}

/// Moffat–Katajainen: `a` holds ascending weights; on return, each entry's code length.
fn minimum_redundancy(a: &mut [u32]) {
    let n = a.len();
    // Phase 1: build the tree in place; internal nodes' weights, then parent pointers.
    a[0] += a[1];
    let (mut root, mut leaf) = (0usize, 2usize);
    for next in 1..n - 1 {
        if leaf >= n || a[root] < a[leaf] {
            a[next] = a[root];
            a[root] = next as u32;
            root += 1;
        } else {
            a[next] = a[leaf];
            leaf += 1;
        }
        if leaf >= n || (root < next && a[root] < a[leaf]) {
            a[next] += a[root];
            a[root] = next as u32;
            root += 1;
        } else {
            a[next] += a[leaf];
            leaf += 1;
        }
    }
    // Phase 2: depths of internal nodes.
    a[n - 2] = 0;
    for next in (0..n.saturating_sub(2)).rev() {
        a[next] = a[a[next] as usize] + 1;
    }
    // Phase 3: depths of leaves.
    let (mut avail, mut used, mut depth) = (1i64, 0i64, 0u32);
    let mut root = n as i64 - 2;
    let mut next = n as i64 - 1;
    while avail > 0 {
        while root >= 0 && a[root as usize] == depth {
            used += 1;
            root -= 1;
        }
        while avail > used {
            a[next as usize] = depth;
            next -= 1;
            avail -= 1;
        }
        avail = 2 * used;
        depth += 1;
        used = 0;
    }
}

/// Folds code lengths above `limit` into `limit` and restores the Kraft equality by moving
/// codes down from shorter lengths.
fn enforce_limit(count: &mut [u32; 33], limit: u32) {
    let limit = limit as usize;
    let mut overflow = false;
    for len in limit + 1..33 {
        if count[len] > 0 {
            overflow = true;
            count[limit] += count[len];
            count[len] = 0;
        }
    }
    if !overflow {
        return;
    }
    let mut total: u64 = (1..=limit)
        .map(|len| u64::from(count[len]) << (limit - len))
        .sum();
    while total > 1 << limit {
        count[limit] -= 1;
        for len in (1..limit).rev() {
            if count[len] > 0 {
                count[len] -= 1;
                count[len + 1] += 2;
                break;
            }
        }
        total -= 1;
    }
}

/// Canonical codes for `lens` (RFC 1951 §3.2.2), bit-reversed for LSB-first output.
pub(crate) fn canonical_codes(lens: &[u8], codes: &mut [u16]) {
    let mut count = [0u16; 16];
    for &len in lens {
        count[usize::from(len)] += 1;
    }
    count[0] = 0;
    let mut next = [0u16; 16];
    let mut code = 0u16;
    for len in 1..16 {
        code = (code + count[len - 1]) << 1;
        next[len] = code;
    }
    for (sym, &len) in lens.iter().enumerate() {
        if len > 0 {
            let c = next[usize::from(len)];
            next[usize::from(len)] += 1;
            codes[sym] = c.reverse_bits() >> (16 - u32::from(len));
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::strategy::Just;

    use super::*;

    fn kraft(lens: &[u8]) -> f64 {
        lens.iter()
            .filter(|&&l| l > 0)
            .map(|&l| 0.5f64.powi(i32::from(l)))
            .sum()
    }

    /// Reference: plain Huffman lengths by repeated merging, no limit.
    fn naive_cost(freqs: &[u32]) -> u64 {
        let mut w: Vec<u64> = freqs
            .iter()
            .filter(|&&f| f > 0)
            .map(|&f| u64::from(f))
            .collect();
        let mut cost = 0;
        while w.len() > 1 {
            w.sort_unstable_by(|a, b| b.cmp(a));
            let (a, b) = (w.pop().unwrap(), w.pop().unwrap());
            cost += a + b;
            w.push(a + b);
        }
        cost
    }

    #[test]
    fn optimal_when_under_the_limit() {
        let freqs = [5u32, 9, 12, 13, 16, 45, 0, 1];
        let mut lens = [0u8; 8];
        code_lengths(&freqs, 15, &mut lens);
        let cost: u64 = freqs
            .iter()
            .zip(&lens)
            .map(|(&f, &l)| u64::from(f) * u64::from(l))
            .sum();
        assert_eq!(cost, naive_cost(&freqs));
        assert_eq!(lens[6], 0);
        assert!((kraft(&lens) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn fibonacci_weights_are_limited_and_complete() {
        let mut freqs = [0u32; 40];
        let (mut a, mut b) = (1u32, 1u32);
        for f in freqs.iter_mut() {
            *f = a;
            let c = a.saturating_add(b);
            a = b;
            b = c;
        }
        for limit in [7, 15] {
            let mut lens = [0u8; 40];
            code_lengths(&freqs, limit, &mut lens);
            assert!(
                lens.iter().all(|&l| l >= 1 && u32::from(l) <= limit),
                "{lens:?}"
            );
            assert!((kraft(&lens) - 1.0).abs() < 1e-12);
        }
    }

    proptest::proptest! {
        /// The counting sort orders the keys exactly as a comparison sort of all of them.
        #[test]
        fn keys_sort_as_a_comparison_sort_would(
            freqs in proptest::collection::vec(
                proptest::prop_oneof![Just(0u32), 1u32..40, 1u32..70_000],
                1..=MAX_SYMBOLS,
            ),
        ) {
            let mut builder = CodeBuilder::new();
            let n = builder.sort(&freqs);
            let mut want: Vec<u64> = freqs
                .iter()
                .enumerate()
                .filter(|(_, &f)| f > 0)
                .map(|(sym, &f)| u64::from(f) << 16 | sym as u64)
                .collect();
            want.sort_unstable();
            proptest::prop_assert_eq!(&builder.keys[..n], &want[..]);
        }
    }

    #[test]
    fn lone_symbol_gets_a_partner() {
        let mut lens = [0u8; 4];
        code_lengths(&[0, 0, 7, 0], 15, &mut lens);
        assert_eq!(lens, [1, 0, 1, 0]);
        code_lengths(&[3, 0, 0, 0], 15, &mut lens);
        assert_eq!(lens, [1, 1, 0, 0]);
    }

    #[test]
    fn canonical_codes_match_rfc_example() {
        // RFC 1951 §3.2.2: lengths (3, 3, 3, 3, 3, 2, 4, 4) give F=00, A=010, ..., H=1111.
        let lens = [3u8, 3, 3, 3, 3, 2, 4, 4];
        let mut codes = [0u16; 8];
        canonical_codes(&lens, &mut codes);
        let unreversed: Vec<u16> = codes
            .iter()
            .zip(&lens)
            .map(|(&c, &l)| c.reverse_bits() >> (16 - u32::from(l)))
            .collect();
        assert_eq!(
            unreversed,
            vec![0b010, 0b011, 0b100, 0b101, 0b110, 0b00, 0b1110, 0b1111]
        );
    }
}
