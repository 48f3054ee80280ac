//! The background worker that recompresses stored variants at the best levels (libdeflate
//! 12 for gzip and deflate, brotli 11, zstd 19), most-hit entry first, off the request path.
//!
//! A better variant replaces the stored one only after it decodes to the stored length and
//! CRC-32 ([`variant::verify`]), and only if the entry it was made from is still the one
//! stored (a revalidation or a new variant meanwhile wins; the worker comes back to it).
//!
//! It yields to the requests: while the compression budget refuses new compressions
//! (`compression.max_cpu`, see [`Throttle`]) it waits, and after each entry it rests as long
//! as the entry took, so it uses at most half of one core.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;

use crate::cache::store::Entry;
use crate::cache::{variant, Cache};
use crate::encode::throttle::Throttle;

/// How long the worker waits when there is nothing to do or no budget.
const IDLE: Duration = Duration::from_millis(250);

/// Runs until the task is dropped.
pub(crate) async fn run(cache: Arc<Cache>, throttle: Throttle) {
    loop {
        if throttle.is_bypassing_new() {
            tokio::time::sleep(IDLE).await;
            continue;
        }
        let Some((key, entry)) = next(&cache) else {
            tokio::time::sleep(IDLE).await;
            continue;
        };
        let started = Instant::now();
        let worked = entry.clone();
        let better = tokio::task::spawn_blocking(move || recompressed(&worked)).await;
        let Ok(Some((new, improved))) = better else {
            continue;
        };
        if cache.store.swap(&key, &entry, Arc::new(new)) {
            cache
                .counters
                .cache
                .recompressions
                .fetch_add(improved, Ordering::Relaxed);
            cache.account();
        }
        let took = started.elapsed();
        debug!(key, ?took, "recompressed");
        tokio::time::sleep(took.max(Duration::from_millis(1))).await;
    }
}

/// The most-hit entry with a variant not yet at its best level.
fn next(cache: &Cache) -> Option<(String, Arc<Entry>)> {
    cache
        .store
        .entries()
        .into_iter()
        .filter(|(_, entry)| entry.body.variants.iter().any(|v| !v.best))
        .max_by_key(|(_, entry)| entry.hits.load(Ordering::Relaxed))
}

/// The entry with every variant at its best level, each verified; a variant the best level
/// does not make smaller (or that fails its check) is kept and marked done.
/// The second value counts the variants replaced.
fn recompressed(entry: &Entry) -> Option<(Entry, u64)> {
    let identity = variant::identity(&entry.body).ok()?;
    let mut body = entry.body.clone();
    let mut improved = 0;
    for stored in body.variants.iter_mut().filter(|v| !v.best) {
        stored.best = true;
        let Some(bytes) = variant::encode_best(stored.coding, &identity) else {
            continue;
        };
        if bytes.len() < stored.bytes.len() && variant::verify(&entry.body, stored.coding, &bytes) {
            stored.bytes = bytes;
            improved += 1;
        }
    }
    Some((entry.with_body(body), improved))
}
