//! Issue 21's tunnel points on loopback: what each end accepts, version replies, tiny
//! blocks, keepalive and the login deadline.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zipwire_tunnel::endpoint::Server;
use zipwire_tunnel::frame::{Method, DATA_HEADER_LEN};
use zipwire_tunnel::handshake::{self, Hello, MAGIC};
use zipwire_tunnel::keepalive::Keepalive;
use zipwire_tunnel::policy::Choice;
use zipwire_tunnel::relay::Shared;
use zipwire_tunnel::startups::Limits;
use zipwire_tunnel::stats::Stats;
use zipwire_tunnel::tls;

use support::*;

async fn start_server(
    keys: &Keys,
    target: SocketAddr,
    shared: Shared,
    limits: Limits,
) -> (SocketAddr, Arc<Stats>) {
    let mut server = Server::bind(
        local(),
        target.to_string(),
        keys.server.clone(),
        keys.token.clone(),
        shared,
    )
    .await
    .unwrap();
    server.set_limits(limits);
    let addr = server.local_addr().unwrap();
    let stats = server.stats();
    tokio::spawn(server.run());
    (addr, stats)
}

fn text(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| b"tunnel text compresses well, "[i % 29] ^ (i / 4099 % 2) as u8)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_at_raw_receives_only_raw_frames() {
    let keys = keys();
    let target = echo_target().await;
    let zstd = Choice::Fixed(Method::new(zipwire_tunnel::frame::Codec::Zstd, 3).unwrap());
    let (server, server_stats) = start_server(&keys, target, shared(zstd), Limits::default()).await;
    let raw = Choice::Fixed(Method::RAW);
    let (client, client_stats) = start_client(&keys, server, shared(raw)).await;
    let mut app = TcpStream::connect(client).await.unwrap();
    round_trip(&mut app, &text(2_000_000)).await;
    let incoming = client_stats.incoming();
    assert_eq!(incoming.raw(), 2_000_000);
    assert!(
        incoming.methods.keys().all(|m| *m == Method::RAW),
        "the raw client received {:?}",
        incoming.methods.keys().collect::<Vec<_>>()
    );
    assert_eq!(server_stats.outgoing().highest(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_of_another_version_is_told_the_versions_the_server_speaks() {
    let keys = keys();
    let target = echo_target().await;
    let (server, _) = start_server(&keys, target, shared(Choice::Auto), Limits::default()).await;
    let tcp = TcpStream::connect(server).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(tls::client_config(keys.pin).unwrap());
    let mut stream = connector.connect(tls::server_name(), tcp).await.unwrap();
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&[9, 0, keys.token.len() as u8]);
    hello.extend_from_slice(&keys.token);
    stream.write_all(&hello).await.unwrap();
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut reply)).await;
    let mut expected = MAGIC.to_vec();
    expected.extend_from_slice(&[3, handshake::VERSIONS]);
    assert_eq!(reply, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keystrokes_cost_no_more_than_raw_frames() {
    let keys = keys();
    let target = echo_target().await;
    let level = Choice::Fixed(Method::new(zipwire_tunnel::frame::Codec::Zstd, 3).unwrap());
    let (server, server_stats) =
        start_server(&keys, target, shared(level.clone()), Limits::default()).await;
    let (client, client_stats) = start_client(&keys, server, shared(level)).await;
    let mut app = TcpStream::connect(client).await.unwrap();
    // ssh-like packets: 36 to 100 random bytes, each echoed before the next.
    let mut state = 0x2545_f491u32;
    for i in 0..150 {
        let len = 36 + (i * 7) % 64;
        let packet: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            })
            .collect();
        round_trip(&mut app, &packet).await;
    }
    for (end, stats) in [("client", &client_stats), ("server", &server_stats)] {
        let out = stats.outgoing();
        let blocks: u64 = out.methods.values().map(|c| c.blocks).sum();
        let raw_framing = out.raw() + blocks * DATA_HEADER_LEN as u64;
        assert!(
            out.wire() <= raw_framing,
            "{end}: {} wire bytes for {} raw bytes in {blocks} frames",
            out.wire(),
            out.raw()
        );
    }
}

