//! A miss stored as it streams, and the misses of one key coalesced.
//!
//! A storable response goes to its client as it would without a cache (compressed on the
//! fly, a call at a time), and the bytes the origin sends are copied into a [`Fill`] on their
//! way (the upstream body's counter feeds it). Only when the upstream body ends as framed (its
//! `Content-Length` reached, its last chunk read, or an HTTP/2 end of stream) is the entry
//! stored; a body that fails, that the client abandons, or that grows past
//! `cache.max_object` leaves nothing behind. A body of unknown length is stored when its
//! framing says where it ends; one delimited by the closing of the connection is not, since
//! a cut there looks like an end (RFC 9112 §6.3). The copies in flight share a quarter of
//! `cache.max_memory` ([`Filling::in_flight`]): a fill that would pass it gives up, so a burst
//! of large misses cannot hold more than that on top of the cache.
//!
//! While one request fills a key, other GETs that find nothing stored for it wait, up to
//! `cache.lock_timeout`, and look again once it ends ([`Filling`]; nginx's
//! `proxy_cache_lock`, Varnish's waiting list): a burst of misses costs the origin one
//! response and the encoder one compression. The wait ends as soon as the leader's response
//! turns out not to be storable (its head says so), so an uncacheable resource is not
//! serialised. When the leader's fill is abandoned instead (its client left, the origin
//! failed, or its body was cut), the next waiter takes the lead and the others wait for it, all
//! within their first `lock_timeout`; after that a request goes its own way.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use tokio::sync::watch;
use tracing::debug;

use crate::key::Selected;
use crate::store::{Entry, StoredBody};
use crate::{Cache, CacheCounters};
use zipwire_rules::negotiate::Coding;

/// The copy of a storable response's body on its way to the client, stored when it ends.
pub struct Fill {
    cache: Arc<Cache>,
    key: String,
    /// The entry to store, its body empty until the upstream body ends.
    entry: Entry,
    body: BytesMut,
    /// More than `cache.max_object` came, or the body was stored already.
    done: bool,
    /// The coding the client of the miss got, for the worker to make at the best level.
    coding: Option<Coding>,
    /// Held until the fill ends, however it ends: the waiting requests look again then.
    lock: Option<FillLock>,
    /// Where invalidations stood at lookup ([`Filling::epoch`]).
    epoch: Epoch,
}

impl std::fmt::Debug for Fill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fill")
            .field("key", &self.key)
            .field("bytes", &self.body.len())
            .field("done", &self.done)
            .finish()
    }
}

impl Fill {
    /// A fill of `entry` (its body left empty) for `key`, holding `lock` while it runs,
    /// looked up at invalidation `epoch` ([`Filling::epoch`]).
    pub fn new(
        cache: Arc<Cache>,
        key: String,
        entry: Entry,
        lock: Option<FillLock>,
        epoch: Epoch,
    ) -> Fill {
        Fill {
            cache,
            key,
            entry,
            epoch,
            body: BytesMut::new(),
            done: false,
            coding: None,
            lock,
        }
    }

    /// The client of the miss gets the body compressed in `coding`: the entry asks the
    /// background worker for that variant.
    pub fn served_in(&mut self, coding: Coding) {
        self.coding = Some(coding);
    }

    /// Copies bytes the upstream sent; past `cache.max_object`, or past what the fills in
    /// flight may hold together, the fill gives up.
    pub fn data(&mut self, bytes: &[u8]) {
        if self.done {
            return;
        }
        let settings = &self.cache.settings;
        let filling = &self.cache.filling;
        let len = bytes.len() as u64;
        let held = filling.in_flight.fetch_add(len, Ordering::Relaxed) + len;
        if (self.body.len() as u64 + len) > settings.max_object || held > settings.max_memory / 4 {
            filling.in_flight.fetch_sub(len, Ordering::Relaxed);
            self.give_up();
            return;
        }
        self.body.extend_from_slice(bytes);
    }

