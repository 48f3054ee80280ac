//! Bad input on TLS listeners: garbage instead of a ClientHello, and clients that never
//! finish their handshake. The proxy must close them, count them, and keep serving.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;
use crate::tls_support::*;

/// Whether the proxy closes `stream` within `limit` (EOF or reset), reading and dropping
/// whatever it sends first.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut sink = Vec::new();
    match tokio::time::timeout(limit, stream.read_to_end(&mut sink)).await {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Err(_) => false,
    }
}

#[tokio::test]
async fn garbage_instead_of_a_client_hello_is_closed_and_the_proxy_keeps_serving() {
    let origin = Origin::start().await;
    let dir = temp_dir("garbage");
    let site = site(&dir, "site", &["proxy.test"]);
    let proxy = TlsProxy::start(origin.upstream(), &site, |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
    })
    .await;
    let mut hello_cut_short = client_hello(0x0303, &[0xc02b]);
    // A record header that announces more than a record may hold (RFC 8446 §5.1: 2^14).
    hello_cut_short[3..5].copy_from_slice(&0xffffu16.to_be_bytes());
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("noise", noise(4096)),
        (
            "cleartext HTTP",
            b"GET / HTTP/1.1\r\nHost: proxy.test\r\n\r\n".to_vec(),
        ),
        ("an oversized record", hello_cut_short),
        (
            "a handshake record of zeros",
            [&[0x16, 0x03, 0x01, 0x00, 0x40][..], &[0; 64]].concat(),
        ),
    ];
    for (what, bytes) in &inputs {
        let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
        // The proxy may close before reading it all.
        let _ = stream.write_all(bytes).await;
        assert!(
            closed_within(&mut stream, Duration::from_secs(5)).await,
            "{what}: the connection stayed open"
        );
    }
    assert_eq!(
        Proxy::count(&proxy.stats.tls_handshake_failures),
        inputs.len() as u64
    );
    assert_eq!(
        Proxy::count(&proxy.stats.connections),
        0,
        "none reached HTTP"
    );
    assert_eq!(Proxy::count(&proxy.stats.active_connections), 0);

    let stream = connect(proxy.addr(), http11_client(), "proxy.test")
        .await
        .expect("handshake");
    let (head, body) = get(stream, "/page.html", &[("accept-encoding", "gzip")]).await;
    assert_eq!(head.status, 200);
    assert_eq!(gunzip(&body), html(50_000));

    // The operator sees both counts, in /stats and /metrics.
    let admin = proxy.admin.expect("an admin listener");
    let (_, stats) = fetch(&client(), "GET", &format!("http://{admin}/stats"), &[]).await;
    let stats: serde_json::Value = serde_json::from_slice(&stats).expect("JSON");
    assert_eq!(stats["tls_handshakes"], 1);
    assert_eq!(stats["tls_handshake_failures"], inputs.len());
    let (_, metrics) = fetch(&client(), "GET", &format!("http://{admin}/metrics"), &[]).await;
    let metrics = String::from_utf8(metrics.to_vec()).expect("text");
    assert!(
        metrics.contains("\nzipwire_proxy_tls_handshakes_total 1\n"),
        "{metrics}"
    );
    let failures = format!(
        "\nzipwire_proxy_tls_handshake_failures_total {}\n",
        inputs.len()
    );
    assert!(metrics.contains(&failures), "{metrics}");
}

#[tokio::test]
async fn stalled_handshakes_hold_connection_slots_until_the_handshake_timeout() {
    const SLOTS: usize = 3;
    const TIMEOUT: Duration = Duration::from_secs(1);
    let origin = Origin::start().await;
    let dir = temp_dir("stalled");
    let site = site(&dir, "site", &["proxy.test"]);
    let proxy = TlsProxy::start(origin.upstream(), &site, |config| {
        config.limits.max_connections = SLOTS;
        config.tls.handshake_timeout = TIMEOUT;
    })
    .await;

    // Every slot taken: some clients send nothing, some half a ClientHello.
    let started = Instant::now();
    let hello = client_hello(0x0303, &[0xc02b, 0xc02f]);
    let mut stalled = Vec::new();
    for i in 0..SLOTS {
        let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
        if i % 2 == 1 {
            stream
                .write_all(&hello[..hello.len() / 2])
                .await
                .expect("send");
        }
        stalled.push(stream);
    }
    // Let the proxy accept them all, so that they hold their slots.
    tokio::time::sleep(Duration::from_millis(200)).await;

    // A legitimate client connects (the kernel queues it) but gets no handshake until a
    // stalled one is cut.
    let legitimate = tokio::spawn({
        let addr = proxy.addr();
        async move {
            let stream = connect(addr, http11_client(), "proxy.test")
                .await
                .expect("handshake");
            let got_in = Instant::now();
            let (head, body) = get(stream, "/page.html", &[("accept-encoding", "gzip")]).await;
            (got_in, head.status, body)
        }
    });
    for (i, stream) in stalled.iter_mut().enumerate() {
        assert!(
            closed_within(stream, TIMEOUT * 5).await,
            "stalled client {i} was not cut"
        );
    }
    let (got_in, status, body) = tokio::time::timeout(Duration::from_secs(10), legitimate)
        .await
        .expect("the legitimate client got in")
        .expect("the client task");
    assert_eq!(status, 200);
    assert_eq!(gunzip(&body), html(50_000));
    // Not before a stalled client's timeout freed a slot: the stalled ones held them.
    let waited = got_in - started;
    assert!(
        waited >= TIMEOUT - Duration::from_millis(100),
        "in after {waited:?}"
    );
    assert_eq!(
        Proxy::count(&proxy.stats.tls_handshake_failures),
        SLOTS as u64
    );
    assert_eq!(Proxy::count(&proxy.stats.tls_handshakes), 1);
}

#[tokio::test]
async fn shutdown_does_not_wait_for_stalled_handshakes() {
    let origin = Origin::start().await;
    let dir = temp_dir("shutdown");
    let site = site(&dir, "site", &["proxy.test"]);
    let proxy = TlsProxy::start(origin.upstream(), &site, |config| {
        config.tls.handshake_timeout = Duration::from_secs(30);
        config.timeouts.shutdown_grace = Duration::from_secs(30);
    })
    .await;
    let mut stalled = TcpStream::connect(proxy.addr()).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), proxy.stop())
        .await
        .expect("the proxy stops without waiting for the handshake")
        .expect("a clean stop");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(closed_within(&mut stalled, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn header_read_counts_from_the_end_of_the_handshake() {
    // A handshake that takes most of `handshake_timeout`, then a head within `header_read`:
    // served. Were `header_read` counted from the connection's start, the head would be cut
    // 1 s after the connection opened.
    let origin = Origin::start().await;
    let dir = temp_dir("slow-handshake");
    let site = site(&dir, "site", &["proxy.test"]);
    let proxy = TlsProxy::start(origin.upstream(), &site, |config| {
        config.tls.handshake_timeout = Duration::from_secs(5);
        config.timeouts.header_read = Duration::from_secs(1);
    })
    .await;
    let tcp = TcpStream::connect(proxy.addr()).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let name = rustls::pki_types::ServerName::try_from("proxy.test").expect("a valid name");
    let stream = tokio_rustls::TlsConnector::from(http11_client())
        .connect(name, tcp)
        .await
        .expect("handshake");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (head, body) = get(stream, "/page.html", &[]).await;
    assert_eq!(head.status, 200);
    assert_eq!(body, html(50_000));
}
