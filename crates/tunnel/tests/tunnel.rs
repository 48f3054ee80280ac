//! End-to-end tests on loopback: a target server, the tunnel server, the tunnel client and an
//! application connecting to the client, all in this process.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zipwire_tunnel::endpoint::{Client, Server};
use zipwire_tunnel::frame::{Codec, Method};
use zipwire_tunnel::handshake::{self, Hello};
use zipwire_tunnel::policy::Choice;
use zipwire_tunnel::relay::Shared;
use zipwire_tunnel::stats::Stats;
use zipwire_tunnel::tls::{self, Fingerprint};

use support::*;

async fn start_server(keys: &Keys, target: SocketAddr, choice: Choice) -> (SocketAddr, Arc<Stats>) {
    let shared = Shared::new(choice, BLOCK, None);
    let server = Server::bind(
        local(),
        target.to_string(),
        keys.server.clone(),
        keys.token.clone(),
        shared,
    )
    .await
    .unwrap();
    let addr = server.local_addr().unwrap();
    let stats = server.stats();
    tokio::spawn(server.run());
    (addr, stats)
}

async fn start_client(
    pin: Fingerprint,
    token: &[u8],
    server: SocketAddr,
    choice: Choice,
) -> (SocketAddr, Arc<Stats>) {
    let shared = Shared::new(choice, BLOCK, None);
    let client = Client::bind(
        local(),
        server.to_string(),
        tls::client_config(pin).unwrap(),
        token.to_vec(),
        shared,
    )
    .await
    .unwrap();
    let addr = client.local_addr().unwrap();
    let stats = client.stats();
    tokio::spawn(client.run());
    (addr, stats)
}

/// A target that runs `serve` on every connection.
async fn target<F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind(local()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    addr
}

/// Echoes as it reads, then half-closes.
async fn echo(stream: TcpStream) {
    let (mut r, mut w) = stream.into_split();
    let _ = tokio::io::copy(&mut r, &mut w).await;
    let _ = w.shutdown().await;
}

fn text(n: usize, seed: u32) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "\"id\": ",
        "\"name\": ",
        "\"url\": \"https://api.example.com/",
        "repos",
        "users",
        "true",
        "false",
        "null",
        "{",
        "}",
        "[",
        "],\n",
        "description",
        "the",
        "of",
        "permissions",
        "123",
        "4567",
        "\n  ",
    ];
    let mut rng = xorshift(seed);
    let mut out = Vec::with_capacity(n + 64);
    while out.len() < n {
        out.extend_from_slice(WORDS[rng() as usize % WORDS.len()].as_bytes());
    }
    out.truncate(n);
    out
}

fn binary(n: usize, seed: u32) -> Vec<u8> {
    let mut rng = xorshift(seed);
    (0..n)
        .map(|i| match rng() % 8 {
            0..=3 => 0,
            4 => (i % 251) as u8,
            5 => 0x48,
            _ => (rng() >> 24) as u8,
        })
        .collect()
}

fn mixed(n: usize, seed: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut part = 0u32;
    while out.len() < n {
        let chunk = match part % 3 {
            0 => text(300_000, seed + part),
            1 => noise(200_000, seed + part),
            _ => binary(250_000, seed + part),
        };
        out.extend_from_slice(&chunk);
        part += 1;
    }
    out.truncate(n);
    out
}

