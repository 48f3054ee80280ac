//! Site dictionaries (`auto`): a raw dictionary built from a sample of the HTML (or JSON) an
//! origin serves, served by the proxy at its own URL on that origin with
//! `Use-As-Dictionary`, and announced on the origin's pages with
//! `Link: <…>; rel="compression-dictionary"`. A browser fetches it when idle and then names
//! it on the navigations (or `fetch()`es) its `match` covers, which get dcz or dcb deltas
//! like any other dictionary's.
//!
//! - **Sampled**: the bodies of fresh, shared-cacheable 200s to GETs without credentials
//!   (no `Cookie`, no `Authorization`, no `Set-Cookie`, no `private` or `no-store`), in
//!   identity, on TLS or from loopback; one per path, at most [`SAMPLE_MAX`] bytes of each,
//!   at most [`SAMPLE_BUDGET`] bytes per origin and kind (oldest dropped first) and
//!   [`SAMPLE_TOTAL`] in all, counted in the memory gate.
//! - **Built** off the request path, on a thread of its own, once [`FIRST_BUILD`] pages are
//!   sampled: `zipwire_codings::train` tries each of [`SIZES`], measuring on held-out
//!   samples what a client would receive over as many page views per download of the
//!   dictionary as the site's clients have made (counted once its dictionaries were fetched
//!   [`MEASURED_AFTER`] times; [`VIEWS_PER_DOWNLOAD`] until then) with the dictionary's own
//!   download, and the smallest total wins. It is published only when it
//!   pays: at most [`PAYS`] of the bytes without it.
//! - **Rebuilt** after every [`REBUILD_AFTER`] newly sampled pages, at most once per
//!   [`BUILD_INTERVAL`] (a build takes seconds of one core): the new one replaces
//!   the current one only when it saves a tenth more on the current samples, and a current
//!   one that no longer pays stops being announced. The previous [`KEEP`] stay served, and
//!   the store holds each for its lifetime, so clients that hold one still get deltas.
//! - **Matched**: an HTML dictionary gets `match` = the sampled paths' common directory +
//!   `*` with `match-dest=("document" "frame" "iframe")` (a dictionary with a matching destination wins in
//!   the browser over one without); a JSON dictionary gets the JSON paths' directory and no
//!   destination (`fetch()` has none).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::request::Parts as RequestParts;
use tracing::{debug, info};
use zipwire_adapt::{MemoryGate, Permit};
use zipwire_codings::train::{self, Measured};
use zipwire_dictionary::{Hash, UseAsDictionary};
use zipwire_rules::negotiate::{AcceptEncoding, Coding, Negotiated};

/// Where the proxy serves site dictionaries on every origin it fronts.
pub const PREFIX: &str = "/.zipwire/dictionary/";

/// The most of one body sampled.
pub const SAMPLE_MAX: usize = 256 * 1024;

/// The most sampled per origin and kind.
pub const SAMPLE_BUDGET: usize = 4 * 1024 * 1024;

/// The most sampled for all sites together.
pub const SAMPLE_TOTAL: u64 = 16 * 1024 * 1024;

/// Pages sampled before the first build.
pub const FIRST_BUILD: usize = 32;

/// Newly sampled pages after which a dictionary is rebuilt.
pub const REBUILD_AFTER: usize = 64;

/// The sizes a dictionary is tried at.
pub const SIZES: [usize; 4] = [16 * 1024, 32 * 1024, 64 * 1024, 128 * 1024];

/// Page views a client is assumed to make per download of a dictionary when its size is
/// chosen, until the site's own are measured: a dictionary lives for [`LIFETIME`], across
/// visits.
pub const VIEWS_PER_DOWNLOAD: u64 = 20;

/// Downloads of a site's dictionaries after which its own views per download count.
pub const MEASURED_AFTER: u64 = 8;

/// The most a dictionary's total may be of the bytes without it to be published.
pub const PAYS: f64 = 0.95;

/// How long a site dictionary is fresh, for browsers and the store.
pub const LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// Earlier dictionaries of a site still served.
pub const KEEP: usize = 2;

