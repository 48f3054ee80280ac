//! The interface between the cache and the place it keeps responses.
//!
//! [`Store`](crate::Store), bounded memory with S3-FIFO eviction, is the one tier today. A
//! second tier (a store shared by a fleet of proxies) implements the same calls: the cache's
//! lookups, fills, variants, invalidations and purges reach storage through this trait alone.

use std::fmt::Debug;
use std::sync::Arc;

use http::HeaderMap;

use crate::store::Entry;

/// Where the cache keeps its entries, by primary key (`host target`) and `Vary` selection.
pub trait Storage: Send + Sync + Debug {
    /// The stored response for `key` whose `Vary` selection `request` matches.
    fn find(&self, key: &str, request: &HeaderMap) -> Option<Arc<Entry>>;

    /// Stores `entry`, replacing the one with the same selection.
    fn put(&self, key: String, entry: Arc<Entry>);

    /// Replaces `old` by `new` only if `old` is still the one stored (a recompression or a
    /// new variant must not undo a revalidation that came meanwhile); whether it did.
    fn swap(&self, key: &str, old: &Arc<Entry>, new: Arc<Entry>) -> bool;

    /// Drops every response of `key`; whether there was any.
    fn remove(&self, key: &str) -> bool;

    /// Drops every key; returns how many there were.
    fn clear(&self) -> u64;

    /// Bytes held, as the tier counts them.
    fn weight(&self) -> u64;

    /// Keys dropped by the eviction policy so far.
    fn evictions(&self) -> u64;

    /// Whether an entry with work for the recompression worker may be stored, clearing the
    /// mark: a store after this call marks it again, so the worker's next look finds it.
    fn take_unfinished(&self) -> bool;

    /// Marks the tier as holding work for the recompression worker.
    fn mark_unfinished(&self);

    /// Every stored entry with its key, for the recompression worker.
    fn entries(&self) -> Vec<(String, Arc<Entry>)>;
}
