//! `[headers]`: request rules change what reaches the origin; response rules reach the
//! client on the origin's answers, the proxy's own errors and cache hits.

use http::header::{HeaderName, HeaderValue};
use zipwire_proxy::{CacheMode, HeaderRules, HeaderSettings};

use crate::support::{client, dead_addr, fetch, upstream, Origin, Proxy};

fn rules() -> HeaderSettings {
    let name = |text: &str| HeaderName::from_bytes(text.as_bytes()).expect("a name");
    HeaderSettings {
        request: HeaderRules {
            remove: vec![name("x-debug")],
            set: vec![(name("x-env"), HeaderValue::from_static("production"))],
            add: vec![],
        },
        response: HeaderRules {
            remove: vec![name("etag")],
            set: vec![(name("x-frame-options"), HeaderValue::from_static("DENY"))],
            add: vec![(name("x-served-by"), HeaderValue::from_static("edge"))],
        },
    }
}

fn applied(parts: &http::response::Parts) -> bool {
    parts
        .headers
        .get("x-frame-options")
        .is_some_and(|v| v == "DENY")
        && parts
            .headers
            .get("x-served-by")
            .is_some_and(|v| v == "edge")
}

#[tokio::test]
async fn rules_apply_to_requests_answers_errors_and_cache_hits() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.headers = rules();
        config.cache.mode = CacheMode::Fresh;
    })
    .await;
    let client = client();
    let (parts, _) = fetch(
        &client,
        "GET",
        &proxy.url("/page.html"),
        &[("x-debug", "1"), ("x-env", "staging")],
    )
    .await;
    assert_eq!(parts.status, 200);
    assert!(applied(&parts), "{:?}", parts.headers);
    assert!(
        !parts.headers.contains_key("etag"),
        "removed from the answer"
    );
    let seen = origin.last_headers();
    assert!(
        !seen.contains_key("x-debug"),
        "a removed field reached the origin"
    );
    assert_eq!(seen["x-env"], "production");

    // A cache hit.
    let hits = || Proxy::count(&proxy.stats.cache.hits);
    let br = [("accept-encoding", "br")];
    fetch(&client, "GET", &proxy.url("/brotli.html"), &br).await;
    let before = hits();
    let (parts, _) = fetch(&client, "GET", &proxy.url("/brotli.html"), &br).await;
    assert_eq!(hits(), before + 1, "the second was not a hit");
    assert!(applied(&parts), "{:?}", parts.headers);

    // The proxy's own 502.
    let dead = dead_addr().await;
    let failing = Proxy::start(vec![upstream(dead.addr)], |config| {
        config.headers = rules();
    })
    .await;
    let (parts, _) = fetch(&client, "GET", &failing.url("/page.html"), &[]).await;
    assert_eq!(parts.status, 502);
    assert!(applied(&parts), "{:?}", parts.headers);
}
