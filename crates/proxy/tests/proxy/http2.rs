//! HTTP/2 towards clients, h2c by prior knowledge on the cleartext listener, with the `h2`
//! crate as a well-behaved client: per-stream compression, framing, gRPC, CONNECT, counters,
//! the idle timeout. Frames written by hand (floods, limits, GOAWAY) are in `http2_raw`.

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use http::{Method, Request, Version};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::support::*;

/// Far above what any step takes on a loaded machine; a test that hangs fails instead.
pub const BOUND: Duration = Duration::from_secs(20);

/// `future`, or a failure naming `what` past [`BOUND`].
pub async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took more than {BOUND:?}"))
}

/// An HTTP/2 connection by prior knowledge and the task driving it, which ends when the
/// connection does.
pub async fn h2_connect(addr: std::net::SocketAddr) -> (SendRequest<Bytes>, JoinHandle<()>) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (send, connection) = bounded("the h2 handshake", h2::client::handshake(tcp))
        .await
        .expect("an h2 handshake");
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    (send, driver)
}

/// A request on its own stream; the whole response.
pub async fn h2_fetch(
    send: &SendRequest<Bytes>,
    method: Method,
    uri: &str,
    headers: &[(&'static str, &'static str)],
) -> (http::response::Parts, Bytes) {
    let mut send = bounded("a free stream", send.clone().ready())
        .await
        .expect("the connection takes streams");
    let mut request = Request::builder().method(method).uri(uri);
    for &(name, value) in headers {
        request = request.header(name, value);
    }
    let request = request.body(()).expect("valid request");
    let (response, _) = send.send_request(request, true).expect("stream opened");
    let response = bounded("the response head", response)
        .await
        .expect("a response");
    let (parts, mut body) = response.into_parts();
    let mut out = Vec::new();
    while let Some(chunk) = bounded("the response body", body.data()).await {
        let chunk = chunk.expect("body data");
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    (parts, Bytes::from(out))
}

/// A GET of `path` on the proxy at `addr`.
pub async fn h2_get(
    send: &SendRequest<Bytes>,
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&'static str, &'static str)],
) -> (http::response::Parts, Bytes) {
    h2_fetch(send, Method::GET, &format!("http://{addr}{path}"), headers).await
}

#[tokio::test]
async fn a_field_value_with_leading_or_trailing_whitespace_is_malformed() {
    // RFC 9113 §8.2.1; an HTTP/1.1 upstream would strip what the proxy kept.
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (send, _driver) = h2_connect(proxy.addr).await;
    for value in ["\tb", "b ", " b\t"] {
        let (head, _) = h2_get(&send, proxy.addr, "/small.txt", &[("x-a", value)]).await;
        assert_eq!(head.status, 400, "{value:?}");
    }
    assert_eq!(origin.hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    let (head, _) = h2_get(&send, proxy.addr, "/small.txt", &[("x-a", "b \t b")]).await;
    assert_eq!(head.status, 200);
}

#[tokio::test]
async fn h2c_by_prior_knowledge_is_compressed_and_decodes_to_the_origin_bytes() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (send, _driver) = h2_connect(proxy.addr).await;
    let (head, body) = h2_get(
        &send,
        proxy.addr,
        "/page.html",
        &[
            ("accept-encoding", "gzip"),
            ("cookie", "a=1"),
            ("cookie", "b=2"),
        ],
    )
    .await;
    assert_eq!(head.status, 200);
    assert_eq!(head.version, Version::HTTP_2);
    assert_eq!(head.headers["content-encoding"], "gzip");
    // RFC 9113 §8.1.1: the stream's frames end the body; a length would be the identity one.
    assert!(
        !head.headers.contains_key("content-length"),
        "{:?}",
        head.headers
    );
    assert!(body.len() < 50_000 / 2, "{} bytes", body.len());
    assert_eq!(gunzip(&body), html(50_000));
    // Forwarded as HTTP/1.1 with Host from :authority and one cookie line (RFC 9113 §8.3.1,
    // §8.2.3).
    let upstream = origin.last_headers();
    assert_eq!(upstream["host"], proxy.addr.to_string());
    assert_eq!(
        upstream.get_all("cookie").iter().collect::<Vec<_>>(),
        ["a=1; b=2"]
    );
    assert_eq!(upstream["via"], "2 zipwire");
}

