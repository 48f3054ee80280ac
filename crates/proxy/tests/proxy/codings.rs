//! zstd and brotli end to end: negotiation by q-values and the server's order, bodies that
//! decode with the reference decoders, the memory gate's fallback to stateless gzip, and the
//! per-coding counters of `/stats` and `/metrics`.

use std::io::Read;
use std::sync::atomic::Ordering;

use zipwire_proxy::{Bypass, Coding};

use crate::support::*;

/// The body decoded as its `Content-Encoding` says.
pub(crate) fn decode(encoding: Option<&str>, body: &[u8]) -> Vec<u8> {
    match encoding {
        None => body.to_vec(),
        Some("gzip") => gunzip(body),
        Some("zstd") => zstd::stream::decode_all(body).expect("valid zstd"),
        Some("br") => {
            let mut plain = Vec::new();
            brotli::Decompressor::new(body, 4096)
                .read_to_end(&mut plain)
                .expect("valid brotli");
            plain
        }
        Some(other) => panic!("unexpected coding {other}"),
    }
}

fn encoding(head: &http::response::Parts) -> Option<&str> {
    head.headers
        .get("content-encoding")
        .map(|value| value.to_str().expect("ASCII"))
}

#[tokio::test]
async fn each_coding_is_chosen_by_weight_then_server_order_and_decodes() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let client = client();
    let rows: &[(&'static str, Option<&str>)] = &[
        // Chromium over HTTPS: all weight 1, the server's order (zstd, br, gzip) decides.
        ("gzip, deflate, br, zstd", Some("zstd")),
        ("gzip, deflate, br", Some("br")),
        ("br;q=1, zstd;q=0.9, gzip", Some("br")),
        ("zstd;q=0, br;q=0, gzip", Some("gzip")),
        ("*", Some("zstd")),
        ("*;q=0.5, zstd;q=0", Some("br")),
        ("identity", None),
    ];
    for &(accept, expected) in rows {
        let (head, body) = fetch(
            &client,
            "GET",
            &proxy.url("/page.html"),
            &[("accept-encoding", accept)],
        )
        .await;
        assert_eq!(encoding(&head), expected, "{accept}");
        assert_eq!(decode(expected, &body), html(50_000), "{accept}");
        assert!(
            head.headers["vary"]
                .to_str()
                .unwrap_or("")
                .contains("Accept-Encoding"),
            "{accept}"
        );
        if expected.is_some() {
            assert!(body.len() < 25_000, "{accept}: not compressed");
            assert!(!head.headers.contains_key("content-length"), "{accept}");
        }
    }
}

#[tokio::test]
async fn a_coding_left_out_of_the_list_is_never_produced() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.compression.rules.offered = vec![Coding::Br, Coding::Gzip];
    })
    .await;
    let (head, body) = fetch(
        &client(),
        "GET",
        &proxy.url("/page.html"),
        &[("accept-encoding", "zstd")],
    )
    .await;
    assert_eq!(encoding(&head), None);
    assert_eq!(body, html(50_000));
    assert_eq!(proxy.stats.bypassed.get(Bypass::NotAccepted), 1);
}

#[tokio::test]
async fn a_streamed_body_of_every_coding_decodes() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    for accept in ["zstd", "br"] {
        let (head, body) = fetch(
            &client(),
            "GET",
            &proxy.url("/big"),
            &[("accept-encoding", accept)],
        )
        .await;
        assert_eq!(encoding(&head), Some(accept));
        assert_eq!(decode(Some(accept), &body), big(), "{accept}");
    }
}

/// Without room for a zstd stream's window, a client that accepts gzip gets stateless gzip,
/// and one that accepts only zstd gets the body uncompressed.
#[tokio::test]
async fn without_room_for_a_window_zstd_falls_back_to_stateless_gzip() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        // Room for one stream's buffers (2 × 64 KiB), not for a zstd context (about 1.4 MB).
        config.budget.max_memory = Some(300_000);
    })
    .await;
    let client = client();
    let late_stream = |accept: &'static str| {
        let (client, url) = (client.clone(), proxy.url("/late-stream"));
        async move { fetch(&client, "GET", &url, &[("accept-encoding", accept)]).await }
    };
    let (head, body) = late_stream("zstd, gzip;q=0.5").await;
    assert_eq!(encoding(&head), Some("gzip"));
    assert_eq!(gunzip(&body), html(10_000));
    let (head, body) = late_stream("zstd").await;
    assert_eq!(encoding(&head), None);
    assert_eq!(body, html(10_000));
    assert_eq!(proxy.stats.bypassed.get(Bypass::Budget), 1);
    // One that ranks identity above gzip gets no gzip either.
    let (head, body) = late_stream("zstd, identity;q=0.5, gzip;q=0.1").await;
    assert_eq!(encoding(&head), None);
    assert_eq!(body, html(10_000));
    assert_eq!(proxy.stats.bypassed.get(Bypass::Budget), 2);
    // A page of known length fits in one call: it needs no window of its own, so it gets zstd.
    let (head, body) = fetch(
        &client,
        "GET",
        &proxy.url("/page.html"),
        &[("accept-encoding", "zstd")],
    )
    .await;
    assert_eq!(encoding(&head), Some("zstd"));
    assert_eq!(decode(Some("zstd"), &body), html(50_000));
}