/// Sends `data` through `addr` while reading what comes back; returns it.
async fn send_and_collect(addr: SocketAddr, data: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let stream = TcpStream::connect(addr).await?;
    let (mut r, mut w) = stream.into_split();
    let writer = tokio::spawn(async move {
        w.write_all(&data).await?;
        w.shutdown().await
    });
    let mut back = Vec::new();
    r.read_to_end(&mut back).await?;
    writer.await.unwrap()?;
    Ok(back)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_arrive_intact_both_ways_at_once_over_many_connections() {
    let keys = keys();
    let target = target(echo).await;
    let (server, server_stats) = start_server(&keys, target, Choice::Auto).await;
    let (client, client_stats) = start_client(keys.pin, &keys.token, server, Choice::Auto).await;
    let mut jobs = Vec::new();
    for i in 0..12u32 {
        let size = 300_000 + i as usize * 150_000;
        let data = match i % 4 {
            0 => text(size, i + 1),
            1 => binary(size, i + 1),
            2 => noise(size, i + 1),
            _ => mixed(size, i + 1),
        };
        jobs.push(tokio::spawn(async move {
            let back = send_and_collect(client, data.clone()).await.unwrap();
            assert!(
                back == data,
                "connection {i}: {} bytes back for {}",
                back.len(),
                data.len()
            );
            data.len() as u64
        }));
    }
    let mut total = 0;
    for job in jobs {
        total += job.await.unwrap();
    }
    assert_eq!(client_stats.outgoing().raw(), total);
    assert_eq!(client_stats.incoming().raw(), total);
    assert_eq!(server_stats.incoming().raw(), total);
    // Every codec path was exercised by something.
    let out = client_stats.outgoing();
    assert!(out.methods.contains_key(&Method::RAW));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixed_level_round_trips() {
    let keys = keys();
    let target = target(echo).await;
    for choice in [
        Method::RAW,
        Method::new(Codec::Deflate, 1).unwrap(),
        Method::new(Codec::Deflate, 3).unwrap(),
        Method::new(Codec::DeflateWindow, 6).unwrap(),
        Method::new(Codec::Zstd, 3).unwrap(),
    ] {
        let (server, _) = start_server(&keys, target, Choice::Fixed(choice)).await;
        let (client, stats) =
            start_client(keys.pin, &keys.token, server, Choice::Fixed(choice)).await;
        let data = mixed(1_500_000, 7);
        assert!(
            send_and_collect(client, data.clone()).await.unwrap() == data,
            "{choice}"
        );
        let used = stats.outgoing().highest();
        if choice == Method::RAW {
            assert_eq!(used, None);
        } else {
            assert_eq!(used, Some(choice));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_close_propagates_both_ways() {
    let keys = keys();
    // Reads to the end, then answers with how much it read and closes.
    let target = target(|stream: TcpStream| async move {
        let (mut r, mut w) = stream.into_split();
        let mut all = Vec::new();
        r.read_to_end(&mut all).await.unwrap();
        w.write_all(format!("read {} bytes", all.len()).as_bytes())
            .await
            .unwrap();
        w.shutdown().await.unwrap();
    })
    .await;
    let (server, _) = start_server(&keys, target, Choice::Auto).await;
    let (client, _) = start_client(keys.pin, &keys.token, server, Choice::Auto).await;
    let answer = send_and_collect(client, text(1_000_000, 3)).await.unwrap();
    assert_eq!(answer, b"read 1000000 bytes");
}

/// Reads until an error or the end; returns the bytes and whether it ended in an error.
async fn read_until_error<R: AsyncRead + Unpin>(r: &mut R) -> (usize, bool) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(20), r.read(&mut buf)).await {
            Ok(Ok(0)) => return (total, false),
            Ok(Ok(n)) => total += n,
            Ok(Err(_)) => return (total, true),
            Err(_) => panic!("no end and no error within 20 s"),
        }
    }
}

/// Closes `stream` with a reset (linger 0), as a process that dies does.
fn reset(stream: TcpStream) {
    socket2::SockRef::from(&stream)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(stream);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_resets_mid_stream_is_an_error_not_an_end_at_the_application() {
    let keys = keys();
    let target = target(|mut stream: TcpStream| async move {
        stream.write_all(&text(1_000_000, 5)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        reset(stream);
    })
    .await;
    let (server, _) = start_server(&keys, target, Choice::Auto).await;
    let (client, _) = start_client(keys.pin, &keys.token, server, Choice::Auto).await;
    let mut app = TcpStream::connect(client).await.unwrap();
    let (read, failed) = read_until_error(&mut app).await;
    assert!(
        failed,
        "a clean end after {read} bytes: the reset was hidden"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_fails_after_its_end_resets_the_application() {
    // The target answers and half-closes, then dies with a reset before it reads the
    // application's upload: its end frame went out first, and the abort that follows must
    // still reach the application, not a clean end.
    let keys = keys();
    let target = target(|mut stream: TcpStream| async move {
        stream.write_all(b"hello").await.unwrap();
        stream.shutdown().await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        reset(stream);
    })
    .await;
    let (server, _) = start_server(&keys, target, Choice::Auto).await;
    let (client, _) = start_client(keys.pin, &keys.token, server, Choice::Auto).await;
    let mut app = TcpStream::connect(client).await.unwrap();
    let mut answer = Vec::new();
    app.read_to_end(&mut answer).await.unwrap();
    assert_eq!(answer, b"hello");
    tokio::time::sleep(Duration::from_millis(600)).await;
    // The upload is taken by the tunnel client before the failure is known; the failure then
    // comes back as an abort, and the tunnel client resets the connection. (Had the
    // application half-closed too, its connection would be closed both ways at the TCP level
    // already, and nothing could tell it: as through any proxy that passes half-closes on.)
    let _ = app.write_all(&text(256 * 1024, 6)).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // Its end was read already, so reads say nothing more; a write meets the reset. A tunnel
    // that stopped reading at an end frame would take this write too, and lose it.
    let failed = app.write_all(b"more").await.is_err();
    assert!(
        failed,
        "the tunnel took more data after the target had failed"
    );
}

#[test]
fn a_tunnel_server_that_vanishes_resets_the_forwarded_connection() {
    let app_runtime = tokio::runtime::Runtime::new().unwrap();
    let keys = keys();
    // The target streams forever, slowly.
    let target = app_runtime.block_on(target(|mut stream: TcpStream| async move {
        let chunk = text(16 * 1024, 9);
        while stream.write_all(&chunk).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }));
    let server_runtime = tokio::runtime::Runtime::new().unwrap();
    let (server, _) = server_runtime.block_on(start_server(&keys, target, Choice::Auto));
    app_runtime.block_on(async {
        let (client, _) = start_client(keys.pin, &keys.token, server, Choice::Auto).await;
        let mut app = TcpStream::connect(client).await.unwrap();
        let mut first = vec![0u8; 100_000];
        app.read_exact(&mut first).await.unwrap();
        // The server process dies: its sockets close with no end frame and no TLS close.
        server_runtime.shutdown_background();
        let (_, failed) = read_until_error(&mut app).await;
        assert!(failed, "the application saw a clean end of a cut stream");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_pin_or_token_never_reaches_the_target() {
    let keys = keys();
    let reached = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = reached.clone();
    let target = target(move |stream: TcpStream| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        echo(stream)
    })
    .await;
    let (server, _) = start_server(&keys, target, Choice::Auto).await;
    let wrong_pin = Fingerprint([7; 32]);
    for (pin, token) in [
        (wrong_pin, keys.token.clone()),
        (keys.pin, b"not the token".to_vec()),
    ] {
        let (client, _) = start_client(pin, &token, server, Choice::Auto).await;
        // The client may refuse so fast that the reset beats connect() itself.
        let Ok(mut app) = TcpStream::connect(client).await else {
            continue;
        };
        let _ = app.write_all(b"secret request").await;
        let (read, _) = read_until_error(&mut app).await;
        assert_eq!(read, 0);
    }
    assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0);
    // And the server still serves the right client.
    let (client, _) = start_client(keys.pin, &keys.token, server, Choice::Auto).await;
    assert_eq!(
        send_and_collect(client, b"hello".to_vec()).await.unwrap(),
        b"hello"
    );
}

/// Opens an authenticated tunnel connection by hand, for sending what a client never would.
async fn raw_tunnel(keys: &Keys, server: SocketAddr) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(server).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(tls::client_config(keys.pin).unwrap());
    let mut stream = connector.connect(tls::server_name(), tcp).await.unwrap();
    let hello = Hello {
        accepts: handshake::ACCEPT_ALL,
        token: keys.token.clone(),
    };
    stream.write_all(&hello.to_bytes().unwrap()).await.unwrap();
    handshake::read_reply(&mut stream).await.unwrap();
    stream
}

async fn read_all_lossy<R: AsyncRead + Unpin>(r: &mut R) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 4096];
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(10), r.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_oversize_and_plaintext_are_refused_and_the_server_lives_on() {
    let keys = keys();
    let target = target(echo).await;
    let (server, _) = start_server(&keys, target, Choice::Auto).await;
    let oversize = [b'D', 0, 0, 0x40, 0, 0, 0, 0x40, 0, 0, 0];
    let corrupt = [b'D', 1, 1, 0, 0, 0, 100, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff];
    let cases: [(&[u8], &str); 3] = [
        (b"Zgarbage", "unknown frame type"),
        (&oversize, "outside the limits"),
        (&corrupt, "corrupt deflate-1 frame"),
    ];
    for (bytes, expected) in cases {
        let mut stream = raw_tunnel(&keys, server).await;
        stream.write_all(bytes).await.unwrap();
        stream.flush().await.unwrap();
        let answer = read_all_lossy(&mut stream).await;
        let text = String::from_utf8_lossy(&answer);
        assert!(
            answer.first() == Some(&b'A') && text.contains(expected),
            "{expected}: {text:?}"
        );
    }
    // Plaintext: no TLS, no answer, no harm.
    let mut plain = TcpStream::connect(server).await.unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = read_all_lossy(&mut plain).await;
    assert!(!answer.windows(4).any(|w| w == b"ZWT1"));
    let (client, _) = start_client(keys.pin, &keys.token, server, Choice::Auto).await;
    assert_eq!(
        send_and_collect(client, b"still here".to_vec())
            .await
            .unwrap(),
        b"still here"
    );
}

/// Forwards bytes both ways at most `rate` bytes per second each way: a slow link.
async fn throttled_relay(to: SocketAddr, rate: u64) -> SocketAddr {
    async fn pump<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(mut r: R, mut w: W, rate: u64) {
        let start = Instant::now();
        let mut sent = 0u64;
        let mut buf = vec![0u8; 8 * 1024];
        loop {
            let n = match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if w.write_all(&buf[..n]).await.is_err() {
                break;
            }
            sent += n as u64;
            let due = Duration::from_secs_f64(sent as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
        let _ = w.shutdown().await;
    }
    // A small receive buffer, as a real bottleneck's queue: without it the kernel would take
    // megabytes at once and hide the link's pace from the sender.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    socket.bind(local()).unwrap();
    let listener = socket.listen(16).unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(outbound) = TcpStream::connect(to).await else {
                    return;
                };
                let (ir, iw) = inbound.into_split();
                let (or, ow) = outbound.into_split();
                tokio::join!(pump(ir, ow, rate), pump(or, iw, rate));
            });
        }
    });
    addr
}

/// A target that reads everything and answers with the byte count.
async fn sink(stream: TcpStream) {
    let (mut r, mut w) = stream.into_split();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0usize;
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        total += n;
    }
    let _ = w.write_all(total.to_string().as_bytes()).await;
    let _ = w.shutdown().await;
}

/// The policy's choices on a fast and a slow link are tested on synthetic links
/// (`policy::tests::the_level_goes_up_on_a_slow_link_and_down_to_raw_on_a_fast_one`): how
/// fast loopback is against the compressor depends on the machine and its load. What is left
/// here is that the relay feeds what it sees of a real slow link (the kernel's view, and the
/// writer's queue) to the policy: a link far slower than any machine compresses makes the
/// ladder climb.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_slow_link_makes_the_level_climb() {
    let keys = keys();
    let target = target(sink).await;
    let (server, _) = start_server(&keys, target, Choice::Auto).await;
    let data = text(4 * 1024 * 1024, 11);
    // 500 KB/s: the link, not the compressor, limits, even on a machine that gives this
    // process a fifth of a core (at 2 MB/s such a machine compressed slower than the link,
    // and the policy rightly stepped down).
    let slow = throttled_relay(server, 500_000).await;
    let (client, stats) = start_client(keys.pin, &keys.token, slow, Choice::Auto).await;
    let answer = send_and_collect(client, data.clone()).await.unwrap();
    assert_eq!(answer, data.len().to_string().as_bytes());
    let out = stats.outgoing();
    let highest = out.highest().expect("compressed something");
    // The ladder starts at zstd-3.
    assert!(
        highest > Method::new(Codec::Zstd, 3).unwrap(),
        "highest {highest} on a slow link:\n{}",
        stats.report()
    );
    assert!(
        (out.wire() as f64) < 0.5 * out.raw() as f64,
        "{}",
        stats.report()
    );
}