    /// Drops the copy and gives its bytes back; nothing is stored. The lock goes at once: the
    /// requests waiting for this key need not wait for the rest of a body that will not be stored,
    /// nor wait out `lock_timeout` for it.
    fn give_up(&mut self) {
        self.done = true;
        self.release();
        self.body = BytesMut::new();
        self.lock = None;
    }

    /// Gives the bytes of the copy back to the fills in flight.
    fn release(&self) {
        let len = self.body.len() as u64;
        self.cache
            .filling
            .in_flight
            .fetch_sub(len, Ordering::Relaxed);
    }

    /// The upstream body ended as framed: stores the entry (once).
    pub fn end(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        self.release();
        if self.cache.filling.voided(&self.key, self.epoch) {
            // Invalidated while the response came: it may predate the change. The waiters pass the
            // lead on, as after a fill cut short: one of them fetches the new response and the
            // others wait for it, so that a purge during a fill does not send every waiter to the
            // origin at once.
            debug!(key = self.key, "invalidated during its fill: not stored");
            self.body = BytesMut::new();
            if let Some(lock) = &mut self.lock {
                lock.abandoned = true;
            }
            self.lock = None;
            return;
        }
        let bytes = std::mem::take(&mut self.body).freeze();
        let body = StoredBody {
            length: bytes.len() as u64,
            crc: crc32fast::hash(&bytes),
            as_sent: Some(bytes),
            variants: Vec::new(),
            pending: self.coding.into_iter().collect(),
            deltas: Vec::new(),
        };
        let entry = Arc::new(self.entry.with_body(body));
        self.cache.store.put(self.key.clone(), entry);
        CacheCounters::bump(&self.cache.counters.stores);
        self.cache.account();
        // Stored: the waiting requests are served from it now, not once this one's client
        // has read the rest.
        self.lock = None;
    }
}

impl Drop for Fill {
    fn drop(&mut self) {
        if !self.done {
            self.release();
            // Neither stored nor refused: the body stopped short.
            if let Some(lock) = &mut self.lock {
                lock.abandoned = true;
            }
        }
    }
}

/// The keys being filled now, each with the requests waiting for it.
#[derive(Debug, Default)]
pub struct Filling {
    keys: Mutex<HashMap<String, Leader>>,
    next_id: AtomicU64,
    /// Bytes the fills in flight hold, together.
    pub in_flight: AtomicU64,
    /// Invalidations of one key and of every key: a fill that saw one of its key, or of all,
    /// while its response came stores nothing.
    epochs: Epochs,
}

/// The invalidations of single keys, numbered, the last [`RECENT`] of them kept by key hash; and a
/// count of purges of every key. Kept by key hash, a recent invalidation voids the fills of its own
/// key only: counted in stripes by hash, one would void the fills of every key in its stripe, and
/// under the HTTP cache test suite's load (100 tests at a time, some of them POSTs) a few unrelated
/// responses would go unstored in every run.
#[derive(Debug, Default)]
struct Epochs {
    /// (key hash, number) of the last invalidations, oldest first.
    recent: Mutex<VecDeque<(u64, u64)>>,
    /// The number of the last invalidation of a single key.
    last: AtomicU64,
    all: AtomicU64,
}

/// Invalidations of single keys remembered: a fill that began more than this many ago is
/// voided as if its key were among the forgotten ones.
const RECENT: usize = 1024;

/// Where invalidations stood when a request looked its key up ([`Filling::epoch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epoch {
    last: u64,
    all: u64,
}

fn key_hash(key: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(key)
}

/// The request filling a key: dropping its sender wakes the waiters, which then read whether
/// the fill was abandoned.
#[derive(Debug)]
struct Leader {
    id: u64,
    done: watch::Sender<FillState>,
}

