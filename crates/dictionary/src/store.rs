//! The dictionaries the proxy holds, keyed by the SHA-256 of their bytes: what a client's
//! `Available-Dictionary` names. Each is held for the origins (`Host` values) that served it,
//! until its [`lifetime`](crate::lifetime()) ends, within `max_memory` and `max_count`; when
//! full, the oldest stored goes first (expired ones before any).
//!
//! A `Mutex` around a map: a lookup is one hash probe per request that names a dictionary,
//! and an insert one per dictionary response, so the lock is never held for long or often.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use crate::Hash;

/// Bytes counted per dictionary besides its body: the map slot, the origin strings, the
/// struct.
const OVERHEAD: usize = 256;

/// One stored dictionary.
#[derive(Debug)]
pub struct Dictionary {
    /// SHA-256 of `bytes`.
    pub hash: Hash,
    /// The decoded body of the response it came from.
    pub bytes: Bytes,
    /// When clients stop using it.
    pub expires: SystemTime,
    /// The `id` it was announced with, if any.
    pub id: Option<String>,
    /// Whether the proxy marked it (`auto`) rather than the origin.
    pub marked_by_proxy: bool,
}

/// The store's limits (`[dictionaries]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of dictionaries held, at most (default 64 MiB).
    pub max_memory: u64,
    /// Dictionaries held, at most (default 1000, Chromium's per-site limit).
    pub max_count: usize,
    /// The largest single dictionary (default 8 MiB: Firefox's dcz window, and a bigger
    /// one could not be referenced whole).
    pub max_size: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_memory: 64 << 20,
            max_count: 1000,
            max_size: 8 << 20,
        }
    }
}

/// What the store has done, for `/stats` and `/metrics`.
#[derive(Debug, Default)]
pub struct StoreCounters {
    /// Dictionaries stored (a new hash, or a known one from another origin).
    pub stored: AtomicU64,
    /// Dictionaries dropped to stay within the limits.
    pub evicted: AtomicU64,
    /// Dictionaries dropped because they expired.
    pub expired: AtomicU64,
}

struct Held {
    dictionary: Arc<Dictionary>,
    /// Lower-case `Host` values that served it.
    origins: Vec<String>,
}

#[derive(Default)]
struct Inner {
    held: HashMap<Hash, Held>,
    /// Hashes in the order stored (a hash may appear after it left `held`).
    order: VecDeque<Hash>,
    bytes: u64,
}

/// The bounded dictionary store.
pub struct Store {
    inner: Mutex<Inner>,
    limits: Limits,
    counters: Arc<StoreCounters>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("limits", &self.limits)
            .field("memory", &self.memory())
            .finish()
    }
}

impl Store {
    /// An empty store within `limits`.
    pub fn new(limits: Limits) -> Store {
        Store {
            inner: Mutex::default(),
            limits,
            counters: Arc::default(),
        }
    }