/// Several zstd streams at once under a small `max_memory`: the first ones hold zstd windows,
/// the later ones come as stateless gzip, and every body decodes. `/stats` and `/metrics`
/// count them by coding.
#[tokio::test]
async fn concurrent_zstd_streams_past_the_memory_cap_come_as_gzip() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
        config.compression.flush.coalesce = 1024;
        // A zstd-1 stream of unknown length holds about 1.4 MB (window 2^19): two fit, three
        // do not; gzip's 2 KiB always does.
        config.budget.max_memory = Some(3_200_000);
    })
    .await;
    let client = client();
    let url = proxy.url("/late-stream");
    let fetches = (0..6).map(|_| {
        let client = client.clone();
        let url = url.clone();
        async move { fetch(&client, "GET", &url, &[("accept-encoding", "gzip, zstd")]).await }
    });
    let responses = futures_join(fetches).await;
    let mut by_coding = std::collections::BTreeMap::new();
    for (head, body) in &responses {
        let coding = encoding(head).unwrap_or("identity").to_owned();
        assert_eq!(decode(encoding(head), body), html(10_000), "{coding}");
        *by_coding.entry(coding).or_insert(0u64) += 1;
    }
    assert_eq!(by_coding.get("zstd"), Some(&2), "{by_coding:?}");
    assert_eq!(by_coding.get("gzip"), Some(&4), "{by_coding:?}");

    let zstd = proxy.stats.codings.get(Coding::Zstd);
    assert_eq!(zstd.responses.load(Ordering::Relaxed), 2);
    assert_eq!(zstd.meter.bytes_in.load(Ordering::Relaxed), 20_000);
    // The budget reads the server's totals: every coding's input and encoder time is in them.
    assert_eq!(Proxy::count(&proxy.stats.compression.bytes_in), 60_000);
    assert!(zstd.meter.busy_nanos.load(Ordering::Relaxed) > 0);
    let admin = proxy.admin.expect("admin configured");
    let (_, body) = fetch(&client, "GET", &format!("http://{admin}/stats"), &[]).await;
    let stats: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    let codings = &stats["codings"];
    assert_eq!(codings["zstd"]["responses"], 2, "{stats}");
    assert_eq!(codings["gzip"]["responses"], 4, "{stats}");
    assert_eq!(codings["br"]["responses"], 0, "{stats}");
    assert_eq!(codings["gzip"]["bytes_in"], 40_000, "{stats}");
    let gzip_out: u64 = responses
        .iter()
        .filter(|(head, _)| encoding(head) == Some("gzip"))
        .map(|(_, body)| body.len() as u64)
        .sum();
    assert_eq!(codings["gzip"]["bytes_out"], gzip_out, "{stats}");
    let (_, body) = fetch(&client, "GET", &format!("http://{admin}/metrics"), &[]).await;
    let text = String::from_utf8(body.to_vec()).expect("text");
    assert!(
        text.contains("zipwire_proxy_coding_responses_total{coding=\"zstd\"} 2"),
        "{text}"
    );
}

/// A slow origin's first bytes reach the client decodable before the body ends, in zstd and
/// brotli too: the encoder flushes when the upstream pauses.
#[tokio::test]
async fn a_pausing_upstream_reaches_the_client_decodable_in_every_coding() {
    use http_body_util::BodyExt;
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    for accept in ["zstd", "br"] {
        let started = std::time::Instant::now();
        let response = client()
            .request(request(
                "GET",
                &proxy.url("/pause"),
                &[("accept-encoding", accept)],
            ))
            .await
            .expect("a response");
        assert_eq!(response.headers()["content-encoding"], accept);
        let mut body = response.into_body();
        let mut wire = Vec::new();
        while prefix(accept, &wire).len() < PAUSE_FIRST.len() {
            let frame = body.frame().await.expect("a frame").expect("no error");
            if let Ok(data) = frame.into_data() {
                wire.extend_from_slice(&data);
            }
        }
        // The flush delay (20 ms) sent the first part while the upstream was still pausing.
        assert!(
            started.elapsed() < PAUSE,
            "{accept}: after {:?}",
            started.elapsed()
        );
        assert_eq!(prefix(accept, &wire), PAUSE_FIRST, "{accept}");
        let rest = body.collect().await.expect("complete").to_bytes();
        wire.extend_from_slice(&rest);
        let plain = decode(Some(accept), &wire);
        assert_eq!(&plain[..PAUSE_FIRST.len()], PAUSE_FIRST);
        assert_eq!(&plain[PAUSE_FIRST.len()..], &html(10_000)[..], "{accept}");
    }
}

/// What a streaming decoder gives for the bytes received so far.
fn prefix(accept: &str, wire: &[u8]) -> Vec<u8> {
    let mut reader: Box<dyn Read + '_> = match accept {
        "zstd" => Box::new(zstd::stream::read::Decoder::new(wire).expect("decoder")),
        _ => Box::new(brotli::Decompressor::new(wire, 4096)),
    };
    let mut plain = Vec::new();
    let mut buf = [0u8; 1024];
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        plain.extend_from_slice(&buf[..n]);
    }
    plain
}
