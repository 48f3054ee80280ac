//! Client-side timeouts: the request body (nginx `client_body_timeout`), the gap between
//! requests (`keepalive_timeout`), the upstream's time to answer counted from the end of
//! the upload, and a client that stops taking its response (`send_timeout`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http2::{bounded, h2_connect, h2_get};
use crate::raw::*;
use crate::support::*;

/// An origin that answers `GET /endless` with a page that never ends (bounded at 4 GiB, far
/// past any socket buffer) and anything else with a small page; the count is of endless
/// answers whose writes failed because the proxy let their connection go.
async fn endless_origin() -> (RawOrigin, Arc<AtomicUsize>) {
    let let_go = Arc::new(AtomicUsize::new(0));
    let counted = let_go.clone();
    let origin = RawOrigin::start(move |mut conn| {
        let let_go = counted.clone();
        async move {
            while let Some(head) = conn.read_head().await {
                if !head.starts_with("GET /endless ") {
                    let small = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nsmall";
                    if conn.stream.write_all(small).await.is_err() {
                        return;
                    }
                    continue;
                }
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\
                            Transfer-Encoding: chunked\r\n\r\n";
                if conn.stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let page = html(64 * 1024);
                let mut chunk = format!("{:x}\r\n", page.len()).into_bytes();
                chunk.extend_from_slice(&page);
                chunk.extend_from_slice(b"\r\n");
                for _ in 0..65_536 {
                    if conn.stream.write_all(&chunk).await.is_err() {
                        let_go.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                }
                return;
            }
        }
    })
    .await;
    (origin, let_go)
}

/// Whether `count` reaches one within `limit`.
async fn reaches_one(count: &AtomicUsize, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while count.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    count.load(Ordering::SeqCst) == 1
}

#[tokio::test]
async fn a_client_that_stops_reading_lets_go_of_the_origin_after_send() {
    let (origin, let_go) = endless_origin().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.send = Duration::from_millis(500);
    })
    .await;
    let mut client = RawClient::connect(proxy.addr).await;
    client
        .send(b"GET /endless HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        .await;
    // The client reads nothing: the socket buffers fill, the proxy's writes wait, and the
    // send timeout ends the connection and the upstream one behind it.
    assert!(
        reaches_one(&let_go, Duration::from_secs(15)).await,
        "the origin connection is still held"
    );
    // What the proxy had written is still delivered, then the connection ends.
    let drained = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = client.stream.read(&mut buf).await {
            let _ = n;
        }
    });
    assert!(drained.await.is_ok(), "the client connection is still open");
    drop(origin);
}

#[tokio::test]
async fn an_http2_stream_left_without_window_is_reset_and_its_origin_let_go() {
    let (origin, let_go) = endless_origin().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.send = Duration::from_millis(500);
    })
    .await;
    let (send, _driver) = h2_connect(proxy.addr).await;
    let mut stream = bounded("a free stream", send.clone().ready())
        .await
        .expect("the connection takes streams");
    let request = http::Request::get(format!("http://{}/endless", proxy.addr))
        .header("accept-encoding", "gzip")
        .body(())
        .expect("valid request");
    let (response, _) = stream.send_request(request, true).expect("stream opened");
    let response = bounded("the response head", response)
        .await
        .expect("a response");
    assert_eq!(response.status(), 200);
    // The stream's window (64 KiB) fills and is never opened: the connection itself stays
    // well (h2 answers PINGs), only the stream waits.
    assert!(
        reaches_one(&let_go, Duration::from_secs(15)).await,
        "the origin connection is still held"
    );
    // When the client opens the window again, the stream is reset, not ended as if whole.
    let mut body = response.into_body();
    let ended = loop {
        match bounded("the rest of the stream", body.data()).await {
            Some(Ok(chunk)) => {
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            Some(Err(error)) => break Ok(error),
            None => break Err("the stream ended as if whole"),
        }
    };
    let error = ended.expect("a reset");
    assert!(error.is_reset(), "{error}");
    // The connection goes on.
    let (parts, small) = h2_get(&send, proxy.addr, "/small", &[]).await;
    assert_eq!(parts.status, 200);
    assert_eq!(&small[..], b"small");
}

