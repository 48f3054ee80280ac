//! The demo's origin and load generator, on loopback.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::client::conn::http1 as client;
use hyper::server::conn::http1 as server;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use zipwire_codec::{Format, Level, Limits};
use zipwire_demo::{
    run_demo, run_load, serve_site, DemoOptions, LoadOptions, Scenario, Site, MISSING_PATH,
};

/// The demo site on an ephemeral port; dropping the sender stops it.
async fn start_site() -> (SocketAddr, Arc<Site>, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let site = Arc::new(Site::generate());
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve_site(listener, Arc::clone(&site), async {
        let _ = stopped.await;
    }));
    (addr, site, stop)
}

/// A server whose responses `answer` makes from the site's resource for the path.
async fn start_custom<F>(answer: F) -> SocketAddr
where
    F: Fn(&Site, &str) -> Response<Full<Bytes>> + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let site = Arc::new(Site::generate());
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let site = Arc::clone(&site);
            let answer = Arc::clone(&answer);
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<_>| {
                    let response = answer(&site, request.uri().path());
                    std::future::ready(Ok::<_, Infallible>(response))
                });
                let _ = server::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

async fn fetch(addr: SocketAddr, request: Request<Empty<Bytes>>) -> (http::response::Parts, Bytes) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = client::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    (parts, body.collect().await.unwrap().to_bytes())
}

fn get(method: Method, path: &str) -> http::request::Builder {
    Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "localhost")
        .header(header::ACCEPT_ENCODING, "gzip, deflate, br")
}

#[test]
fn site_is_deterministic_and_sized_like_a_real_site() {
    let site = Site::generate();
    let again = Site::generate();
    let sizes: Vec<(&str, usize)> = site
        .pages()
        .map(|page| (page.path(), page.body().len()))
        .collect();
    for (page, other) in site.pages().zip(again.pages()) {
        assert_eq!(page.body(), other.body(), "{}", page.path());
        assert_eq!(page.etag(), other.etag(), "{}", page.path());
    }
    let size = |path: &str| site.lookup(path).body().len();
    let within = |path: &str, lo: usize, hi: usize| {
        let len = size(path);
        assert!(
            (lo..=hi).contains(&len),
            "{path}: {len} bytes, sizes {sizes:?}"
        );
    };
    within("/", 60_000, 80_000);
    within("/static/site.css", 28_000, 36_000);
    within("/static/app.js", 95_000, 110_000);
    within("/api/articles.json", 48_000, 56_000);
    within("/static/logo.svg", 2_000, 12_000);
    within("/static/hero.png", 2_000, 8_000);
    assert_eq!(site.lookup(MISSING_PATH).status(), StatusCode::NOT_FOUND);
    assert!(site
        .resources()
        .iter()
        .all(|page| page.status() == StatusCode::OK));
}

#[test]
fn site_text_compresses_like_real_text() {
    // Ratios a real site gets at level 1: far from random bytes (1.0) and from one repeated
    // line (hundreds).
    let site = Site::generate();
    for page in site
        .resources()
        .iter()
        .filter(|page| page.is_compressible())
    {
        let compressed = zipwire_codec::compress(Format::Gzip, Level::FASTEST, page.body());
        let ratio = page.body().len() as f64 / compressed.len() as f64;
        assert!(
            (2.0..12.0).contains(&ratio),
            "{}: ratio {ratio:.2}",
            page.path()
        );
    }
}

