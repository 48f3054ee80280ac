//! The cache on the request path: what a request may use ([`Cache::lookup`]), the wait for
//! a fill of the same key ([`Cache::join_fill`]), what the origin's answer does to the store
//! ([`Cache::after_upstream`]), and the response made from a stored entry ([`Cache::serve`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderValue, AGE, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_LOCATION, ETAG,
    IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_UNMODIFIED_SINCE, LAST_MODIFIED, LOCATION,
    RANGE, SET_COOKIE, TRANSFER_ENCODING, UPGRADE,
};
use http::request::Parts;
use http::{Method, Response, StatusCode, Version};
use http_body::Body;
use tracing::debug;
use zipwire_codec::Limits;

use crate::cache::fill::{Epoch, Fill, FillLock, FillState, Turn};
use crate::cache::key::{self, Selected};
use crate::cache::policy::{self, Length, Privacy, RequestRules};
use crate::cache::range;
use crate::cache::revalidate;
use crate::cache::store::{self, Entry, StoredBody, Variant};
use crate::cache::{variant, Cache, CacheCounters, CacheMode};
use crate::config::Rules;
use crate::decide::facts::{Budget, RequestFacts, ResponseFacts};
use crate::decide::headers;
use crate::decide::list;
use crate::decide::rules::{decide, Bypass, Decision, Payload, Vary};
use crate::encode::body::{thread_cpu, BodyMeter};
use crate::encode::codings::Codings;
use crate::encode::throttle::Throttle;
use crate::error::ProxyError;
use crate::exchange::forward;
use crate::exchange::upstream::UpstreamBody;

/// The largest body whose variant is made on the request's own thread (a millisecond or
/// less at the request-path levels); a larger one goes to a blocking thread.
const INLINE_VARIANT: u64 = 128 * 1024;

/// `Connection` options that name no request field the proxy would drop.
const CONNECTION_OPTIONS: [&str; 4] = ["close", "keep-alive", "upgrade", "te"];

/// What the cache makes of a request.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// Nothing: it goes to the origin as without a cache (a range on a miss, or validated by
    /// a date; preconditions other than `If-None-Match`/`If-Modified-Since`, `no-store`,
    /// upgrades, safe methods other than GET and HEAD).
    Bypass,
    /// An unsafe method: a non-error response invalidates the key (RFC 9111 §4.4).
    Invalidate { key: String },
    /// GET or HEAD.
    Use(Use),
}

/// A GET or HEAD the cache may answer.
#[derive(Debug)]
pub(crate) struct Use {
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
pub(crate) enum After {
    /// Forward its response as without a cache; a storable one with the [`Fill`] its body
    /// feeds on the way.
    Forward(Response<UpstreamBody>, Option<Box<Fill>>),
    /// Answer from this entry (freshened just now).
    Serve(String, Arc<Entry>),
}

/// A response made from an entry.
pub(crate) struct Served {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// What was done for this client, counted as the response filter's decisions are.
    pub(crate) decision: Decision,
}

/// What the response filter would use to encode: the rules, the encoders, the budget.
pub(crate) struct Encoders<'a> {
    pub(crate) rules: &'a Rules,
    pub(crate) codings: &'a Codings,
    /// The compression budget: a variant made on the request path is admitted by it, as a
    /// streamed compression is.
    pub(crate) throttle: &'a Throttle,
    /// Gunzip for clients without gzip, within these limits; `None` when off.
    pub(crate) gunzip: Option<Limits>,
}

