//! Compression dictionaries in the proxy (RFC 9842): which responses become dictionaries,
//! which requests get a delta, and the header fields both carry. The protocol pieces (fields,
//! the cross-origin check, the store, the version patterns) are the `zipwire-dictionary`
//! crate; the encoders are `zipwire-codings`' zstd and brotli streams given a dictionary.
//!
//! - A response becomes a dictionary ([`Dictionaries::candidate`]) when it is a fresh 200 to
//!   a GET in identity, and either the origin marked it with `Use-As-Dictionary`, or (`auto`)
//!   it is a compressible, shared-cacheable versioned asset that the proxy marks itself with
//!   a `match` covering its other versions. Its body is copied as it streams
//!   ([`fill::DictionaryFill`]) and stored when it ends as framed.
//! - A request gets a delta ([`Dictionaries::choose`]) when it lists `dcz` or `dcb`, names a
//!   stored dictionary of the same origin in `Available-Dictionary`, is not a range request,
//!   and passes the cross-origin check; the rest of the decision (type, size, budget,
//!   `no-transform`, an origin's own coding) is the ordinary one, so a response that would
//!   not be compressed is not sent as a delta either.
//! - A site's HTML and JSON pages are sampled, and a dictionary built from them is served
//!   at the proxy's own URL and announced on the site's pages (`auto`, unless `site =
//!   false`; see [`site`]).
//! - Only on TLS connections, or from a loopback peer (a browser's `localhost`): RFC 9842 is
//!   for secure contexts, and a middlebox on a cleartext path may not know the codings.

pub(crate) mod fill;
pub(crate) mod site;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderValue, AUTHORIZATION, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH,
    CONTENT_RANGE, COOKIE, HOST, LINK, RANGE, SET_COOKIE,
};
use http::request::Parts as RequestParts;
use http::{Method, StatusCode};
use tracing::debug;
use zipwire_adapt::{MemoryGate, Permit};

use crate::encode::body::BodyMeter;
use zipwire_codings::{dictionary as codec, BodyEncoder, BrotliLevel, ZstdLevel};
use zipwire_dictionary::fields::{self, USE_AS_DICTIONARY};
use zipwire_dictionary::gate::{self, Allowed};
use zipwire_dictionary::{
    version, Accepted, DictCoding, Dictionary, Hash, Limits, Mode, Store, UseAsDictionary,
};
use zipwire_rules::{headers, list, Decision, Path, ResponseFacts, Rules, Vary};

use crate::encode::body::dictionary_decoder::Resolve;

/// `[dictionaries]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DictionarySettings {
    /// `auto` (the default), `origin` or `off`.
    pub mode: Mode,
    /// The store's caps.
    pub limits: Limits,
    /// The dictionary codings offered (default both). On the streamed path the first the
    /// client lists is sent (default `dcz` first: it encodes 3-5x faster than `dcb` at the
    /// request-path levels); from the cache `dcb` is sent whenever the client lists it (made
    /// at brotli 11 off the request path, its deltas are the smaller and served as fast).
    pub codings: Vec<DictCoding>,
    /// Build site dictionaries for HTML and JSON pages (`auto` only; on by default: see
    /// `docs/config.md`).
    pub site: bool,
    /// How responses under some path prefixes are marked (`auto` only; default none).
    pub paths: Vec<PathRule>,
}

/// `[[dictionaries.paths]]`: how the proxy marks the responses under a path prefix in
/// `auto`, in place of its version patterns. The longest prefix a request's path starts with
/// applies; an origin's own `Use-As-Dictionary` is never replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRule {
    /// The path prefix (starting with `/`).
    pub prefix: String,
    /// What eligible responses under it are marked with (versioned or not: the rest of the
    /// rules for marking still apply); `None`: nothing under it is marked.
    pub mark: Option<UseAsDictionary>,
}

impl Default for DictionarySettings {
    fn default() -> DictionarySettings {
        DictionarySettings {
            mode: Mode::default(),
            limits: Limits::default(),
            codings: DictCoding::ALL.to_vec(),
            site: true,
            paths: Vec::new(),
        }
    }
}

