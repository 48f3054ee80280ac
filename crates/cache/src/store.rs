//! The stored responses, bounded in memory: a `quick_cache` (S3-FIFO eviction, a weigher that
//! counts every byte held) keyed by host and target, each key holding the responses its
//! `Vary` selects.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use http::StatusCode;
use quick_cache::sync::Cache;
use quick_cache::{DefaultHashBuilder, Lifecycle, OptionsBuilder, Weighter};

use crate::key::Selected;
use crate::storage::Storage;
use zipwire_dictionary::{DictCoding, Hash};
use zipwire_rules::negotiate::Coding;

/// Fixed cost counted per entry besides its bytes: the structs, the index slot, the
/// allocator's overhead.
const ENTRY_OVERHEAD: usize = 512;

/// A copy of `headers` that holds its own bytes. hyper's header values are slices of the
/// connection's read buffer, so a stored one would keep that whole buffer (8 KiB or more) alive:
/// 30,000 cached 100-byte responses would hold 159 MB against a `max_memory` of 16 MiB.
pub fn detached(headers: &HeaderMap) -> HeaderMap {
    let mut copy = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        copy.append(name.clone(), detached_value(value));
    }
    copy
}

/// One header value with bytes of its own (see [`detached`]).
pub fn detached_value(value: &HeaderValue) -> HeaderValue {
    match HeaderValue::from_bytes(value.as_bytes()) {
        Ok(mut copy) => {
            copy.set_sensitive(value.is_sensitive());
            copy
        }
        // It was a valid value; the bytes are the same.
        Err(_) => value.clone(),
    }
}

/// Responses kept for one key, at most this many (one per `Vary` selection).
const SELECTIONS_PER_KEY: usize = 8;

/// One stored response. Immutable: a revalidation, a new variant or a recompression makes a
/// new entry that replaces it, so a reader never sees half an update.
#[derive(Debug)]
pub struct Entry {
    /// The stored response's status.
    pub status: StatusCode,
    /// The upstream's headers, hop-by-hop fields removed.
    pub headers: HeaderMap,
    /// What the request fields named by `Vary` held.
    pub selected: Selected,
    /// When the response (or the 304 that last revalidated it) was received.
    pub response_time: SystemTime,
    /// Its age when received (RFC 9111 §4.2.3).
    pub initial_age: Duration,
    /// How long it is fresh from the origin's point of view (§4.2.1).
    pub lifetime: Duration,
    /// Whether it may answer a request with `Authorization` (§3.5).
    pub shared_with_credentials: bool,
    /// The body, as sent and in the variants made of it.
    pub body: StoredBody,
    /// Uses since it was stored, for the recompression order.
    pub hits: Arc<AtomicU64>,
}

/// A stored body: as the upstream sent it, or, for a response the proxy compresses, one
/// variant per coding produced so far (the identity bytes are not kept: a client without a
/// stored coding gets a variant decoded).
#[derive(Clone, Debug, Default)]
pub struct StoredBody {
    /// The bytes as the origin sent them, until a variant replaces them.
    pub as_sent: Option<Bytes>,
    /// The body in each content coding made so far.
    pub variants: Vec<Variant>,
    /// Codings a client got this response in (the miss, compressed as it streamed) that
    /// have no stored variant yet: the background worker makes them at the best level, so
    /// the next client in that coding gets a stored variant.
    pub pending: Vec<Coding>,
    /// Deltas against dictionaries clients hold (RFC 9842 `dcz`, `dcb`), at most
    /// [`DELTAS_PER_ENTRY`], the newest last.
    pub deltas: Vec<Delta>,
    /// Length of the representation (decoded, for variants).
    pub length: u64,
    /// CRC-32 of the representation, to check a variant before it is swapped in.
    pub crc: u32,
}

/// One coding of a compressible response.
#[derive(Clone, Debug)]
pub struct Variant {
    /// Its content coding.
    pub coding: Coding,
    /// The encoded body.
    pub bytes: Bytes,
    /// Made at the best level by the background worker.
    pub best: bool,
    /// What the request-path encoder took to make it, in microseconds: the time each hit
    /// saves.
    pub micros: u64,
}

/// Deltas kept per entry: one per dictionary a client holds, and clients hold the last few
/// versions (RFC 9842's variant fan-out, http-extensions#2635).
pub const DELTAS_PER_ENTRY: usize = 4;

/// The body as a delta against one dictionary, in one dictionary coding.
#[derive(Clone, Debug)]
pub struct Delta {
    /// The dictionary's hash.
    pub hash: Hash,
    /// `dcz` or `dcb`.
    pub coding: DictCoding,
    /// The encoded body, the coding's header included.
    pub bytes: Bytes,
    /// The dictionary, for the worker that remakes the delta at the best level. Its bytes
    /// are the dictionary store's (shared, counted there).
    pub dictionary: Bytes,
    /// Made at the best level by the background worker.
    pub best: bool,
}