#[test]
fn png_is_valid() {
    let site = Site::generate();
    let png = site.lookup("/static/hero.png").body().clone();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let mut at = 8;
    let mut kinds = Vec::new();
    let mut idat = Vec::new();
    let mut size = (0, 0);
    while at < png.len() {
        let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let kind = &png[at + 4..at + 8];
        let data = &png[at + 8..at + 8 + len];
        let crc = u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(kind);
        hasher.update(data);
        assert_eq!(
            hasher.finalize(),
            crc,
            "CRC of chunk {}",
            String::from_utf8_lossy(kind)
        );
        match kind {
            b"IHDR" => {
                assert_eq!(len, 13);
                size = (
                    u32::from_be_bytes(data[0..4].try_into().unwrap()),
                    u32::from_be_bytes(data[4..8].try_into().unwrap()),
                );
                assert_eq!(&data[8..], &[8, 6, 0, 0, 0], "8-bit RGBA, no interlace");
            }
            b"IDAT" => idat.extend_from_slice(data),
            _ => {}
        }
        kinds.push(String::from_utf8_lossy(kind).into_owned());
        at += 12 + len;
    }
    assert_eq!(at, png.len(), "chunks end exactly at the end of the file");
    assert_eq!(kinds.first().map(String::as_str), Some("IHDR"));
    assert_eq!(kinds.last().map(String::as_str), Some("IEND"));
    let raw = zipwire_codec::decompress(Format::Zlib, &idat, Limits::default()).unwrap();
    let (width, height) = size;
    assert_eq!(raw.len(), (height * (1 + 4 * width)) as usize);
    assert!(
        raw.chunks(1 + 4 * width as usize).all(|row| row[0] == 0),
        "filter bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn site_serves_every_path_with_origin_headers() {
    let (addr, site, _stop) = start_site().await;
    for page in site.pages() {
        let (parts, body) = fetch(
            addr,
            get(Method::GET, page.path()).body(Empty::new()).unwrap(),
        )
        .await;
        let path = page.path();
        assert_eq!(parts.status, page.status(), "{path}");
        let headers = &parts.headers;
        assert_eq!(headers[header::CONTENT_TYPE], page.content_type(), "{path}");
        assert_eq!(
            headers[header::CONTENT_LENGTH],
            page.body().len().to_string(),
            "{path}"
        );
        let etag = headers[header::ETAG].to_str().unwrap();
        assert!(
            etag.starts_with('"') && etag.ends_with('"'),
            "{path}: strong ETag {etag}"
        );
        assert_eq!(
            headers[header::LAST_MODIFIED],
            "Tue, 03 Mar 2026 09:00:00 GMT"
        );
        assert!(
            headers.get(header::CONTENT_ENCODING).is_none(),
            "{path}: never compressed"
        );
        assert_eq!(&body, page.body(), "{path}");

        // HEAD: the same headers, no body.
        let (head, body) = fetch(addr, get(Method::HEAD, path).body(Empty::new()).unwrap()).await;
        assert_eq!(head.status, page.status(), "{path}");
        assert_eq!(
            head.headers[header::CONTENT_LENGTH],
            page.body().len().to_string(),
            "{path}"
        );
        assert_eq!(head.headers[header::ETAG], etag, "{path}");
        assert!(body.is_empty(), "{path}");
    }

    let home = site.lookup("/");
    let conditional = get(Method::GET, "/")
        .header(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(&format!("\"x\", W/{}", home.etag().to_str().unwrap())).unwrap(),
        )
        .body(Empty::new())
        .unwrap();
    let (parts, body) = fetch(addr, conditional).await;
    assert_eq!(parts.status, StatusCode::NOT_MODIFIED);
    assert_eq!(&parts.headers[header::ETAG], home.etag());
    assert!(body.is_empty());

    let (parts, _) = fetch(addr, get(Method::POST, "/").body(Empty::new()).unwrap()).await;
    assert_eq!(parts.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(parts.headers[header::ALLOW], "GET, HEAD");

    let (parts, body) = fetch(
        addr,
        get(Method::GET, "/static/other.css?v=2")
            .body(Empty::new())
            .unwrap(),
    )
    .await;
    assert_eq!(parts.status, StatusCode::NOT_FOUND);
    assert_eq!(&body, site.not_found().body());

    let served = site.served();
    assert_eq!(served.requests, 2 * site.pages().count() as u64 + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_against_the_site_counts_and_verifies() {
    let (addr, site, stop) = start_site().await;
    let options = LoadOptions {
        connections: 4,
        duration: Duration::from_secs(1),
        ..LoadOptions::default()
    };
    let report = run_load(addr, &site, &options).await.unwrap();
    assert!(report.requests > 50, "{report:?}");
    assert_eq!(report.mismatches, 0, "{report:?}");
    assert_eq!(report.errors, 0, "{report:?}");
    assert_eq!(report.compressed, 0, "the origin never compresses");
    assert_eq!(report.wire_bytes, report.decoded_bytes);
    // Stops at its one-second duration; the upper bound only has to tell that from running on,
    // and leaves a loaded machine room.
    assert!(report.elapsed >= Duration::from_secs(1) && report.elapsed < Duration::from_secs(5));
    let served = site.served();
    assert_eq!(served.requests, report.requests);
    assert_eq!(served.body_bytes, report.wire_bytes);
    assert!(report.rss_before.is_some() && report.rss_after.is_some());
    assert!((report.ratio() - 1.0).abs() < 1e-9);
    drop(stop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_stops_at_the_request_budget() {
    let (addr, site, _stop) = start_site().await;
    let options = LoadOptions {
        connections: 3,
        duration: Duration::from_secs(10),
        max_requests: 40,
        ..LoadOptions::default()
    };
    let report = run_load(addr, &site, &options).await.unwrap();
    assert_eq!(report.requests, 40, "{report:?}");
    assert_eq!(site.served().requests, 40);
    // Stopped by the request budget, long before the 10 s duration.
    assert!(report.elapsed < Duration::from_secs(8), "{report:?}");
}

/// Answers like the site, but gzips the compressible pages (as a proxy would).
fn gzip_answer(site: &Site, path: &str, corrupt: bool) -> Response<Full<Bytes>> {
    let page = site.lookup(path);
    let mut response = Response::builder().status(page.status());
    let body = if page.is_compressible() {
        response = response.header(header::CONTENT_ENCODING, "gzip");
        let mut body = page.body().to_vec();
        if corrupt && page.path() == "/api/articles.json" {
            body[100] ^= 1;
        }
        Bytes::from(zipwire_codec::compress(Format::Gzip, Level::FASTEST, &body))
    } else {
        page.body().clone()
    };
    response.body(Full::new(body)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_decodes_gzip_and_counts_mismatches() {
    let site = Site::generate();
    let options = LoadOptions {
        // One connection walks the pages in order, so 70 requests are each page 10 times.
        connections: 1,
        duration: Duration::from_secs(5),
        max_requests: 70,
        ..LoadOptions::default()
    };

    let good = start_custom(|site, path| gzip_answer(site, path, false)).await;
    let report = run_load(good, &site, &options).await.unwrap();
    assert_eq!(report.requests, 70, "{report:?}");
    assert_eq!(report.mismatches, 0, "{report:?}");
    assert_eq!(report.compressed, 60, "6 of the 7 pages are compressible");
    assert!(report.ratio() > 2.0, "{report:?}");

    let bad = start_custom(|site, path| gzip_answer(site, path, true)).await;
    let report = run_load(bad, &site, &options).await.unwrap();
    assert_eq!(report.mismatches, 10, "{report:?}");
    assert!(report
        .first_mismatch
        .unwrap()
        .contains("/api/articles.json"));

    // A compressed image is a mismatch too: the proxy must leave it alone.
    let eager = start_custom(|site, path| {
        let page = site.lookup(path);
        let body = zipwire_codec::compress(Format::Gzip, Level::FASTEST, page.body());
        Response::builder()
            .status(page.status())
            .header(header::CONTENT_ENCODING, "gzip")
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    })
    .await;
    let report = run_load(eager, &site, &options).await.unwrap();
    assert_eq!(report.mismatches, 10, "{report:?}");
    assert!(report.first_mismatch.unwrap().contains("image/png"));
}

#[tokio::test]
async fn load_reports_an_address_that_refuses() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let error = run_load(addr, &Site::generate(), &LoadOptions::default())
        .await
        .unwrap_err();
    assert!(error.to_string().contains(&addr.to_string()), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_runs_the_proxy_off_and_compressing() {
    let options = DemoOptions {
        connections: 4,
        duration: Duration::from_millis(700),
        max_requests: 100_000,
        scenarios: vec![
            Scenario::Off,
            Scenario::Compress(Level::FASTEST),
            Scenario::Compress(Level::DEFAULT),
        ],
    };
    let report = run_demo(options).await.unwrap();
    let text = report.to_string();
    eprintln!("{text}");
    assert_eq!(report.scenarios.len(), 3, "{text}");
    assert_eq!(report.mismatches(), 0, "{text}");
    let [off, fast, zlib] = &report.scenarios[..] else {
        unreachable!()
    };
    assert!(off.load.requests > 10, "{text}");
    assert_eq!(off.load.compressed, 0, "{text}");
    assert!((off.ratio() - 1.0).abs() < 1e-9, "{text}");
    for compressing in [fast, zlib] {
        assert!(compressing.load.compressed > 0, "{text}");
        assert!(compressing.ratio() > 2.5, "{text}");
        // Every response was decoded: the clients saw the origin's bytes.
        assert_eq!(
            compressing.load.decoded_bytes, compressing.origin.body_bytes,
            "{text}"
        );
    }
    assert!(zlib.ratio() > fast.ratio(), "{text}");
    assert!(text.contains("zipwire proxy --listen"), "{text}");
    // The returning visitor: the new release of the script as a delta of the old, checked
    // by decoding, a small fraction of what a browser without the dictionary gets.
    let returning = report
        .returning
        .as_ref()
        .expect("the returning visitor ran");
    assert!(
        returning.with > 0 && returning.with * 20 < returning.without,
        "{text}"
    );
    assert!(returning.without * 2 < returning.identity, "{text}");
    assert!(text.contains("Returning visitor"), "{text}");
}
