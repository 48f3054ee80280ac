//! zipwire's shared HTTP cache (RFC 9111) in front of the compressor: compress once, serve
//! many. Its model is pingora's `pingora-cache` (key, lock, storage, eviction, meta, variance,
//! behind the proxy's named cache phase).
//!
//! # Brief overview
//!
//! - [`Cache::lookup`] says what a request may use ([`Lookup`]); [`Cache::join_fill`] waits
//!   for a fill of the same key under way ([`fill`]: the fill lock and coalescing, up to
//!   [`CacheSettings::lock_timeout`]); [`Cache::after_upstream`] says what the origin's answer
//!   does to the store ([`After`]).
//! - A response a shared cache may store ([`policy`]: RFC 9111 §3, `CDN-Cache-Control` of
//!   RFC 9213) is kept in a [`Storage`] tier: today [`Store`], memory bounded by
//!   [`CacheSettings::max_memory`] with `quick_cache`'s eviction; a second tier shared by a
//!   fleet implements the same trait. Entries are keyed by host and target and by the request
//!   fields their `Vary` names ([`key`]).
//! - A compressible response is kept once per coding the clients asked for ([`variant`]); a
//!   client without a stored coding gets a stored variant decoded. [`recompress`] is where a
//!   stored variant is recompressed at the best level, off the request path.
//! - Two modes ([`CacheMode`]): `revalidate` asks the origin every time, conditionally
//!   ([`revalidate`]), so it never serves what the origin would not; `fresh` serves a fresh
//!   entry without asking (nginx `proxy_cache`, Varnish) and revalidates stale ones.
//!
//! The response made from an entry for one client (the coding it gets, ranges, a 304) is the
//! proxy's cache phase, which asks `zipwire_rules::admit` as the streamed path does.
//!
//! The cache is off unless configured: the origin sees conditional requests it did not see
//! before, and fewer requests, so turning it on is the operator's choice.

pub mod fill;
pub mod key;
mod lookup;
pub mod policy;
pub mod recompress;
pub mod revalidate;
mod storage;
pub mod store;
pub mod variant;

pub use lookup::{After, Lookup};
pub use storage::Storage;
pub use store::{Delta, Entry, Store, StoredBody, Variant};

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use zipwire_codings::Codings;

/// How the proxy uses its cache (`[cache] mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheMode {
    /// No cache: every request goes to the origin and every response is compressed anew.
    #[default]
    Off,
    /// Every request goes to the origin, conditional on the stored validator; a 304 is
    /// answered from the cache, without compressing again.
    Revalidate,
    /// A fresh entry is served without asking the origin (`max-age`, `s-maxage`, `Expires`,
    /// `Age`); a stale one is revalidated.
    Fresh,
}

/// The wall clock the cache reads for ages and expiry; tests pass one they move.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> SystemTime + Send + Sync>);

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock(Arc::new(SystemTime::now))
    }

    /// A clock that reads `now`.
    pub fn new(now: impl Fn() -> SystemTime + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(now))
    }

    /// The time now.
    pub fn now(&self) -> SystemTime {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Clock")
    }
}

/// The `[cache]` settings (nginx `proxy_cache_*`, Varnish's storage and `beresp` rules).
#[derive(Clone, Debug)]
pub struct CacheSettings {
    /// Off (the default), revalidate or fresh.
    pub mode: CacheMode,
    /// The largest body stored, in bytes. Default 8 MiB. A body of unknown length (chunked)
    /// is copied as it streams and dropped from the cache once it grows past this; one that
    /// ends only when the connection closes is not stored.
    pub max_object: u64,
    /// The memory the cache may hold, every stored byte and the index counted (nginx
    /// `keys_zone` plus `max_size`, Varnish `-s malloc,SIZE`). Default 128 MiB.
    pub max_memory: u64,
    /// Whether responses with `Set-Cookie` are stored (default no: a cookie meant for one
    /// client must not go to others).
    pub store_set_cookie: bool,
    /// Recompress stored variants at the best levels in the background (default on).
    pub recompress: bool,
    /// How long a request that misses waits for another request already filling the same
    /// key before it asks the origin itself (nginx `proxy_cache_lock_timeout`). Default 5 s;
    /// zero turns the coalescing off.
    pub lock_timeout: Duration,
    /// The clock ages are read from.
    pub clock: Clock,
}

