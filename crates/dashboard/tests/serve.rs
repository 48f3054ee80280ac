//! The guards of the admin loop that the tunnel's `--admin` (and the proxy's `admin`) runs: it
//! answers only a local `Host`, waits at most `HEAD_TIMEOUT` for a head, and caps its
//! connections, so that idle ones cannot take the descriptors a tunnel needs (150 idle
//! connections would stop a tunnel whose limit is 100).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zipwire_dashboard::{Dashboard, Kind, Source, MAX_CONNECTIONS};

async fn admin() -> SocketAddr {
    admin_on("127.0.0.1:0").await
}

async fn admin_on(bind: &str) -> SocketAddr {
    let listener = TcpListener::bind(bind).await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let stats: Arc<dyn Source> = Arc::new(|| "{\"ok\":1}".to_owned());
    let events = stats.clone();
    let dashboard = Dashboard::new(Kind::Tunnel, move || events.sample());
    tokio::spawn(zipwire_dashboard::serve(listener, stats, dashboard));
    addr
}

/// The whole answer to `request` (which closes the connection), as text.
async fn answer(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut raw)).await;
    assert!(read.is_ok(), "no answer from the admin listener");
    String::from_utf8_lossy(&raw).into_owned()
}

/// The status line of the answer to a `GET /stats` naming `host`, or "" when none came.
async fn status(addr: SocketAddr, host: &str) -> String {
    let request = format!("GET /stats HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let text = answer(addr, &request).await;
    text.lines().next().unwrap_or("").to_owned()
}

#[tokio::test]
async fn a_405_names_the_methods_allowed() {
    let addr = admin().await;
    let request = format!(
        "POST /dashboard HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    );
    let text = answer(addr, &request).await.to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 405"), "{text}");
    assert!(text.contains("\r\nallow: get, head\r\n"), "{text}");
}

#[tokio::test]
async fn a_loopback_admin_answers_only_a_local_host() {
    let addr = admin().await;
    let port = addr.port();
    for (host, expected) in [
        (format!("evil.example:{port}"), "421"),
        (format!("localhost:{port}"), "200"),
        (format!("127.0.0.1:{port}"), "200"),
    ] {
        let line = status(addr, &host).await;
        assert!(line.contains(expected), "{host}: {line}");
    }
}

#[tokio::test]
async fn a_wildcard_admin_checks_the_host_of_loopback_connections() {
    // A listener on 0.0.0.0 must not answer a rebound name on 127.0.0.1.
    let port = admin_on("0.0.0.0:0").await.port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    for (host, expected) in [
        (format!("evil.example:{port}"), "421"),
        (format!("localhost:{port}"), "200"),
    ] {
        let line = status(addr, &host).await;
        assert!(line.contains(expected), "{host}: {line}");
    }
}

#[tokio::test]
async fn idle_connections_past_the_cap_wait_for_a_slot() {
    let addr = admin().await;
    let mut idle = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        idle.push(TcpStream::connect(addr).await.expect("connect"));
    }
    let mut waiting = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET /stats HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    waiting.write_all(request.as_bytes()).await.expect("write");
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_millis(800), waiting.read(&mut buf)).await;
    assert!(read.is_err(), "served past the cap");
    drop(idle.pop());
    let read = tokio::time::timeout(Duration::from_secs(3), waiting.read(&mut buf)).await;
    let got = read.expect("served once a slot is free").expect("read");
    assert!(String::from_utf8_lossy(&buf[..got]).starts_with("HTTP/1.1 200"));
}
