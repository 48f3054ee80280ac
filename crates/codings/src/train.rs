//! Site dictionaries: a raw dictionary (RFC 9842's only type) built from a sample of what a
//! site serves, its size chosen by measuring what it saves with its own download counted.
//!
//! The content is chosen by COVER's segment selection ([`crate::cover`]): the 1 KiB
//! segments of the samples whose 8-byte substrings occur in the most samples, most useful
//! last.
//!
//! [`build`] trains on three quarters of the samples at each size asked, measures each
//! dictionary on the held-out quarter (`dcz` at [`MEASURE_LEVEL`] against plain zstd at the
//! same level, plus the dictionary's own download at zstd 19), keeps the size whose total is
//! smallest, and trains that size again on every sample.

use bytes::Bytes;

use crate::dictionary::dcz_one_shot;

/// The zstd level dictionaries are measured at: the ratios of a dictionary against none move
/// together across levels, and this one measures a megabyte in tens of milliseconds.
pub const MEASURE_LEVEL: i32 = 9;

/// The level a dictionary's own download is estimated at (a proxy sends it at its best).
const DOWNLOAD_LEVEL: i32 = 19;

/// What a dictionary was measured to save on held-out samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measured {
    /// The held-out samples' bytes without a dictionary.
    pub plain: u64,
    /// Their bytes as deltas against the dictionary.
    pub with: u64,
    /// The dictionary's own compressed size.
    pub download: u64,
    /// The held-out samples.
    pub pages: u64,
}

impl Measured {
    /// What a client that fetches the dictionary and then the samples receives: the deltas
    /// plus the download.
    pub fn total(&self) -> u64 {
        self.with + self.download
    }

    /// [`Measured::total`] as a share of the bytes without a dictionary (1.0 when there were
    /// none).
    pub fn ratio(&self) -> f64 {
        if self.plain == 0 {
            return 1.0;
        }
        self.total() as f64 / self.plain as f64
    }
}

impl Measured {
    /// [`Measured::ratio`] for a client that makes `views` page views like the held-out
    /// samples per download of the dictionary.
    pub fn projected(&self, views: u64) -> f64 {
        if self.plain == 0 || self.pages == 0 {
            return 1.0;
        }
        let per_view = |bytes: u64| bytes as f64 / self.pages as f64 * views as f64;
        (per_view(self.with) + self.download as f64) / per_view(self.plain)
    }
}

/// A dictionary built by [`build`], with what it was measured to save.
#[derive(Clone, Debug)]
pub struct Trained {
    /// The raw dictionary.
    pub dictionary: Bytes,
    /// The size it was asked to have.
    pub size: usize,
    /// Its measurement on the held-out samples (trained without them).
    pub measured: Measured,
}

/// A raw dictionary of at most `size` bytes trained on `samples`; `None` when the trainer
/// finds nothing to keep (too few or too small samples).
pub fn train(samples: &[Bytes], size: usize) -> Option<Bytes> {
    let selected = crate::cover::select(samples, size);
    // A dictionary that starts as zstd's format would be taken for it (`dcz` forbids).
    let usable = !selected.is_empty() && crate::dictionary::usable_for_dcz(&selected);
    usable.then(|| Bytes::from(selected))
}

/// What `dictionary` saves on `samples` (see [`Measured`]).
pub fn measure(dictionary: &Bytes, samples: &[Bytes]) -> Measured {
    let mut measured = Measured {
        download: zstd::bulk::compress(dictionary, DOWNLOAD_LEVEL)
            .map_or(dictionary.len(), |out| out.len()) as u64,
        ..Measured::default()
    };
    for sample in samples {
        let plain =
            zstd::bulk::compress(sample, MEASURE_LEVEL).map_or(sample.len(), |out| out.len());
        let with = dcz_one_shot(dictionary, MEASURE_LEVEL, sample).map_or(plain, |out| out.len());
        measured.pages += 1;
        measured.plain += plain as u64;
        measured.with += with as u64;
    }
    measured
}

