//! HTTP/1.1 framing through the proxy, on raw sockets: message length (RFC 9112 §6),
//! `Host` (§3.2), versions (§2.3) and what is refused.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::raw::*;
use crate::support::*;

/// A response framed by both `Content-Length` (wrong, shorter) and chunked coding.
fn length_and_chunked(body: &[u8]) -> Vec<u8> {
    let mut reply = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 300\r\n\
        Transfer-Encoding: chunked\r\n\r\n"
        .to_vec();
    reply.extend_from_slice(&chunked(body, 700));
    reply
}

#[tokio::test]
async fn chunked_coding_overrides_a_content_length_from_upstream() {
    let body = html(2_000);
    let origin = RawOrigin::replying(length_and_chunked(&body)).await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        // The false length (300) is under min_length, the true one (2,000) over it.
        config.compression.rules.min_length = 1_000;
    })
    .await;
    let mut client = RawClient::connect(proxy.addr).await;
    // Passed (no Accept-Encoding), then compressed, on one kept-alive connection.
    client.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let passed = client.response(false).await;
    assert_eq!(passed.status(), 200, "{}", passed.head);
    assert_ne!(
        passed.field("content-length"),
        Some("300"),
        "{}",
        passed.head
    );
    assert_eq!(passed.body, body);
    // The upstream connection is not used again (RFC 9112 §6.3): whoever framed the
    // response by its length would take the rest for the next response.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while origin.ended() == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(origin.ended(), 1, "the connection went back to the pool");
    client
        .send(b"GET /b HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        .await;
    let compressed = client.response(false).await;
    assert_eq!(compressed.status(), 200, "{}", compressed.head);
    assert_eq!(
        compressed.field("content-encoding"),
        Some("gzip"),
        "{}",
        compressed.head
    );
    assert_eq!(gunzip(&compressed.body), body);
    assert_eq!(origin.heads.lock().expect("heads").len(), 2);
}

#[tokio::test]
async fn a_content_length_list_from_upstream_goes_out_as_one_value() {
    // `5, 5` and a repeated line: hyper reads both as 5; passed on as they came, the list
    // is no valid value and an HTTP/2 client refuses two `content-length` fields.
    for reply in [
        &b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 5, 5\r\n\r\nhello"[..],
        b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    ] {
        let origin = RawOrigin::replying(reply.to_vec()).await;
        let proxy = Proxy::start(vec![origin.upstream()], |_| {}).await;
        let mut client = RawClient::connect(proxy.addr).await;
        client.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n").await;
        let response = client.response(false).await;
        assert_eq!(response.status(), 200, "{}", response.head);
        assert_eq!(
            response.head.matches("content-length").count(),
            1,
            "{}",
            response.head
        );
        assert_eq!(response.field("content-length"), Some("5"), "{}", response.head);
        assert_eq!(response.body, b"hello");
    }
}

#[tokio::test]
async fn a_response_transfer_coding_other_than_chunked_gets_502() {
    let mut reply =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
            .to_vec();
    let coded = zipwire_codec::compress(
        zipwire_codec::Format::Gzip,
        zipwire_codec::Level::DEFAULT,
        &html(2_000),
    );
    reply.extend_from_slice(&chunked(&coded, 500));
    let origin = RawOrigin::replying(reply).await;
    let proxy = Proxy::start(vec![origin.upstream()], |_| {}).await;
    let mut client = RawClient::connect(proxy.addr).await;
    client.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let response = client.response(false).await;
    // Never the coded bytes passed off as the content.
    assert_eq!(response.status(), 502, "{}", response.head);
    assert_eq!(Proxy::count(&proxy.stats.errors.upstream), 1);
}

