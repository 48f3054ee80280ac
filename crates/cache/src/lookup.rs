//! The cache on the request path: what a request may use ([`Cache::lookup`]), the wait for
//! a fill of the same key ([`Cache::join_fill`]) and what the origin's answer does to the
//! store ([`Cache::after_upstream`]). The response made from a stored entry is the proxy's
//! cache phase.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_LOCATION, ETAG,
    IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_UNMODIFIED_SINCE, LAST_MODIFIED, LOCATION,
    RANGE, SET_COOKIE, TRANSFER_ENCODING, UPGRADE,
};
use http::request::Parts;
use http::{Method, Response, StatusCode, Version};
use http_body::Body;
use tracing::debug;
use zipwire_rules::{forward, list, Coding};

use crate::fill::{Epoch, Fill, FillLock, FillState, Turn};
use crate::key::{self, Selected};
use crate::policy::{self, Length, Privacy, RequestRules};
use crate::revalidate;
use crate::store::{self, Delta, Entry, StoredBody, Variant, DELTAS_PER_ENTRY};
use crate::{Cache, CacheCounters, CacheMode};
use zipwire_dictionary::{DictCoding, Hash};

/// `Connection` options that name no request field the proxy would drop.
const CONNECTION_OPTIONS: [&str; 4] = ["close", "keep-alive", "upgrade", "te"];

/// What the cache makes of a request.
#[derive(Debug)]
pub enum Lookup {
    /// Nothing: it goes to the origin as without a cache (a range on a miss, or validated by
    /// a date; preconditions other than `If-None-Match`/`If-Modified-Since`, `no-store`,
    /// upgrades, safe methods other than GET and HEAD).
    Bypass,
    /// An unsafe method: a non-error response invalidates the key (RFC 9111 §4.4).
    Invalidate {
        /// The primary key of the request's target.
        key: String,
    },
    /// GET or HEAD.
    Use(Use),
}

/// A GET or HEAD the cache may answer.
#[derive(Debug)]
pub struct Use {
    key: String,
    entry: Option<Arc<Entry>>,
    rules: RequestRules,
    /// The request carried `If-None-Match` of its own.
    client_tags: bool,
    /// The request carried `If-None-Match` or `If-Modified-Since` of its own.
    client_conditional: bool,
    /// The stored validators went upstream.
    conditional: bool,
    /// This request fills the key for others waiting on it.
    lock: Option<FillLock>,
    /// The key's invalidations when it was looked up.
    epoch: Epoch,
}

/// What to do once the origin answered.
pub enum After<B> {
    /// Forward its response as without a cache; a storable one with the [`Fill`] its body
    /// feeds on the way.
    Forward(Response<B>, Option<Box<Fill>>),
    /// Answer from this entry (freshened just now).
    Serve(String, Arc<Entry>),
}

impl Cache {
    /// What the cache makes of `request`.
    pub fn lookup(&self, request: &Parts) -> Lookup {
        let method = &request.method;
        if *method == Method::OPTIONS || *method == Method::TRACE || *method == Method::CONNECT {
            return Lookup::Bypass;
        }
        if *method != Method::GET && *method != Method::HEAD {
            return Lookup::Invalidate {
                key: key::primary(request),
            };
        }
        let headers = &request.headers;
        let rules = RequestRules::from_headers(headers);
        if rules.no_store
            || !policy::range_may_use_cache(method, headers)
            || [IF_MATCH, IF_UNMODIFIED_SINCE, UPGRADE]
                .iter()
                .any(|name| headers.contains_key(name))
        {
            return Lookup::Bypass;
        }
        // A client that names fields in `Connection` has them left out of what goes upstream:
        // a response that varies on one would be filed under a value the origin never saw.
        if list::elements(headers.get_all(CONNECTION)).any(|option| {
            !CONNECTION_OPTIONS
                .iter()
                .any(|known| option.eq_ignore_ascii_case(known.as_bytes()))
        }) {
            return Lookup::Bypass;
        }
        let key = key::primary(request);
        let epoch = self.filling.epoch();
        let authorized = headers.contains_key(AUTHORIZATION);
        let entry = self
            .store
            .find(&key, headers)
            .filter(|entry| !authorized || entry.shared_with_credentials);
        // A range is served from a stored identity 200 alone; otherwise, and on a miss, it
        // goes to the origin as without a cache (a 206 is not stored).
        if *method == Method::GET
            && headers.contains_key(RANGE)
            && !entry.as_deref().is_some_and(policy::serves_ranges)
        {
            return Lookup::Bypass;
        }
        Lookup::Use(Use {
            key,
            entry,
            rules,
            client_tags: headers.contains_key(IF_NONE_MATCH),
            client_conditional: headers.contains_key(IF_NONE_MATCH)
                || headers.contains_key(IF_MODIFIED_SINCE),
            conditional: false,
            lock: None,
            epoch,
        })
    }