    /// The limits it keeps.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Its counters.
    pub fn counters(&self) -> &Arc<StoreCounters> {
        &self.counters
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `bytes` as a dictionary of `origin` for `lifetime` from `now`. Returns its hash,
    /// or `None` when it is empty or larger than `max_size` or `max_memory` allow. A known
    /// hash gets the later expiry and the new origin.
    pub fn insert(
        &self,
        origin: &str,
        bytes: Bytes,
        lifetime: Duration,
        now: SystemTime,
        id: Option<String>,
        marked_by_proxy: bool,
    ) -> Option<Hash> {
        let size = bytes.len() as u64;
        if size == 0
            || size > self.limits.max_size
            || size + OVERHEAD as u64 > self.limits.max_memory
        {
            return None;
        }
        let hash = Hash::of(&bytes);
        let origin = origin.to_ascii_lowercase();
        let expires = now + lifetime;
        let mut inner = self.lock();
        if let Some(held) = inner.held.get_mut(&hash) {
            if !held.origins.contains(&origin) {
                held.origins.push(origin);
                self.counters.stored.fetch_add(1, Ordering::Relaxed);
            }
            if held.dictionary.expires < expires {
                let old = &held.dictionary;
                held.dictionary = Arc::new(Dictionary {
                    hash,
                    bytes: old.bytes.clone(),
                    expires,
                    id: id.or_else(|| old.id.clone()),
                    marked_by_proxy: old.marked_by_proxy && marked_by_proxy,
                });
            }
            return Some(hash);
        }
        let weight = size + OVERHEAD as u64;
        self.make_room(&mut inner, weight, now);
        inner.bytes += weight;
        inner.order.push_back(hash);
        inner.held.insert(
            hash,
            Held {
                dictionary: Arc::new(Dictionary {
                    hash,
                    bytes,
                    expires,
                    id,
                    marked_by_proxy,
                }),
                origins: vec![origin],
            },
        );
        self.counters.stored.fetch_add(1, Ordering::Relaxed);
        Some(hash)
    }

    /// Drops expired dictionaries, then the oldest, until `weight` more bytes and one more
    /// dictionary fit.
    fn make_room(&self, inner: &mut Inner, weight: u64, now: SystemTime) {
        let full = |inner: &Inner| {
            inner.bytes + weight > self.limits.max_memory
                || inner.held.len() >= self.limits.max_count
        };
        if full(inner) {
            let expired: Vec<Hash> = inner
                .held
                .iter()
                .filter(|(_, held)| held.dictionary.expires <= now)
                .map(|(hash, _)| *hash)
                .collect();
            for hash in expired {
                remove(inner, &hash);
                self.counters.expired.fetch_add(1, Ordering::Relaxed);
            }
        }
        while full(inner) {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            if remove(inner, &oldest) {
                self.counters.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        if inner.order.len() > 2 * inner.held.len() + 16 {
            let held = &inner.held;
            inner.order.retain(|hash| held.contains_key(hash));
        }
    }

    /// The dictionary with `hash` that `origin` served, if it has not expired at `now`.
    pub fn get(&self, hash: &Hash, origin: &str, now: SystemTime) -> Option<Arc<Dictionary>> {
        let mut inner = self.lock();
        let held = inner.held.get(hash)?;
        if held.dictionary.expires <= now {
            remove(&mut inner, hash);
            self.counters.expired.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        held.origins
            .iter()
            .any(|held| held.eq_ignore_ascii_case(origin))
            .then(|| held.dictionary.clone())
    }

    /// The dictionary with `hash`, whatever origin served it (the cache's background worker,
    /// which has checked the origin when it queued the work).
    pub fn by_hash(&self, hash: &Hash) -> Option<Arc<Dictionary>> {
        self.lock()
            .held
            .get(hash)
            .map(|held| held.dictionary.clone())
    }

    /// Bytes held, overhead counted.
    pub fn memory(&self) -> u64 {
        self.lock().bytes
    }

    /// Dictionaries held.
    pub fn len(&self) -> usize {
        self.lock().held.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Removes `hash`; whether it was held.
fn remove(inner: &mut Inner, hash: &Hash) -> bool {
    match inner.held.remove(hash) {
        Some(held) => {
            inner.bytes -= held.dictionary.bytes.len() as u64 + OVERHEAD as u64;
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    fn store(max_memory: u64, max_count: usize) -> Store {
        Store::new(Limits {
            max_memory,
            max_count,
            max_size: 1 << 20,
        })
    }

    #[test]
    fn found_by_hash_for_the_origin_that_served_it() {
        let store = store(1 << 20, 10);
        let now = SystemTime::now();
        let hash = store
            .insert(
                "Example.com",
                Bytes::from_static(b"dictionary"),
                HOUR,
                now,
                None,
                false,
            )
            .unwrap();
        assert_eq!(hash, Hash::of(b"dictionary"));
        assert!(store.get(&hash, "example.com", now).is_some());
        assert!(store.get(&hash, "other.example", now).is_none());
        assert!(store.get(&Hash([0; 32]), "example.com", now).is_none());
        assert!(store.get(&hash, "example.com", now + 2 * HOUR).is_none());
        assert!(store.is_empty(), "expired on lookup");
    }

    #[test]
    fn memory_and_count_stay_within_limits() {
        let now = SystemTime::now();
        let store = store(10 * (1000 + OVERHEAD as u64), 5);
        for i in 0..50u8 {
            let bytes = Bytes::from(vec![i; 1000]);
            store.insert("a", bytes, HOUR, now, None, true).unwrap();
            assert!(store.len() <= 5);
            assert!(store.memory() <= 10 * (1000 + OVERHEAD as u64));
        }
        // The newest are kept.
        assert!(store.get(&Hash::of(&[49; 1000]), "a", now).is_some());
        assert!(store.get(&Hash::of(&[0; 1000]), "a", now).is_none());
        assert_eq!(store.counters().evicted.load(Ordering::Relaxed), 45);
        let small = super::Store::new(Limits {
            max_memory: 2000,
            max_count: 5,
            max_size: 1 << 20,
        });
        assert!(small
            .insert("a", Bytes::from(vec![1; 1900]), HOUR, now, None, true)
            .is_none());
    }

    #[test]
    fn expired_ones_go_before_older_live_ones() {
        let now = SystemTime::now();
        let store = store(1 << 20, 2);
        let live = store.insert("a", Bytes::from_static(b"live"), 10 * HOUR, now, None, true);
        let short = store.insert("a", Bytes::from_static(b"short"), HOUR, now, None, true);
        let later = now + 2 * HOUR;
        store.insert("a", Bytes::from_static(b"new"), HOUR, later, None, true);
        assert!(store.get(&live.unwrap(), "a", later).is_some());
        assert!(store.by_hash(&short.unwrap()).is_none());
    }
}