/// Forwards `from` to `to` until the path dies; then swallows everything and holds both
/// sockets open, as a dead path does (no FIN, no reset).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    dead: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        if dead.load(Ordering::SeqCst) {
            if n == 0 {
                std::future::pending::<()>().await;
            }
            continue;
        }
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A TCP relay between the client and the server that can be made to drop everything
/// silently; returns its address and the switch.
async fn pausable_path(to: SocketAddr) -> (SocketAddr, Arc<AtomicBool>) {
    let listener = TcpListener::bind(local()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let dead = Arc::new(AtomicBool::new(false));
    let switch = dead.clone();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let Ok(outbound) = TcpStream::connect(to).await else {
                continue;
            };
            let (in_r, in_w) = inbound.into_split();
            let (out_r, out_w) = outbound.into_split();
            tokio::spawn(pump(in_r, out_w, dead.clone()));
            tokio::spawn(pump(out_r, in_w, dead.clone()));
        }
    });
    (addr, switch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silently_dead_path_resets_the_forwarded_connection() {
    let keys = keys();
    let target = echo_target().await;
    let (server, _) = start_server(&keys, target, shared(Choice::Auto), Limits::default()).await;
    let (path, dead) = pausable_path(server).await;
    let mut pinging = shared(Choice::Auto);
    pinging.keepalive = Some(Keepalive::every(Duration::from_millis(200)));
    let (client, _) = start_client(&keys, path, pinging).await;
    let mut app = TcpStream::connect(client).await.unwrap();
    round_trip(&mut app, b"still there?").await;
    // Idle for several intervals: pings and pongs keep it up.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    round_trip(&mut app, b"yes").await;
    dead.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let end = tokio::time::timeout(Duration::from_secs(15), app.read(&mut buf)).await;
    let Ok(end) = end else {
        panic!("the application still waits after 15 s on a dead path");
    };
    let error = end.expect_err("a dead path ended the stream cleanly");
    assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset, "{error}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Writes 1 MB at a time, reading nothing, until a write fails or stalls for `stall`; returns
/// the error, or `None` for a stall.
async fn write_until_stuck(stream: &mut TcpStream, stall: Duration) -> Option<std::io::Error> {
    let block = vec![0x5a_u8; 1 << 20];
    loop {
        match tokio::time::timeout(stall, stream.write_all(&block)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Some(error),
            Err(_) => return None,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_that_gives_up_on_a_jammed_pair_frees_the_target() {
    // The application and the target each write without reading: the tunnel fills both
    // ways. The application then gives up with a reset. Its sender must not wait for ever to
    // queue the abort behind frames that cannot move, leaving the target jammed until it
    // gives up too: over direct TCP it gets the reset at once.
    let (freed_tx, freed) = tokio::sync::oneshot::channel();
    let target = one_shot_target(|mut stream: TcpStream| async move {
        let stuck = write_until_stuck(&mut stream, Duration::from_secs(2)).await;
        assert!(
            stuck.is_none(),
            "the target failed before the jam: {stuck:?}"
        );
        let jammed = Instant::now();
        let error = write_until_stuck(&mut stream, Duration::from_secs(30)).await;
        let _ = freed_tx.send((error, jammed.elapsed()));
    })
    .await;
    let keys = keys();
    let (server, _) = start_server(&keys, target, shared(Choice::Auto), Limits::default()).await;
    let (client, _) = start_client(&keys, server, shared(Choice::Auto)).await;
    let mut app = TcpStream::connect(client).await.unwrap();
    let stuck = write_until_stuck(&mut app, Duration::from_secs(2)).await;
    assert!(
        stuck.is_none(),
        "the application failed before the jam: {stuck:?}"
    );
    // Both sides jammed (the target's stall is timed from the same moment, give or take).
    tokio::time::sleep(Duration::from_millis(500)).await;
    socket2::SockRef::from(&app)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(app);
    let gave_up = Instant::now();
    let (error, _) = tokio::time::timeout(Duration::from_secs(20), freed)
        .await
        .expect("the target still jammed 20 s after the application's reset")
        .expect("the target's task");
    assert!(error.is_some(), "the target's writes stalled 30 s");
    assert!(
        gave_up.elapsed() < Duration::from_secs(10),
        "the target was freed {:?} after the reset",
        gave_up.elapsed()
    );
}

/// A target on loopback that runs `serve` on its one connection.
async fn one_shot_target<F, Fut>(serve: F) -> SocketAddr
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind(local()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        if let Ok((stream, _)) = listener.accept().await {
            serve(stream).await;
        }
    });
    addr
}

/// A tunnel whose client pings every 400 ms (declared dead after 1.6 s of silence). Both ends
/// run in the test's process: with pings every 100 ms, a 400 ms stall of the whole process
/// (a loaded machine) looked like a dead peer.
async fn pinging_tunnel(target: SocketAddr) -> SocketAddr {
    let keys = keys();
    let (server, _) = start_server(&keys, target, shared(Choice::Auto), Limits::default()).await;
    let mut pinging = shared(Choice::Auto);
    pinging.keepalive = Some(Keepalive::every(Duration::from_millis(400)));
    start_client(&keys, server, pinging).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_waits_out_a_slow_answer_after_the_request_ended() {
    // The request half-closes, the answer takes 4 s (2.5 times the silence that declares the
    // peer dead): the peer still answers pings after this end's end frame.
    let target = one_shot_target(|mut stream: TcpStream| async move {
        let mut request = Vec::new();
        stream.read_to_end(&mut request).await.unwrap();
        tokio::time::sleep(Duration::from_millis(4_000)).await;
        stream.write_all(b"answer to ").await.unwrap();
        stream.write_all(&request).await.unwrap();
    })
    .await;
    let mut app = TcpStream::connect(pinging_tunnel(target).await)
        .await
        .unwrap();
    app.write_all(b"question").await.unwrap();
    app.shutdown().await.unwrap();
    let mut answer = Vec::new();
    app.read_to_end(&mut answer)
        .await
        .expect("reset while waiting");
    assert_eq!(answer, b"answer to question");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_waits_out_an_application_that_reads_slowly() {
    // The application stops reading for 4 s while the target streams: the tunnel client
    // stops reading the tunnel too, and must not take its own deafness for the peer's death.
    let data = text(12 << 20);
    let sent = data.clone();
    let target = one_shot_target(|mut stream: TcpStream| async move {
        let _ = stream.write_all(&sent).await;
    })
    .await;
    let mut app = TcpStream::connect(pinging_tunnel(target).await)
        .await
        .unwrap();
    let mut first = vec![0u8; 64 * 1024];
    app.read_exact(&mut first).await.unwrap();
    tokio::time::sleep(Duration::from_millis(4_000)).await;
    let mut rest = Vec::new();
    app.read_to_end(&mut rest)
        .await
        .expect("reset while the application paused");
    assert_eq!(first.len() + rest.len(), data.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_waits_out_an_upload_to_a_slow_target() {
    // The target reads 64 KB every 50 ms: the tunnel server, writing to it, reads the tunnel
    // no faster and answers no ping meanwhile; the client's queue stays full of data. 8 MB,
    // more than the kernel buffers between the ends hold (loopback's receive buffer grows to
    // 6 MB): once every data frame is acknowledged, the client's pings still wait in the
    // server's receive buffer behind seconds of data, and only the server's unasked pongs
    // (sent while it writes to the slow target) keep the client from declaring it dead.
    let target = one_shot_target(|mut stream: TcpStream| async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0;
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = stream.write_all(format!("got {total}").as_bytes()).await;
    })
    .await;
    let mut app = TcpStream::connect(pinging_tunnel(target).await)
        .await
        .unwrap();
    let upload = noise(8 << 20, 7);
    app.write_all(&upload)
        .await
        .expect("reset during the upload");
    app.shutdown().await.unwrap();
    let mut answer = Vec::new();
    app.read_to_end(&mut answer)
        .await
        .expect("reset before the answer");
    assert_eq!(answer, format!("got {}", upload.len()).as_bytes());
}

/// The TCP sockets in /proc/net/tcp: (local port, remote port, state, timer).
fn sockets() -> Vec<(u16, u16, u8, u8)> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let port = |field: &str| u16::from_str_radix(field.rsplit(':').next().unwrap(), 16).unwrap();
    table
        .lines()
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let state = u8::from_str_radix(f[3], 16).unwrap();
            let timer = u8::from_str_radix(f[5].split(':').next().unwrap(), 16).unwrap();
            (port(f[1]), port(f[2]), state, timer)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tunnel_and_forwarded_socket_has_tcp_keepalive() {
    const ESTABLISHED: u8 = 1;
    // The kernel's keepalive timer shows as timer 2 in /proc/net/tcp.
    const KEEPALIVE_TIMER: u8 = 2;
    let keys = keys();
    let target = echo_target().await;
    let (server, _) = start_server(&keys, target, shared(Choice::Auto), Limits::default()).await;
    let (client, _) = start_client(&keys, server, shared(Choice::Auto)).await;
    let mut app = TcpStream::connect(client).await.unwrap();
    round_trip(&mut app, b"keep me alive").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let table = sockets();
    let find = |what: &str, pick: &dyn Fn(u16, u16) -> bool| {
        let found: Vec<_> = table
            .iter()
            .filter(|(l, r, state, _)| *state == ESTABLISHED && pick(*l, *r))
            .collect();
        assert_eq!(found.len(), 1, "{what}: {found:?}");
        assert_eq!(found[0].3, KEEPALIVE_TIMER, "{what} has no keepalive timer");
    };
    let (c, s, t) = (client.port(), server.port(), target.port());
    find("client's forwarded socket", &|l, _| l == c);
    find("client's tunnel socket", &|_, r| r == s);
    find("server's tunnel socket", &|l, _| l == s);
    find("server's forwarded socket", &|_, r| r == t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_the_hello_share_one_deadline() {
    let keys = keys();
    let target = echo_target().await;
    let limits = Limits {
        login_grace: Duration::from_millis(1000),
        ..Limits::default()
    };
    let (server, _) = start_server(&keys, target, shared(Choice::Auto), limits).await;
    let connector = tokio_rustls::TlsConnector::from(tls::client_config(keys.pin).unwrap());
    let hello = Hello {
        accepts: handshake::ACCEPT_ALL,
        token: keys.token.clone(),
    }
    .to_bytes()
    .unwrap();
    // Each phase takes 700 ms: within a deadline of its own, past a shared one.
    for (pause, served) in [(Duration::ZERO, true), (Duration::from_millis(700), false)] {
        let tcp = TcpStream::connect(server).await.unwrap();
        tokio::time::sleep(pause).await;
        let Ok(mut stream) = connector.connect(tls::server_name(), tcp).await else {
            assert!(!served, "a prompt client failed the TLS handshake");
            continue;
        };
        tokio::time::sleep(pause).await;
        let _ = stream.write_all(&hello).await;
        let reply = handshake::read_reply(&mut stream).await;
        assert_eq!(reply.is_ok(), served, "pause {pause:?}: {reply:?}");
    }
}