impl StoredBody {
    /// Whether the recompression worker has work on it: a coding to make, or a variant or
    /// delta not at its best level.
    pub fn unfinished(&self) -> bool {
        !self.pending.is_empty()
            || self.variants.iter().any(|v| !v.best)
            || self.deltas.iter().any(|d| !d.best)
    }

    /// The stored delta against `hash` in `coding`.
    pub fn delta(&self, hash: &Hash, coding: DictCoding) -> Option<&Delta> {
        self.deltas
            .iter()
            .find(|delta| delta.hash == *hash && delta.coding == coding)
    }

    /// The stored variant in `coding`.
    pub fn variant(&self, coding: Coding) -> Option<&Variant> {
        self.variants
            .iter()
            .find(|variant| variant.coding == coding)
    }

    /// Bytes held.
    pub fn weight(&self) -> usize {
        self.as_sent.as_ref().map_or(0, Bytes::len)
            + self.variants.iter().map(|v| v.bytes.len()).sum::<usize>()
            + self.deltas.iter().map(|d| d.bytes.len()).sum::<usize>()
    }
}

impl Entry {
    /// The age of the entry at `now` (§4.2.3: initial age plus resident time).
    pub fn age(&self, now: SystemTime) -> Duration {
        self.initial_age
            + now
                .duration_since(self.response_time)
                .unwrap_or(Duration::ZERO)
    }

    /// Bytes held, everything counted.
    fn weight(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 32)
            .sum();
        ENTRY_OVERHEAD + headers + self.selected.weight() + self.body.weight()
    }

    /// A copy with another body, the same hit count.
    pub fn with_body(&self, body: StoredBody) -> Entry {
        Entry {
            status: self.status,
            headers: self.headers.clone(),
            selected: self.selected.clone(),
            response_time: self.response_time,
            initial_age: self.initial_age,
            lifetime: self.lifetime,
            shared_with_credentials: self.shared_with_credentials,
            body,
            hits: self.hits.clone(),
        }
    }
}

/// The responses of one key.
type Slot = Arc<Vec<Arc<Entry>>>;

#[derive(Clone)]
struct Weigh;

impl Weighter<String, Slot> for Weigh {
    fn weight(&self, key: &String, slot: &Slot) -> u64 {
        slot_weight(key, slot)
    }
}

/// What a key's slot weighs against the store's capacity.
fn slot_weight(key: &str, entries: &[Arc<Entry>]) -> u64 {
    let entries: usize = entries.iter().map(|entry| entry.weight()).sum();
    (key.len() + 64 + entries) as u64
}

/// Collects the keys that one insertion dropped: quick_cache reports the slot an insertion
/// replaces as evicted too, and only the others count as evictions
/// ([`Store::insert`]).
#[derive(Clone)]
struct Dropped;

impl Lifecycle<String, Slot> for Dropped {
    type RequestState = Vec<String>;

    fn begin_request(&self) -> Vec<String> {
        Vec::new()
    }

    fn on_evict(&self, dropped: &mut Vec<String>, key: String, _slot: Slot) {
        dropped.push(key);
    }
}

/// The bounded store.
pub struct Store {
    cache: Cache<String, Slot, Weigh, DefaultHashBuilder, Dropped>,
    /// Responses the eviction policy dropped to make room (not those replaced by a newer
    /// fill, a variant or a recompression of the same key).
    evictions: AtomicU64,
    /// Held by every change: [`Store::put`] and [`Store::swap`] read a key's slot and write
    /// it back, and a removal or another change between the two was undone (a purged or
    /// invalidated response came back; a new fill was replaced by the entry it replaced).
    /// Reads take no lock; changes are few (a fill's end, a variant, an invalidation).
    writing: std::sync::Mutex<()>,
    /// The most one key's slot may weigh: one shard's capacity, past which quick_cache
    /// refuses the insertion and drops the key's old slot too.
    slot_capacity: u64,
    /// An entry with a variant to make or recompress may have been stored since the recompression
    /// worker last looked: it scans the store only then (a scan every 250 ms of a store with
    /// nothing to do would cost 5% of a core at 17,700 entries).
    unfinished: AtomicBool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("weight", &self.cache.weight())
            .field("keys", &self.cache.len())
            .finish()
    }
}

