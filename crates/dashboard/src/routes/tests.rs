use std::pin::Pin;
use std::sync::atomic::AtomicU64;
use std::task::Poll;

use http_body::Body as _;

use super::*;
use crate::events::{INTERVAL, MAX_VIEWERS};

fn counting() -> (Dashboard, Arc<AtomicU64>) {
    let calls = Arc::new(AtomicU64::new(0));
    let counted = calls.clone();
    let dashboard = Dashboard::new(Kind::Proxy, move || {
        let n = counted.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{{\"n\":{n}}}")
    });
    (dashboard, calls)
}

fn get(path: &str, headers: &[(&str, &str)]) -> Request<()> {
    let mut request = Request::get(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(()).expect("a valid request")
}

/// The whole body of a buffered response.
fn bytes(response: Response<Body>) -> Vec<u8> {
    let mut body = response.into_body();
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut out = Vec::new();
    while let Poll::Ready(Some(frame)) = Pin::new(&mut body).poll_frame(&mut cx) {
        let frame = frame.expect("infallible");
        out.extend_from_slice(frame.data_ref().expect("a data frame"));
    }
    out
}

fn page(headers: &[(&str, &str)]) -> Response<Body> {
    let (dashboard, _) = counting();
    dashboard
        .respond(&get("/dashboard", headers))
        .expect("the dashboard's path")
}

#[test]
fn the_page_links_only_its_own_versioned_assets() {
    let response = page(&[]);
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    assert_eq!(response.headers()[header::CACHE_CONTROL], "no-cache");
    let html = String::from_utf8(bytes(response)).expect("UTF-8");
    let version = assets::version();
    for file in [
        "uPlot.iife.min.js",
        "uPlot.min.css",
        "dashboard.js",
        "proxy.js",
    ] {
        assert!(
            html.contains(&format!("\"/assets/{version}/{file}\"")),
            "{file} not linked: {html}"
        );
    }
    // Self-contained: no scheme or protocol-relative URL anywhere in the page.
    assert!(!html.contains("http:") && !html.contains("https:") && !html.contains("\"//"));
}

#[test]
fn gzip_is_served_to_browsers_that_accept_it() {
    let plain = bytes(page(&[]));
    let gzipped = page(&[("accept-encoding", "gzip, deflate, br, zstd")]);
    assert_eq!(gzipped.headers()[header::CONTENT_ENCODING], "gzip");
    assert_eq!(gzipped.headers()[header::VARY], "accept-encoding");
    let wire = bytes(gzipped);
    assert!(
        wire.len() < plain.len(),
        "{} >= {}",
        wire.len(),
        plain.len()
    );
    let decoded = zipwire_codec::decompress(zipwire_codec::Format::Gzip, &wire, Default::default())
        .expect("valid gzip");
    assert_eq!(decoded, plain);
    let refused = page(&[("accept-encoding", "gzip;q=0, identity")]);
    assert!(refused.headers().get(header::CONTENT_ENCODING).is_none());
}

#[test]
fn assets_are_cached_under_their_version_only() {
    let (dashboard, _) = counting();
    let version = assets::version();
    let path = format!("/assets/{version}/uPlot.iife.min.js");
    let response = dashboard.respond(&get(&path, &[])).expect("an asset");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[header::CACHE_CONTROL], FOREVER);
    assert!(String::from_utf8_lossy(&bytes(response)).contains("uPlot"));
    let stale = dashboard
        .respond(&get("/assets/00000000/uPlot.iife.min.js", &[]))
        .expect("an asset path");
    assert_eq!(stale.status(), StatusCode::NOT_FOUND);
    assert!(dashboard
        .respond(&get(&format!("/assets/{version}/nope.js"), &[]))
        .is_none());
    assert!(dashboard.respond(&get("/stats", &[])).is_none());
}

#[test]
fn the_root_is_the_page_only_for_html() {
    let (dashboard, _) = counting();
    assert!(dashboard.respond(&get("/", &[("accept", "*/*")])).is_none());
    let html = dashboard
        .respond(&get("/", &[("accept", "text/html,application/xhtml+xml")]))
        .expect("the page");
    assert_eq!(html.status(), StatusCode::OK);
}

/// No viewer, no work: serving the page takes no sample, and time passing takes none either;
/// a viewer takes one sample per tick, and its going away ends them.
#[tokio::test(start_paused = true)]
async fn samples_are_taken_only_while_someone_watches() {
    let (dashboard, calls) = counting();
    for path in ["/dashboard", "/stats"] {
        if let Some(response) = dashboard.respond(&get(path, &[])) {
            let _ = bytes(response);
        }
    }
    tokio::time::sleep(INTERVAL * 10).await;
    assert_eq!(calls.load(Ordering::Relaxed), 0);
    assert_eq!(dashboard.samples(), 0);

    let response = dashboard.respond(&get("/events", &[])).expect("the stream");
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    assert_eq!(dashboard.viewers(), 1);
    let mut body = response.into_body();
    let mut events = Vec::new();
    for _ in 0..3 {
        let frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx))
            .await
            .expect("a frame")
            .expect("infallible");
        events.push(String::from_utf8(frame.into_data().expect("data").to_vec()).expect("UTF-8"));
    }
    assert_eq!(events[0], "retry: 2000\ndata: {\"n\":1}\n\n");
    assert_eq!(events[2], "data: {\"n\":3}\n\n");
    assert_eq!(dashboard.samples(), 3);
    drop(body);
    assert_eq!(dashboard.viewers(), 0);
    tokio::time::sleep(INTERVAL * 10).await;
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

#[tokio::test(start_paused = true)]
async fn viewers_past_the_cap_are_refused() {
    let (dashboard, _) = counting();
    let open: Vec<_> = (0..MAX_VIEWERS)
        .map(|_| dashboard.respond(&get("/events", &[])).expect("a stream"))
        .collect();
    assert!(open.iter().all(|r| r.status() == StatusCode::OK));
    let refused = dashboard.respond(&get("/events", &[])).expect("an answer");
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    drop(open);
    let again = dashboard.respond(&get("/events", &[])).expect("an answer");
    assert_eq!(again.status(), StatusCode::OK);
}