impl Cache {
    /// What the cache makes of `request`.
    pub(crate) fn lookup(&self, request: &Parts) -> Lookup {
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
            || !range::may_use_cache(method, headers)
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
            && !entry.as_deref().is_some_and(range::servable)
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
    pub(crate) async fn join_fill(&self, lookup: Lookup, request: &Parts) -> Lookup {
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
                CacheCounters::bump(&self.counters.cache.coalesced);
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
    pub(crate) fn fresh(&self, lookup: &Lookup) -> Option<(String, Arc<Entry>)> {
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
        CacheCounters::bump(&self.counters.cache.hits);
        Some((using.key.clone(), entry.clone()))
    }

    /// Makes the request going upstream conditional on the stored validators.
    pub(crate) fn add_conditionals(&self, lookup: &mut Lookup, upstream: &mut HeaderMap) {
        if let Lookup::Use(using) = lookup {
            if let Some(entry) = &using.entry {
                revalidate::add_conditionals(entry, upstream);
                using.conditional = true;
            }
        }
    }

    /// Freshens or invalidates after the origin answered `request`, and for a storable
    /// response sets up the [`Fill`] that stores it once its body has streamed.
    pub(crate) fn after_upstream(
        self: &Arc<Self>,
        lookup: Lookup,
        request: &Parts,
        response: Response<UpstreamBody>,
    ) -> After {
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
                    // `Last-Modified`, from an origin that answered the date alone): the
                    // stored body is not relabelled with it, which would have served the old
                    // body under the new tag for good (until 2026-11-27). This client gets
                    // the entry as it was stored, and the entry goes, so that the next
                    // request fetches the new one whole.
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
                    CacheCounters::bump(&self.counters.cache.revalidations);
                    return After::Serve(using.key, served);
                }
            }
            return After::Forward(response, None);
        }
        CacheCounters::bump(&self.counters.cache.misses);
        if request.method == Method::HEAD {
            // §4.3.5: a HEAD response that no longer matches the stored one invalidates it.
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
            // The origin answered with a new response that may not be kept: the old one is
            // no longer what it serves.
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
                .cache
                .invalidations
                .fetch_add(dropped, Ordering::Relaxed);
            self.account();
        }
    }

    /// The `Age` of `entry` now. RFC 9111 §1.2.2: an age past 2^31 seconds is sent as 2^31.
    fn age_of(&self, entry: &Entry) -> HeaderValue {
        HeaderValue::from(entry.age(self.settings.clock.now()).as_secs().min(1 << 31))
    }

    /// A 304 for a client whose preconditions `entry` fails, with the header fields its 200
    /// would carry (`headers`) less the representation's own.
    fn not_modified(&self, entry: &Entry, mut headers: HeaderMap, facts: &RequestFacts) -> Served {
        headers.insert(AGE, self.age_of(entry));
        // RFC 9110 §15.4.5: no representation metadata beyond the fields that guide a
        // cache's update (ETag, Vary, Cache-Control, Expires, Date, Content-Location,
        // Last-Modified). A `Content-Encoding: gzip` here relabelled the identity copy a
        // downstream cache updated with it, when the weak tag matched that copy (until
        // 2026-11-28).
        let metadata: Vec<_> = headers
            .keys()
            .filter(|name| name.as_str().starts_with("content-") && **name != CONTENT_LOCATION)
            .cloned()
            .collect();
        for name in metadata {
            headers.remove(name);
        }
        // A client whose `If-None-Match` names strong tags alone holds a response that was
        // not recoded: its tag stays strong, as on a 304 from the origin (see
        // `not_modified_vary`), or its copy would lose it and `If-Range` with it (until
        // 2026-11-28 a 304 from the cache weakened it).
        if facts.holds_strong_tags {
            if let Some(etag) = entry.headers.get(ETAG) {
                headers.insert(ETAG, etag.clone());
            }
        }
        Served {
            status: StatusCode::NOT_MODIFIED,
            headers,
            body: Bytes::new(),
            // Counted as the streaming path counts a 304 from the origin.
            decision: Decision::Pass {
                reason: Bypass::Status,
                vary: Vary::Unchanged,
            },
        }
    }

    /// The response to `request` made from `entry`, with the coding the rules choose for
    /// this client: a stored variant when there is one (the encoder time it saves counted),
    /// else made now and stored beside the others.
    pub(crate) async fn serve(
        &self,
        key: &str,
        entry: &Arc<Entry>,
        request: &Parts,
        facts: &RequestFacts,
        encoders: &Encoders<'_>,
    ) -> Result<Served, ProxyError> {
        entry.hits.fetch_add(1, Ordering::Relaxed);
        let mut response = ResponseFacts::from_parts(entry.status, &entry.headers);
        let mut decision = decide(facts, &response, encoders.rules);
        // RFC 9110 §13.2.1: the client's preconditions count only where the answer would be
        // 2xx; a stored 404 or 301 is sent as it is (a browser must not keep showing a page
        // the origin has since removed). They are checked before any variant is made: a 304
        // needs the 200's header fields, not its body (until 2026-11-28 a 304 for a coding
        // not stored yet compressed the whole body first, at the budget's expense).
        if entry.status.is_success() {
            let mut headers = entry.headers.clone();
            headers::apply(&decision, &mut headers, Version::HTTP_11);
            if revalidate::client_not_modified(&request.headers, &headers) {
                return Ok(self.not_modified(entry, headers, facts));
            }
        }
        // §13.2.2: after `If-None-Match`, a range.
        if let Some(part) =
            range::respond(entry, request, facts, encoders.rules, self.age_of(entry))?
        {
            return Ok(part);
        }
        let stored = match decision {
            Decision::Compress { coding, .. } => self.stored_variant(key, entry, request, coding),
            _ => None,
        };
        if stored.is_none() {
            // A variant made now takes from the rate allowance by the length it compresses,
            // as a streamed response does by its Content-Length (until 2026-11-28 such
            // variants were not admitted, and uncounted: varying the query or the coding
            // compressed past `max_cpu` and `max_rate`).
            let throttle = encoders.throttle;
            let refused = throttle.is_bypassing_new()
                || (matches!(
                    decision,
                    Decision::Compress {
                        payload: Payload::Transform,
                        ..
                    }
                ) && !throttle.admit(entry.body.length));
            if refused {
                response.budget = Budget::Exhausted;
                decision = decide(facts, &response, encoders.rules);
            }
        }
        if matches!(decision, Decision::Decompress { .. }) && encoders.gunzip.is_none() {
            decision = Decision::Pass {
                reason: Bypass::AlreadyEncoded,
                vary: Vary::Unchanged,
            };
        }
        // A HEAD for a coding not stored yet is not worth compressing for: its length is
        // left out, as the streaming path does.
        let mut length_known = true;
        let body = match decision {
            Decision::Compress {
                payload: Payload::Absent,
                ..
            } if stored.is_none() => {
                length_known = false;
                Some(Bytes::new())
            }
            Decision::Compress { coding, .. } => match stored {
                Some(variant) => {
                    self.counters
                        .cache
                        .encoder_micros_saved
                        .fetch_add(variant.micros, Ordering::Relaxed);
                    Some(variant.bytes)
                }
                None => match self.add_variant(key, entry, coding, encoders.codings).await {
                    Some(bytes) => Some(bytes),
                    None => {
                        // The encoder failed: the identity bytes, as a budget bypass would.
                        decision = Decision::Pass {
                            reason: Bypass::Budget,
                            vary: Vary::Add,
                        };
                        None
                    }
                },
            },
            Decision::Decompress { .. } => {
                let limits = encoders.gunzip.unwrap_or_default();
                let as_sent = entry.body.as_sent.as_deref().unwrap_or_default();
                let cpu = thread_cpu();
                let decoded =
                    zipwire_codec::decompress(zipwire_codec::Format::Gzip, as_sent, limits)
                        .map_err(ProxyError::Gunzip)?;
                BodyMeter::with_totals(self.counters.decompression.clone()).record(
                    as_sent.len(),
                    decoded.len(),
                    thread_cpu().saturating_sub(cpu),
                    false,
                );
                Some(Bytes::from(decoded))
            }
            Decision::Pass { .. } => None,
        };
        let body = match body {
            Some(body) => body,
            None => variant::identity(&entry.body).map_err(ProxyError::Gunzip)?,
        };
        let mut headers = entry.headers.clone();
        headers::apply(&decision, &mut headers, Version::HTTP_11);
        headers.remove(TRANSFER_ENCODING);
        if length_known {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        headers.insert(AGE, self.age_of(entry));
        let absent = request.method == Method::HEAD
            || matches!(
                decision,
                Decision::Compress {
                    payload: Payload::Absent,
                    ..
                }
            );
        Ok(Served {
            status: entry.status,
            headers,
            body: if absent { Bytes::new() } else { body },
            decision,
        })
    }

    /// The variant of `entry` in `coding`: stored with it, or added since `entry` was looked
    /// up (the requests that waited for one fill all look up the entry without variants; the
    /// first of them to be served adds one, and the others use it instead of compressing).
    fn stored_variant(
        &self,
        key: &str,
        entry: &Arc<Entry>,
        request: &Parts,
        coding: crate::decide::negotiate::Coding,
    ) -> Option<Variant> {
        if let Some(variant) = entry.body.variant(coding) {
            return Some(variant.clone());
        }
        let current = self.store.find(key, &request.headers)?;
        let same = current.body.length == entry.body.length && current.body.crc == entry.body.crc;
        same.then(|| current.body.variant(coding).cloned())
            .flatten()
    }

    /// Compresses the entry in `coding` with the request-path encoder and stores the variant
    /// beside the others (the bytes as sent are dropped once a variant exists: a client
    /// without a coding gets one decoded). A body past [`INLINE_VARIANT`] is compressed on
    /// a blocking thread: in one piece on the runtime's thread it held up every connection
    /// there (a 4 MB br variant, 200 ms, until 2026-11-28), where a streamed response is
    /// compressed a call at a time between the others' turns.
    async fn add_variant(
        &self,
        key: &str,
        entry: &Arc<Entry>,
        coding: crate::decide::negotiate::Coding,
        codings: &Codings,
    ) -> Option<Bytes> {
        let encoder = codings.encoder(coding, Some(entry.body.length));
        let stored = entry.body.clone();
        let make = move || {
            let identity = variant::identity(&stored).ok()?;
            let cpu = thread_cpu();
            let (bytes, micros) = variant::encode(encoder, &identity)?;
            Some((
                identity.len(),
                bytes,
                micros,
                thread_cpu().saturating_sub(cpu),
            ))
        };
        let made = if entry.body.length > INLINE_VARIANT {
            tokio::task::spawn_blocking(make).await.ok().flatten()
        } else {
            make()
        };
        let (identity_len, bytes, micros, cpu) = made?;
        // Counted as a streamed compression's calls are: the stats' encoder time, input and
        // savings, this coding's totals, and what the budget reads.
        BodyMeter::with_totals(self.counters.compression.clone())
            .with_coding_totals(self.counters.codings.get(coding).meter.clone())
            .record(identity_len, bytes.len(), cpu, false);
        let mut body = entry.body.clone();
        body.as_sent = None;
        // The worker recompresses this one at the best level instead of making it anew.
        body.pending.retain(|pending| *pending != coding);
        body.variants.push(Variant {
            coding,
            bytes: bytes.clone(),
            best: false,
            micros,
        });
        if self.store.swap(key, entry, Arc::new(entry.with_body(body))) {
            self.account();
        }
        Some(bytes)
    }
}

impl Cache {
    /// What of a response freshened by a 304 the store may keep for every client: all of it
    /// (`Some(None)`); a copy without its `Set-Cookie` (unless `store_set_cookie`) or the
    /// fields of a qualified `private` (`Some(Some(copy))`); nothing (`None`) when the 304
    /// made it `private` or `no-store`. The 304 answered one client; until 2026-11-27 its
    /// `Set-Cookie` went into the stored response, and to everyone served from it.
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
fn length(response: &Response<UpstreamBody>) -> Length {
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