impl Store {
    /// A store of at most `max_memory` bytes, for objects up to `max_object`.
    pub fn new(max_memory: u64, max_object: u64) -> Store {
        // quick_cache splits the capacity among shards and refuses an item larger than one:
        // fewer shards for larger objects, so that the largest allowed always fits.
        let per_shard = (4 * (max_object + 64 * 1024)).max(1);
        let shards = (max_memory / per_shard).clamp(1, 16);
        let shards = 1usize << (63 - shards.leading_zeros());
        let options = OptionsBuilder::new()
            .shards(shards)
            .estimated_items_capacity(1024)
            .weight_capacity(max_memory.max(1))
            .build();
        let lifecycle = Dropped;
        let cache = match options {
            Ok(options) => {
                Cache::with_options(options, Weigh, DefaultHashBuilder::default(), lifecycle)
            }
            // The options above are always valid; a smaller default is the fallback.
            Err(_) => Cache::with(
                1024,
                max_memory.max(1),
                Weigh,
                DefaultHashBuilder::default(),
                lifecycle,
            ),
        };
        Store {
            cache,
            evictions: AtomicU64::new(0),
            writing: std::sync::Mutex::new(()),
            slot_capacity: max_memory.max(1) / shards as u64,
            unfinished: AtomicBool::new(false),
        }
    }

    /// Stores `slot` under `key` (the caller holds the write lock), counting as evictions
    /// the other keys the policy dropped to make room.
    fn insert(&self, key: String, slot: Slot) {
        if slot.iter().any(|entry| entry.body.unfinished()) {
            self.unfinished.store(true, Ordering::Release);
        }
        let dropped = self.cache.insert_with_lifecycle(key.clone(), slot);
        let evicted = dropped.iter().filter(|dropped| **dropped != key).count();
        self.evictions.fetch_add(evicted as u64, Ordering::Relaxed);
    }

