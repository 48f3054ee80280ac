//! What misbehaving clients get, the connection limit, and graceful shutdown.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use zipwire_proxy::{run_blocking, ProxyConfig, ProxyError};

use crate::raw::RawOrigin;
use crate::support::*;

#[tokio::test]
async fn garbage_gets_400_and_the_connection_closed() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let raw = raw_exchange(
        proxy.addr,
        b"\x16\x03\x01 this is not http\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert_eq!(origin.hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn connect_requests_get_501() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let raw = raw_exchange(
        proxy.addr,
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    let text = String::from_utf8_lossy(&raw);
    // RFC 9110 §15.6.2, as over HTTP/2; the origin never sees it.
    assert!(text.starts_with("HTTP/1.1 501"), "{text}");
    assert_eq!(origin.hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_oversized_header_block_gets_431() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.limits.max_header_bytes = 16 * 1024;
    })
    .await;
    let mut raw = b"GET /small.txt HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..400 {
        raw.extend_from_slice(format!("x-filler-{i}: {}\r\n", "a".repeat(80)).as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    let answer = raw_exchange(proxy.addr, &raw, Duration::from_secs(3)).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    // A request within the limit is served.
    let (head, _) = fetch(&client(), "GET", &proxy.url("/small.txt"), &[]).await;
    assert_eq!(head.status, 200);
}

#[tokio::test]
async fn a_slow_request_head_is_cut_after_the_header_read_timeout() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await; // header_read: 1 s
    let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
    stream
        .write_all(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    let started = Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(6), stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "still open after 6 s");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(800) && elapsed < Duration::from_secs(4),
        "closed after {elapsed:?}"
    );
}

#[tokio::test]
async fn max_connections_holds_extra_clients_until_one_leaves() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.limits.max_connections = 1;
        config.timeouts.header_read = Duration::from_secs(5);
    })
    .await;
    let request = b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut first = TcpStream::connect(proxy.addr).await.expect("connect");
    first.write_all(request).await.expect("write");
    let mut buf = [0u8; 4096];
    let n = first.read(&mut buf).await.expect("a response");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));

    let mut second = TcpStream::connect(proxy.addr)
        .await
        .expect("queued by the kernel");
    second.write_all(request).await.expect("write");
    let waited = tokio::time::timeout(Duration::from_millis(400), second.read(&mut buf)).await;
    assert!(
        waited.is_err(),
        "the second client was served while the first was open"
    );

    drop(first);
    let n = tokio::time::timeout(Duration::from_secs(3), second.read(&mut buf))
        .await
        .expect("served once the first left")
        .expect("read");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
}

#[tokio::test]
async fn shutdown_lets_in_flight_requests_finish() {
    let origin = Origin::start().await;
    // A grace far longer than the request: the stop must come when the request is done
    // (about 0.4 s), not when the grace ends; the margin between them holds on a busy machine.
    let mut proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.shutdown_grace = Duration::from_secs(10);
    })
    .await;
    let url = proxy.url("/slow-body");
    let in_flight =
        tokio::spawn(
            async move { fetch(&client(), "GET", &url, &[("accept-encoding", "gzip")]).await },
        );
    // In flight: the origin has the request (a fixed sleep can be too short for a loaded
    // machine to have even connected).
    let deadline = Instant::now() + Duration::from_secs(5);
    while origin.hits.load(std::sync::atomic::Ordering::SeqCst) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    let server = proxy.shut_down();
    let (head, body) = in_flight.await.expect("request task");
    assert_eq!(head.status, 200);
    assert_eq!(gunzip(&body), html(20_000));
    stopped_within(
        server,
        started,
        Duration::from_secs(5),
        "stopped within the grace period",
    )
    .await;
    assert!(
        TcpStream::connect(proxy.addr).await.is_err(),
        "still accepting"
    );
}

/// Shuts down a proxy with `grace` while a request to the origin's slow page is in flight,
/// calling `during` on the proxy's [`Hurry`] once the shutdown has begun; checks that the
/// server stops within 3 s (the slow page takes 5) and that the client is told its request
/// was cut.
async fn cut_in_flight(grace: Duration, during: impl FnOnce(zipwire_proxy::Hurry)) {
    let origin = Origin::start().await;
    let mut proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.shutdown_grace = grace;
        config.timeouts.upstream_response = Duration::from_secs(10);
    })
    .await;
    let url = proxy.url("/very-slow");
    let in_flight = tokio::spawn(async move { client().request(request("GET", &url, &[])).await });
    // In flight: the origin has the request (a fixed sleep can be too short for a loaded
    // machine to have even connected).
    let deadline = Instant::now() + Duration::from_secs(5);
    while origin.hits.load(std::sync::atomic::Ordering::SeqCst) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let started = Instant::now();
    let hurry = proxy.hurry.clone();
    let server = proxy.shut_down();
    tokio::time::sleep(Duration::from_millis(100)).await;
    during(hurry);
    // The bound sits between the cut and the origin's 5 s, with room for a busy machine.
    stopped_within(
        server,
        started,
        Duration::from_secs(3),
        "stopped before the slow page ended",
    )
    .await;
    let answer = tokio::time::timeout(Duration::from_secs(2), in_flight)
        .await
        .expect("the client is told")
        .expect("request task");
    assert!(answer.is_err(), "the cut request got a response");
    assert_eq!(Proxy::count(&proxy.stats.active_connections), 0);
}

#[tokio::test]
async fn shutdown_closes_what_is_left_after_the_grace_period() {
    cut_in_flight(Duration::from_millis(300), |_| {}).await;
}

