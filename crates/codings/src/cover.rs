//! The content of a raw dictionary chosen from samples by COVER's greedy segment selection
//! (Liao, Petri, Moffat, Wirth, "Effective Construction of Relative Lempel-Ziv
//! Dictionaries", 2016; the algorithm behind zstd's trainer): the samples are cut into as
//! many epochs as the dictionary has segments; in each, the `SEGMENT`-byte window whose
//! distinct 8-byte substrings occur in the most samples is kept, and those substrings score
//! nothing afterwards, so no content is kept twice. The segments go best last, nearest the
//! body, where a match costs the fewest bits.
//!
//! Written here rather than taken from zstd's `ZDICT_trainFromBuffer` (the same algorithm)
//! because that emits zstd's own dictionary format, a header and entropy tables that a raw
//! dictionary would only carry as dead bytes, and tunes its segments for zstd's format. On
//! Debian's python3.11-doc (45 pages sampled, 50 other pages measured, `dcb` at brotli 11
//! with the dictionary's own download counted) this selection gives 0.847x brotli 11's bytes
//! at 64 KiB and 0.849x at 128 KiB, where zstd's trainer (its magic and ID removed) gives
//! 0.855x and 0.856x (the `site_dictionary` example of this crate).

use bytes::Bytes;

/// The substring length scored.
const DMER: usize = 8;

/// The length of a kept segment.
pub const SEGMENT: usize = 1024;

/// Bits of the substring hash: 2^20 counters.
const HASH_BITS: u32 = 20;

fn hash(window: &[u8]) -> usize {
    let mut bytes = [0u8; DMER];
    bytes.copy_from_slice(&window[..DMER]);
    (u64::from_le_bytes(bytes).wrapping_mul(0x9E37_79B1_85EB_CA87) >> (64 - HASH_BITS)) as usize
}

/// The raw dictionary of at most `size` bytes COVER selects from `samples`; empty when the
/// samples are too short to hold a segment.
pub fn select(samples: &[Bytes], size: usize) -> Vec<u8> {
    select_with(samples, size, SEGMENT)
}

/// [`select`] with segments of `segment` bytes (at least 64).
pub fn select_with(samples: &[Bytes], size: usize, segment: usize) -> Vec<u8> {
    let segment_len = segment.max(64);
    let table = 1usize << HASH_BITS;
    // In how many samples each substring occurs.
    let mut frequency = vec![0u32; table];
    let mut last_sample = vec![u32::MAX; table];
    for (index, sample) in samples.iter().enumerate() {
        for window in sample.windows(DMER) {
            let h = hash(window);
            if last_sample[h] != index as u32 {
                last_sample[h] = index as u32;
                frequency[h] += 1;
            }
        }
    }
    drop(last_sample);
    // Substrings seen in one sample only are not shared content.
    for count in frequency.iter_mut() {
        if *count < 2 {
            *count = 0;
        }
    }
    let usable: Vec<&Bytes> = samples.iter().filter(|s| s.len() >= segment_len).collect();
    let total: usize = usable.iter().map(|s| s.len()).sum();
    let segments = (size / segment_len).max(1);
    if total == 0 {
        return Vec::new();
    }
    let epoch = (total / segments).max(segment_len);
    let mut in_window = vec![0u16; table];
    let mut kept: Vec<(u64, &[u8])> = Vec::new();
    // The samples laid end to end, walked an epoch at a time; a window never spans two.
    let mut position = usable.iter().flat_map(|sample| {
        (0..=sample.len() - segment_len)
            .step_by(1)
            .map(move |start| (sample, start))
    });
    let mut scanned = 0;
    while scanned < total && kept.len() < segments {
        let mut best: Option<(u64, &[u8])> = None;
        let mut current: Option<(&Bytes, usize)> = None;
        let mut score = 0u64;
        let mut taken = 0;
        while taken < epoch {
            let Some((sample, start)) = position.next() else {
                break;
            };
            taken += 1;
            scanned += 1;
            let continues =
                current.is_some_and(|(s, at)| std::ptr::eq(s, *sample) && at + 1 == start);
            if !continues {
                if let Some((s, at)) = current {
                    release(
                        &mut in_window,
                        &frequency,
                        &s[at..at + segment_len],
                        &mut score,
                    );
                }
                score = 0;
                for window in sample[start..start + segment_len].windows(DMER) {
                    score += enter(&mut in_window, &frequency, hash(window));
                }
            } else {
                // Slide by one: the substring leaving, the one entering.
                let leaving = hash(&sample[start - 1..start - 1 + DMER]);
                score = score.saturating_sub(leave(&mut in_window, &frequency, leaving));
                let end = start + segment_len - DMER;
                score += enter(&mut in_window, &frequency, hash(&sample[end..end + DMER]));
            }
            current = Some((sample, start));
            if best.is_none_or(|(best, _)| score > best) {
                best = Some((score, &sample[start..start + segment_len]));
            }
        }
        if let Some((s, at)) = current {
            release(
                &mut in_window,
                &frequency,
                &s[at..at + segment_len],
                &mut score,
            );
        }
        let Some((score, segment)) = best else {
            break;
        };
        if score == 0 {
            continue;
        }
        for window in segment.windows(DMER) {
            frequency[hash(window)] = 0;
        }
        kept.push((score, segment));
    }
    kept.sort_by_key(|(score, _)| *score);
    let mut dictionary = Vec::with_capacity(kept.len() * segment_len);
    for (_, segment) in kept {
        dictionary.extend_from_slice(segment);
    }
    let excess = dictionary.len().saturating_sub(size);
    dictionary.drain(..excess);
    dictionary
}

