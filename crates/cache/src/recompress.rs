//! The background worker that recompresses stored variants at the best levels (libdeflate
//! 12 for gzip and deflate, brotli 11, zstd 19), most-hit entry first, off the request path.
//! It also makes, at the best level, the variant in the coding a miss was streamed in, so
//! that the first hit after it is served from memory rather than compressed again.
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

use crate::store::{Entry, Variant};
use crate::{variant, Cache};
use zipwire_adapt::Throttle;
use zipwire_codings::{dictionary, Codings};

/// How long the worker waits when there is nothing to do or no budget.
const IDLE: Duration = Duration::from_millis(250);

/// Runs until the task is dropped.
pub async fn run(cache: Arc<Cache>, throttle: Throttle) {
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
        let codings = cache.codings.clone();
        let better = tokio::task::spawn_blocking(move || recompressed(&worked, &codings)).await;
        let Ok(Some((new, improved))) = better else {
            continue;
        };
        if cache.store.swap(&key, &entry, Arc::new(new)) {
            cache
                .counters
                .recompressions
                .fetch_add(improved, Ordering::Relaxed);
            cache.account();
        }
        let took = started.elapsed();
        debug!(key, ?took, "recompressed");
        tokio::time::sleep(took.max(Duration::from_millis(1))).await;
    }
}

/// The most-hit entry with a variant not yet at its best level, or one to make. The store
/// is scanned only if such an entry may have been stored since the last scan that found
/// none; after one that found some, it stays marked.
fn next(cache: &Cache) -> Option<(String, Arc<Entry>)> {
    if !cache.store.take_unfinished() {
        return None;
    }
    let found = cache
        .store
        .entries()
        .into_iter()
        .filter(|(_, entry)| entry.body.unfinished())
        .max_by_key(|(_, entry)| entry.hits.load(Ordering::Relaxed))?;
    // There may be more; the next call scans again.
    cache.store.mark_unfinished();
    Some(found)
}

/// The entry with every variant at its best level, each verified; a variant the best level
/// does not make smaller (or that fails its check) is kept and marked done. A pending coding
/// becomes a best variant, with the time the request-path encoder takes for it (what each
/// hit on it saves). The second value counts the variants replaced or made.
fn recompressed(entry: &Entry, codings: &Codings) -> Option<(Entry, u64)> {
    let identity = variant::identity(&entry.body).ok()?;
    let mut body = entry.body.clone();
    let mut improved = 0;
    for coding in std::mem::take(&mut body.pending) {
        if body.variant(coding).is_some() {
            continue;
        }
        let Some(bytes) = variant::encode_best(coding, &identity) else {
            continue;
        };
        if !variant::verify(&entry.body, coding, &bytes) {
            continue;
        }
        let request_path = codings.encoder(coding, Some(identity.len() as u64));
        let micros = variant::encode(request_path, &identity).map_or(0, |(_, micros)| micros);
        body.variants.push(Variant {
            coding,
            bytes,
            best: true,
            micros,
        });
        improved += 1;
    }
    if !body.variants.is_empty() {
        // A client without a stored coding gets a variant decoded.
        body.as_sent = None;
    }
    for delta in body.deltas.iter_mut().filter(|d| !d.best) {
        delta.best = true;
        let Some(bytes) =
            dictionary::encode_best(delta.coding, &delta.dictionary, &delta.hash, &identity)
        else {
            continue;
        };
        let decoded =
            dictionary::decode(delta.coding, &delta.dictionary, &bytes, entry.body.length);
        let verified = decoded.is_ok_and(|decoded| {
            decoded.len() as u64 == entry.body.length && crc32fast::hash(&decoded) == entry.body.crc
        });
        if bytes.len() < delta.bytes.len() && verified {
            delta.bytes = bytes;
            improved += 1;
        }
    }
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
