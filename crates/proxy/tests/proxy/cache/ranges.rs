//! Byte ranges answered from a stored response (RFC 9110 §14): a 206 of the identity bytes
//! without asking the origin, a 416 past the end, the whole response for what the cache does
//! not serve, and the origin for a range on a miss or validated by a date.

use zipwire_proxy::CacheMode;

use super::{client, counter, get, proxy, Scripted};
use crate::support::{fetch, gunzip};

#[tokio::test]
async fn a_stored_response_answers_ranges_of_its_identity_bytes() {
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    let expected = origin.script.lock().expect("not poisoned").body.clone();
    assert_eq!(expected.len(), 20_000);
    // The miss stores the identity bytes; the hit after it adds a gzip variant and drops
    // them, so the ranges below come from the variant decoded.
    for _ in 0..2 {
        get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    }
    assert_eq!(origin.hits(), 1);
    let cases: &[(&str, usize, usize)] = &[
        ("bytes=10-19", 10, 19),
        ("bytes=-5", 19_995, 19_999),
        ("bytes=19990-", 19_990, 19_999),
        ("bytes=19990-99999", 19_990, 19_999),
        ("bytes=0-0", 0, 0),
    ];
    for &(range, first, last) in cases {
        let (parts, body) = get(
            &client,
            &proxy,
            &[("accept-encoding", "gzip"), ("range", range)],
        )
        .await;
        assert_eq!(parts.status, 206, "{range}");
        assert_eq!(
            parts.headers["content-range"],
            format!("bytes {first}-{last}/20000").as_str()
        );
        assert_eq!(
            parts.headers["content-length"],
            (last - first + 1).to_string()
        );
        assert!(!parts.headers.contains_key("content-encoding"), "{range}");
        assert_eq!(
            parts.headers["etag"], "\"v1\"",
            "a part of the identity bytes keeps the origin's strong tag"
        );
        assert_eq!(parts.headers["vary"], "Accept-Encoding", "its 200 varies");
        assert_eq!(body, expected.slice(first..=last), "{range}");
    }
    assert_eq!(
        origin.hits(),
        1,
        "ranges of a fresh entry never reach the origin"
    );

    // Past the end: 416 with the length.
    let (parts, body) = get(&client, &proxy, &[("range", "bytes=20000-")]).await;
    assert_eq!(parts.status, 416);
    assert_eq!(parts.headers["content-range"], "bytes */20000");
    assert!(body.is_empty());

    // If-Range: the same strong tag gets the part; another tag, or a weak one, the whole 200.
    let (parts, body) = get(
        &client,
        &proxy,
        &[("range", "bytes=5-9"), ("if-range", "\"v1\"")],
    )
    .await;
    assert_eq!(parts.status, 206);
    assert_eq!(body, expected.slice(5..10));
    for if_range in ["\"v0\"", "W/\"v1\""] {
        let (parts, body) = get(
            &client,
            &proxy,
            &[
                ("accept-encoding", "gzip"),
                ("range", "bytes=5-9"),
                ("if-range", if_range),
            ],
        )
        .await;
        assert_eq!(parts.status, 200, "{if_range}");
        assert!(!parts.headers.contains_key("content-range"));
        assert_eq!(gunzip(&body), expected, "{if_range}");
    }
    // Several ranges, a syntax error, another unit: the whole 200, as Varnish does.
    for range in ["bytes=0-1,5-6", "bytes=9-5", "items=0-9"] {
        let (parts, body) = get(&client, &proxy, &[("range", range)]).await;
        assert_eq!(parts.status, 200, "{range}");
        assert_eq!(body, expected, "{range}");
    }
    // HEAD ignores Range (§14.2).
    let (head, _) = fetch(
        &client,
        "HEAD",
        &proxy.url("/page"),
        &[("range", "bytes=0-9")],
    )
    .await;
    assert_eq!(head.status, 200);
    assert_eq!(head.headers["content-length"], "20000");
    assert_eq!(origin.hits(), 1);
    assert_eq!(counter(&proxy, |c| &c.hits), 14);

    // A date in If-Range goes to the origin as without a cache, and so does a miss.
    let date = "Sat, 28 Nov 2026 12:00:00 GMT";
    get(
        &client,
        &proxy,
        &[("range", "bytes=0-9"), ("if-range", date)],
    )
    .await;
    assert_eq!(origin.hits(), 2);
    assert_eq!(origin.last_request().1["range"], "bytes=0-9");
    fetch(
        &client,
        "GET",
        &proxy.url("/other"),
        &[("range", "bytes=0-9")],
    )
    .await;
    assert_eq!(origin.hits(), 3);
    assert_eq!(origin.last_request().1["range"], "bytes=0-9");
    let (parts, _) = fetch(&client, "GET", &proxy.url("/other"), &[]).await;
    assert_eq!(parts.status, 200);
    assert_eq!(origin.hits(), 4, "the range on a miss stored nothing");
}

#[tokio::test]
async fn a_revalidated_entry_answers_a_range_after_the_304() {
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"v1\"")).await;
    let proxy = proxy(&origin, CacheMode::Revalidate, origin.time.clone()).await;
    let client = client();
    let expected = origin.script.lock().expect("not poisoned").body.clone();
    get(&client, &proxy, &[]).await;
    let (parts, body) = get(&client, &proxy, &[("range", "bytes=100-199")]).await;
    assert_eq!(origin.hits(), 2, "revalidate mode asks every time");
    assert_eq!(origin.last_request().1["if-none-match"], "\"v1\"");
    assert_eq!(parts.status, 206);
    assert_eq!(parts.headers["content-range"], "bytes 100-199/20000");
    assert_eq!(body, expected.slice(100..200));
    // The origin's tag changed: its 200 replaces the entry and goes to the client whole (the
    // scripted origin ignores ranges, as a server may).
    origin.edit(|s| s.etag = Some("\"v2\"".to_owned()));
    let (parts, body) = get(&client, &proxy, &[("range", "bytes=100-199")]).await;
    assert_eq!(parts.status, 200);
    assert_eq!(body, expected);
    let (parts, _) = get(
        &client,
        &proxy,
        &[("range", "bytes=0-0"), ("if-range", "\"v1\"")],
    )
    .await;
    assert_eq!(parts.status, 200, "the stored tag is v2 now");
}