/// The least time between two builds of one site's dictionary.
pub const BUILD_INTERVAL: Duration = Duration::from_secs(600);

/// Paths remembered per site as sampled; past this the memory of them starts over.
pub const MAX_SEEN: usize = 100_000;

/// Sites (origin and kind) sampled at once; when full, the sites without a dictionary that
/// sampled least make room.
pub const MAX_SITES: usize = 64;

/// What a site dictionary is built from and serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `text/html` pages, for navigations.
    Html,
    /// JSON documents, for `fetch()`.
    Json,
}

impl Kind {
    /// The kind of a response of `fields`, if it is one.
    fn of(fields: &HeaderMap) -> Option<Kind> {
        let media = fields.get(CONTENT_TYPE)?.to_str().ok()?;
        let essence = media.split(';').next()?.trim().to_ascii_lowercase();
        if essence == "text/html" {
            Some(Kind::Html)
        } else if essence == "application/json" || essence.ends_with("+json") {
            Some(Kind::Json)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Html => "html",
            Kind::Json => "json",
        }
    }
}

/// A body to sample: where it goes once whole.
#[derive(Clone, Debug)]
pub(crate) struct Sample {
    origin: String,
    kind: Kind,
    path: String,
}

/// A published dictionary: its bytes in each coding a client may fetch it in, and the
/// fields it is served and announced with.
#[derive(Debug)]
pub(crate) struct Published {
    hash: Hash,
    /// Its URL's path.
    path: String,
    identity: Bytes,
    encoded: Vec<(Coding, Bytes)>,
    mark: HeaderValue,
    link: HeaderValue,
    measured: Measured,
    /// Times it was served.
    fetches: AtomicU64,
    /// Responses sent as deltas against it.
    uses: AtomicU64,
}

impl Published {
    /// Its bytes.
    pub(crate) fn bytes(&self) -> &Bytes {
        &self.identity
    }
}

/// One origin's samples and dictionaries of one kind.
#[derive(Default)]
struct Site {
    samples: VecDeque<(String, Bytes)>,
    bytes: usize,
    seen: HashSet<u64>,
    /// Pages sampled since the last build.
    fresh: usize,
    building: bool,
    /// When the last build started.
    built_at: Option<Instant>,
    /// Newest last.
    published: Vec<Arc<Published>>,
    /// Whether the newest is announced (it paid when last measured).
    announced: bool,
}

impl Job {
    /// The origin the build is for.
    pub(crate) fn origin(&self) -> &str {
        &self.key.0
    }
}

impl Site {
    /// Page views per download of this site's dictionaries: measured once they were fetched
    /// [`MEASURED_AFTER`] times, else [`VIEWS_PER_DOWNLOAD`].
    fn views(&self) -> u64 {
        let count = |field: fn(&Published) -> &AtomicU64| -> u64 {
            self.published
                .iter()
                .map(|p| field(p).load(Ordering::Relaxed))
                .sum()
        };
        let fetches = count(|p| &p.fetches);
        match fetches >= MEASURED_AFTER {
            true => (count(|p| &p.uses) / fetches).clamp(1, 1000),
            false => VIEWS_PER_DOWNLOAD,
        }
    }
}

/// Every site's samples and dictionaries.
pub(crate) struct Sites {
    inner: Mutex<HashMap<(String, Kind), Site>>,
    hasher: RandomState,
    /// The samples' bytes, in the memory gate.
    permit: Mutex<Permit>,
    /// [`BUILD_INTERVAL`], shorter in tests.
    interval: Duration,
}

impl std::fmt::Debug for Sites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sites").finish_non_exhaustive()
    }
}

/// What a build needs of the site: its samples, and the newest dictionary to beat.
pub(crate) struct Job {
    key: (String, Kind),
    samples: Vec<(String, Bytes)>,
    current: Option<Arc<Published>>,
    /// Page views per download to size for.
    views: u64,
}