/// How a fill stands, as the requests waiting for it see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum FillState {
    /// The origin has not answered yet.
    #[default]
    Asked,
    /// A storable response is coming, for the requests whose `Vary` fields hold these values: the
    /// others need not wait for its body, up to `lock_timeout` (as Varnish wakes its waiting list
    /// once the headers are in).
    Selects(Selected),
    /// It ended; `true` if it stopped short (nothing stored, the lead passes on).
    Ended(bool),
}

/// What a request that found nothing stored does.
#[derive(Debug)]
pub enum Turn {
    /// Nobody fills the key: this request does, holding the lock until its fill ends.
    Lead(FillLock),
    /// Another request fills it: wait for it to end, then look again. The value turns true
    /// if the fill was abandoned rather than stored or refused.
    Wait(watch::Receiver<FillState>),
}

/// The lock on one key's fill; dropping it wakes the requests waiting for the key.
#[derive(Debug)]
pub struct FillLock {
    filling: Arc<Filling>,
    key: String,
    id: u64,
    /// The fill stopped short (its client left before or while the answer came, the origin
    /// failed, or its body was cut): the waiters pass the lead on instead of all going to the
    /// origin. True until the origin's answer is in ([`FillLock::answered`]): a leader whose
    /// request is dropped, or fails, before the head arrives never gets to say so.
    abandoned: bool,
}

impl FillLock {
    /// The response coming is storable and selected by `selected`: the waiting requests it
    /// will not answer go their own way now.
    pub fn selects(&self, selected: &Selected) {
        let keys = self.filling.keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(leader) = keys.get(&self.key).filter(|leader| leader.id == self.id) {
            leader
                .done
                .send_replace(FillState::Selects(selected.clone()));
        }
    }

    /// The origin's head is in: the response is stored, refused, or handed to a [`Fill`]
    /// (which marks its lock abandoned again if its body stops short), and the waiters look
    /// again rather than lead a new fill.
    pub fn answered(&mut self) {
        self.abandoned = false;
    }
}

impl Filling {
    /// Where invalidations stand: a fill keeps the value from its lookup, and stores only if
    /// its key was not invalidated since ([`Filling::voided`]; RFC 9111 §4.4: a POST that
    /// succeeds while a GET's body is still coming must not see that body stored after it).
    pub fn epoch(&self) -> Epoch {
        Epoch {
            last: self.epochs.last.load(Ordering::Acquire),
            all: self.epochs.all.load(Ordering::Acquire),
        }
    }

    /// Whether `key`, or every key, was invalidated since `since`.
    pub fn voided(&self, key: &str, since: Epoch) -> bool {
        let epochs = &self.epochs;
        if epochs.all.load(Ordering::Acquire) != since.all {
            return true;
        }
        if epochs.last.load(Ordering::Acquire) == since.last {
            return false;
        }
        let recent = epochs.recent.lock().unwrap_or_else(|e| e.into_inner());
        // Every invalidation after `since` must still be kept, or the key's may be gone.
        if recent
            .front()
            .is_none_or(|&(_, number)| number > since.last + 1)
        {
            return true;
        }
        let hash = key_hash(key);
        recent
            .iter()
            .any(|&(invalidated, number)| number > since.last && invalidated == hash)
    }

    /// Voids the fills of `key` in flight, or of every key.
    pub fn void(&self, key: Option<&str>) {
        let Some(key) = key else {
            self.epochs.all.fetch_add(1, Ordering::AcqRel);
            return;
        };
        let mut recent = self.epochs.recent.lock().unwrap_or_else(|e| e.into_inner());
        let number = self.epochs.last.fetch_add(1, Ordering::AcqRel) + 1;
        recent.push_back((key_hash(key), number));
        if recent.len() > RECENT {
            recent.pop_front();
        }
    }

