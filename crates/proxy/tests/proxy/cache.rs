//! The compressed-variant cache (`[cache]`, RFC 9111) against an origin the test scripts:
//! what it stores, both modes, revalidation, invalidation, faults. Expiry is driven by a
//! clock the test moves, never by sleeping.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::HeaderValue;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use zipwire_proxy::{CacheMode, Clock};

use crate::support::{client, fetch, gunzip, html, purge, upstream, Proxy, TestClient};

mod accounting;
mod privacy;
mod ranges;
mod revalidation;

/// What the scripted origin answers: one representation, with its headers; it answers a
/// matching `If-None-Match` with a 304 carrying `not_modified` headers.
struct Script {
    /// The status of the full answer (200 unless a test says otherwise).
    status: StatusCode,
    headers: Vec<(&'static str, String)>,
    body: Bytes,
    etag: Option<String>,
    not_modified: Vec<(&'static str, String)>,
    /// Bodies by `Accept-Language`, for `Vary`.
    by_language: bool,
    /// The `Date` it sends: the test's clock, which the proxy reads too.
    clock: Clock,
}

/// An origin serving a [`Script`], recording what it was asked.
struct Scripted {
    addr: std::net::SocketAddr,
    script: Arc<Mutex<Script>>,
    hits: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<(Method, HeaderMap)>>>,
    /// Moves the time both the origin and the proxy read.
    clock: TestClock,
    /// That time, for the proxy.
    time: Clock,
    task: JoinHandle<()>,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Scripted {
    async fn start(headers: &[(&'static str, &str)], etag: Option<&str>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (clock, time) = TestClock::new();
        let script = Arc::new(Mutex::new(Script {
            clock: time.clone(),
            status: StatusCode::OK,
            headers: headers.iter().map(|&(n, v)| (n, v.to_owned())).collect(),
            body: Bytes::from(html(20_000)),
            etag: etag.map(str::to_owned),
            not_modified: Vec::new(),
            by_language: false,
        }));
        let hits = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let state = (script.clone(), hits.clone(), requests.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = state.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let state = state.clone();
                        async move {
                            state.1.fetch_add(1, Ordering::SeqCst);
                            let mut requests = state.2.lock().expect("not poisoned");
                            requests.push((request.method().clone(), request.headers().clone()));
                            drop(requests);
                            let script = state.0.lock().expect("not poisoned");
                            Ok::<_, Infallible>(answer(&script, &request))
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Scripted {
            addr,
            script,
            hits,
            requests,
            clock,
            time,
            task,
        }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    fn last_request(&self) -> (Method, HeaderMap) {
        self.requests
            .lock()
            .expect("not poisoned")
            .last()
            .cloned()
            .expect("a request")
    }

    fn edit(&self, change: impl FnOnce(&mut Script)) {
        change(&mut self.script.lock().expect("not poisoned"));
    }
}

fn answer(script: &Script, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let matches = script.etag.as_ref().is_some_and(|etag| {
        request
            .headers()
            .get_all("if-none-match")
            .iter()
            .any(|line| {
                line.to_str()
                    .unwrap_or("")
                    .split(", ")
                    .any(|tag| tag.trim_start_matches("W/") == etag.trim_start_matches("W/"))
            })
    });
    let mut response = Response::new(Full::new(Bytes::new()));
    let headers = response.headers_mut();
    let date = httpdate::fmt_http_date(script.clock.now());
    headers.insert("date", HeaderValue::from_str(&date).expect("valid"));
    if let Some(etag) = &script.etag {
        headers.insert("etag", HeaderValue::from_str(etag).expect("valid"));
    }
    if matches {
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        for (name, value) in &script.not_modified {
            let headers = response.headers_mut();
            let value = HeaderValue::from_str(value).expect("valid");
            // A 304's own ETag replaces the script's (an origin that names another tag).
            if *name == "etag" {
                headers.insert(*name, value);
            } else {
                headers.append(*name, value);
            }
        }
        return response;
    }
    for (name, value) in &script.headers {
        headers.append(*name, HeaderValue::from_str(value).expect("valid"));
    }
    headers.insert("content-type", HeaderValue::from_static("text/html"));
    *response.status_mut() = script.status;
    let mut body = script.body.to_vec();
    if script.by_language {
        let language = request.headers().get("accept-language");
        body.extend_from_slice(language.map_or(b"none".as_slice(), HeaderValue::as_bytes));
    }
    *response.body_mut() = Full::new(Bytes::from(body));
    response
}

/// A clock the test moves forward.
#[derive(Clone)]
struct TestClock(Arc<AtomicU64>);

impl TestClock {
    fn new() -> (TestClock, Clock) {
        let offset = Arc::new(AtomicU64::new(0));
        let start = SystemTime::now();
        let read = offset.clone();
        let clock = Clock::new(move || start + Duration::from_secs(read.load(Ordering::SeqCst)));
        (TestClock(offset), clock)
    }

    fn advance(&self, seconds: u64) {
        self.0.fetch_add(seconds, Ordering::SeqCst);
    }
}

async fn proxy(origin: &Scripted, mode: CacheMode, clock: Clock) -> Proxy {
    Proxy::start(vec![upstream(origin.addr)], move |config| {
        config.cache.mode = mode;
        config.cache.clock = clock;
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
    })
    .await
}

async fn get(
    client: &TestClient,
    proxy: &Proxy,
    headers: &[(&'static str, &'static str)],
) -> (http::response::Parts, Bytes) {
    fetch(client, "GET", &proxy.url("/page"), headers).await
}

fn counter(proxy: &Proxy, read: impl Fn(&zipwire_proxy::CacheCounters) -> &AtomicU64) -> u64 {
    read(&proxy.stats.cache).load(Ordering::Relaxed)
}

#[tokio::test]
async fn fresh_mode_serves_fresh_entries_and_revalidates_stale_ones() {
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    origin.edit(|s| s.not_modified = vec![("x-revalidated", "yes".to_owned())]);
    let clock = origin.clock.clone();
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    let expected = origin.script.lock().expect("not poisoned").body.clone();
    for _ in 0..3 {
        let (parts, body) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
        assert_eq!(parts.status, 200);
        assert_eq!(parts.headers["content-encoding"], "gzip");
        assert_eq!(parts.headers["etag"], "W/\"v1\"");
        assert_eq!(gunzip(&body), expected);
    }
    assert_eq!(origin.hits(), 1, "fresh hits never reach the origin");
    assert_eq!(counter(&proxy, |c| &c.hits), 2);
    clock.advance(30);
    let (parts, _) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    assert_eq!(parts.headers["age"], "30");
    assert_eq!(origin.hits(), 1);
    clock.advance(31);
    let (parts, body) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    assert_eq!(origin.hits(), 2, "a stale entry is revalidated");
    assert_eq!(origin.last_request().1["if-none-match"], "\"v1\"");
    assert_eq!(
        parts.headers["x-revalidated"], "yes",
        "the 304's fields are stored"
    );
    assert_eq!(gunzip(&body), expected);
    assert_eq!(counter(&proxy, |c| &c.revalidations), 1);
    // Freshened by the 304: fresh again for 60 s.
    get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    assert_eq!(origin.hits(), 2);
    // The client's no-cache and Pragma: no-cache make it revalidate.
    get(&client, &proxy, &[("cache-control", "no-cache")]).await;
    assert_eq!(origin.hits(), 3);
    get(&client, &proxy, &[("pragma", "no-cache")]).await;
    assert_eq!(origin.hits(), 4);
}

#[tokio::test]
async fn a_304_s_cookie_or_privacy_stays_with_its_client() {
    // The 304 answers one client: its Set-Cookie goes to that client, not into the shared
    // response; a 304 that makes the response private takes it out of the cache.
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"s1\"")).await;
    let clock = origin.clock.clone();
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    get(&client, &proxy, &[]).await;
    clock.advance(61);
    origin.edit(|s| s.not_modified = vec![("set-cookie", "sid=alice".to_owned())]);
    let (alice, _) = get(&client, &proxy, &[]).await;
    assert_eq!(alice.headers["set-cookie"], "sid=alice");
    assert_eq!(counter(&proxy, |c| &c.revalidations), 1);
    let (bob, _) = get(&client, &proxy, &[]).await;
    assert_eq!(origin.hits(), 2, "fresh again after the 304");
    assert!(bob.headers.get("set-cookie").is_none(), "{:?}", bob.headers);
    clock.advance(61);
    origin.edit(|s| {
        s.not_modified = vec![("cache-control", "private, max-age=600".to_owned())];
    });
    let (carol, _) = get(&client, &proxy, &[]).await;
    assert_eq!(carol.status, 200);
    assert_eq!(origin.hits(), 3);
    origin.edit(|s| s.not_modified = Vec::new());
    get(&client, &proxy, &[]).await;
    assert_eq!(
        origin.hits(),
        4,
        "a response made private is not served from the cache"
    );
}

#[tokio::test]
async fn what_a_shared_cache_must_not_store_goes_to_the_origin_every_time() {
    let refused: &[&[(&str, &str)]] = &[
        &[("cache-control", "max-age=60, no-store")],
        &[("cache-control", "private, max-age=60")],
        &[("cache-control", "max-age=60"), ("set-cookie", "id=1")],
        &[("cache-control", "max-age=60"), ("vary", "*")],
        &[
            ("cache-control", "no-store"),
            ("cdn-cache-control", "no-store"),
        ],
        // Surrogate-Control sets a surrogate's time, not whose the response is; and one with
        // no caching directive leaves Cache-Control in charge.
        &[
            ("cache-control", "private"),
            ("surrogate-control", "max-age=60"),
        ],
        &[
            ("cache-control", "private, no-store"),
            ("surrogate-control", "content=\"ESI/1.0\""),
        ],
        // A field the proxy writes upstream: the stored response would be one client's.
        &[("cache-control", "max-age=60"), ("vary", "X-Forwarded-For")],
    ];
    for headers in refused {
        let origin = Scripted::start(headers, Some("\"v1\"")).await;
        let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
        let client = client();
        for _ in 0..2 {
            get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
        }
        assert_eq!(origin.hits(), 2, "{headers:?} must not be stored");
        assert_eq!(counter(&proxy, |c| &c.stores), 0, "{headers:?}");
    }
    // Stored: CDN-Cache-Control speaks for this cache over Cache-Control (RFC 9213); no-cache
    // stores but revalidates every use; Set-Cookie when the operator opts in.
    let origin = Scripted::start(
        &[
            ("cache-control", "no-store"),
            ("cdn-cache-control", "max-age=60"),
        ],
        Some("\"v1\""),
    )
    .await;
    let proxy = self::proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    for _ in 0..2 {
        get(&client, &proxy, &[]).await;
    }
    assert_eq!(origin.hits(), 1);
    let origin =
        Scripted::start(&[("cache-control", "no-cache, max-age=60")], Some("\"v1\"")).await;
    let proxy = self::proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    for _ in 0..2 {
        get(&client, &proxy, &[]).await;
    }
    assert_eq!(origin.hits(), 2);
    assert_eq!(origin.last_request().1["if-none-match"], "\"v1\"");
    assert_eq!(counter(&proxy, |c| &c.revalidations), 1);
    let origin = Scripted::start(
        &[("cache-control", "max-age=60"), ("set-cookie", "a=1")],
        None,
    )
    .await;
    let time = origin.time.clone();
    let proxy = Proxy::start(vec![upstream(origin.addr)], move |config| {
        config.cache.mode = CacheMode::Fresh;
        config.cache.store_set_cookie = true;
        config.cache.clock = time;
    })
    .await;
    for _ in 0..2 {
        get(&client, &proxy, &[]).await;
    }
    assert_eq!(origin.hits(), 1);
}

#[tokio::test]
async fn vary_selects_by_the_named_request_fields() {
    let origin = Scripted::start(
        &[("cache-control", "max-age=60"), ("vary", "Accept-Language")],
        Some("\"v1\""),
    )
    .await;
    origin.edit(|s| s.by_language = true);
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    let (_, en) = get(&client, &proxy, &[("accept-language", "en")]).await;
    let (_, fr) = get(&client, &proxy, &[("accept-language", "fr")]).await;
    let (_, en_again) = get(
        &client,
        &proxy,
        &[("accept-language", "en"), ("accept-encoding", "gzip")],
    )
    .await;
    let (_, fr_again) = get(&client, &proxy, &[("accept-language", "fr")]).await;
    assert!(en.ends_with(b"en"));
    assert!(fr.ends_with(b"fr"));
    assert_eq!(gunzip(&en_again), en);
    assert_eq!(fr_again, fr);
    assert_eq!(origin.hits(), 2);
}

#[tokio::test]
async fn a_field_the_client_names_in_connection_selects_nothing() {
    let origin = Scripted::start(
        &[("cache-control", "max-age=60"), ("vary", "Accept-Language")],
        Some("\"v1\""),
    )
    .await;
    origin.edit(|s| s.by_language = true);
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    // `Connection` names Accept-Language, which the proxy then leaves out upstream: the
    // origin answers for no language, which must not be filed under `en`.
    let request = format!(
        "GET /page HTTP/1.1\r\nHost: {}\r\nAccept-Language: en\r\n\
         Connection: close, Accept-Language\r\n\r\n",
        proxy.addr
    );
    let raw =
        crate::support::raw_exchange(proxy.addr, request.as_bytes(), Duration::from_secs(3)).await;
    assert!(raw.ends_with(b"none"), "the origin saw no language");
    let (_, en) = get(&client(), &proxy, &[("accept-language", "en")]).await;
    assert!(en.ends_with(b"en"), "another client's variant");
}

#[tokio::test]
async fn unsafe_methods_and_purges_invalidate() {
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    let mut expected_hits = 0;
    for method in ["POST", "PUT", "DELETE"] {
        get(&client, &proxy, &[]).await;
        get(&client, &proxy, &[]).await;
        expected_hits += 1;
        assert_eq!(origin.hits(), expected_hits, "stored before {method}");
        fetch(&client, method, &proxy.url("/page"), &[]).await;
        expected_hits += 1;
        get(&client, &proxy, &[]).await;
        expected_hits += 1;
        assert_eq!(
            origin.hits(),
            expected_hits,
            "{method} invalidated the entry"
        );
        origin.edit(|s| s.headers.push(("x-round", method.to_owned())));
        // Clean slate for the next method.
        fetch(&client, "DELETE", &proxy.url("/page"), &[]).await;
        expected_hits += 1;
    }
    get(&client, &proxy, &[]).await;
    expected_hits += 1;
    let key = format!("/cache?key={}%20/page", proxy.addr);
    let answer = purge(&proxy, &key).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    get(&client, &proxy, &[]).await;
    expected_hits += 1;
    assert_eq!(origin.hits(), expected_hits, "purged by key");
    // A purge URL cut short drops nothing.
    for target in ["/cache?", "/cache?k"] {
        let answer = purge(&proxy, target).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{target}: {answer}");
    }
    get(&client, &proxy, &[]).await;
    assert_eq!(origin.hits(), expected_hits, "nothing purged");
    let answer = purge(&proxy, "/cache").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    get(&client, &proxy, &[]).await;
    expected_hits += 1;
    assert_eq!(origin.hits(), expected_hits, "purged all");
    // Counted in keys dropped, not in purge requests: the one stored again just now, then
    // none from an empty cache.
    let before = counter(&proxy, |c| &c.invalidations);
    purge(&proxy, "/cache").await;
    assert_eq!(counter(&proxy, |c| &c.invalidations), before + 1);
    purge(&proxy, "/cache").await;
    assert_eq!(counter(&proxy, |c| &c.invalidations), before + 1);
}

#[tokio::test]
async fn head_and_authorization() {
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    // The miss streams; the hit after it is sent from the stored variant, with its length.
    get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    let (parts, _) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    let length = parts.headers["content-length"].clone();
    let (head, body) = fetch(
        &client,
        "HEAD",
        &proxy.url("/page"),
        &[("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(origin.hits(), 1, "HEAD is answered from the entry");
    assert!(body.is_empty());
    assert_eq!(head.headers["content-length"], length);
    assert_eq!(head.headers["content-encoding"], "gzip");
    // A response to a request with credentials is not stored, nor used for one, unless it
    // says so (RFC 9111 §3.5). (Ranges: `cache/ranges.rs`.)
    get(&client, &proxy, &[("authorization", "Basic eDp5")]).await;
    assert_eq!(origin.hits(), 2);
}

#[tokio::test]
async fn a_body_cut_short_is_never_stored() {
    // An origin that declares 1000 bytes, sends 100 and closes.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer).await;
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncache-control: max-age=60\r\n\
                        etag: \"v1\"\r\ncontent-length: 1000\r\n\r\n";
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&[b'a'; 100]).await;
        }
    });
    let (_clock, time) = TestClock::new();
    let proxy = Proxy::start(vec![upstream(addr)], move |config| {
        config.cache.mode = CacheMode::Fresh;
        config.cache.clock = time;
    })
    .await;
    let client = client();
    for round in 1..=2 {
        // The miss streams: the client gets what it would without a cache, a body that
        // fails rather than a clean end.
        let received = match client
            .request(crate::support::request("GET", &proxy.url("/page"), &[]))
            .await
        {
            Ok(response) => response.into_body().collect().await.map(|b| b.to_bytes()),
            Err(error) => panic!("no response: {error}"),
        };
        assert!(
            received.is_err(),
            "round {round}: a cut body ends in an error"
        );
        assert_eq!(hits.load(Ordering::SeqCst), round, "nothing was stored");
    }
    assert_eq!(counter(&proxy, |c| &c.stores), 0);
    task.abort();
}

#[tokio::test]
async fn memory_stays_under_max_memory_and_evictions_are_counted() {
    // Run alone, so that the allocator's count is this test's: what the cache really holds,
    // not only the weight it gives its entries.
    if !zipwire_testkit::alloc::alone(
        "cache::memory_stays_under_max_memory_and_evictions_are_counted",
    ) {
        return;
    }
    const MAX_MEMORY: u64 = 200_000;
    // The same 40 pages through a proxy without a cache first: what the requests leave live
    // in the proxy and the test is not the cache's.
    let (uncached, _) = forty_pages(CacheMode::Off, MAX_MEMORY).await;
    let (cached, proxy) = forty_pages(CacheMode::Fresh, MAX_MEMORY).await;
    let held = counter(&proxy, |c| &c.bytes_held);
    eprintln!("{cached} bytes live at most with the cache, {uncached} without; it weighs {held}");
    // What the cache really holds, entries and their keys, headers and bookkeeping, stays
    // within twice the cap its weights keep to (measured about 1.6 times: the weight counts
    // body bytes); 40 pages kept would be 800 KB and more.
    let real = cached - uncached;
    assert!(
        real < 2 * MAX_MEMORY as isize,
        "the cache holds {real} bytes for a cap of {MAX_MEMORY}"
    );
    assert_eq!(counter(&proxy, |c| &c.stores), 40);
    assert!(counter(&proxy, |c| &c.evictions) > 0);
    assert!(held > 20_000);
}

/// Fetches 40 pages through a new proxy with the cache in `mode`, capped at `max_memory`:
/// the most bytes live above the start after each (the allocator's count), and the proxy.
async fn forty_pages(mode: CacheMode, max_memory: u64) -> (isize, Proxy) {
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    let time = origin.time.clone();
    let proxy = Proxy::start(vec![upstream(origin.addr)], move |config| {
        config.cache.mode = mode;
        config.cache.clock = time;
        config.cache.max_memory = max_memory;
        config.cache.max_object = 40_000;
        // The cache's memory alone: no site dictionary samples the pages.
        config.dictionaries.site = false;
    })
    .await;
    let client = client();
    // A page the cache does not keep warms the connections and buffers up.
    fetch(
        &client,
        "GET",
        &proxy.url("/warm"),
        &[("cache-control", "no-store")],
    )
    .await;
    let before = zipwire_testkit::alloc::live();
    let mut most = 0;
    for i in 0..40 {
        let url = proxy.url(&format!("/page{i}"));
        fetch(&client, "GET", &url, &[]).await;
        assert!(counter(&proxy, |c| &c.bytes_held) <= max_memory);
        most = most.max(zipwire_testkit::alloc::live() - before);
    }
    (most, proxy)
}

/// Waits until the background worker has recompressed `count` variants, failing after 20 s.
async fn recompressed(proxy: &Proxy, count: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while counter(proxy, |c| &c.recompressions) < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {count} recompressions within 20 s",
            counter(proxy, |c| &c.recompressions)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn stored_variants_are_recompressed_at_the_best_level_in_the_background() {
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    // Text that the best levels compress better than the request path's, br's too (a
    // repetitive page gives brotli nothing more to find).
    let text = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 100_000, 3);
    origin.edit(|s| s.body = Bytes::from(text));
    let expected = origin.script.lock().expect("not poisoned").body.clone();
    // The miss passes identity (no coding to make in the background). Each hit after it makes
    // a variant on the request path, and the worker then recompresses it; the test waits for
    // each recompression before the next hit, so that no variant is added while the worker
    // swaps the entry (the swap would win and the variant be lost).
    let (parts, _) = get(&client, &proxy, &[]).await;
    assert!(!parts.headers.contains_key("content-encoding"));
    let (_, first) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    recompressed(&proxy, 1).await;
    let (_, first_br) = get(&client, &proxy, &[("accept-encoding", "br")]).await;
    recompressed(&proxy, 2).await;
    let (parts, best) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    assert_eq!(parts.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&best), expected);
    assert!(
        best.len() < first.len(),
        "{} !< {}",
        best.len(),
        first.len()
    );
    let (parts, best_br) = get(&client, &proxy, &[("accept-encoding", "br")]).await;
    assert_eq!(parts.headers["content-encoding"], "br");
    assert!(
        best_br.len() < first_br.len(),
        "{} !< {}",
        best_br.len(),
        first_br.len()
    );
    let mut decoded = Vec::new();
    std::io::Read::read_to_end(
        &mut brotli::Decompressor::new(&best_br[..], 4096),
        &mut decoded,
    )
    .expect("brotli decodes");
    assert_eq!(decoded, expected);
    assert!(
        best.len() + best_br.len() < first.len() + first_br.len(),
        "gzip {} -> {}, br {} -> {}",
        first.len(),
        best.len(),
        first_br.len(),
        best_br.len()
    );
    assert_eq!(origin.hits(), 1);
}

#[tokio::test]
async fn surrogate_control_for_this_cache_overrides_cache_control() {
    // Cache-Control says no-store to everyone; Surrogate-Control lets this surrogate keep it.
    let origin = Scripted::start(
        &[
            ("cache-control", "no-store"),
            ("surrogate-control", "max-age=60;zipwire"),
        ],
        None,
    )
    .await;
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    for _ in 0..3 {
        let (parts, _) = get(&client, &proxy, &[]).await;
        assert_eq!(parts.status, 200);
    }
    assert_eq!(origin.hits(), 1, "stored for 60 s");
    assert_eq!(
        origin.last_request().1["surrogate-capability"],
        "zipwire=\"Surrogate/1.0\"",
        "the origin learns this cache's device token"
    );
    // A Surrogate-Control no-store wins over a fresh Cache-Control; one aimed at another
    // surrogate does not count.
    for (surrogate, hits) in [("no-store", 3), ("no-store;other", 1)] {
        let origin = Scripted::start(
            &[
                ("cache-control", "max-age=60"),
                ("surrogate-control", surrogate),
            ],
            None,
        )
        .await;
        let other = proxy_for(&origin).await;
        for _ in 0..3 {
            get(&client, &other, &[]).await;
        }
        assert_eq!(origin.hits(), hits, "{surrogate}");
    }
}

#[tokio::test]
async fn surrogate_control_reaches_only_clients_that_are_surrogates() {
    // Squid's rule: the field speaks to surrogates; a client that did not send
    // Surrogate-Capability gets the response without it, on a miss and on a hit alike.
    let origin = Scripted::start(
        &[
            ("cache-control", "max-age=60"),
            ("surrogate-control", "max-age=600"),
        ],
        None,
    )
    .await;
    let proxy = proxy_for(&origin).await;
    let client = client();
    let downstream = [("surrogate-capability", "cdn=\"Surrogate/1.0\"")];
    // The first request misses and stores the response; every later one is a hit.
    for round in ["first round", "second round"] {
        let (parts, _) = get(&client, &proxy, &[]).await;
        assert_eq!(parts.status, 200, "{round}");
        assert!(
            parts.headers.get("surrogate-control").is_none(),
            "{round}: a browser does not get Surrogate-Control"
        );
        assert_eq!(parts.headers["cache-control"], "max-age=60", "{round}");
        let (parts, _) = get(&client, &proxy, &downstream).await;
        assert_eq!(
            parts.headers["surrogate-control"], "max-age=600",
            "{round}: a downstream surrogate does"
        );
        assert_eq!(origin.hits(), 1, "{round}: the first request stored it");
    }
}

async fn proxy_for(origin: &Scripted) -> Proxy {
    proxy(origin, CacheMode::Fresh, origin.time.clone()).await
}
