//! The limits and timeouts the proxy keeps towards its origins, observed from the origin's
//! side: a connect that never completes, an idle pooled connection, a marked-down upstream.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::oneshot;

use crate::support::*;

/// A loopback listener whose accept queue is full and never drained: the kernel drops further
/// SYNs (Linux does so whenever the accept queue is full), so a connect to it hangs as one to
/// a blackholed address would. Returns the listener and the connections that filled it.
async fn unanswering_listener() -> (TcpListener, Vec<TcpStream>) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("valid"))
        .expect("bind");
    let listener = socket.listen(1).expect("listen");
    let addr = listener.local_addr().expect("address");
    let mut fillers = Vec::new();
    // A backlog of 1 holds two established connections; the third SYN is dropped.
    for _ in 0..3 {
        if let Ok(Ok(stream)) =
            tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(addr)).await
        {
            fillers.push(stream);
        }
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(addr))
            .await
            .is_err(),
        "the listener still answers SYNs"
    );
    (listener, fillers)
}

#[tokio::test]
async fn upstream_connect_gives_up_on_an_origin_that_never_answers() {
    let (listener, _fillers) = unanswering_listener().await;
    let addr = listener.local_addr().expect("address");
    let proxy = Proxy::start(vec![upstream(addr)], |config| {
        config.timeouts.upstream_connect = Duration::from_millis(400);
        config.timeouts.upstream_response = Duration::from_secs(30);
    })
    .await;
    let started = Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        fetch(&client(), "GET", &proxy.url("/page.html"), &[]),
    )
    .await;
    let elapsed = started.elapsed();
    let (head, _) = answer.expect("the proxy answered before the response timeout");
    assert_eq!(head.status, 502);
    // It waited for the connect (a SYN retransmission is 1 s; GET is retried once on another
    // try) and gave up long before the 30 s response timeout.
    assert!(
        elapsed >= Duration::from_millis(400) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
    assert_eq!(proxy.stats.errors.upstream.load(Ordering::Relaxed), 1);
}

/// An origin that serves one request on one connection, keeps it open, and reports when the
/// proxy closes it.
async fn origin_reporting_close() -> (std::net::SocketAddr, oneshot::Receiver<Instant>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let (closed, on_close) = oneshot::channel();
    tokio::spawn(async move {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let mut head = Vec::new();
        let mut buf = [0; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let response = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        if stream.write_all(response).await.is_err() {
            return;
        }
        // Anything the proxy sends now would be a second request; the test makes none.
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
        let _ = closed.send(Instant::now());
    });
    (addr, on_close)
}

#[tokio::test]
async fn the_pool_closes_an_idle_origin_connection_after_the_idle_timeout() {
    let (addr, on_close) = origin_reporting_close().await;
    let proxy = Proxy::start(vec![upstream(addr)], |config| {
        config.timeouts.idle = Duration::from_millis(500);
    })
    .await;
    let (head, body) = fetch(&client(), "GET", &proxy.url("/"), &[]).await;
    assert_eq!(head.status, 200);
    assert_eq!(&body[..], b"ok");
    let answered = Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(10), on_close)
        .await
        .expect("the proxy closed the idle origin connection")
        .expect("the origin reported");
    let idle = closed.duration_since(answered);
    // Kept for reuse at first (not closed right after the response), closed once idle.
    assert!(
        idle >= Duration::from_millis(300) && idle < Duration::from_secs(5),
        "closed after {idle:?}"
    );
}

#[tokio::test]
async fn a_marked_down_upstream_gets_no_requests_until_its_down_time_ends() {
    let dead = dead_addr().await;
    let live = Origin::start().await;
    // Long enough for seven requests on a loaded machine (1.5 s is tight).
    let down_time = Duration::from_secs(4);
    let proxy = Proxy::start(vec![upstream(dead.addr), live.upstream()], |config| {
        config.down_time = down_time;
    })
    .await;
    let client = client();
    let (head, _) = fetch(&client, "GET", &proxy.url("/small.txt"), &[]).await;
    assert_eq!(head.status, 200);
    let marked = Instant::now();
    // The port comes back to life at once, but it is marked down: it must see nothing.
    let revived = dead.revive();
    for _ in 0..6 {
        let (head, _) = fetch(&client, "GET", &proxy.url("/small.txt"), &[]).await;
        assert_eq!(head.status, 200);
    }
    assert!(marked.elapsed() < down_time, "the requests took too long");
    assert_eq!(revived.connections.load(Ordering::SeqCst), 0);
    assert_eq!(revived.hits.load(Ordering::SeqCst), 0);
    assert_eq!(live.hits.load(Ordering::SeqCst), 7);

    tokio::time::sleep(down_time.saturating_sub(marked.elapsed()) + Duration::from_millis(300))
        .await;
    for _ in 0..6 {
        let (head, _) = fetch(&client, "GET", &proxy.url("/small.txt"), &[]).await;
        assert_eq!(head.status, 200);
    }
    assert_eq!(
        revived.hits.load(Ordering::SeqCst),
        3,
        "back in the rotation"
    );
    assert_eq!(live.hits.load(Ordering::SeqCst), 10);
}

#[tokio::test]
async fn a_lone_upstream_back_from_a_failed_connect_is_served_at_once() {
    // An origin restarting: the first request finds nothing listening and marks the only
    // upstream down. Back a moment later, it must get the next request, not 502s for the
    // rest of `down_time` (nginx ignores `fail_timeout` for a lone server).
    let dead = dead_addr().await;
    let down_time = Duration::from_secs(30);
    let proxy = Proxy::start(vec![upstream(dead.addr)], |config| {
        config.down_time = down_time;
    })
    .await;
    let client = client();
    let (head, _) = fetch(&client, "GET", &proxy.url("/small.txt"), &[]).await;
    assert_eq!(head.status, 502);
    let revived = dead.revive();
    let (head, _) = fetch(&client, "GET", &proxy.url("/small.txt"), &[]).await;
    assert_eq!(head.status, 200);
    assert_eq!(revived.hits.load(Ordering::SeqCst), 1);
}
