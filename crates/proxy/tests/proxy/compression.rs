//! The compression rules as a client sees them through the proxy: headers rewritten, bodies
//! decoded and compared byte for byte with the origin's.

use std::time::Duration;

use zipwire_codec::Level;
use zipwire_proxy::Bypass;

use crate::support::*;

const GZIP: &[(&str, &str)] = &[("accept-encoding", "gzip")];

#[tokio::test]
async fn html_is_gzipped_with_headers_rewritten() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (head, body) = fetch(&client(), "GET", &proxy.url("/page.html"), GZIP).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.headers["content-encoding"], "gzip");
    assert_eq!(head.headers["transfer-encoding"], "chunked");
    assert!(!head.headers.contains_key("content-length"));
    assert!(!head.headers.contains_key("accept-ranges"));
    assert_eq!(head.headers["etag"], "W/\"v1\"");
    assert_eq!(head.headers["vary"], "Cookie, Accept-Encoding");
    assert_eq!(gunzip(&body), html(50_000));
    assert!(body.len() * 4 < 50_000, "compressed to {}", body.len());
    assert_eq!(Proxy::count(&proxy.stats.compressed), 1);
    assert_eq!(Proxy::count(&proxy.stats.requests), 1);
    assert_eq!(Proxy::count(&proxy.stats.bytes_in), 50_000);
    assert_eq!(Proxy::count(&proxy.stats.bytes_out), body.len() as u64);
    assert_eq!(Proxy::count(&proxy.stats.compression.bytes_in), 50_000);
    assert_eq!(Proxy::count(&proxy.stats.active_streams), 0);
}

#[tokio::test]
async fn deflate_is_zlib_wrapped() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (head, body) = fetch(
        &client(),
        "GET",
        &proxy.url("/data.json"),
        &[("accept-encoding", "deflate")],
    )
    .await;
    assert_eq!(head.headers["content-encoding"], "deflate");
    assert_eq!(unzlib(&body), json(500));
}

/// Every coding at every level, decoded by implementations that share no code with zipwire's
/// encoder or framing: GNU gzip for gzip bodies, Python's zlib module for deflate
/// (zlib-wrapped) bodies; `gunzip`/`unzlib` add zipwire's and flate2's decoders.
#[tokio::test]
async fn every_coding_and_level_decodes_with_gzip_and_python() {
    if !(zipwire_testkit::require_tool("gzip") && zipwire_testkit::require_tool("python3")) {
        return;
    }
    const PY_UNZLIB: &str =
        "import sys, zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read()))";
    let origin = Origin::start().await;
    let client = client();
    for level in 1..=9u8 {
        let level = Level::try_from(level).expect("levels 1-9 exist");
        let proxy = Proxy::start(vec![origin.upstream()], |config| {
            config.compression.level = level;
        })
        .await;
        for (coding, path, expected) in [
            ("gzip", "/page.html", html(50_000)),
            ("deflate", "/data.json", json(500)),
        ] {
            let (head, body) = fetch(
                &client,
                "GET",
                &proxy.url(path),
                &[("accept-encoding", coding)],
            )
            .await;
            assert_eq!(head.headers["content-encoding"], coding, "level {level:?}");
            let (theirs, ours) = match coding {
                "gzip" => (
                    zipwire_testkit::run_with_stdin("gzip", &["-dc"], &body),
                    gunzip(&body),
                ),
                _ => (
                    zipwire_testkit::run_with_stdin("python3", &["-c", PY_UNZLIB], &body),
                    unzlib(&body),
                ),
            };
            let theirs = theirs.unwrap_or_else(|e| panic!("{coding} at {level:?}: {e}"));
            assert!(theirs == expected, "{coding} at {level:?}: wrong bytes");
            assert!(
                ours == expected,
                "{coding} at {level:?}: zipwire decodes other bytes"
            );
        }
    }
}

#[tokio::test]
async fn stateful_levels_compress_through_the_proxy() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.compression.level = Level::BEST;
    })
    .await;
    let (head, body) = fetch(&client(), "GET", &proxy.url("/page.html"), GZIP).await;
    assert_eq!(head.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&body), html(50_000));
}