#[tokio::test]
async fn many_concurrent_streams_on_one_connection_are_each_compressed() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (send, _driver) = h2_connect(proxy.addr).await;
    let started = Instant::now();
    let mut streams = tokio::task::JoinSet::new();
    for i in 0..60 {
        let send = send.clone();
        let addr = proxy.addr;
        streams.spawn(async move {
            // Two 4 MiB bodies streamed beside the small ones.
            let (path, expected) = match i {
                2 | 32 => ("/big", big()),
                _ if i % 2 == 0 => ("/page.html", html(50_000)),
                _ => ("/data.json", json(500)),
            };
            let (head, body) = h2_get(&send, addr, path, &[("accept-encoding", "gzip")]).await;
            assert_eq!(head.status, 200, "{path}");
            assert_eq!(head.headers["content-encoding"], "gzip", "{path}");
            assert!(!head.headers.contains_key("content-length"), "{path}");
            assert!(gunzip(&body) == expected, "{path}: decoded body differs");
        });
    }
    while let Some(done) = bounded("60 streams", streams.join_next()).await {
        done.expect("a stream's checks");
    }
    // One connection carried them all.
    assert_eq!(Proxy::count(&proxy.stats.connections), 1);
    assert_eq!(Proxy::count(&proxy.stats.compressed), 60);
    eprintln!("60 streams in {:?}", started.elapsed());
}

#[tokio::test]
async fn grpc_passes_uncompressed_whatever_the_types() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.compression.rules.types = vec!["*/*".parse().expect("valid pattern")];
    })
    .await;
    let (send, _driver) = h2_connect(proxy.addr).await;
    let (head, body) = h2_get(&send, proxy.addr, "/grpc", &[("accept-encoding", "gzip")]).await;
    assert_eq!(head.status, 200);
    assert!(!head.headers.contains_key("content-encoding"));
    assert_eq!(body, html(5_000));
    assert_eq!(proxy.stats.bypassed.get(zipwire_proxy::Bypass::Grpc), 1);
    // The same types compress anything else.
    let (head, _) = h2_get(
        &send,
        proxy.addr,
        "/image.png",
        &[("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(head.headers["content-encoding"], "gzip");
}

#[tokio::test]
async fn http1_and_h2_share_the_listener_and_are_counted_apart() {
    let captured = crate::logging::captured();
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
    })
    .await;
    let client = client();
    let (head, body) = fetch(
        &client,
        "GET",
        &proxy.url("/page.html"),
        &[("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(head.version, Version::HTTP_11);
    assert_eq!(gunzip(&body), html(50_000));
    let (send, _driver) = h2_connect(proxy.addr).await;
    for _ in 0..2 {
        let (head, body) = h2_get(&send, proxy.addr, "/h2-logged.missing", &[]).await;
        assert_eq!(head.status, 404);
        assert_eq!(body, "not found");
    }

    let admin = proxy.admin.expect("admin configured");
    let (_, stats) = fetch(&client, "GET", &format!("http://{admin}/stats"), &[]).await;
    let stats: serde_json::Value = serde_json::from_slice(&stats).expect("JSON");
    assert_eq!(
        stats["requests_by_protocol"],
        serde_json::json!({"http/1.0": 0, "http/1.1": 1, "h2": 2}),
        "{stats}"
    );
    let (_, metrics) = fetch(&client, "GET", &format!("http://{admin}/metrics"), &[]).await;
    let metrics = String::from_utf8(metrics.to_vec()).expect("text");
    assert!(
        metrics.contains("zipwire_proxy_requests_by_protocol_total{protocol=\"h2\"} 2\n"),
        "{metrics}"
    );
    let text = String::from_utf8(captured.0.lock().expect("not poisoned").clone()).expect("utf-8");
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" access ") && line.contains("path=/h2-logged.missing"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].contains("protocol=\"h2\""), "{}", lines[0]);
}

#[tokio::test]
async fn connect_over_h2_is_refused_with_501_and_extended_connect_is_not_offered() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (send, _driver) = h2_connect(proxy.addr).await;
    // SETTINGS_ENABLE_CONNECT_PROTOCOL is never sent (RFC 8441 §3): no WebSocket over h2.
    let send = bounded("the server's settings", send.ready())
        .await
        .expect("ready");
    assert!(!send.is_extended_connect_protocol_enabled());
    let (head, body) = h2_fetch(&send, Method::CONNECT, "example.com:443", &[]).await;
    assert_eq!(head.status, 501);
    assert_eq!(body, "501 Not Implemented\n");
    assert!(!head.headers.contains_key("connection"));
    assert_eq!(origin.hits.load(std::sync::atomic::Ordering::SeqCst), 0);
    // The connection still serves.
    let (head, _) = h2_get(&send, proxy.addr, "/small.txt", &[]).await;
    assert_eq!(head.status, 200);
}

