//! Upstream selection, retries, timeouts, pooling and the forwarded request.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::support::*;

#[tokio::test]
async fn requests_take_turns_between_upstreams() {
    let a = Origin::start().await;
    let b = Origin::start().await;
    let proxy = Proxy::start(vec![a.upstream(), b.upstream()], |_| {}).await;
    let client = client();
    for _ in 0..6 {
        let (head, _) = fetch(&client, "GET", &proxy.url("/small.txt"), &[]).await;
        assert_eq!(head.status, 200);
    }
    assert_eq!(a.hits.load(Ordering::SeqCst), 3);
    assert_eq!(b.hits.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_dead_upstream_is_marked_down_and_gets_go_to_the_next() {
    let dead = dead_addr().await;
    let live = Origin::start().await;
    let proxy = Proxy::start(vec![upstream(dead.addr), live.upstream()], |_| {}).await;
    let client = client();
    for _ in 0..4 {
        let (head, body) = fetch(&client, "GET", &proxy.url("/page.html"), &[]).await;
        assert_eq!(head.status, 200);
        assert_eq!(body, html(50_000));
    }
    assert_eq!(live.hits.load(Ordering::SeqCst), 4);
    assert_eq!(proxy.stats.errors.upstream.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_put_body_is_resent_to_the_next_upstream() {
    let dead = dead_addr().await;
    let live = Origin::start().await;
    let proxy = Proxy::start(vec![upstream(dead.addr), live.upstream()], |_| {}).await;
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let request = Request::put(proxy.url("/upload"))
        .body(Full::new(Bytes::from(html(30_000))))
        .expect("valid request");
    let response = client.request(request).await.expect("a response");
    assert_eq!(response.status(), 200);
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    assert_eq!(body, "received 30000");
}

#[tokio::test]
async fn a_post_whose_connect_failed_goes_to_the_next_upstream_once() {
    // A failed connect sent nothing, so a POST may go on (nginx's `proxy_next_upstream
    // error`) rather than get 502.
    let dead = dead_addr().await;
    let live = Origin::start().await;
    let proxy = Proxy::start(vec![upstream(dead.addr), live.upstream()], |_| {}).await;
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let request = Request::post(proxy.url("/upload"))
        .body(Full::new(Bytes::from(html(20_000))))
        .expect("valid request");
    let response = client.request(request).await.expect("a response");
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.expect("body");
    assert_eq!(body.to_bytes(), "received 20000");
    assert_eq!(live.hits.load(Ordering::SeqCst), 1);
    assert_eq!(proxy.stats.errors.upstream.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_get_goes_past_every_dead_upstream_to_a_live_one() {
    // Two dead servers first: a GET with only one more try after a failed connect would get
    // 502 with two servers up.
    let (one, two) = (dead_addr().await, dead_addr().await);
    let live = Origin::start().await;
    let other = Origin::start().await;
    let servers = vec![
        upstream(one.addr),
        upstream(two.addr),
        live.upstream(),
        other.upstream(),
    ];
    let proxy = Proxy::start(servers, |_| {}).await;
    let (head, body) = fetch(&client(), "GET", &proxy.url("/page.html"), &[]).await;
    assert_eq!(head.status, 200);
    assert_eq!(body, html(50_000));
    assert_eq!(live.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn all_upstreams_down_gets_502() {
    let dead = dead_addr().await;
    let proxy = Proxy::start(vec![upstream(dead.addr)], |_| {}).await;
    let client = client();
    for _ in 0..2 {
        let (head, body) = fetch(&client, "GET", &proxy.url("/"), &[]).await;
        assert_eq!(head.status, 502);
        assert_eq!(body, "502 Bad Gateway\n");
    }
}

#[tokio::test]
async fn a_slow_upstream_gets_504() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.upstream_response = std::time::Duration::from_millis(300);
    })
    .await;
    let (head, _) = fetch(&client(), "GET", &proxy.url("/slow-head"), &[]).await;
    assert_eq!(head.status, 504);
}

/// An upstream that accepts connections and never answers: its address, and the task that
/// holds them.
async fn silent_origin() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    (addr, task)
}

#[tokio::test]
async fn an_upstream_that_never_answers_is_marked_down_and_a_get_goes_on() {
    // A server that accepts and never answers must not keep its share, or every other
    // request waits for the whole timeout and gets 504.
    let (silent, _held) = silent_origin().await;
    let live = Origin::start().await;
    let proxy = Proxy::start(vec![upstream(silent), live.upstream()], |config| {
        config.timeouts.upstream_response = std::time::Duration::from_millis(300);
    })
    .await;
    let client = client();
    for _ in 0..4 {
        let started = std::time::Instant::now();
        let (head, body) = fetch(&client, "GET", &proxy.url("/page.html"), &[]).await;
        assert_eq!(head.status, 200);
        assert_eq!(body, html(50_000));
        // Only the first request waits for the silent server.
        if live.hits.load(Ordering::SeqCst) > 1 {
            assert!(started.elapsed() < std::time::Duration::from_millis(250));
        }
    }
    assert_eq!(live.hits.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_post_to_an_upstream_that_never_answers_gets_504_and_the_next_goes_elsewhere() {
    let (silent, _held) = silent_origin().await;
    let live = Origin::start().await;
    let proxy = Proxy::start(vec![upstream(silent), live.upstream()], |config| {
        config.timeouts.upstream_response = std::time::Duration::from_millis(300);
    })
    .await;
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let request = Request::post(proxy.url("/upload"))
            .body(Full::new(Bytes::from(html(2_000))))
            .expect("valid request");
        let response = client.request(request).await.expect("a response");
        statuses.push(response.status().as_u16());
    }
    // The POST may have been acted on, so it is not sent again; the server is skipped after.
    assert_eq!(statuses, [504, 200, 200]);
    assert_eq!(live.hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn upstream_connections_are_kept_alive_and_reused() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let client = client();
    for _ in 0..20 {
        let (head, body) = fetch(&client, "GET", &proxy.url("/data.json"), &[]).await;
        assert_eq!(head.status, 200);
        assert_eq!(body, json(500));
    }
    assert_eq!(origin.hits.load(Ordering::SeqCst), 20);
    assert!(origin.connections.load(Ordering::SeqCst) <= 2);
}

#[tokio::test]
async fn forwarded_requests_carry_proxy_headers_and_lose_hop_by_hop_ones() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    fetch(
        &client(),
        "GET",
        &proxy.url("/small.txt?q=1"),
        &[
            ("x-forwarded-for", "203.0.113.9"),
            ("connection", "x-private"),
            ("x-private", "secret"),
            ("keep-alive", "timeout=5"),
            ("cookie", "session=abc"),
        ],
    )
    .await;
    let seen = origin.last_headers();
    assert_eq!(seen["x-forwarded-for"], "203.0.113.9, 127.0.0.1");
    assert_eq!(seen["via"], "1.1 zipwire");
    assert_eq!(seen["cookie"], "session=abc");
    assert!(!seen.contains_key("x-private"));
    assert!(!seen.contains_key("keep-alive"));

    let plain = Proxy::start(vec![origin.upstream()], |config| {
        config.forwarding.x_forwarded_for = false;
        config.forwarding.via = None;
    })
    .await;
    fetch(&client(), "GET", &plain.url("/small.txt"), &[]).await;
    let seen = origin.last_headers();
    assert!(!seen.contains_key("x-forwarded-for"));
    assert!(!seen.contains_key("via"));
}

/// An origin that answers one request per connection with keep-alive, then closes the
/// connection when the next request arrives on it (an idle keep-alive timeout crossing that
/// request), and counts the requests it answered.
async fn closing_origin() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = answered.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                for turn in 0..2 {
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    request.clear();
                    if turn == 1 {
                        return;
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    let body = "hello, kept-alive world\n";
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(format!("{head}{body}").as_bytes()).await;
                }
            });
        }
    });
    (addr, answered)
}

#[tokio::test]
async fn a_get_whose_kept_alive_connection_closes_before_the_answer_is_sent_again() {
    let (addr, answered) = closing_origin().await;
    let proxy = Proxy::start(vec![upstream(addr)], |_| {}).await;
    let client = client();
    for round in 0..3 {
        let (head, body) = fetch(&client, "GET", &proxy.url("/page"), &[]).await;
        assert_eq!(head.status, 200, "request {round}");
        assert_eq!(body, "hello, kept-alive world\n");
    }
    assert_eq!(answered.load(Ordering::SeqCst), 3);
    // A POST is not idempotent: closed the same way, it is not sent again.
    let (head, _) = fetch(&client, "POST", &proxy.url("/page"), &[]).await;
    assert_eq!(head.status, 502);
}