#[tokio::test]
async fn images_and_small_bodies_pass_untouched() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let client = client();
    let (head, body) = fetch(&client, "GET", &proxy.url("/image.png"), GZIP).await;
    assert!(!head.headers.contains_key("content-encoding"));
    assert_eq!(head.headers["content-length"], "10000");
    assert_eq!(body, noise(10_000));
    let (head, body) = fetch(&client, "GET", &proxy.url("/small.txt"), GZIP).await;
    assert!(!head.headers.contains_key("content-encoding"));
    assert_eq!(body, html(100));
    assert_eq!(proxy.stats.bypassed.get(Bypass::Type), 1);
    assert_eq!(proxy.stats.bypassed.get(Bypass::TooSmall), 1);
}

#[tokio::test]
async fn clients_without_gzip_get_identity_with_vary() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (head, body) = fetch(&client(), "GET", &proxy.url("/page.html"), &[]).await;
    assert!(!head.headers.contains_key("content-encoding"));
    assert_eq!(head.headers["content-length"], "50000");
    assert_eq!(head.headers["etag"], "\"v1\"");
    assert_eq!(head.headers["vary"], "Cookie, Accept-Encoding");
    assert_eq!(body, html(50_000));
    assert_eq!(proxy.stats.bypassed.get(Bypass::NotAccepted), 1);
}

#[tokio::test]
async fn a_passed_body_arriving_in_parts_keeps_its_length() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    // The first part is read before the head goes out: the length the connection frames the
    // body by must still count it.
    let fetched = tokio::time::timeout(
        Duration::from_secs(10),
        fetch(&client(), "GET", &proxy.url("/parts.png"), GZIP),
    )
    .await;
    let (head, body) = fetched.expect("the whole body within 10 s");
    assert_eq!(head.headers["content-length"], "100000");
    assert_eq!(body, noise(100_000));
}

#[tokio::test]
async fn head_gets_the_headers_of_get_and_no_body() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (head, body) = fetch(&client(), "HEAD", &proxy.url("/page.html"), GZIP).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.headers["content-encoding"], "gzip");
    assert_eq!(head.headers["etag"], "W/\"v1\"");
    assert!(!head.headers.contains_key("content-length"));
    assert!(body.is_empty());
    assert_eq!(proxy.stats.bypassed.get(Bypass::Head), 1);
    // The raw answer carries no body bytes, not even an empty gzip stream.
    let raw = raw_exchange(
        proxy.addr,
        b"HEAD /page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    let (text, rest) = split_head(&raw);
    assert!(text.contains("content-encoding: gzip"), "{text}");
    assert!(rest.is_empty());
}

#[tokio::test]
async fn statuses_without_a_transformable_body_pass() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let client = client();
    let (head, body) = fetch(&client, "GET", &proxy.url("/no-content"), GZIP).await;
    assert_eq!(head.status, 204);
    assert!(!head.headers.contains_key("content-encoding"));
    assert!(body.is_empty());
    let (head, _) = fetch(&client, "GET", &proxy.url("/not-modified"), GZIP).await;
    assert_eq!(head.status, 304);
    assert_eq!(head.headers["vary"], "Accept-Encoding");
    // Weak, as the compressed 200 of the same page is (RFC 9110 §15.4.5).
    assert_eq!(head.headers["etag"], "W/\"v1\"");
    let (head, body) = fetch(&client, "GET", &proxy.url("/partial"), GZIP).await;
    assert_eq!(head.status, 206);
    assert!(!head.headers.contains_key("content-encoding"));
    assert_eq!(head.headers["content-range"], "bytes 0-999/50000");
    assert_eq!(body, html(1_000));
    // 206 is ruled out by its status before its `Content-Range` is looked at.
    assert_eq!(proxy.stats.bypassed.get(Bypass::Status), 3);
}