impl Sites {
    /// No sites yet; samples counted in `memory`.
    pub(crate) fn new(memory: &MemoryGate) -> Sites {
        Sites {
            inner: Mutex::new(HashMap::new()),
            hasher: RandomState::new(),
            permit: Mutex::new(memory.account(0)),
            interval: BUILD_INTERVAL,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Kind), Site>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a response of `fields` to `request` of `origin` is sampled (see the module
    /// documentation; the caller has checked method, status, coding and credentials).
    pub(crate) fn wants(
        &self,
        request: &RequestParts,
        fields: &HeaderMap,
        origin: &str,
    ) -> Option<Sample> {
        let kind = Kind::of(fields)?;
        let path = request.uri.path();
        if path.starts_with(PREFIX) {
            return None;
        }
        let seen = self.hasher.hash_one(path);
        let sites = self.lock();
        let key = (origin.to_owned(), kind);
        if sites
            .get(&key)
            .is_some_and(|site| site.seen.contains(&seen))
        {
            return None;
        }
        Some(Sample {
            origin: key.0,
            kind,
            path: path.to_owned(),
        })
    }

    /// Adds a sampled body; a build to run when one is due.
    pub(crate) fn add(&self, sample: Sample, body: Bytes) -> Option<Job> {
        if body.is_empty() {
            return None;
        }
        let mut sites = self.lock();
        let key = (sample.origin.clone(), sample.kind);
        let mut permit = self.permit.lock().unwrap_or_else(PoisonError::into_inner);
        let new_site = !sites.contains_key(&key);
        if !make_room(&mut sites, &mut permit, &key, new_site, body.len() as u64) {
            return None;
        }
        let site = sites.entry(key).or_default();
        let seen = self.hasher.hash_one(&sample.path);
        if site.seen.len() >= MAX_SEEN {
            site.seen.clear();
        }
        if !site.seen.insert(seen) {
            return None;
        }
        permit.grow_anyway(body.len() as u64);
        site.bytes += body.len();
        site.samples.push_back((sample.path, body));
        while site.bytes > SAMPLE_BUDGET {
            let Some((_, old)) = site.samples.pop_front() else {
                break;
            };
            site.bytes -= old.len();
            permit.shrink(old.len() as u64);
        }
        site.fresh += 1;
        let due = match site.published.is_empty() {
            true => site.samples.len() >= FIRST_BUILD && site.fresh >= FIRST_BUILD,
            false => site.fresh >= REBUILD_AFTER,
        };
        let recent = site.built_at.is_some_and(|at| at.elapsed() < self.interval);
        if !due || site.building || recent {
            return None;
        }
        site.building = true;
        site.built_at = Some(Instant::now());
        site.fresh = 0;
        Some(Job {
            key: (sample.origin, sample.kind),
            samples: site.samples.iter().cloned().collect(),
            current: site.published.last().cloned(),
            views: site.views(),
        })
    }

    /// Runs a build (slow: seconds for megabytes of samples) and publishes what pays; the
    /// new dictionary, to store.
    pub(crate) fn build(&self, job: Job) -> Option<Arc<Published>> {
        let bodies: Vec<Bytes> = job.samples.iter().map(|(_, body)| body.clone()).collect();
        let paths: Vec<&str> = job.samples.iter().map(|(path, _)| path.as_str()).collect();
        let views = job.views;
        let built = train::build(&bodies, &SIZES, views);
        let (origin, kind) = job.key.clone();
        let mut sites = self.lock();
        let site = sites.entry(job.key).or_default();
        site.building = false;
        let current = job.current.map(|current| {
            let now = train::measure(&current.identity, &train::held_out(&bodies));
            (current, now)
        });
        let pays = |measured: &Measured| measured.projected(views) <= PAYS;
        if let Some((_, now)) = &current {
            site.announced = pays(now);
        }
        let built = built.filter(|built| pays(&built.measured))?;
        if let Some((_, now)) = &current {
            let better = built.measured.projected(views) < 0.9 * now.projected(views);
            if !better {
                debug!(origin, kind = kind.name(), "site dictionary kept");
                return None;
            }
        }
        let published = Arc::new(publish(kind, &paths, built.dictionary, built.measured)?);
        info!(
            origin,
            kind = kind.name(),
            bytes = published.identity.len(),
            hash = %published.hash.short(),
            views,
            projected = published.measured.projected(views),
            "site dictionary built"
        );
        site.published.push(published.clone());
        if site.published.len() > KEEP + 1 {
            site.published.remove(0);
        }
        site.announced = true;
        Some(published)
    }

    /// The `Link` fields to announce on a page of `origin`: its current dictionaries.
    pub(crate) fn links(&self, origin: &str) -> Vec<HeaderValue> {
        let sites = self.lock();
        [Kind::Html, Kind::Json]
            .into_iter()
            .filter_map(|kind| {
                let site = sites.get(&(origin.to_owned(), kind))?;
                let newest = site.published.last().filter(|_| site.announced)?;
                Some(newest.link.clone())
            })
            .collect()
    }

    /// The dictionary served at `path` on `origin`, if one is (counted as fetched).
    pub(crate) fn find(&self, origin: &str, path: &str) -> Option<Arc<Published>> {
        let sites = self.lock();
        let found = [Kind::Html, Kind::Json].into_iter().find_map(|kind| {
            let site = sites.get(&(origin.to_owned(), kind))?;
            site.published.iter().find(|p| p.path == path).cloned()
        })?;
        found.fetches.fetch_add(1, Ordering::Relaxed);
        Some(found)
    }

    /// Counts a response sent as a delta against the dictionary `hash`, if it is a site's.
    pub(crate) fn count_use(&self, hash: &Hash) {
        let sites = self.lock();
        let found = sites
            .values()
            .flat_map(|site| site.published.iter())
            .find(|published| published.hash == *hash);
        if let Some(published) = found {
            published.uses.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Makes room for `bytes` more of samples (and for a new site when `new_site`) by dropping
/// the sites other than `keep` that have no dictionary yet, fewest samples first: a flood of
/// `Host` values cannot keep the sites that have one, or are further along, from sampling.
/// Whether there is room.
fn make_room(
    sites: &mut HashMap<(String, Kind), Site>,
    permit: &mut Permit,
    keep: &(String, Kind),
    new_site: bool,
    bytes: u64,
) -> bool {
    loop {
        let full = new_site && sites.len() >= MAX_SITES;
        if !full && permit.bytes() + bytes <= SAMPLE_TOTAL {
            return true;
        }
        let victim = sites
            .iter()
            .filter(|(key, site)| *key != keep && site.published.is_empty() && !site.building)
            .min_by_key(|(_, site)| site.samples.len())
            .map(|(key, _)| key.clone());
        let Some(victim) = victim.and_then(|key| sites.remove(&key)) else {
            return false;
        };
        permit.shrink(victim.bytes as u64);
    }
}

/// A dictionary made ready to serve: its URL, its fields, its encodings at the best levels.
fn publish(kind: Kind, paths: &[&str], bytes: Bytes, measured: Measured) -> Option<Published> {
    let hash = Hash::of(&bytes);
    let path = format!("{PREFIX}{}-{hash:?}", kind.name());
    let mark = UseAsDictionary {
        pattern: format!("{}*", common_directory(paths)),
        destinations: match kind {
            Kind::Html => ["document", "frame", "iframe"].map(str::to_owned).to_vec(),
            Kind::Json => Vec::new(),
        },
        id: None,
    }
    .to_header_value()?;
    let link = HeaderValue::from_str(&format!("<{path}>; rel=\"compression-dictionary\"")).ok()?;
    let encoded = [Coding::Br, Coding::Zstd, Coding::Gzip]
        .into_iter()
        .filter_map(|coding| {
            let encoded = zipwire_cache::variant::encode_best(coding, &bytes)?;
            (encoded.len() < bytes.len()).then_some((coding, encoded))
        })
        .collect();
    Some(Published {
        hash,
        path,
        identity: bytes,
        encoded,
        mark,
        link,
        measured,
        fetches: AtomicU64::new(0),
        uses: AtomicU64::new(0),
    })
}

/// The directory every path shares, ending in `/`.
fn common_directory(paths: &[&str]) -> String {
    let mut common: &str = paths.first().copied().unwrap_or("/");
    for path in paths {
        let shared = common
            .bytes()
            .zip(path.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        common = &common[..shared];
    }
    match common.rfind('/') {
        Some(end) => common[..=end].to_owned(),
        None => "/".to_owned(),
    }
}

/// The response to a GET or HEAD of a published dictionary, for a client whose request had
/// `headers`: the body in the best coding it accepts, and the fields.
pub(crate) fn response(published: &Published, headers: &HeaderMap) -> (Bytes, HeaderMap) {
    let offered: Vec<Coding> = published.encoded.iter().map(|(c, _)| *c).collect();
    let chosen = match AcceptEncoding::from_headers(headers).negotiate(&offered) {
        Negotiated::Coding(coding) => published.encoded.iter().find(|(c, _)| *c == coding),
        _ => None,
    };
    let mut fields = HeaderMap::new();
    fields.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    fields.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_str(&format!("public, max-age={}", LIFETIME.as_secs()))
            .unwrap_or_else(|_| HeaderValue::from_static("public, max-age=86400")),
    );
    fields.insert(
        http::header::VARY,
        HeaderValue::from_static("Accept-Encoding"),
    );
    fields.insert(
        zipwire_dictionary::fields::USE_AS_DICTIONARY,
        published.mark.clone(),
    );
    let body = match chosen {
        Some((coding, bytes)) => {
            fields.insert(
                http::header::CONTENT_ENCODING,
                HeaderValue::from_static(coding.as_str()),
            );
            bytes.clone()
        }
        None => published.identity.clone(),
    };
    (body, fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_directory_ends_in_a_slash() {
        assert_eq!(
            common_directory(&["/docs/a.html", "/docs/b/c.html"]),
            "/docs/"
        );
        assert_eq!(common_directory(&["/a.html", "/docs/b.html"]), "/");
        assert_eq!(common_directory(&["/docs/a.html"]), "/docs/");
        assert_eq!(
            common_directory(&["/docs/ab.html", "/docs/ac.html"]),
            "/docs/"
        );
        assert_eq!(common_directory(&[]), "/");
    }

    /// Page `n` of a site whose pages share `template`.
    fn page(template: &str, n: usize) -> Bytes {
        let mut page = String::new();
        let mut state = template.bytes().map(u64::from).sum::<u64>() * 0x2545_f491 + 1;
        for part in 0..600 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            page.push_str(&format!(
                "<a href=/{template}/{}>{part}</a>",
                state % 1_000_003
            ));
        }
        let mut state = n as u64 * 0x9e37_79b9 + 7;
        for _ in 0..300 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            page.push_str(&format!("{} ", state % 100_003));
        }
        Bytes::from(page)
    }

    fn request(path: &str) -> RequestParts {
        http::Request::get(path)
            .body(())
            .expect("request")
            .into_parts()
            .0
    }

    fn html() -> HeaderMap {
        let mut fields = HeaderMap::new();
        fields.insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
        fields
    }

    /// Samples pages `range` of `template` under `/docs/`; the build they make due, if any.
    fn feed(sites: &Sites, template: &str, range: std::ops::Range<usize>) -> Option<Job> {
        let mut due = None;
        for n in range {
            let path = format!("/docs/{template}-{n}.html");
            let sample = sites.wants(&request(&path), &html(), "example.com");
            if let Some(job) = sample.and_then(|sample| sites.add(sample, page(template, n))) {
                assert!(due.is_none(), "one build at a time");
                due = Some(job);
            }
        }
        due
    }

    #[test]
    fn a_site_gets_a_dictionary_and_a_new_one_when_its_pages_change() {
        let mut sites = Sites::new(&MemoryGate::new(None));
        sites.interval = Duration::ZERO;
        assert!(feed(&sites, "a", 0..FIRST_BUILD - 1).is_none());
        // A page already sampled is not sampled again.
        let again = "/docs/a-0.html";
        assert!(sites
            .wants(&request(again), &html(), "example.com")
            .is_none());
        let job = feed(&sites, "a", FIRST_BUILD - 1..FIRST_BUILD).expect("a build is due");
        let first = sites.build(job).expect("the first dictionary pays");
        assert_eq!(sites.links("example.com"), vec![first.link.clone()]);
        assert!(sites.links("other.example").is_empty());
        assert_eq!(
            sites.find("example.com", &first.path).map(|p| p.hash),
            Some(first.hash)
        );
        assert_eq!(
            first.mark,
            r#"match="/docs/*", match-dest=("document" "frame" "iframe")"#
        );
        let (body, fields) = response(&first, &HeaderMap::new());
        assert_eq!(body, first.identity);
        assert!(fields.get("content-encoding").is_none());

        // More pages like the first: the rebuild is no better, the dictionary stays.
        let job = feed(&sites, "a", 100..100 + REBUILD_AFTER).expect("a rebuild is due");
        assert!(sites.build(job).is_none());
        assert_eq!(sites.links("example.com"), vec![first.link.clone()]);

        // The site changes: the rebuild replaces the dictionary, the old one is still served.
        let job = feed(&sites, "b", 0..REBUILD_AFTER).expect("a rebuild is due");
        let second = sites.build(job).expect("a new dictionary");
        assert_ne!(second.hash, first.hash);
        assert_eq!(sites.links("example.com"), vec![second.link.clone()]);
        assert!(sites.find("example.com", &first.path).is_some());
    }

    #[test]
    fn a_flood_of_hosts_cannot_crowd_out_a_site_with_a_dictionary() {
        let sites = Sites::new(&MemoryGate::new(None));
        let job = feed(&sites, "a", 0..FIRST_BUILD).expect("a build is due");
        let published = sites.build(job).expect("the first dictionary pays");
        for host in 0..3 * MAX_SITES {
            let origin = format!("junk-{host}.example");
            let sample = sites
                .wants(&request("/docs/x.html"), &html(), &origin)
                .expect("any host is sampled");
            assert!(sites.add(sample, page("junk", host)).is_none());
            assert!(sites.lock().len() <= MAX_SITES);
        }
        assert_eq!(sites.links("example.com"), vec![published.link.clone()]);
        // The newest host got its place.
        let newest = format!("junk-{}.example", 3 * MAX_SITES - 1);
        assert!(sites.lock().contains_key(&(newest, Kind::Html)));
    }

    #[test]
    fn views_per_download_are_measured_once_there_are_enough_downloads() {
        let mut sites = Sites::new(&MemoryGate::new(None));
        sites.interval = Duration::ZERO;
        let job = feed(&sites, "a", 0..FIRST_BUILD).expect("a build is due");
        assert_eq!(job.views, VIEWS_PER_DOWNLOAD);
        let published = sites.build(job).expect("the first dictionary pays");
        let fetch = |count| {
            for _ in 0..count {
                sites.find("example.com", &published.path).expect("served");
            }
        };
        fetch(MEASURED_AFTER - 1);
        for _ in 0..60 * MEASURED_AFTER {
            sites.count_use(&published.hash);
        }
        // A hash that is no site's counts nowhere.
        sites.count_use(&Hash::of(b"another dictionary"));
        let job = feed(&sites, "a", 100..100 + REBUILD_AFTER).expect("a rebuild is due");
        assert_eq!(job.views, VIEWS_PER_DOWNLOAD, "too few downloads to count");
        sites.build(job);
        fetch(1);
        let job = feed(&sites, "a", 200..200 + REBUILD_AFTER).expect("a rebuild is due");
        assert_eq!(job.views, 60);
    }

    #[test]
    fn builds_wait_for_the_interval() {
        let sites = Sites::new(&MemoryGate::new(None));
        let job = feed(&sites, "a", 0..FIRST_BUILD).expect("a build is due");
        sites.build(job).expect("the first dictionary pays");
        assert!(feed(&sites, "b", 0..2 * REBUILD_AFTER).is_none());
    }

    #[test]
    fn only_html_and_json_are_kinds() {
        let mut fields = HeaderMap::new();
        fields.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        assert_eq!(Kind::of(&fields), Some(Kind::Html));
        fields.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/ld+json"),
        );
        assert_eq!(Kind::of(&fields), Some(Kind::Json));
        fields.insert(CONTENT_TYPE, HeaderValue::from_static("text/css"));
        assert_eq!(Kind::of(&fields), None);
    }
}