#[tokio::test]
async fn an_http_10_origin_does_not_downgrade_an_http_11_client() {
    let body = noise(3_000);
    let mut reply = b"HTTP/1.0 200 OK\r\nContent-Type: image/png\r\n\r\n".to_vec();
    reply.extend_from_slice(&body);
    let reply = std::sync::Arc::new(reply);
    // A close-delimited body: one response per connection.
    let origin = RawOrigin::start(move |mut conn| {
        let reply = reply.clone();
        async move {
            if conn.read_head().await.is_some() {
                let _ = conn.stream.write_all(&reply).await;
            }
        }
    })
    .await;
    let proxy = Proxy::start(vec![origin.upstream()], |_| {}).await;
    let mut client = RawClient::connect(proxy.addr).await;
    for _ in 0..2 {
        client
            .send(b"GET /image.png HTTP/1.1\r\nHost: x\r\n\r\n")
            .await;
        let response = client.response(false).await;
        assert!(
            response.head.starts_with("http/1.1 200"),
            "{}",
            response.head
        );
        assert_eq!(response.field("transfer-encoding"), Some("chunked"));
        assert_eq!(response.body, body);
    }
}

#[tokio::test]
async fn an_http_10_client_is_not_promised_keep_alive_on_a_close_delimited_body() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    // A body of known length keeps the connection...
    let mut client = RawClient::connect(proxy.addr).await;
    client
        .send(b"GET /image.png HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .await;
    let passed = client.response(false).await;
    assert_eq!(passed.status(), 200);
    assert_eq!(
        passed.field("connection"),
        Some("keep-alive"),
        "{}",
        passed.head
    );
    assert_eq!(passed.body, noise(10_000));
    // ...one of unknown length ends with the connection, and says so. (HTTP/1.0 gets no
    // compression, which would drop a known length.)
    client
        .send(b"GET /big HTTP/1.0\r\nConnection: keep-alive\r\nAccept-Encoding: gzip\r\n\r\n")
        .await;
    let unsized_body = client.response(false).await;
    assert_eq!(unsized_body.status(), 200);
    assert!(unsized_body.closed, "{}", unsized_body.head);
    assert!(
        !unsized_body.head.contains("keep-alive"),
        "{}",
        unsized_body.head
    );
    assert_eq!(unsized_body.body, big());
}