    fn write(&self) -> std::sync::MutexGuard<'_, ()> {
        self.writing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Storage for Store {
    /// The stored response for `key` whose `Vary` selection `request` matches.
    fn find(&self, key: &str, request: &HeaderMap) -> Option<Arc<Entry>> {
        let slot = self.cache.get(key)?;
        slot.iter()
            .find(|entry| entry.selected.matches(request))
            .cloned()
    }

    /// Stores `entry`, replacing the one with the same selection.
    fn put(&self, key: String, entry: Arc<Entry>) {
        let _writing = self.write();
        let mut entries: Vec<Arc<Entry>> = match self.cache.peek(&key) {
            Some(slot) => slot
                .iter()
                .filter(|old| old.selected != entry.selected)
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        entries.truncate(SELECTIONS_PER_KEY - 1);
        entries.insert(0, entry);
        // The oldest selections go where the slot would outgrow its shard: quick_cache would refuse
        // it and drop every selection of the key, the new one with them (a sixth `Vary` selection
        // of 200 KB in a 1 MiB cache would empty the key).
        while entries.len() > 1 && slot_weight(&key, &entries) > self.slot_capacity {
            entries.pop();
        }
        self.insert(key, Arc::new(entries));
    }

    /// Replaces `old` by `new` only if `old` is still the one stored (a recompression or a
    /// new variant must not undo a revalidation that came meanwhile).
    fn swap(&self, key: &str, old: &Arc<Entry>, new: Arc<Entry>) -> bool {
        let _writing = self.write();
        let Some(slot) = self.cache.peek(key) else {
            return false;
        };
        let Some(position) = slot.iter().position(|entry| Arc::ptr_eq(entry, old)) else {
            return false;
        };
        let mut entries: Vec<Arc<Entry>> = slot.iter().cloned().collect();
        entries[position] = new;
        self.insert(key.to_owned(), Arc::new(entries));
        true
    }

    /// Drops every response of `key`; whether there was any.
    fn remove(&self, key: &str) -> bool {
        let _writing = self.write();
        self.cache.remove(key).is_some()
    }

    /// Drops every key; returns how many there were.
    fn clear(&self) -> u64 {
        let _writing = self.write();
        let keys = self.cache.len() as u64;
        self.cache.clear();
        keys
    }

    /// Bytes held, as the weigher counts them.
    fn weight(&self) -> u64 {
        self.cache.weight()
    }

    /// Keys dropped by the eviction policy so far.
    fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Whether an entry with work for the recompression worker may be stored, clearing the
    /// mark: a store after this call marks it again, so the worker's next look finds it.
    fn take_unfinished(&self) -> bool {
        self.unfinished.swap(false, Ordering::AcqRel)
    }

    /// Marks the store as holding work for the recompression worker.
    fn mark_unfinished(&self) {
        self.unfinished.store(true, Ordering::Release);
    }

    /// Every stored entry with its key, for the recompression worker.
    fn entries(&self) -> Vec<(String, Arc<Entry>)> {
        self.cache
            .iter()
            .flat_map(|(key, slot)| {
                slot.iter()
                    .map(|entry| (key.clone(), entry.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

#[cfg(test)]
impl Entry {
    /// A fresh-looking 200 with `headers` and `body`, stored as sent, for tests.
    pub fn for_tests(headers: HeaderMap, body: Bytes) -> Entry {
        Entry {
            status: StatusCode::OK,
            headers,
            selected: Selected::new(&HeaderMap::new(), &HeaderMap::new(), true),
            response_time: SystemTime::UNIX_EPOCH,
            initial_age: Duration::ZERO,
            lifetime: Duration::ZERO,
            shared_with_credentials: false,
            body: StoredBody {
                length: body.len() as u64,
                as_sent: Some(body),
                variants: Vec::new(),
                pending: Vec::new(),
                deltas: Vec::new(),
                crc: 0,
            },
            hits: Arc::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(size: usize) -> Arc<Entry> {
        Arc::new(Entry::for_tests(
            HeaderMap::new(),
            Bytes::from(vec![b'x'; size]),
        ))
    }

    #[test]
    fn detached_headers_hold_their_own_bytes() {
        // As hyper parses a head: each value a slice of the connection's read buffer.
        let buffer = Bytes::from(b"x-a: one\r\nx-b: two\r\n".repeat(400));
        let mut headers = HeaderMap::new();
        let value =
            |at: usize| HeaderValue::from_maybe_shared(buffer.slice(at..at + 3)).expect("valid");
        headers.append("x-a", value(5));
        let mut secret = value(15);
        secret.set_sensitive(true);
        headers.append("x-b", secret);
        headers.append("x-b", value(5));
        let inside = |bytes: &[u8]| {
            let range = buffer.as_ptr_range();
            range.contains(&bytes.as_ptr())
        };
        assert!(
            headers.values().all(|v| inside(v.as_bytes())),
            "the test's premise"
        );
        let copy = detached(&headers);
        assert_eq!(copy, headers);
        assert!(copy.values().all(|v| !inside(v.as_bytes())));
        let kept: Vec<_> = copy
            .get_all("x-b")
            .iter()
            .map(HeaderValue::is_sensitive)
            .collect();
        assert_eq!(kept, [true, false]);
    }

    #[test]
    fn only_entries_with_work_mark_the_store_for_the_worker() {
        let store = Store::new(1 << 20, 64 * 1024);
        assert!(!store.take_unfinished());
        store.put("done".to_owned(), entry(100));
        assert!(!store.take_unfinished(), "nothing to recompress");
        let mut pending = Entry::for_tests(HeaderMap::new(), Bytes::from_static(b"abc"));
        pending.body.pending.push(Coding::Gzip);
        store.put("pending".to_owned(), Arc::new(pending));
        assert!(store.take_unfinished());
        assert!(!store.take_unfinished(), "taken");
    }

    /// quick_cache reports a replaced slot as evicted: a new fill of a key, or a swap for its
    /// recompressed entry, counted as an eviction (7 stores, 7 recompressions: 8 evictions,
    /// with 4.8 KB held of 128 MiB).
    #[test]
    fn only_what_makes_room_counts_as_an_eviction() {
        let store = Store::new(1 << 20, 64 * 1024);
        let first = entry(1_000);
        store.put("a".to_owned(), first.clone());
        store.put("a".to_owned(), entry(1_000));
        let stored = store.find("a", &HeaderMap::new()).expect("stored");
        assert!(store.swap("a", &stored, entry(500)));
        assert!(!store.swap("a", &first, entry(500)));
        assert_eq!(store.evictions(), 0);
        for n in 0..300 {
            store.put(format!("k{n}"), entry(10_000));
        }
        let evicted = store.evictions();
        assert!(evicted > 100, "{evicted}");
        assert!(store.cache.weight() <= 1 << 20);
    }

    #[test]
    fn selections_past_a_shard_drop_the_oldest_not_the_key() {
        // 1 MiB, objects up to 256 KiB: one shard. Six `Vary: Accept-Language` selections of
        // 200 KB outgrow it; the oldest goes and the newest five stay.
        let store = Store::new(1 << 20, 256 * 1024);
        let vary = HeaderMap::from_iter([(
            http::header::VARY,
            http::HeaderValue::from_static("accept-language"),
        )]);
        let request = |language: &str| {
            let mut headers = HeaderMap::new();
            let value = http::HeaderValue::from_str(language).expect("a valid value");
            headers.insert(http::header::ACCEPT_LANGUAGE, value);
            headers
        };
        let languages = ["a", "b", "c", "d", "e", "f"];
        for language in languages {
            let mut entry = Entry::for_tests(vary.clone(), Bytes::from(vec![b'x'; 200_000]));
            entry.selected = Selected::new(&vary, &request(language), true);
            store.put("k".to_owned(), Arc::new(entry));
        }
        assert!(store.find("k", &request("f")).is_some(), "the newest");
        assert!(
            store.find("k", &request("a")).is_none(),
            "the oldest made room"
        );
        let kept = languages
            .iter()
            .filter(|language| store.find("k", &request(language)).is_some())
            .count();
        assert_eq!(kept, 5);
        assert!(store.cache.weight() <= 1 << 20);
    }
}