#[tokio::test]
async fn a_slow_upload_that_progresses_is_not_an_upstream_timeout() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.upstream_response = Duration::from_millis(800);
        config.timeouts.client_body = Duration::from_secs(5);
    })
    .await;
    let mut client = RawClient::connect(proxy.addr).await;
    client
        .send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n")
        .await;
    // 2.5 s of upload, three times the upstream's time to answer.
    for part in html(20_000).chunks(2_000) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        client.send(part).await;
    }
    let response = client.response(false).await;
    assert_eq!(response.status(), 200, "{}", response.head);
    assert_eq!(response.body, b"received 20000");
    assert_eq!(Proxy::count(&proxy.stats.errors.upstream), 0);
}

#[tokio::test]
async fn a_stalled_upload_gets_408_and_frees_the_origin_connection() {
    let origin = RawOrigin::start(|mut conn| async move {
        if conn.read_head().await.is_some() {
            conn.drain().await;
        }
    })
    .await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.client_body = Duration::from_millis(500);
        config.timeouts.upstream_response = Duration::from_secs(30);
    })
    .await;
    let mut client = RawClient::connect(proxy.addr).await;
    let started = Instant::now();
    client
        .send(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n")
        .await;
    client.send(&html(5_000)).await;
    let response = client.response(false).await;
    assert_eq!(response.status(), 408, "{}", response.head);
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert!(client.closed_within(Duration::from_secs(2)).await);
    let heads = origin.heads.lock().expect("not poisoned").clone();
    assert!(
        heads.len() == 1 && heads[0].starts_with("POST /upload "),
        "{heads:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    while origin.ended() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(origin.ended(), 1, "the origin connection is still held");
    assert_eq!(Proxy::count(&proxy.stats.errors.client), 1);
    assert_eq!(Proxy::count(&proxy.stats.errors.upstream), 0);
}
#[tokio::test]
async fn an_upload_the_origin_stops_reading_gets_504_and_lets_go_of_both_sides() {
    // The origin reads the head, then nothing until told to, as a backend stuck in a
    // handler that never gets to the body (nginx's proxy_send_timeout).
    let go_on = Arc::new(tokio::sync::Notify::new());
    let told = go_on.clone();
    let origin = RawOrigin::start(move |mut conn| {
        let told = told.clone();
        async move {
            if conn.read_head().await.is_some() {
                told.notified().await;
                conn.drain().await;
            }
        }
    })
    .await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.upstream_response = Duration::from_secs(1);
        config.timeouts.client_body = Duration::from_secs(60);
    })
    .await;
    let mut client = RawClient::connect(proxy.addr).await;
    // A second handle on the client's socket keeps uploading at full speed, far more than
    // every buffer on the way holds, until the proxy stops taking it.
    let writer = client.stream.into_std().expect("a std socket");
    let mut upload = tokio::net::TcpStream::from_std(writer.try_clone().expect("a clone"))
        .expect("a tokio socket");
    client.stream = tokio::net::TcpStream::from_std(writer).expect("a tokio socket");
    let uploading = tokio::spawn(async move {
        let head = b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n";
        upload.write_all(head).await.expect("the head");
        let part = vec![b'u'; 64 * 1024];
        while upload.write_all(&part).await.is_ok() {}
    });
    let started = Instant::now();
    let response = client.response(false).await;
    assert_eq!(response.status(), 504, "{}", response.head);
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    // The origin's connection was closed: once the origin reads, it reaches the end.
    go_on.notify_one();
    assert!(
        reaches_one(&origin.ended, Duration::from_secs(5)).await,
        "the origin connection is still held"
    );
    uploading.abort();
    assert!(client.closed_within(Duration::from_secs(5)).await);
    assert_eq!(Proxy::count(&proxy.stats.errors.upstream_timeout), 1);
    assert_eq!(Proxy::count(&proxy.stats.errors.client), 0);
}

#[tokio::test]
async fn idle_not_header_read_bounds_the_gap_between_requests() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.header_read = Duration::from_millis(400);
        config.timeouts.idle = Duration::from_millis(1_500);
    })
    .await;
    let mut client = RawClient::connect(proxy.addr).await;
    let request = b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n";
    client.send(request).await;
    assert_eq!(client.response(false).await.status(), 200);
    // Longer than header_read, shorter than idle: the connection is still there.
    tokio::time::sleep(Duration::from_millis(800)).await;
    client.send(request).await;
    assert_eq!(client.response(false).await.status(), 200);
    // Then idle closes it.
    let waited = Instant::now();
    assert!(client.closed_within(Duration::from_secs(5)).await);
    let elapsed = waited.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1_200) && elapsed < Duration::from_secs(4),
        "closed after {elapsed:?}"
    );
}