#[tokio::test]
async fn a_range_validated_by_a_date_goes_upstream_only_where_the_200_is_never_recoded() {
    // The client resumes a body it got whole, validated by its Last-Modified: if that body
    // was gzip, the origin's identity 206 joined to it would make a corrupt file. Without the
    // range the origin sends the whole body again.
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let date = "Tue, 14 Nov 2023 22:13:20 GMT";
    let resume = |accept: &'static str, if_range: &'static str| {
        [
            ("accept-encoding", accept),
            ("range", "bytes=3000-"),
            ("if-range", if_range),
        ]
    };
    let client = client();
    fetch(
        &client,
        "GET",
        &proxy.url("/page.html"),
        &resume("gzip", date),
    )
    .await;
    let seen = origin.last_headers();
    assert!(
        !seen.contains_key("range") && !seen.contains_key("if-range"),
        "{seen:?}"
    );
    // A client that takes no coding holds identity bytes; a tag in If-Range is never weak.
    for (accept, if_range) in [("identity", date), ("gzip", "\"v1\"")] {
        fetch(
            &client,
            "GET",
            &proxy.url("/page.html"),
            &resume(accept, if_range),
        )
        .await;
        let seen = origin.last_headers();
        assert_eq!(seen["range"], "bytes=3000-", "{accept} {if_range}");
        assert_eq!(seen["if-range"], if_range);
    }
}

#[tokio::test]
async fn accept_encoding_is_removed_upstream_in_offload_mode() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    fetch(&client(), "GET", &proxy.url("/page.html"), GZIP).await;
    assert!(!origin.last_headers().contains_key("accept-encoding"));

    let kept = Proxy::start(vec![origin.upstream()], |config| {
        config.compression.offload = false;
    })
    .await;
    fetch(&client(), "GET", &kept.url("/page.html"), GZIP).await;
    assert_eq!(origin.last_headers()["accept-encoding"], "gzip");
}

#[tokio::test]
async fn upstream_gzip_is_decoded_for_clients_without_gzip() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let client = client();
    let (head, body) = fetch(&client, "GET", &proxy.url("/gzipped.html"), &[]).await;
    assert!(!head.headers.contains_key("content-encoding"));
    assert!(!head.headers.contains_key("content-length"));
    assert_eq!(head.headers["vary"], "Accept-Encoding");
    assert_eq!(body, html(50_000));
    assert_eq!(Proxy::count(&proxy.stats.decompressed), 1);

    let (head, body) = fetch(&client, "GET", &proxy.url("/gzipped.html"), GZIP).await;
    assert_eq!(head.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&body), html(50_000));
    assert_eq!(proxy.stats.bypassed.get(Bypass::AlreadyEncoded), 1);

    let off = Proxy::start(vec![origin.upstream()], |config| {
        config.compression.gunzip = false;
    })
    .await;
    let (head, body) = fetch(&client, "GET", &off.url("/gzipped.html"), &[]).await;
    assert_eq!(head.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&body), html(50_000));
    // The same `Vary` whoever asks: a cache keeps the first response's.
    let (with_gzip, _) = fetch(&client, "GET", &off.url("/gzipped.html"), GZIP).await;
    assert_eq!(head.headers.get("vary"), with_gzip.headers.get("vary"));
}

/// A coding the client did not ask for never reaches it: an origin's br or zstd (sent despite
/// offload, or with offload off) is decoded for a client without it, and passed to one
/// that takes it.
#[tokio::test]
async fn upstream_br_and_zstd_are_decoded_for_clients_without_them() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let client = client();
    for path in ["/brotli.html", "/zstd.html"] {
        let (head, body) = fetch(&client, "GET", &proxy.url(path), GZIP).await;
        assert!(!head.headers.contains_key("content-encoding"), "{path}");
        assert_eq!(head.headers["vary"], "Accept-Encoding", "{path}");
        assert_eq!(body, html(50_000), "{path}");
    }
    assert_eq!(Proxy::count(&proxy.stats.decompressed), 2);
    let (head, body) = fetch(
        &client,
        "GET",
        &proxy.url("/zstd.html"),
        &[("accept-encoding", "zstd")],
    )
    .await;
    assert_eq!(head.headers["content-encoding"], "zstd");
    assert_eq!(
        zstd::stream::decode_all(&body[..]).expect("zstd"),
        html(50_000)
    );
    // From the cache too: the stored br is decoded for each client without br.
    let cached = Proxy::start(vec![origin.upstream()], |config| {
        config.cache.mode = zipwire_proxy::CacheMode::Fresh;
    })
    .await;
    for _ in 0..2 {
        let (head, body) = fetch(&client, "GET", &cached.url("/brotli.html"), GZIP).await;
        assert!(!head.headers.contains_key("content-encoding"));
        assert_eq!(body, html(50_000));
    }
    assert_eq!(
        cached
            .stats
            .cache
            .hits
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    // A cut zstd body is never passed off as complete: 502 before the head, or a cut body.
    let response = client
        .request(crate::support::request(
            "GET",
            &proxy.url("/zstd-cut.html"),
            GZIP,
        ))
        .await
        .expect("a response");
    if response.status().is_success() {
        use http_body_util::BodyExt;
        assert!(
            response.into_body().collect().await.is_err(),
            "a cut body ended cleanly"
        );
    } else {
        assert_eq!(response.status(), http::StatusCode::BAD_GATEWAY);
    }
}