/// What the proxy counts of dictionaries, for `/stats`, `/metrics` and the dashboard.
#[derive(Debug, Default)]
pub struct DictionaryCounters {
    /// Whether dictionaries are on.
    pub enabled: AtomicBool,
    /// Requests that named a dictionary and listed `dcz` or `dcb`.
    pub offered: AtomicU64,
    /// Responses sent as `dcz`.
    pub dcz: AtomicU64,
    /// Responses sent as `dcb`.
    pub dcb: AtomicU64,
    /// Requests whose `Available-Dictionary` named no dictionary held for their origin.
    pub unknown: AtomicU64,
    /// Requests the cross-origin check refused a dictionary coding.
    pub refused: AtomicU64,
    /// Responses the proxy marked with `Use-As-Dictionary` itself (`auto`).
    pub marked: AtomicU64,
    /// Dictionaries stored.
    pub stored: AtomicU64,
    /// Dictionaries dropped to stay within the caps, or expired.
    pub evicted: AtomicU64,
    /// Dictionaries held now (gauge).
    pub held: AtomicU64,
    /// Bytes the store holds now (gauge).
    pub held_bytes: AtomicU64,
    /// Identity bytes of the bodies sent in a dictionary coding.
    pub bytes_in: AtomicU64,
    /// Bytes those bodies took on the wire.
    pub bytes_out: AtomicU64,
    /// Bytes they saved against the coding each client would have got otherwise, estimated
    /// from that coding's running ratio.
    pub bytes_saved: AtomicU64,
    /// Site dictionaries built and published.
    pub site_built: AtomicU64,
    /// Site dictionaries served to clients.
    pub site_fetches: AtomicU64,
}

impl DictionaryCounters {
    /// The counter of responses sent in `coding`.
    pub fn uses(&self, coding: DictCoding) -> &AtomicU64 {
        match coding {
            DictCoding::Dcz => &self.dcz,
            DictCoding::Dcb => &self.dcb,
        }
    }
}

/// What a request brings: the dictionary it names and the codings it lists.
#[derive(Clone, Debug)]
pub(crate) struct Ask {
    hash: Hash,
    accepted: Accepted,
    origin: String,
}

/// A dictionary coding chosen for one response.
#[derive(Clone, Debug)]
pub(crate) struct Use {
    pub(crate) coding: DictCoding,
    pub(crate) dictionary: Arc<Dictionary>,
    allowed: Allowed,
}

impl Use {
    /// For the access log: the coding and the first bytes of the hash.
    pub(crate) fn describe(&self) -> String {
        format!("{}:{}", self.coding, self.dictionary.hash.short())
    }
}

/// A response whose body becomes a dictionary once it has streamed whole.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    origin: String,
    lifetime: Duration,
    id: Option<String>,
    /// The `Use-As-Dictionary` the proxy adds (`auto`); `None` when the origin sent one.
    mark: Option<HeaderValue>,
}

/// One server's dictionaries: the store, the mode, the levels deltas are made at.
pub(crate) struct Dictionaries {
    mode: Mode,
    codings: Vec<DictCoding>,
    store: Store,
    counters: Arc<DictionaryCounters>,
    levels: (ZstdLevel, BrotliLevel),
    /// The largest dictionary the store takes (its `max_size`).
    max_size: u64,
    /// `[[dictionaries.paths]]`.
    paths: Vec<PathRule>,
    /// zstd's state per stream by window log 10..=23, measured at start.
    zstd_memory: Vec<usize>,
    /// The store's bytes, counted in the memory gate.
    held: Mutex<Permit>,
    /// The gate the copies of candidates in flight take their bytes from.
    memory: MemoryGate,
    /// Site dictionaries (`auto` only).
    sites: Option<site::Sites>,
}

impl std::fmt::Debug for Dictionaries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionaries")
            .field("mode", &self.mode)
            .field("store", &self.store)
            .finish()
    }
}

