//! A small seeded generator, SplitMix64, for made-up data: the demo site's pages, the
//! benchmark's built-in sample and the test kit's inputs. Not for anything secret: it is
//! fast and statistically good enough for content, and the same seed gives the same
//! sequence on every machine, so generated data is reproducible.

/// SplitMix64 (Steele, Lea and Flood; the seeding generator of `java.util.SplittableRandom`).
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`; the modulo's slight bias does not matter here).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// One of `items` (not empty), each as likely.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// One of `items` (not empty), skewed towards the start, as word frequencies in real text
    /// are: the lesser of two draws.
    pub fn pick_skewed<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        let a = self.below(items.len());
        let b = self.below(items.len());
        &items[a.min(b)]
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_splitmix64s() {
        // The reference outputs for seed 1234567 (the generator's published C code).
        let mut rng = SplitMix64::new(1_234_567);
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(
            first,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423
            ]
        );
    }

    #[test]
    fn draws_stay_in_their_ranges() {
        let mut rng = SplitMix64::new(7);
        for _ in 0..1000 {
            assert!(rng.below(10) < 10);
            assert!((3..=5).contains(&rng.range(3, 5)));
            assert!([1, 2].contains(rng.pick(&[1, 2])));
        }
        assert!((0..1000).filter(|_| rng.chance(30)).count().abs_diff(300) < 60);
    }
}
