//! What a hit costs and how it is counted: a variant made on the request path is compression
//! like a streamed one, in the stats and in the budget.

use std::time::Duration;

use zipwire_proxy::{Bypass, Coding};

use super::*;

#[tokio::test]
async fn variants_made_on_hits_are_counted_as_compression() {
    // A hit that makes a variant counts as compression: responses_compressed,
    // encode_seconds, compressed_input_bytes and the codings must not stay at 0.
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    // The miss passes (no coding accepted) and stores the identity bytes.
    let (parts, _) = get(&client, &proxy, &[]).await;
    assert!(!parts.headers.contains_key("content-encoding"));
    for coding in ["gzip", "br", "zstd", "gzip"] {
        let (parts, _) = get(&client, &proxy, &[("accept-encoding", coding)]).await;
        assert_eq!(parts.headers["content-encoding"], coding);
    }
    assert_eq!(origin.hits(), 1);
    let stats = &proxy.stats;
    assert_eq!(
        Proxy::count(&stats.compressed),
        4,
        "every hit sent compressed"
    );
    // Three variants made, each of the whole 20,000-byte body; the second gzip hit was served.
    assert_eq!(Proxy::count(&stats.compression.worked_in), 60_000);
    assert!(Proxy::count(&stats.compression.busy_nanos) > 0);
    assert!(Proxy::count(&stats.compression.saved) > 40_000);
    let gzip = stats.codings.get(Coding::Gzip);
    assert_eq!(gzip.responses.load(Ordering::Relaxed), 2);
    assert_eq!(gzip.meter.bytes_in.load(Ordering::Relaxed), 20_000);
    assert_eq!(stats.bypassed.get(Bypass::NotAccepted), 1);
}

#[tokio::test]
async fn a_variant_made_on_a_hit_takes_from_the_rate_budget() {
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    let time = origin.time.clone();
    let proxy = Proxy::start(vec![upstream(origin.addr)], move |config| {
        config.cache.mode = CacheMode::Fresh;
        config.cache.clock = time;
        // 10 kB over one second: one 20 kB variant takes it all.
        config.budget.max_rate = Some(10_000);
        config.budget.window = Duration::from_secs(1);
    })
    .await;
    let client = client();
    get(&client, &proxy, &[]).await;
    let (parts, _) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    assert_eq!(parts.headers["content-encoding"], "gzip");
    let (parts, body) = get(&client, &proxy, &[("accept-encoding", "br")]).await;
    assert!(
        !parts.headers.contains_key("content-encoding"),
        "a second variant within the window passed the rate budget"
    );
    assert_eq!(body, origin.script.lock().expect("not poisoned").body);
    assert_eq!(proxy.stats.bypassed.get(Bypass::Budget), 1);
    // A variant already made costs nothing and is served whatever the budget says.
    let (parts, _) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    assert_eq!(parts.headers["content-encoding"], "gzip");
}

#[tokio::test]
async fn a_304_from_the_cache_makes_no_variant_and_keeps_a_strong_tag_strong() {
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    let (parts, _) = get(&client, &proxy, &[]).await;
    assert_eq!(parts.status, 200);
    // A 304 for a coding not stored: nothing to compress (compressing the whole body to send
    // no body at all would be waste).
    for (coding, tag, expected) in [
        ("zstd", "W/\"v1\"", "W/\"v1\""),
        // Strong tags alone: the client holds the identity response, whose tag stays strong
        // (as on the origin's 304s).
        ("gzip", "\"v1\"", "\"v1\""),
    ] {
        let (parts, body) = get(
            &client,
            &proxy,
            &[("accept-encoding", coding), ("if-none-match", tag)],
        )
        .await;
        assert_eq!(parts.status, 304, "{coding} {tag}");
        assert!(body.is_empty());
        assert_eq!(parts.headers["etag"], expected, "{:?}", parts.headers);
        assert_eq!(parts.headers["vary"], "Accept-Encoding");
        assert!(!parts.headers.contains_key("content-encoding"));
    }
    assert_eq!(origin.hits(), 1);
    let stats = &proxy.stats;
    assert_eq!(
        Proxy::count(&stats.compression.worked_in),
        0,
        "no variant made"
    );
    assert_eq!(Proxy::count(&stats.compressed), 0);
    // The 200 that follows makes its variant then.
    let (parts, _) = get(&client, &proxy, &[("accept-encoding", "zstd")]).await;
    assert_eq!(parts.headers["content-encoding"], "zstd");
    assert_eq!(Proxy::count(&stats.compression.worked_in), 20_000);
}

#[tokio::test]
async fn a_large_variant_is_made_off_the_thread_that_serves_the_others() {
    // The first br hit on a 6 MB entry compresses it whole. Run on the runtime's thread (the
    // proxy's one worker here, as with `threads = 1`), it would make every other request
    // wait: a HEAD sent meanwhile would take as long as the compression. The
    // proxy runs on a runtime of its own, so that the test's clock and client keep running
    // whatever blocks the proxy's thread.
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    let text = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 6_000_000, 7);
    origin.edit(|s| s.body = Bytes::from(text));
    let proxy = Proxy::start_apart(vec![crate::support::upstream(origin.addr)], |config| {
        config.cache.mode = CacheMode::Fresh;
        config.cache.clock = origin.time.clone();
        config.cache.max_object = 8 << 20;
    })
    .await;
    let client = client();
    let (parts, _) = get(&client, &proxy, &[]).await;
    assert_eq!(parts.status, 200);
    let started = std::time::Instant::now();
    let hit = {
        let (client, url) = (client.clone(), proxy.url("/page"));
        tokio::spawn(async move {
            let (parts, body) = fetch(&client, "GET", &url, &[("accept-encoding", "br")]).await;
            (parts, body.len(), started.elapsed())
        })
    };
    // The hit's request reaches the proxy, which starts compressing.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while Proxy::count(&proxy.stats.requests) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the hit never arrived"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (head, _) = fetch(&client, "HEAD", &proxy.url("/page"), &[]).await;
    let waited = started.elapsed();
    assert!(
        !hit.is_finished(),
        "the variant was made before the HEAD was answered"
    );
    let (parts, length, compressing) = hit.await.expect("the hit's task");
    assert_eq!(head.status, 200);
    assert_eq!(parts.headers["content-encoding"], "br");
    assert!(length > 0);
    assert!(
        waited * 2 < compressing,
        "the HEAD was answered {waited:?} after the hit was sent, which took {compressing:?}"
    );
}