impl Dictionaries {
    /// The dictionaries of a server; `None` when `mode` is off.
    pub(crate) fn new(
        settings: &DictionarySettings,
        levels: (ZstdLevel, BrotliLevel),
        counters: Arc<DictionaryCounters>,
        memory: &MemoryGate,
    ) -> Option<Dictionaries> {
        if settings.mode == Mode::Off {
            return None;
        }
        counters.enabled.store(true, Ordering::Relaxed);
        let dcz_level =
            ZstdLevel::new(levels.0.get().max(codec::MIN_DCZ_LEVEL)).unwrap_or(levels.0);
        let zstd_memory = (zipwire_codings::MIN_WINDOW_LOG..=codec::DCZ_MAX_WINDOW_LOG)
            .map(|log| zipwire_codings::zstd::measure(dcz_level, log))
            .collect();
        Some(Dictionaries {
            mode: settings.mode,
            codings: settings.codings.clone(),
            store: Store::new(settings.limits),
            max_size: settings.limits.max_size,
            paths: settings.paths.clone(),
            counters,
            levels,
            zstd_memory,
            held: Mutex::new(memory.account(0)),
            memory: memory.clone(),
            sites: (settings.mode == Mode::Auto && settings.site).then(|| site::Sites::new(memory)),
        })
    }

    /// The store, for the cache's background worker.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Reads what `request` asks for; `None` unless it names a dictionary, lists `dcz` or
    /// `dcb`, and came over TLS or from loopback (`secure`).
    pub(crate) fn ask(&self, request: &RequestParts, secure: bool) -> Option<Ask> {
        if !secure {
            return None;
        }
        let hash = fields::available_dictionary(&request.headers)?;
        let accepted = Accepted::from_headers(&request.headers);
        if !accepted.any() {
            return None;
        }
        self.counters.offered.fetch_add(1, Ordering::Relaxed);
        Some(Ask {
            hash,
            accepted,
            origin: origin_of(request)?,
        })
    }