#[tokio::test]
async fn an_h2_connection_is_idle_only_when_no_stream_is_open() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.idle = Duration::from_secs(1);
    })
    .await;
    let (send, driver) = h2_connect(proxy.addr).await;
    // A stream that stays open past the idle timeout (the origin pauses 1.5 s mid-body)
    // while a short one ends: the connection is not idle until both have.
    let long = {
        let send = send.clone();
        let addr = proxy.addr;
        tokio::spawn(async move { h2_get(&send, addr, "/pause", &[]).await })
    };
    let (head, _) = h2_get(&send, proxy.addr, "/small.txt", &[]).await;
    assert_eq!(head.status, 200);
    let (head, body) = bounded("the long stream", long).await.expect("long stream");
    assert_eq!(head.status, 200);
    assert!(body.starts_with(PAUSE_FIRST));
    assert_eq!(body.len(), PAUSE_FIRST.len() + 10_000);
    // Then idle: closed after about a second, not at once.
    let idle_since = Instant::now();
    bounded("the idle close", driver).await.expect("driver");
    let waited = idle_since.elapsed();
    assert!(
        waited >= Duration::from_millis(800),
        "closed after {waited:?}"
    );
    // The client may see the end (GOAWAY) a moment before the proxy's task ends.
    bounded("the proxy's close", async {
        while Proxy::count(&proxy.stats.active_connections) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn with_http2_off_a_cleartext_listener_speaks_http1_only() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.http2.enabled = false;
    })
    .await;
    let tcp = TcpStream::connect(proxy.addr).await.expect("connect");
    // The preface is no HTTP/1 request: no HTTP/2 server answers it.
    let addr = proxy.addr;
    let handshake = bounded("the refused handshake", async move {
        let (send, connection) = h2::client::handshake(tcp).await?;
        let driver = tokio::spawn(connection);
        let request = Request::get(format!("http://{addr}/small.txt"))
            .body(())
            .expect("valid request");
        let (response, _) = send.ready().await?.send_request(request, true)?;
        let result = response.await.map(|_| ());
        driver.abort();
        result
    })
    .await;
    assert!(handshake.is_err());
    let (head, _) = fetch(&client(), "GET", &proxy.url("/small.txt"), &[]).await;
    assert_eq!(head.status, 200);
    assert_eq!(Proxy::count(&proxy.stats.requests), 1);
}

#[tokio::test]
async fn an_upload_larger_than_the_stream_window_reaches_the_origin_whole() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (send, _driver) = h2_connect(proxy.addr).await;
    let mut send = bounded("a free stream", send.ready()).await.expect("ready");
    let request = Request::post(format!("http://{}/upload", proxy.addr))
        .body(())
        .expect("valid request");
    let (response, mut upload) = send.send_request(request, false).expect("stream opened");
    // Four times the proxy's 256 KiB stream window: the proxy must open it as it reads.
    let mut left = Bytes::from(noise(1 << 20));
    while !left.is_empty() {
        upload.reserve_capacity(left.len().min(64 * 1024));
        let granted = bounded(
            "window for the upload",
            std::future::poll_fn(|cx| upload.poll_capacity(cx)),
        )
        .await
        .expect("the stream stays open")
        .expect("capacity");
        let chunk = left.split_to(granted.min(left.len()));
        upload.send_data(chunk, left.is_empty()).expect("send data");
    }
    let response = bounded("the response head", response)
        .await
        .expect("response");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = bounded("the response body", body.data()).await {
        text.extend_from_slice(&chunk.expect("data"));
    }
    assert_eq!(text, format!("received {}", 1 << 20).as_bytes());
}

#[tokio::test]
async fn a_get_body_without_a_length_reaches_the_origin_whole() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (send, _driver) = h2_connect(proxy.addr).await;
    let mut send = bounded("a free stream", send.ready())
        .await
        .expect("the connection takes streams");
    let request = Request::get(format!("http://{}/upload", proxy.addr))
        .body(())
        .expect("valid request");
    let (response, mut upload) = send.send_request(request, false).expect("stream opened");
    upload.reserve_capacity(3_000);
    upload
        .send_data(Bytes::from(html(3_000)), true)
        .expect("body sent");
    let response = bounded("the response head", response)
        .await
        .expect("a response");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = bounded("the response body", body.data()).await {
        out.extend_from_slice(&chunk.expect("body data"));
    }
    assert_eq!(out, b"received 3000");
}

#[tokio::test]
async fn streams_open_no_more_upstream_connections_than_the_limit() {
    // Were every stream to take an upstream socket of its own, whatever
    // `limits.max_connections` said, a few clients would run the proxy out of descriptors.
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.limits.max_connections = 2;
        config.timeouts.upstream_response = Duration::from_secs(5);
    })
    .await;
    let (send, _driver) = h2_connect(proxy.addr).await;
    let addr = proxy.addr;
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let send = send.clone();
            tokio::spawn(async move { h2_get(&send, addr, "/slow-head", &[]).await.0.status })
        })
        .collect();
    // Both requests at the origin: both slots are held.
    bounded("the slow requests at the origin", async {
        while origin.hits.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    // A third stream waits the connect timeout for one, then is a 502.
    let started = Instant::now();
    let (head, _) = h2_get(&send, addr, "/small.txt", &[]).await;
    assert_eq!(head.status, 502);
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    for stream in slow {
        assert_eq!(stream.await.expect("joined"), 200);
    }
    // The origin was not to blame: it is not marked down.
    let (head, _) = h2_get(&send, addr, "/small.txt", &[]).await;
    assert_eq!(head.status, 200);
}