/// Counts a substring into the window: its frequency if it is new there.
fn enter(in_window: &mut [u16], frequency: &[u32], h: usize) -> u64 {
    in_window[h] = in_window[h].saturating_add(1);
    if in_window[h] == 1 {
        u64::from(frequency[h])
    } else {
        0
    }
}

/// Takes a substring out of the window: its frequency if it is gone from it.
fn leave(in_window: &mut [u16], frequency: &[u32], h: usize) -> u64 {
    in_window[h] = in_window[h].saturating_sub(1);
    if in_window[h] == 0 {
        u64::from(frequency[h])
    } else {
        0
    }
}

/// Empties the window of `segment`'s substrings.
fn release(in_window: &mut [u16], frequency: &[u32], segment: &[u8], score: &mut u64) {
    for window in segment.windows(DMER) {
        let gone = leave(in_window, frequency, hash(window));
        *score = score.saturating_sub(gone);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(seed: u64, length: usize) -> Vec<u8> {
        zipwire_testkit::generate(zipwire_testkit::DataKind::Random, length, seed)
    }

    /// Samples of noise, each holding `shared` at a different offset.
    fn samples(shared: &[u8], count: u64) -> Vec<Bytes> {
        (0..count)
            .map(|n| {
                let mut sample = noise(n + 1, 3000 + 97 * n as usize);
                let at = 500 + 131 * n as usize;
                sample.splice(at..at, shared.iter().copied());
                Bytes::from(sample)
            })
            .collect()
    }

    #[test]
    fn the_content_every_sample_shares_is_kept_and_nothing_else_first() {
        let shared = noise(999, 3 * SEGMENT);
        let samples = samples(&shared, 12);
        let dictionary = select(&samples, 2 * SEGMENT);
        assert!(!dictionary.is_empty() && dictionary.len() <= 2 * SEGMENT);
        // Every segment is shared content: found inside the shared block.
        for segment in dictionary.chunks(SEGMENT) {
            assert!(
                shared.windows(segment.len()).any(|w| w == segment),
                "a segment of unshared bytes was kept"
            );
        }
        // No segment is kept twice.
        let chunks: Vec<&[u8]> = dictionary.chunks(SEGMENT).collect();
        assert!(chunks.len() < 2 || chunks[0] != chunks[1]);
    }

    #[test]
    fn samples_shorter_than_a_segment_give_nothing() {
        let short: Vec<Bytes> = (0..8).map(|n| Bytes::from(noise(n, 100))).collect();
        assert!(select(&short, 4096).is_empty());
        assert!(select(&[], 4096).is_empty());
    }
}