    /// The dictionary coding for a response with `response` fields to the request that made
    /// `ask`, if one may be used (see the module documentation). A client that lists both
    /// gets the first of [`DictionarySettings::codings`] on the streamed `path`, and `dcb`
    /// from the cache.
    pub(crate) fn choose(
        &self,
        ask: &Ask,
        (request, response): (&HeaderMap, &HeaderMap),
        path: Path,
    ) -> Option<Use> {
        if request.contains_key(RANGE) {
            return None;
        }
        let Some(dictionary) = self.store.get(&ask.hash, &ask.origin, SystemTime::now()) else {
            self.counters.unknown.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let usable = |coding: &DictCoding| match coding {
            DictCoding::Dcz => ask.accepted.dcz && codec::usable_for_dcz(&dictionary.bytes),
            DictCoding::Dcb => ask.accepted.dcb,
        };
        let coding = match path {
            Path::Stored => [DictCoding::Dcb, DictCoding::Dcz]
                .into_iter()
                .filter(|coding| self.codings.contains(coding))
                .find(usable),
            _ => self.codings.iter().copied().find(usable),
        }?;
        let Some(allowed) = gate::check(request, response) else {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        Some(Use {
            coding,
            dictionary,
            allowed,
        })
    }

    /// Finds, for an upstream's unasked `dcb`/`dcz` body to `request`, the dictionary its
    /// header names among those held for the request's origin.
    pub(crate) fn resolver(self: &Arc<Self>, request: &RequestParts) -> Resolve {
        let dictionaries = self.clone();
        let origin = origin_of(request);
        Box::new(move |hash| {
            let dictionary = dictionaries
                .store
                .get(hash, origin.as_deref()?, SystemTime::now())?;
            Some(dictionary.bytes.clone())
        })
    }

    /// [`Dictionaries::resolver`] for a whole `coding` body at hand (a stored response):
    /// the dictionary is looked up now.
    pub(crate) fn resolve_stored(
        &self,
        coding: DictCoding,
        body: &[u8],
        request: &RequestParts,
    ) -> Resolve {
        let named = body
            .get(coding.header_len() - 32..coding.header_len())
            .and_then(|hash| <[u8; 32]>::try_from(hash).ok())
            .map(Hash);
        let held = named.zip(origin_of(request)).and_then(|(hash, origin)| {
            let dictionary = self.store.get(&hash, &origin, SystemTime::now())?;
            Some((hash, dictionary.bytes.clone()))
        });
        Box::new(move |hash| {
            held.filter(|(named, _)| named == hash)
                .map(|(_, bytes)| bytes)
        })
    }

    /// The largest dictionary the store takes.
    pub(crate) fn max_size(&self) -> u64 {
        self.max_size
    }

    /// A fresh encoder for `used` and a body of `length`, at the request-path levels.
    pub(crate) fn encoder(&self, used: &Use, length: Option<u64>) -> BodyEncoder {
        let dictionary = &used.dictionary;
        codec::encoder(
            used.coding,
            &dictionary.bytes,
            &dictionary.hash,
            length,
            self.levels,
        )
    }

    /// The bytes of state that encoder holds (see [`codec::memory`]).
    pub(crate) fn memory(&self, used: &Use, length: Option<u64>) -> usize {
        let zstd = |log: u32| {
            let index = log.saturating_sub(zipwire_codings::MIN_WINDOW_LOG) as usize;
            self.zstd_memory.get(index).copied().unwrap_or(0)
        };
        codec::memory(
            used.coding,
            used.dictionary.bytes.len(),
            length,
            (&zstd, self.levels.1),
        )
    }

    /// Whether the response with `response` parts to `request` becomes a dictionary (see the
    /// module documentation); `secure` as for [`Dictionaries::ask`].
    pub(crate) fn candidate(
        &self,
        request: &RequestParts,
        (status, fields): (StatusCode, &HeaderMap),
        secure: bool,
        rules: &Rules,
    ) -> Option<Candidate> {
        if request.method != Method::GET
            || status != StatusCode::OK
            || fields.contains_key(CONTENT_ENCODING)
            || fields.contains_key(CONTENT_RANGE)
        {
            return None;
        }
        let length = fields
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
        if length.is_some_and(|length| length == 0 || length > self.store.limits().max_size) {
            return None;
        }
        let lifetime = zipwire_dictionary::lifetime(fields)?;
        let origin = origin_of(request)?;
        if let Some(marked) = UseAsDictionary::from_headers(fields) {
            return Some(Candidate {
                origin,
                lifetime,
                id: marked.id,
                mark: None,
            });
        }
        if self.mode != Mode::Auto || !secure || fields.contains_key(USE_AS_DICTIONARY) {
            return None;
        }
        // Shared-cacheable only: never a response meant for one client.
        if !shared(request, fields) {
            return None;
        }
        let facts = ResponseFacts::from_parts(status, fields);
        let media = facts.content_type.as_ref()?;
        if !rules.is_compressible(media) {
            return None;
        }
        let path = request.uri.path();
        let rule = self
            .paths
            .iter()
            .filter(|rule| path.starts_with(&rule.prefix))
            .max_by_key(|rule| rule.prefix.len());
        let mark = match rule {
            Some(rule) => rule.mark.as_ref()?.to_header_value()?,
            None => UseAsDictionary::matching(version::pattern_for(path)?).to_header_value()?,
        };
        Some(Candidate {
            origin,
            lifetime,
            id: None,
            mark: Some(mark),
        })
    }

    /// Whether the body of the response with `response` parts to `request` is sampled for a
    /// site dictionary (see [`site`]); `secure` as for [`Dictionaries::ask`].
    pub(crate) fn sample(
        &self,
        request: &RequestParts,
        (status, fields): (StatusCode, &HeaderMap),
        secure: bool,
    ) -> Option<site::Sample> {
        let sites = self.sites.as_ref()?;
        if !secure
            || request.method != Method::GET
            || status != StatusCode::OK
            || fields.contains_key(CONTENT_ENCODING)
            || fields.contains_key(CONTENT_RANGE)
            || !shared(request, fields)
        {
            return None;
        }
        sites.wants(request, fields, &origin_of(request)?)
    }

    /// Takes a sampled body; builds a site dictionary on a thread of its own when one is due.
    pub(crate) fn add_sample(self: &Arc<Self>, sample: site::Sample, body: Bytes) {
        let Some(job) = self
            .sites
            .as_ref()
            .and_then(|sites| sites.add(sample, body))
        else {
            return;
        };
        let dictionaries = self.clone();
        let spawned = std::thread::Builder::new()
            .name("zipwire-dictionary".into())
            .spawn(move || dictionaries.build_site(job));
        if let Err(error) = spawned {
            debug!(%error, "no thread for a site dictionary");
        }
    }

    /// Runs a site dictionary's build and stores what it publishes.
    fn build_site(&self, job: site::Job) {
        let origin = job.origin().to_owned();
        let Some(published) = self.sites.as_ref().and_then(|sites| sites.build(job)) else {
            return;
        };
        self.counters.site_built.fetch_add(1, Ordering::Relaxed);
        self.store.insert(
            &origin,
            published.bytes().clone(),
            site::LIFETIME,
            SystemTime::now(),
            None,
            true,
        );
        self.account();
    }

    /// The site dictionary a request for a path under [`site::PREFIX`] asks for: its body and
    /// fields, or `None` (a 404) when none is served there; `None` of the outer option when
    /// the path is not the proxy's.
    #[allow(clippy::type_complexity)]
    pub(crate) fn serve_site(&self, request: &RequestParts) -> Option<Option<(Bytes, HeaderMap)>> {
        let sites = self.sites.as_ref()?;
        let path = request.uri.path();
        if !path.starts_with(site::PREFIX) {
            return None;
        }
        let found = origin_of(request).and_then(|origin| sites.find(&origin, path));
        Some(found.map(|published| {
            self.counters.site_fetches.fetch_add(1, Ordering::Relaxed);
            site::response(&published, &request.headers)
        }))
    }

    /// Adds `Link: <…>; rel="compression-dictionary"` for the site dictionaries of the
    /// request's origin to an HTML page (a 200 to a GET, on a secure request).
    pub(crate) fn announce(
        &self,
        request: &RequestParts,
        (status, fields): (StatusCode, &mut HeaderMap),
        secure: bool,
    ) {
        let Some(sites) = &self.sites else {
            return;
        };
        if !secure || request.method != Method::GET || status != StatusCode::OK {
            return;
        }
        let html = fields
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|media| {
                let essence = media.split(';').next().unwrap_or_default().trim();
                essence.eq_ignore_ascii_case("text/html")
            });
        if !html {
            return;
        }
        let Some(origin) = origin_of(request) else {
            return;
        };
        for link in sites.links(&origin) {
            fields.append(LINK, link);
        }
    }

    /// Rewrites a response's fields for what was chosen: a dictionary coding's
    /// `Content-Encoding` and `Vary` (with the fields the cross-origin check read), or for a
    /// request that named a dictionary, `Available-Dictionary` in `Vary` wherever
    /// `Accept-Encoding` is; and the proxy's own `Use-As-Dictionary` on a candidate.
    pub(crate) fn rewrite(
        &self,
        fields: &mut HeaderMap,
        decision: &Decision,
        used: Option<&Use>,
        asked: bool,
        candidate: Option<&Candidate>,
    ) {
        if let Some(used) = used {
            fields.insert(
                CONTENT_ENCODING,
                HeaderValue::from_static(used.coding.as_str()),
            );
            let mut vary = vec!["Accept-Encoding", "Available-Dictionary"];
            vary.extend_from_slice(used.allowed.vary());
            headers::add_vary(fields, &vary);
        } else if asked && merges_vary(decision) {
            headers::add_vary(fields, &["Accept-Encoding", "Available-Dictionary"]);
        }
        if let Some(mark) = candidate.and_then(|candidate| candidate.mark.clone()) {
            fields.insert(USE_AS_DICTIONARY, mark);
            self.counters.marked.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A permit of no bytes from the memory gate, for a copy in flight to grow.
    pub(crate) fn permit(&self) -> Permit {
        self.memory.account(0)
    }

    /// Stores a candidate's whole body.
    pub(crate) fn store_body(&self, candidate: &Candidate, body: Bytes) {
        let stored = self.store.insert(
            &candidate.origin,
            body,
            candidate.lifetime,
            SystemTime::now(),
            candidate.id.clone(),
            candidate.mark.is_some(),
        );
        if let Some(hash) = stored {
            debug!(hash = %hash.short(), origin = candidate.origin, "dictionary stored");
        }
        self.account();
    }

    /// Brings the gauges and the memory gate's count up to date.
    fn account(&self) {
        let counters = self.store.counters();
        let bytes = self.store.memory();
        self.counters
            .stored
            .store(counters.stored.load(Ordering::Relaxed), Ordering::Relaxed);
        self.counters.evicted.store(
            counters.evicted.load(Ordering::Relaxed) + counters.expired.load(Ordering::Relaxed),
            Ordering::Relaxed,
        );
        self.counters
            .held
            .store(self.store.len() as u64, Ordering::Relaxed);
        self.counters.held_bytes.store(bytes, Ordering::Relaxed);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let now = held.bytes();
        if bytes > now {
            held.grow_anyway(bytes - now);
        } else {
            held.shrink(now - bytes);
        }
    }

    /// Counts a body sent as `used`: `identity` bytes became `sent`, where the
    /// client's ordinary coding would have sent `ordinary` (known or estimated).
    pub(crate) fn count_use(&self, used: &Use, identity: u64, sent: u64, ordinary: u64) {
        let counters = &self.counters;
        counters.uses(used.coding).fetch_add(1, Ordering::Relaxed);
        if let Some(sites) = &self.sites {
            sites.count_use(&used.dictionary.hash);
        }
        counters.bytes_in.fetch_add(identity, Ordering::Relaxed);
        counters.bytes_out.fetch_add(sent, Ordering::Relaxed);
        counters
            .bytes_saved
            .fetch_add(ordinary.saturating_sub(sent), Ordering::Relaxed);
    }
}

/// What `identity` bytes would have taken in the coding whose totals `meter` holds, at the
/// ratio that coding has had so far (the identity length before it has compressed anything).
pub(crate) fn estimate(meter: &BodyMeter, identity: u64) -> u64 {
    let taken = meter.bytes_in.load(Ordering::Relaxed);
    let made = meter.bytes_out.load(Ordering::Relaxed);
    if taken == 0 {
        return identity;
    }
    (identity as f64 * made as f64 / taken as f64) as u64
}

/// What a response made by the proxy itself (the cache phase) needs of the dictionaries.
#[derive(Clone, Copy)]
pub(crate) struct Context<'a> {
    pub(crate) dictionaries: &'a Dictionaries,
    /// What the request asked for, if it named a dictionary.
    pub(crate) ask: Option<&'a Ask>,
    /// TLS, or a loopback peer.
    pub(crate) secure: bool,
}

/// Whether a response of `fields` to `request` may serve every client: no `private` or
/// `no-store`, no `Set-Cookie`, and a request without `Authorization` or `Cookie`.
fn shared(request: &RequestParts, fields: &HeaderMap) -> bool {
    let personal = list::elements(fields.get_all(CACHE_CONTROL)).any(|directive| {
        let name = directive.split(|&b| b == b'=').next().unwrap_or_default();
        name.eq_ignore_ascii_case(b"private") || name.eq_ignore_ascii_case(b"no-store")
    });
    !personal
        && !fields.contains_key(SET_COOKIE)
        && !request.headers.contains_key(AUTHORIZATION)
        && !request.headers.contains_key(COOKIE)
}

/// Whether a decision merges `Accept-Encoding` into `Vary`.
fn merges_vary(decision: &Decision) -> bool {
    match decision {
        Decision::Compress { .. } | Decision::Decompress { .. } => true,
        Decision::Pass { vary, .. } => *vary != Vary::Unchanged,
    }
}

/// The origin a request addresses, as the store keys it: its `Host` (or the target's
/// authority), in lower case.
fn origin_of(request: &RequestParts) -> Option<String> {
    let host = match request.uri.authority() {
        Some(authority) => authority.as_str().to_owned(),
        None => request.headers.get(HOST)?.to_str().ok()?.to_owned(),
    };
    Some(host.to_ascii_lowercase())
}
