//! Client-side timeouts: the request body (nginx `client_body_timeout`), the gap between
//! requests (`keepalive_timeout`), and the upstream's time to answer counted from the end of
//! the upload.

use std::time::{Duration, Instant};

use crate::raw::*;
use crate::support::*;

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