    /// Leads the fill of `key`, or joins the requests waiting for its leader.
    pub fn turn(self: &Arc<Self>, key: &str) -> Turn {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(leader) = keys.get(key) {
            return Turn::Wait(leader.done.subscribe());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (done, _) = watch::channel(FillState::Asked);
        keys.insert(key.to_owned(), Leader { id, done });
        Turn::Lead(FillLock {
            filling: self.clone(),
            key: key.to_owned(),
            id,
            abandoned: true,
        })
    }

    /// Whether a request fills `key` now.
    pub fn is_filling(&self, key: &str) -> bool {
        let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.contains_key(key)
    }

    /// Keys being filled now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.keys.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Drop for FillLock {
    fn drop(&mut self) {
        let mut keys = self.filling.keys.lock().unwrap_or_else(|e| e.into_inner());
        if keys
            .get(&self.key)
            .is_some_and(|leader| leader.id == self.id)
        {
            // Dropping the sender ends every waiter's `changed()`; the value says how.
            if let Some(leader) = keys.remove(&self.key) {
                leader.done.send_replace(FillState::Ended(self.abandoned));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_invalidation_voids_the_fills_of_its_key_alone() {
        let filling = Filling::default();
        let before = filling.epoch();
        assert!(!filling.voided("h /a", before));
        for n in 0..300 {
            filling.void(Some(&format!("h /other{n}")));
        }
        assert!(!filling.voided("h /a", before), "other keys' invalidations");
        filling.void(Some("h /a"));
        assert!(filling.voided("h /a", before));
        let after = filling.epoch();
        assert!(!filling.voided("h /a", after));
        filling.void(None);
        assert!(filling.voided("h /b", after), "a purge of everything");
        // More invalidations since than are remembered: the key's may be among those gone.
        let long_ago = filling.epoch();
        for n in 0..=RECENT {
            filling.void(Some(&format!("h /later{n}")));
        }
        assert!(filling.voided("h /a", long_ago));
        assert!(!filling.voided("h /a", filling.epoch()));
    }

    #[tokio::test]
    async fn the_first_request_leads_and_the_others_wake_when_it_ends() {
        let filling = Arc::new(Filling::default());
        let Turn::Lead(lock) = filling.turn("h /a") else {
            panic!("the first request leads");
        };
        let Turn::Wait(mut first) = filling.turn("h /a") else {
            panic!("the second waits");
        };
        let Turn::Wait(mut second) = filling.turn("h /a") else {
            panic!("the third waits");
        };
        assert!(
            matches!(filling.turn("h /b"), Turn::Lead(_)),
            "keys are apart"
        );
        let waited = tokio::time::timeout(Duration::from_millis(50), first.changed()).await;
        assert!(waited.is_err(), "no wake while the leader fills");
        let mut lock = lock;
        lock.answered();
        drop(lock);
        for waiter in [&mut first, &mut second] {
            let woken = tokio::time::timeout(Duration::from_secs(5), waiter.changed()).await;
            assert!(woken.is_ok(), "woken when the leader ends");
            assert_eq!(
                *waiter.borrow(),
                FillState::Ended(false),
                "a fill that ended is not abandoned"
            );
        }
        assert_eq!(filling.len(), 0);
        assert!(
            matches!(filling.turn("h /a"), Turn::Lead(_)),
            "the key is free again"
        );
    }

    #[tokio::test]
    async fn waiters_learn_that_a_fill_was_abandoned() {
        let filling = Arc::new(Filling::default());
        let Turn::Lead(lock) = filling.turn("h /a") else {
            panic!("the first request leads");
        };
        let Turn::Wait(mut waiter) = filling.turn("h /a") else {
            panic!("the second waits");
        };
        // Dropped before the origin answered: its client left, or the origin failed.
        drop(lock);
        let _ = tokio::time::timeout(Duration::from_secs(5), waiter.changed()).await;
        assert_eq!(
            *waiter.borrow(),
            FillState::Ended(true),
            "the waiter reads that the fill stopped short"
        );
        assert!(
            matches!(filling.turn("h /a"), Turn::Lead(_)),
            "the next request takes the lead"
        );
    }
}