#[tokio::test]
async fn bypass_new_passes_responses_as_budget() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    proxy
        .throttle
        .bypass_new
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let (head, body) = fetch(&client(), "GET", &proxy.url("/page.html"), GZIP).await;
    assert!(!head.headers.contains_key("content-encoding"));
    assert_eq!(head.headers["vary"], "Cookie, Accept-Encoding");
    assert_eq!(body, html(50_000));
    assert_eq!(proxy.stats.bypassed.get(Bypass::Budget), 1);
    assert_eq!(Proxy::count(&proxy.stats.compressed), 0);
}

#[tokio::test]
async fn step_down_sends_stored_blocks_that_still_decode() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    proxy
        .throttle
        .step_down
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let (head, body) = fetch(&client(), "GET", &proxy.url("/page.html"), GZIP).await;
    assert_eq!(head.headers["content-encoding"], "gzip");
    assert!(body.len() > 50_000, "stored, {} bytes", body.len());
    assert_eq!(gunzip(&body), html(50_000));
}

#[tokio::test]
async fn http10_clients_get_the_body_uncompressed_with_its_length() {
    // As nginx's `gzip_http_version 1.1`: a compressed body loses upstream's length, and an
    // HTTP/1.0 client could then not tell a body cut upstream from a whole one.
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let raw = raw_exchange(
        proxy.addr,
        b"GET /page.html HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    let (head, body) = split_head(&raw);
    assert!(head.starts_with("http/1.0 200"), "{head}");
    assert!(!head.contains("content-encoding"), "{head}");
    assert!(head.contains("content-length: 50000"), "{head}");
    assert!(head.contains("vary: cookie, accept-encoding"), "{head}");
    assert_eq!(body, html(50_000));
    assert!(origin.last_headers()["via"] == "1.0 zipwire");
    assert_eq!(proxy.stats.bypassed.get(zipwire_proxy::Bypass::Http10), 1);
}

#[tokio::test]
async fn a_304_says_nothing_of_bytes_that_differ_from_what_the_client_stored() {
    let origin = crate::raw::RawOrigin::replying(
        b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Encoding: gzip\r\n\
          Content-MD5: abc\r\nAccept-Ranges: bytes\r\n\r\n"
            .to_vec(),
    )
    .await;
    let proxy = Proxy::start(vec![origin.upstream()], |_| {}).await;
    let head = |request: &'static [u8]| async move {
        let raw = raw_exchange(proxy.addr, request, Duration::from_secs(3)).await;
        let text = split_head(&raw).0;
        assert!(text.starts_with("http/1.1 304"), "{text}");
        assert!(!text.contains("content-encoding"), "{text}");
        assert!(!text.contains("content-md5"), "{text}");
        text
    };
    // The 200 would have been decoded for this client: its cache holds no gzip, and must not
    // be told it does.
    let text =
        head(b"GET /a HTTP/1.1\r\nHost: x\r\nIf-None-Match: W/\"v1\"\r\nConnection: close\r\n\r\n")
            .await;
    assert!(!text.contains("accept-ranges"), "{text}");
    assert!(text.contains("etag: w/\"v1\""), "{text}");
    // Passed as it is to a client that accepts gzip: the cache keeps its stored coding.
    head(b"GET /a HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n").await;
}