#[tokio::test]
async fn host_must_be_there_once() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let refused: [&[u8]; 4] = [
        b"GET /small.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        b"GET /small.txt HTTP/1.1\r\nAccept: */*\r\n\r\n",
        b"GET /small.txt HTTP/1.1\r\nHost: attacker@victim.example\r\n\r\n",
        // The target's authority becomes the upstream Host: no userinfo there either.
        b"GET http://attacker@victim.example/small.txt HTTP/1.1\r\nHost: victim.example\r\n\r\n",
    ];
    for raw in refused {
        let answer = raw_exchange(proxy.addr, raw, Duration::from_secs(3)).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    }
    assert_eq!(origin.hits.load(Ordering::SeqCst), 0);
    assert_eq!(Proxy::count(&proxy.stats.errors.client), 4);
    // HTTP/1.0 did not require it.
    let answer = raw_exchange(
        proxy.addr,
        b"GET /small.txt HTTP/1.0\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.0 200"), "{text}");
}

#[tokio::test]
async fn the_asterisk_form_is_for_options_alone() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    for raw in [
        b"GET * HTTP/1.1\r\nHost: x\r\n\r\n".as_slice(),
        b"HEAD * HTTP/1.1\r\nHost: x\r\n\r\n",
        // The authority form is CONNECT's (RFC 9112 §3.2.3): this must not go upstream as
        // `GET /` with `Host: evil:80`.
        b"GET evil:80 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST evil:80 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    ] {
        let answer = raw_exchange(proxy.addr, raw, Duration::from_secs(3)).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    }
    assert_eq!(origin.hits.load(Ordering::SeqCst), 0);
    let answer = raw_exchange(
        proxy.addr,
        b"OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    assert!(!text.starts_with("HTTP/1.1 400"), "{text}");
    assert_eq!(origin.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_request_length_goes_upstream_as_read_and_never_past_2_63() {
    // `0005` goes upstream as the number read, not as written, and lengths past 2^63 - 1
    // (negative to a next hop reading a signed 64-bit integer) are refused, as nginx answers
    // those 400.
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let mut client = RawClient::connect(proxy.addr).await;
    client
        .send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 0005\r\n\r\nhello")
        .await;
    let response = client.response(false).await;
    assert_eq!(response.body, b"received 5", "{}", response.head);
    assert_eq!(origin.last_headers()["content-length"], "5");
    for length in ["9223372036854775808", "18446744073709551613"] {
        let raw = format!("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n");
        let answer = raw_exchange(proxy.addr, raw.as_bytes(), Duration::from_secs(3)).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 400"), "{length}: {text}");
    }
    assert_eq!(origin.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_204_never_carries_a_content_length() {
    // RFC 9110 §8.6. hyper drops the upstream's from a 204 to GET but not to HEAD.
    let origin = RawOrigin::start(|mut conn| async move {
        while conn.read_head().await.is_some() {
            let reply = b"HTTP/1.1 204 No Content\r\nContent-Length: 89\r\n\r\n";
            if conn.stream.write_all(reply).await.is_err() {
                return;
            }
        }
    })
    .await;
    let proxy = Proxy::start(vec![origin.upstream()], |_| {}).await;
    for method in ["GET", "HEAD"] {
        let mut client = RawClient::connect(proxy.addr).await;
        let request = format!("{method} /none HTTP/1.1\r\nHost: x\r\n\r\n");
        client.send(request.as_bytes()).await;
        let response = client.response(true).await;
        assert_eq!(response.status(), 204, "{}", response.head);
        assert!(
            !response
                .head
                .to_ascii_lowercase()
                .contains("content-length"),
            "{method}: {}",
            response.head
        );
    }
}

#[tokio::test]
async fn an_absolute_target_names_the_host() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let mut client = RawClient::connect(proxy.addr).await;
    client
        .send(b"GET http://www.example.test/small.txt HTTP/1.1\r\nHost: other.test\r\n\r\n")
        .await;
    let response = client.response(false).await;
    assert_eq!(response.status(), 200, "{}", response.head);
    let seen = origin.last_headers();
    let hosts: Vec<_> = seen.get_all("host").iter().collect();
    assert_eq!(hosts, ["www.example.test"]);
}

#[tokio::test]
async fn a_transfer_coding_other_than_chunked_gets_501() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let answer = raw_exchange(
        proxy.addr,
        b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
          5\r\nhello\r\n0\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 501"), "{text}");
    assert_eq!(origin.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn client_body_errors_are_the_clients() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let bad: [&[u8]; 2] = [
        // A chunk size that is not hexadecimal.
        b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\nzz\r\nhello\r\n0\r\n\r\n",
        // More data in a chunk than its size.
        b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello, world\r\n0\r\n\r\n",
    ];
    for raw in bad {
        let answer = raw_exchange(proxy.addr, raw, Duration::from_secs(3)).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    }
    // Half-closed mid-body.
    let mut client = RawClient::connect(proxy.addr).await;
    client
        .send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n")
        .await;
    client.send(&html(5_000)).await;
    client.stream.shutdown().await.expect("half-close");
    let response = client.response(false).await;
    assert_eq!(response.status(), 400, "{}", response.head);
    assert_eq!(Proxy::count(&proxy.stats.errors.client), 3);
    assert_eq!(Proxy::count(&proxy.stats.errors.upstream), 0);
}

#[tokio::test]
async fn a_70_kb_uri_gets_414() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let mut raw = b"GET /".to_vec();
    raw.extend(std::iter::repeat_n(b'a', 70_000));
    raw.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\n\r\n");
    let answer = raw_exchange(proxy.addr, &raw, Duration::from_secs(3)).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 414"), "{text}");
    assert_eq!(origin.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_response_after_early_hints_arrives_whole() {
    let body = html(5_000);
    let mut reply = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
        .to_vec();
    reply.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    reply.extend_from_slice(&body);
    let origin = RawOrigin::replying(reply).await;
    let proxy = Proxy::start(vec![origin.upstream()], |_| {}).await;
    let mut client = RawClient::connect(proxy.addr).await;
    // 103 Early Hints pass through to HTTP/1.1 clients.
    client.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let hints = client.response(false).await;
    assert_eq!(hints.status(), 103, "{}", hints.head);
    assert_eq!(hints.field("link"), Some("</style.css>; rel=preload"));
    let passed = client.response(false).await;
    assert_eq!(passed.status(), 200, "{}", passed.head);
    assert_eq!(passed.body, body);
    client
        .send(b"GET /b HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        .await;
    assert_eq!(client.response(false).await.status(), 103);
    let compressed = client.response(false).await;
    assert_eq!(compressed.status(), 200, "{}", compressed.head);
    assert_eq!(gunzip(&compressed.body), body);
    // RFC 9110 §15.2: never a 1xx to an HTTP/1.0 client.
    let mut old = RawClient::connect(proxy.addr).await;
    old.send(b"GET /c HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .await;
    let final_only = old.response(false).await;
    assert_eq!(final_only.status(), 200, "{}", final_only.head);
    assert_eq!(final_only.body, body);
}

#[tokio::test]
async fn early_hints_come_before_a_late_final_response_and_after_the_one_before() {
    let body = html(3_000);
    let origin = RawOrigin::start(move |mut conn| {
        let body = body.clone();
        async move {
            while conn.read_head().await.is_some() {
                let hints = b"HTTP/1.1 103 Early Hints\r\nLink: </app.js>; rel=preload\r\n\r\n";
                if conn.stream.write_all(hints).await.is_err() {
                    return;
                }
                // The final response takes a while: the hints are worth their own write.
                tokio::time::sleep(Duration::from_millis(1_000)).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                if conn.stream.write_all(head.as_bytes()).await.is_err()
                    || conn.stream.write_all(&body).await.is_err()
                {
                    return;
                }
            }
        }
    })
    .await;
    let expected = html(3_000);
    let proxy = Proxy::start(vec![origin.upstream()], |_| {}).await;
    let mut client = RawClient::connect(proxy.addr).await;
    client.send(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let hints = client.response(false).await;
    let hinted = std::time::Instant::now();
    assert_eq!(hints.status(), 103, "{}", hints.head);
    assert_eq!(hints.field("link"), Some("</app.js>; rel=preload"));
    let first = client.response(false).await;
    // The hints went out before the upstream's final response existed, which comes 1 s after
    // them: held back, they would arrive with it. (A bound on the hints' own arrival, 900 ms,
    // is tight on a loaded machine; the gap shrinks only if the hints are late.)
    assert!(
        hinted.elapsed() > Duration::from_millis(300),
        "the final response followed the hints after {:?}",
        hinted.elapsed()
    );
    assert_eq!(first.status(), 200, "{}", first.head);
    assert_eq!(first.body, expected);
    // Two requests pipelined: each one's hints follow the previous response whole.
    client
        .send(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    for _ in 0..2 {
        let hints = client.response(false).await;
        assert_eq!(hints.status(), 103, "{}", hints.head);
        let whole = client.response(false).await;
        assert_eq!(whole.status(), 200, "{}", whole.head);
        assert_eq!(whole.body, expected);
    }
}

#[tokio::test]
async fn a_chunked_get_body_reaches_the_origin_whole() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let body = html(3_000);
    // The third is a WebSocket handshake (sent upstream as an upgrade, on a connection of its
    // own), whose body must not be dropped.
    let websocket = "Connection: upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n";
    for (method, upgrade) in [("GET", ""), ("POST", ""), ("GET", websocket)] {
        let mut client = RawClient::connect(proxy.addr).await;
        let head = format!(
            "{method} /upload HTTP/1.1\r\nHost: x\r\n{upgrade}Transfer-Encoding: chunked\r\n\r\n"
        );
        client.send(head.as_bytes()).await;
        client.send(&chunked(&body, 1_000)).await;
        let response = client.response(false).await;
        assert_eq!(response.status(), 200, "{}", response.head);
        assert_eq!(response.body, b"received 3000", "{method} {upgrade}");
    }
}

#[tokio::test]
async fn a_chunked_upload_never_follows_an_http_10_answer_on_its_connection() {
    // An HTTP/1.0 answer on a kept-alive connection makes hyper send later requests on it as
    // HTTP/1.0, which cannot carry a chunked body: the upload would go with none, and the
    // client get a 200 when the origin answered that empty request in HTTP/1.1. Such a
    // connection is not used again, so the upload goes as HTTP/1.1 on a new one, with its
    // body.
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (seen, count) = (heads.clone(), connections.clone());
    let origin = RawOrigin::start(move |mut conn| {
        let seen = seen.clone();
        let number = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async move {
            while let Some(head) = conn.read_head().await {
                let upload = head.starts_with("POST");
                seen.lock().unwrap().push((number, head));
                let reply: &[u8] = if upload {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                } else {
                    b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"
                };
                if conn.stream.write_all(reply).await.is_err() || upload {
                    return;
                }
            }
        }
    })
    .await;
    let proxy = Proxy::start(vec![origin.upstream()], |_| {}).await;
    let mut client = RawClient::connect(proxy.addr).await;
    client.send(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(client.response(false).await.status(), 200);
    let mut client = RawClient::connect(proxy.addr).await;
    client
        .send(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await;
    client.send(&chunked(b"hello", 5)).await;
    let response = client.response(false).await;
    assert_eq!(response.status(), 200, "{}", response.head);
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2, "{heads:?}");
    let (connection, post) = &heads[1];
    assert_eq!(
        *connection, 1,
        "the upload went on the HTTP/1.0 connection: {heads:?}"
    );
    assert!(post.starts_with("POST /upload HTTP/1.1"), "{heads:?}");
    assert!(
        post.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{heads:?}"
    );
}

#[tokio::test]
async fn a_body_cut_short_for_an_http10_client_ends_in_a_reset_not_an_end() {
    // Upstream gzip with a length, cut in the middle: an HTTP/1.0 client that does not take
    // gzip gets it decoded, with no length, so only the connection's end can tell it that
    // the body is incomplete.
    let page = html(200_000);
    let gzipped = {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&page).expect("gzip");
        encoder.finish().expect("gzip")
    };
    let mut reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n\
         Content-Length: {}\r\n\r\n",
        gzipped.len()
    )
    .into_bytes();
    reply.extend_from_slice(&gzipped[..gzipped.len() / 2]);
    let origin = RawOrigin::start(move |mut conn| {
        let reply = reply.clone();
        async move {
            if conn.read_head().await.is_some() {
                let _ = conn.stream.write_all(&reply).await;
            }
            // Dropped: the upstream closes halfway through its body.
        }
    })
    .await;
    let proxy = Proxy::start(vec![origin.upstream()], |_| {}).await;
    let mut client = tokio::net::TcpStream::connect(proxy.addr)
        .await
        .expect("connect");
    client
        .write_all(b"GET /page HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .expect("request");
    let mut got = Vec::new();
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 16 * 1024];
        loop {
            match client.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(error) => return Err(error.kind()),
            }
        }
    })
    .await
    .expect("the connection ends");
    let text = String::from_utf8_lossy(&got[..got.len().min(200)]).into_owned();
    assert!(text.starts_with("HTTP/1.0 200"), "{text}");
    assert!(!text.to_lowercase().contains("content-length"), "{text}");
    assert_eq!(end, Err(std::io::ErrorKind::ConnectionReset));
}