#[tokio::test]
async fn a_hurried_shutdown_closes_what_is_left_without_waiting_for_the_grace() {
    // A second SIGTERM in the binary; the grace alone would hold for 30 s.
    cut_in_flight(Duration::from_secs(30), |hurry| hurry.now()).await;
}

#[tokio::test]
async fn a_connection_that_has_sent_nothing_does_not_hold_the_shutdown() {
    // A browser's preconnect: connected, silent. The stop must not wait for its
    // `timeouts.header_read`.
    let origin = Origin::start().await;
    let mut proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.header_read = Duration::from_secs(20);
        config.timeouts.shutdown_grace = Duration::from_secs(20);
    })
    .await;
    let mut silent = TcpStream::connect(proxy.addr).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    stopped_within(
        proxy.shut_down(),
        started,
        Duration::from_secs(3),
        "stopped without waiting for the silent client",
    )
    .await;
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(2), silent.read(&mut byte))
        .await
        .expect("the connection is closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn a_body_cut_by_the_end_of_the_grace_resets_an_http10_client() {
    // Chunked from upstream, passed to an HTTP/1.0 client without a length: only the
    // connection's end tells it whether the body is whole. A shutdown whose grace expires
    // resets it: a FIN would have the client take a tenth of the body for all.
    let origin = RawOrigin::start(|mut conn| async move {
        if conn.read_head().await.is_some() {
            let mut reply = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
                Transfer-Encoding: chunked\r\n\r\n"
                .to_vec();
            reply.extend_from_slice(format!("{:x}\r\n", 10_000).as_bytes());
            reply.extend_from_slice(&[b'a'; 10_000]);
            reply.extend_from_slice(b"\r\n");
            let _ = conn.stream.write_all(&reply).await;
            // The other 90 KB would come later.
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    })
    .await;
    let mut proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.shutdown_grace = Duration::from_millis(300);
    })
    .await;
    let mut client = TcpStream::connect(proxy.addr).await.expect("connect");
    client
        .write_all(b"GET /log HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .expect("request");
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    while !got.ends_with(&[b'a'; 10_000]) {
        let n = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buf))
            .await
            .expect("the first part in time")
            .expect("read");
        assert!(n > 0, "closed before the first part");
        got.extend_from_slice(&buf[..n]);
    }
    let server = proxy.shut_down();
    let end = tokio::time::timeout(Duration::from_secs(5), client.read(&mut buf))
        .await
        .expect("cut at the end of the grace");
    assert_eq!(
        end.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionReset),
        "the cut body ended as if whole"
    );
    let _ = server.await;
}

#[test]
fn run_blocking_serves_until_shutdown_completes() {
    let upstreams = vec![upstream("127.0.0.1:9".parse().expect("valid"))];
    let config = ProxyConfig::new("127.0.0.1:0".parse().expect("valid"), upstreams);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let shutdown = async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = tx.send(());
    };
    run_blocking(config, shutdown).expect("a clean stop");
    rx.try_recv().expect("stopped by the shutdown future");

    let config = ProxyConfig::new("127.0.0.1:0".parse().expect("valid"), Vec::new());
    let refused = run_blocking(config, async {});
    assert!(matches!(refused, Err(ProxyError::NoUpstreams)));
}

#[tokio::test]
async fn an_ipv4_and_an_ipv6_wildcard_share_one_port() {
    // docs/config.md's dual-stack example: nginx binds `[::]` IPv6-only so that the pair
    // starts; bound for both families, the second listener found its port taken.
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        assert!(
            !zipwire_testkit::is_ci(),
            "no IPv6 loopback under CI=true: the dual-stack pair cannot be tried"
        );
        eprintln!("no IPv6 loopback on this machine: the dual-stack pair cannot be tried");
        return;
    }
    let origin = Origin::start().await;
    // One port for both, so it is picked here: free a moment ago, and another one when a
    // parallel test took it meanwhile (then a bind fails and nothing else is listened on, so
    // the retry is race-free). A proxy that cannot bind the pair fails every attempt.
    const ATTEMPTS: usize = 5;
    let mut attempt = 1;
    let (proxy, port) = loop {
        let port = std::net::TcpListener::bind("0.0.0.0:0")
            .and_then(|probe| probe.local_addr())
            .expect("a free port")
            .port();
        let started = Proxy::try_start(vec![origin.upstream()], |config| {
            config.listen = vec![
                format!("0.0.0.0:{port}").parse().expect("valid"),
                format!("[::]:{port}").parse().expect("valid"),
            ];
        })
        .await;
        match started {
            Ok(proxy) => break (proxy, port),
            Err(ProxyError::Bind { .. }) if attempt < ATTEMPTS => attempt += 1,
            Err(error) => panic!(
                "attempt {attempt}: {error}: {:?}",
                std::error::Error::source(&error)
            ),
        }
    };
    let client = client();
    for host in ["127.0.0.1", "[::1]"] {
        let url = format!("http://{host}:{port}/small.txt");
        let response = client
            .request(request("GET", &url, &[]))
            .await
            .expect("a response");
        assert_eq!(response.status(), 200, "{host}");
    }
    drop(proxy);
}

/// Waits for the server's `task` to stop cleanly, within `limit` of `started` (`what` says
/// what the stop must not have waited for).
async fn stopped_within(
    task: tokio::task::JoinHandle<Result<(), ProxyError>>,
    started: Instant,
    limit: Duration,
    what: &str,
) {
    tokio::time::timeout(limit + Duration::from_secs(3), task)
        .await
        .expect(what)
        .expect("task")
        .expect("clean stop");
    assert!(started.elapsed() < limit, "{what}: {:?}", started.elapsed());
}