    /// For a GET that found nothing stored: leads the fill of its key, or, when another
    /// request fills it already, waits for that one to end and looks again. If that fill was
    /// abandoned (its client left, or the origin's body was cut), the request lines up again:
    /// the first to do so leads the next fill and the others wait for it. A request waits
    /// `lock_timeout` at most in all.
    pub async fn join_fill(&self, lookup: Lookup, request: &Parts) -> Lookup {
        let Lookup::Use(mut using) = lookup else {
            return lookup;
        };
        let timeout = self.settings.lock_timeout;
        if using.entry.is_some() || request.method != Method::GET || timeout.is_zero() {
            return Lookup::Use(using);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut counted = false;
        loop {
            let mut done = match self.filling.turn(&using.key) {
                Turn::Lead(lock) => {
                    using.lock = Some(lock);
                    return Lookup::Use(using);
                }
                Turn::Wait(done) => done,
            };
            if !counted {
                CacheCounters::bump(&self.counters.coalesced);
                counted = true;
            }
            // Until the fill ends, or its response turns out to be for other requests than
            // this one (which may be so already), or the time is up.
            let abandoned = loop {
                match done.borrow_and_update().clone() {
                    FillState::Ended(abandoned) => break abandoned,
                    FillState::Selects(selected) if !selected.matches(&request.headers) => {
                        break false
                    }
                    _ => {}
                }
                match tokio::time::timeout_at(deadline, done.changed()).await {
                    Ok(Ok(())) => {}
                    // The leader gone: its last word says how.
                    Ok(Err(_)) => break *done.borrow() == FillState::Ended(true),
                    Err(_) => break false,
                }
            };
            match self.lookup(request) {
                Lookup::Use(again) if abandoned && again.entry.is_none() => using = again,
                found => return found,
            }
        }
    }

    /// In `fresh` mode, the entry to answer with without asking the origin, counted as a hit.
    pub fn fresh(&self, lookup: &Lookup) -> Option<(String, Arc<Entry>)> {
        let Lookup::Use(using) = lookup else {
            return None;
        };
        let entry = using.entry.as_ref()?;
        if self.settings.mode != CacheMode::Fresh {
            return None;
        }
        let age = entry.age(self.settings.clock.now());
        if !policy::is_fresh(entry.lifetime, age, &using.rules) {
            return None;
        }
        CacheCounters::bump(&self.counters.hits);
        Some((using.key.clone(), entry.clone()))
    }

    /// Makes the request going upstream conditional on the stored validators.
    pub fn add_conditionals(&self, lookup: &mut Lookup, upstream: &mut HeaderMap) {
        if let Lookup::Use(using) = lookup {
            if let Some(entry) = &using.entry {
                revalidate::add_conditionals(entry, upstream);
                using.conditional = true;
            }
        }
    }

    /// Freshens or invalidates after the origin answered `request`, and for a storable
    /// response sets up the [`Fill`] that stores it once its body has streamed.
    pub fn after_upstream<B: Body>(
        self: &Arc<Self>,
        lookup: Lookup,
        request: &Parts,
        response: Response<B>,
    ) -> After<B> {
        let mut using = match lookup {
            Lookup::Bypass => return After::Forward(response, None),
            Lookup::Invalidate { key } => {
                self.invalidate(&key, response.status(), response.headers());
                return After::Forward(response, None);
            }
            Lookup::Use(using) => using,
        };
        if let Some(lock) = &mut using.lock {
            lock.answered();
        }
        let status = response.status();
        if status == StatusCode::NOT_MODIFIED && using.conditional {
            if let Some(entry) = &using.entry {
                // A 304 must never reach a client that asked for the whole response (RFC
                // 9110 §15.4.5), and it updates the stored response only if its validator
                // is that response's (RFC 9111 §4.3.4).
                let ours_alone = !using.client_conditional;
                let fits = revalidate::freshens(entry, response.headers(), using.client_tags);
                if !fits && ours_alone {
                    // It names another representation (a new strong `ETag` or another
                    // `Last-Modified`, from an origin that answered the date alone): the stored
                    // body is not relabelled with it, which would serve the stored body under the
                    // new tag for good. This client gets the entry as it was stored, and the entry
                    // goes, so that the next request fetches the new one whole.
                    if self.store.remove(&using.key) {
                        self.account();
                    }
                    return After::Serve(using.key, entry.clone());
                }
                if fits {
                    let mut not_modified = response.headers().clone();
                    forward::strip_hop_by_hop(&mut not_modified);
                    let now = self.settings.clock.now();
                    // This client gets every field the 304 sent; the store, only what it may
                    // share (see `shareable`).
                    let served = Arc::new(revalidate::freshened(entry, &not_modified, now));
                    match self.shareable(&served) {
                        // The same entry, so that a variant made while serving it is kept.
                        Some(None) => {
                            self.store.swap(&using.key, entry, served.clone());
                        }
                        Some(Some(stripped)) => {
                            self.store.swap(&using.key, entry, Arc::new(stripped));
                        }
                        None => {
                            if self.store.remove(&using.key) {
                                self.account();
                            }
                        }
                    }
                    CacheCounters::bump(&self.counters.revalidations);
                    return After::Serve(using.key, served);
                }
            }
            return After::Forward(response, None);
        }
        CacheCounters::bump(&self.counters.misses);
        if request.method == Method::HEAD {
            // §4.3.5: a HEAD response that does not match the stored one invalidates it.
            if let Some(entry) = &using.entry {
                let same = |name| entry.headers.get(&name) == response.headers().get(&name);
                if status != entry.status || !same(ETAG) || !same(LAST_MODIFIED) {
                    self.store.remove(&using.key);
                    self.account();
                }
            }
            return After::Forward(response, None);
        }
        let admitted = policy::storable(
            &request.method,
            &request.headers,
            status,
            response.headers(),
            length(&response),
            self.settings.max_object,
            self.settings.store_set_cookie,
        );
        if let Err(reason) = admitted {
            debug!(?reason, key = using.key, "not stored");
            // The origin answered with a new response that may not be kept: the stored one
            // is not what it serves, and goes.
            if using.entry.is_some() && self.store.remove(&using.key) {
                self.account();
            }
            return After::Forward(response, None);
        }
        let mut headers = store::detached(response.headers());
        forward::strip_hop_by_hop(&mut headers);
        let (directives, _) = policy::response_directives(&headers);
        for name in &Privacy::of(&headers).fields {
            headers.remove(name);
        }
        let now = self.settings.clock.now();
        let entry = Entry {
            status,
            selected: Selected::new(&headers, &request.headers, self.offload),
            response_time: now,
            initial_age: policy::initial_age(&headers, now),
            lifetime: policy::freshness_lifetime(&headers, now),
            shared_with_credentials: directives.public
                || directives.must_revalidate
                || directives.s_maxage.is_some(),
            body: StoredBody::default(),
            headers,
            hits: Arc::default(),
        };
        if let Some(lock) = &using.lock {
            lock.selects(&entry.selected);
        }
        let mut fill = Fill::new(self.clone(), using.key, entry, using.lock, using.epoch);
        if response.body().is_end_stream() {
            // Nothing to stream (a 204, an empty body): stored now.
            fill.end();
            return After::Forward(response, None);
        }
        After::Forward(response, Some(Box::new(fill)))
    }

    /// §4.4: a non-error response to an unsafe method invalidates its target and the
    /// `Location` and `Content-Location` on the same host.
    fn invalidate(&self, key: &str, status: StatusCode, headers: &HeaderMap) {
        if !(status.is_success() || status.is_redirection()) {
            return;
        }
        self.filling.void(Some(key));
        let mut dropped = u64::from(self.store.remove(key));
        for name in [LOCATION, CONTENT_LOCATION] {
            if let Some(other) = headers
                .get(&name)
                .and_then(|value| key::for_location(key, value.as_bytes()))
            {
                self.filling.void(Some(&other));
                dropped += u64::from(self.store.remove(&other));
            }
        }
        if dropped > 0 {
            self.counters
                .invalidations
                .fetch_add(dropped, Ordering::Relaxed);
            self.account();
        }
    }

    /// The `Age` of `entry` now. RFC 9111 §1.2.2: an age past 2^31 seconds is sent as 2^31.
    pub fn age_of(&self, entry: &Entry) -> HeaderValue {
        HeaderValue::from(entry.age(self.settings.clock.now()).as_secs().min(1 << 31))
    }

    /// The variant of `entry` in `coding`: stored with it, or added since `entry` was looked
    /// up (the requests that waited for one fill all look up the entry without variants; the
    /// first of them to be served adds one, and the others use it instead of compressing).
    pub fn stored_variant(
        &self,
        key: &str,
        entry: &Arc<Entry>,
        request: &Parts,
        coding: Coding,
    ) -> Option<Variant> {
        if let Some(variant) = entry.body.variant(coding) {
            return Some(variant.clone());
        }
        let current = self.store.find(key, &request.headers)?;
        let same = current.body.length == entry.body.length && current.body.crc == entry.body.crc;
        same.then(|| current.body.variant(coding).cloned())
            .flatten()
    }

    /// The stored delta of `entry` against `hash` in `coding`, or of the entry stored now for
    /// the same representation (a newer copy may hold one made since `entry` was read).
    pub fn stored_delta(
        &self,
        key: &str,
        entry: &Arc<Entry>,
        request: &Parts,
        hash: &Hash,
        coding: DictCoding,
    ) -> Option<Delta> {
        if let Some(delta) = entry.body.delta(hash, coding) {
            return Some(delta.clone());
        }
        let current = self.store.find(key, &request.headers)?;
        let same = current.body.length == entry.body.length && current.body.crc == entry.body.crc;
        same.then(|| current.body.delta(hash, coding).cloned())
            .flatten()
    }

    /// Stores `delta`, made on the request path, beside the entry's others (the oldest goes
    /// past [`DELTAS_PER_ENTRY`]); the worker remakes it at the best level.
    pub fn add_delta(&self, key: &str, entry: &Arc<Entry>, delta: Delta) {
        let mut body = entry.body.clone();
        body.deltas
            .retain(|held| !(held.hash == delta.hash && held.coding == delta.coding));
        if body.deltas.len() >= DELTAS_PER_ENTRY {
            body.deltas.remove(0);
        }
        body.deltas.push(delta);
        if self.store.swap(key, entry, Arc::new(entry.with_body(body))) {
            self.account();
        }
    }

    /// Stores `bytes`, the variant of `entry` in `coding` made on the request path, beside
    /// the others. The bytes as sent are dropped once a variant exists (a client without a
    /// coding gets one decoded), and the recompression worker recompresses this variant at
    /// the best level instead of making it anew.
    pub fn add_variant(
        &self,
        key: &str,
        entry: &Arc<Entry>,
        coding: Coding,
        bytes: Bytes,
        micros: u64,
    ) {
        let mut body = entry.body.clone();
        body.as_sent = None;
        body.pending.retain(|pending| *pending != coding);
        body.variants.push(Variant {
            coding,
            bytes,
            best: false,
            micros,
        });
        if self.store.swap(key, entry, Arc::new(entry.with_body(body))) {
            self.account();
        }
    }
}

impl Cache {
    /// What of a response freshened by a 304 the store may keep for every client: all of it
    /// (`Some(None)`); a copy without its `Set-Cookie` (unless `store_set_cookie`) or the
    /// fields of a qualified `private` (`Some(Some(copy))`); nothing (`None`) when the 304
    /// made it `private` or `no-store`. The 304 answered one client: its `Set-Cookie` kept in
    /// the stored response would go to everyone served from it.
    fn shareable(&self, served: &Entry) -> Option<Option<Entry>> {
        let (directives, _) = policy::response_directives(&served.headers);
        let privacy = Privacy::of(&served.headers);
        if privacy.private || directives.no_store {
            return None;
        }
        let cookie = !self.settings.store_set_cookie && served.headers.contains_key(SET_COOKIE);
        let private = privacy
            .fields
            .iter()
            .any(|name| served.headers.contains_key(name));
        if !cookie && !private {
            return Some(None);
        }
        let mut shared = served.with_body(served.body.clone());
        if cookie {
            shared.headers.remove(SET_COOKIE);
        }
        for name in &privacy.fields {
            shared.headers.remove(name);
        }
        Some(Some(shared))
    }
}

/// What the framing of `response` says of its body's length (RFC 9112 §6.3): a transfer
/// coding overrides a `Content-Length`; an HTTP/2 stream always ends where it says.
fn length<B: Body>(response: &Response<B>) -> Length {
    if response.body().is_end_stream() {
        return Length::Known(0);
    }
    let headers = response.headers();
    if headers.contains_key(TRANSFER_ENCODING) || response.version() == Version::HTTP_2 {
        return Length::Framed;
    }
    match headers.get(CONTENT_LENGTH) {
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
            .map_or(Length::UntilClose, Length::Known),
        None => Length::UntilClose,
    }
}