impl Default for CacheSettings {
    fn default() -> CacheSettings {
        CacheSettings {
            mode: CacheMode::Off,
            max_object: 8 << 20,
            max_memory: 128 << 20,
            store_set_cookie: false,
            recompress: true,
            lock_timeout: Duration::from_secs(5),
            clock: Clock::system(),
        }
    }
}

/// What the cache counts (`/stats` and `/metrics`).
#[derive(Debug, Default)]
pub struct CacheCounters {
    /// Requests answered from a stored response without asking the origin.
    pub hits: AtomicU64,
    /// Requests for which nothing usable was stored.
    pub misses: AtomicU64,
    /// Stored responses the origin confirmed with a 304.
    pub revalidations: AtomicU64,
    /// Responses stored (new or replacing).
    pub stores: AtomicU64,
    /// Keys the eviction policy dropped.
    pub evictions: AtomicU64,
    /// Bytes the cache holds now (a gauge).
    pub bytes_held: AtomicU64,
    /// Variants recompressed at the best level and swapped in.
    pub recompressions: AtomicU64,
    /// Encoder time the hits saved: for each response served from a stored variant, the
    /// time its compression took, in microseconds.
    pub encoder_micros_saved: AtomicU64,
    /// Keys dropped by purge requests or by unsafe methods (RFC 9111 §4.4).
    pub invalidations: AtomicU64,
    /// Misses that waited for another request filling the same key instead of asking the
    /// origin at once.
    pub coalesced: AtomicU64,
}

impl CacheCounters {
    /// Adds one to `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The cache one server shares between its connections.
#[derive(Debug)]
pub struct Cache {
    /// The `[cache]` settings it was made with.
    pub settings: CacheSettings,
    /// Where the entries are kept.
    pub store: Box<dyn Storage>,
    /// The keys being filled now, and who waits for them.
    pub filling: Arc<fill::Filling>,
    /// What it counts, shared with the server's stats.
    pub counters: Arc<CacheCounters>,
    /// The request path's encoders: what a variant costs there is what each hit on a stored
    /// one saves.
    pub codings: Codings,
    /// The upstream never sees `Accept-Encoding` (offload mode), so it is no selecting field.
    pub offload: bool,
}

impl Cache {
    /// The cache for `settings`; `None` when its mode is off.
    pub fn new(
        settings: &CacheSettings,
        codings: &Codings,
        counters: Arc<CacheCounters>,
        offload: bool,
    ) -> Option<Cache> {
        if settings.mode == CacheMode::Off {
            return None;
        }
        Some(Cache {
            settings: settings.clone(),
            store: Box::new(Store::new(settings.max_memory, settings.max_object)),
            filling: Arc::default(),
            counters,
            codings: codings.clone(),
            offload,
        })
    }

    /// Drops the responses of one key (`host target`), or every one: the admin purge. Whether it
    /// dropped anything: everything, a stored response of the key, or one on its way in, which is
    /// voided: the purge did drop it, so it does not answer 404.
    pub fn purge(&self, key: Option<&str>) -> bool {
        let filling = key.is_some_and(|key| self.filling.is_filling(key));
        // Responses on their way in would otherwise be stored after the purge.
        self.filling.void(key);
        // Keys dropped, as the counter's documentation says, rather than purge requests, which
        // would count one for a whole cache and one that dropped nothing alike.
        let dropped = match key {
            Some(key) => u64::from(self.store.remove(key)),
            None => self.store.clear(),
        };
        self.counters
            .invalidations
            .fetch_add(dropped, std::sync::atomic::Ordering::Relaxed);
        self.account();
        key.is_none() || dropped > 0 || filling
    }

    /// Brings the gauges up to date after a change.
    pub fn account(&self) {
        self.counters
            .bytes_held
            .store(self.store.weight(), Ordering::Relaxed);
        self.counters
            .evictions
            .store(self.store.evictions(), Ordering::Relaxed);
    }
}