/// Every fourth sample: what [`build`] measures on.
pub fn held_out(samples: &[Bytes]) -> Vec<Bytes> {
    samples.iter().skip(3).step_by(4).cloned().collect()
}

/// The best of `sizes` for `samples` and a client making `views` page views per download
/// (see the module documentation); `None` when no size could be trained or there are fewer
/// than four samples.
pub fn build(samples: &[Bytes], sizes: &[usize], views: u64) -> Option<Trained> {
    if samples.len() < 4 {
        return None;
    }
    let learn: Vec<Bytes> = samples
        .iter()
        .enumerate()
        .filter(|(index, _)| index % 4 != 3)
        .map(|(_, sample)| sample.clone())
        .collect();
    let held = held_out(samples);
    let best = sizes
        .iter()
        .filter_map(|&size| {
            let dictionary = train(&learn, size)?;
            Some((size, measure(&dictionary, &held)))
        })
        .min_by(|(_, a), (_, b)| a.projected(views).total_cmp(&b.projected(views)))?;
    let (size, measured) = best;
    Some(Trained {
        dictionary: train(samples, size)?,
        size,
        measured,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages that share a template around text of their own.
    fn pages(count: usize) -> Vec<Bytes> {
        (0..count)
            .map(|n| {
                let mut page = String::from(
                    "<!DOCTYPE html><html><head><meta charset=utf-8><link rel=stylesheet \
                     href=/static/site.css><title>",
                );
                page.push_str(&format!("Page {n}</title></head><body><nav class=top>"));
                for link in ["home", "docs", "blog", "about", "contact", "pricing"] {
                    page.push_str(&format!("<a class=nav-link href=/{link}/>{link}</a>"));
                }
                page.push_str("</nav><main>");
                for word in 0..400 {
                    page.push_str(&format!("w{} ", (word * 7919 + n * 104_729) % 100_003));
                }
                page.push_str(
                    "</main><footer>Copyright the example authors. All rights reserved. \
                               Built with care.</footer></body></html>",
                );
                Bytes::from(page)
            })
            .collect()
    }

    #[test]
    fn a_trained_dictionary_is_raw_and_makes_pages_smaller() {
        let samples = pages(64);
        let dictionary = train(&samples, 4096).expect("trained");
        assert!(dictionary.len() <= 4096);
        assert!(crate::dictionary::usable_for_dcz(&dictionary));
        let measured = measure(&dictionary, &pages(80)[64..]);
        assert!(measured.with < measured.plain, "{measured:?}");
        // Every delta decodes to its page.
        for page in &pages(70)[64..] {
            let delta = dcz_one_shot(&dictionary, MEASURE_LEVEL, page).expect("delta");
            let back = crate::dictionary::decode(
                zipwire_dictionary::DictCoding::Dcz,
                &dictionary,
                &delta,
                1 << 20,
            )
            .expect("decodes");
            assert_eq!(back, page.as_ref());
        }
    }

    #[test]
    fn build_keeps_the_size_with_the_smallest_total() {
        let samples = pages(64);
        let sizes = [1024, 4096, 16 * 1024];
        for views in [1, 20, 1000] {
            let built = build(&samples, &sizes, views).expect("built");
            let learn: Vec<Bytes> = samples
                .iter()
                .enumerate()
                .filter(|(index, _)| index % 4 != 3)
                .map(|(_, s)| s.clone())
                .collect();
            let held = held_out(&samples);
            assert_eq!(held.len(), 16);
            for size in sizes {
                let other = measure(&train(&learn, size).expect("trained"), &held);
                assert!(
                    built.measured.projected(views) <= other.projected(views),
                    "{views} {size}: {other:?}"
                );
            }
            // One view cannot pay for a download; twenty can.
            assert!(
                views == 1 || built.measured.projected(views) < 1.0,
                "{:?}",
                built.measured
            );
        }
    }

    #[test]
    fn too_few_samples_build_nothing() {
        assert!(build(&pages(3), &[4096], 20).is_none());
        assert!(train(&[], 4096).is_none());
    }
}
