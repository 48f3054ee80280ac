//! WebSocket pass-through (RFC 6455 over HTTP/1.1, RFC 9110 §7.8): the handshake reaches
//! the origin with its `Connection` and `Upgrade`, a `101` turns the client connection into
//! a tunnel to a fresh upstream connection, and a refused upgrade is an ordinary response.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use sha1::Digest as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::support::*;

/// The key of RFC 6455 §1.3's example handshake.
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// How long a step may take on a loaded machine.
const LIMIT: Duration = Duration::from_secs(10);

const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;

/// `Sec-WebSocket-Accept` for `key` (RFC 6455 §4.2.2).
fn accept(key: &str) -> String {
    let mut sha1 = sha1::Sha1::new();
    sha1.update(key.as_bytes());
    sha1.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(sha1.finalize())
}

/// A frame (FIN set), masked as a client must mask (RFC 6455 §5.3) when `mask` is given.
fn frame(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    let masked = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        len @ 0..=125 => out.push(masked | len as u8),
        len @ 126..=0xffff => {
            out.push(masked | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            out.push(masked | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    match mask {
        Some(key) => {
            out.extend_from_slice(&key);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        }
        None => out.extend_from_slice(payload),
    }
    out
}

/// Reads one frame: its opcode and unmasked payload; `None` at the end of the stream.
async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).await.ok()?;
    let opcode = head[0] & 0x0f;
    let len = match head[1] & 0x7f {
        126 => {
            let mut len = [0u8; 2];
            stream.read_exact(&mut len).await.ok()?;
            u64::from(u16::from_be_bytes(len))
        }
        127 => {
            let mut len = [0u8; 8];
            stream.read_exact(&mut len).await.ok()?;
            u64::from_be_bytes(len)
        }
        len => u64::from(len),
    };
    let mut mask = [0u8; 4];
    if head[1] & 0x80 != 0 {
        stream.read_exact(&mut mask).await.ok()?;
    }
    let mut payload = vec![0u8; usize::try_from(len).ok()?];
    stream.read_exact(&mut payload).await.ok()?;
    for (i, byte) in payload.iter_mut().enumerate() {
        *byte ^= mask[i % 4];
    }
    Some((opcode, payload))
}

/// Reads a head up to its blank line, leaving what follows in the stream.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

fn field<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (field, value) = line.split_once(':')?;
        field
            .trim()
            .eq_ignore_ascii_case(name)
            .then(|| value.trim())
    })
}

/// An origin that answers `/ws` handshakes with a 101 and echoes every frame, `/refuse` with
/// a 400 and anything else with a 200 page, keeping the connection alive between ordinary
/// requests.
struct EchoOrigin {
    addr: SocketAddr,
    /// Connections accepted.
    connections: Arc<AtomicUsize>,
    /// Connections that ended (the peer closed).
    ended: Arc<AtomicUsize>,
    /// Every request head, with the number of its connection.
    heads: Arc<Mutex<Vec<(usize, String)>>>,
    task: JoinHandle<()>,
}

impl EchoOrigin {
    async fn start() -> EchoOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind origin");
        let addr = listener.local_addr().expect("address");
        let connections = Arc::new(AtomicUsize::new(0));
        let ended = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (c, e, h) = (connections.clone(), ended.clone(), heads.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let number = c.fetch_add(1, Ordering::SeqCst) + 1;
                let (e, h) = (e.clone(), h.clone());
                tokio::spawn(async move {
                    serve(stream, number, h).await;
                    e.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        EchoOrigin {
            addr,
            connections,
            ended,
            heads,
            task,
        }
    }

    fn heads(&self) -> Vec<(usize, String)> {
        self.heads.lock().expect("not poisoned").clone()
    }
}

impl Drop for EchoOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut stream: TcpStream, number: usize, heads: Arc<Mutex<Vec<(usize, String)>>>) {
    while let Some(head) = read_head(&mut stream).await {
        heads
            .lock()
            .expect("not poisoned")
            .push((number, head.clone()));
        let path = head.split(' ').nth(1).unwrap_or("").to_owned();
        if path == "/ws" {
            let key = field(&head, "sec-websocket-key").unwrap_or("");
            let reply = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Accept: {}\r\n\r\n",
                accept(key)
            );
            if stream.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
            while let Some((opcode, payload)) = read_frame(&mut stream).await {
                if stream
                    .write_all(&frame(opcode, &payload, None))
                    .await
                    .is_err()
                {
                    return;
                }
                if opcode == OP_CLOSE {
                    return;
                }
            }
            return;
        }
        let (status, body) = if path == "/refuse" {
            ("400 Bad Request", b"not a websocket endpoint\n".to_vec())
        } else {
            ("200 OK", html(20_000))
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        if stream.write_all(reply.as_bytes()).await.is_err()
            || stream.write_all(&body).await.is_err()
        {
            return;
        }
    }
}

/// A WebSocket client through the proxy: the handshake sent, the response head read.
async fn handshake(proxy: SocketAddr, path: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(proxy).await.expect("connect");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: chat.example\r\nConnection: keep-alive, Upgrade\r\n\
         Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {KEY}\r\n\
         Accept-Encoding: gzip\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let head = tokio::time::timeout(LIMIT, read_head(&mut stream))
        .await
        .expect("a head in time")
        .expect("a head");
    (stream, head)
}

/// Sends a frame from the client and reads the echo.
async fn echo(stream: &mut TcpStream, opcode: u8, payload: &[u8]) -> (u8, Vec<u8>) {
    let sent = frame(opcode, payload, Some([0x37, 0xfa, 0x21, 0x3d]));
    let (mut read, mut write) = stream.split();
    let writer = async {
        write.write_all(&sent).await.expect("write");
    };
    let reader = async { read_frame(&mut read).await.expect("an echoed frame") };
    let ((), echoed) = tokio::time::timeout(LIMIT, async { tokio::join!(writer, reader) })
        .await
        .expect("the echo in time");
    echoed
}

fn upstream_of(origin: &EchoOrigin) -> zipwire_proxy::Upstream {
    upstream(origin.addr)
}

#[tokio::test]
async fn websocket_frames_are_echoed_through_the_proxy_both_ways() {
    let origin = EchoOrigin::start().await;
    let proxy = Proxy::start(vec![upstream_of(&origin)], |_| {}).await;
    let (mut ws, head) = handshake(proxy.addr, "/ws").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert_eq!(field(&head, "upgrade"), Some("websocket"), "{head}");
    assert_eq!(field(&head, "connection"), Some("upgrade"), "{head}");
    assert_eq!(
        field(&head, "sec-websocket-accept"),
        Some(accept(KEY).as_str())
    );
    assert_eq!(field(&head, "content-encoding"), None, "{head}");
    // The origin got the handshake with the two hop-by-hop fields the proxy sent again.
    let (_, origin_head) = origin.heads().pop().expect("the handshake");
    assert_eq!(
        field(&origin_head, "upgrade"),
        Some("websocket"),
        "{origin_head}"
    );
    assert_eq!(
        field(&origin_head, "connection"),
        Some("upgrade"),
        "{origin_head}"
    );
    assert_eq!(field(&origin_head, "sec-websocket-key"), Some(KEY));

    assert_eq!(
        echo(&mut ws, OP_TEXT, b"hello through zipwire").await,
        (OP_TEXT, b"hello through zipwire".to_vec())
    );
    // Large messages, compressible and not, arrive intact: nothing is recoded.
    for payload in [html(1 << 20), noise(1 << 20)] {
        assert_eq!(
            echo(&mut ws, OP_BINARY, &payload).await,
            (OP_BINARY, payload)
        );
    }
    assert_eq!(Proxy::count(&proxy.stats.upgrades), 1);
    assert_eq!(Proxy::count(&proxy.stats.active_upgrades), 1);
    assert_eq!(Proxy::count(&proxy.stats.compressed), 0);

    // A close frame is echoed, the origin closes, and so does the client's side.
    assert_eq!(echo(&mut ws, OP_CLOSE, b"").await.0, OP_CLOSE);
    let mut rest = Vec::new();
    let read = tokio::time::timeout(LIMIT, ws.read_to_end(&mut rest)).await;
    assert!(matches!(read, Ok(Ok(0))), "{read:?} {rest:?}");
    wait_for(|| Proxy::count(&proxy.stats.active_upgrades) == 0).await;
}

#[tokio::test]
async fn an_idle_tunnel_is_closed_on_both_sides() {
    let origin = EchoOrigin::start().await;
    let proxy = Proxy::start(vec![upstream_of(&origin)], |config| {
        config.timeouts.upgrade_idle = Duration::from_millis(1_500);
    })
    .await;
    let (mut ws, head) = handshake(proxy.addr, "/ws").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    // Traffic within the idle time keeps the tunnel open: 2 s of it, past the idle time, with
    // a 1.1 s margin for a loaded machine between two messages.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(echo(&mut ws, OP_TEXT, b"still here").await.0, OP_TEXT);
    }
    let started = std::time::Instant::now();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(LIMIT, ws.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(1_400),
        "{:?}",
        started.elapsed()
    );
    // The origin's side was closed too.
    wait_for(|| origin.ended.load(Ordering::SeqCst) == 1).await;
    wait_for(|| Proxy::count(&proxy.stats.active_upgrades) == 0).await;
}

#[tokio::test]
async fn a_refused_upgrade_is_an_ordinary_response() {
    let origin = EchoOrigin::start().await;
    let proxy = Proxy::start(vec![upstream_of(&origin)], |_| {}).await;
    let (mut refused, head) = handshake(proxy.addr, "/refuse").await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    let length: usize = field(&head, "content-length")
        .and_then(|n| n.parse().ok())
        .expect("a length");
    let mut body = vec![0u8; length];
    refused.read_exact(&mut body).await.expect("the body");
    assert_eq!(body, b"not a websocket endpoint\n");
    // A 200 to a handshake is compressed as any page would be.
    let (mut page, head) = handshake(proxy.addr, "/page").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(field(&head, "content-encoding"), Some("gzip"), "{head}");
    assert_eq!(field(&head, "upgrade"), None, "{head}");
    drop(page.shutdown().await);
    assert_eq!(Proxy::count(&proxy.stats.upgrades), 0);
}

#[tokio::test]
async fn a_101_to_a_request_that_asked_for_no_upgrade_is_a_502() {
    // Passed on, the bare 101 would cost the client its connection, with the request behind
    // it (and give an HTTP/1.0 client a 101, which RFC 9110 §15.2 forbids).
    let origin = EchoOrigin::start().await;
    let proxy = Proxy::start(vec![upstream_of(&origin)], |_| {}).await;
    let mut stream = TcpStream::connect(proxy.addr).await.expect("connect");
    stream
        .write_all(b"GET /ws HTTP/1.1\r\nHost: a\r\n\r\nGET /page HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .expect("write");
    let head = tokio::time::timeout(LIMIT, read_head(&mut stream))
        .await
        .expect("a head in time")
        .expect("a head");
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    let length: usize = field(&head, "content-length")
        .and_then(|n| n.parse().ok())
        .expect("a length");
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.expect("the body");
    let next = tokio::time::timeout(LIMIT, read_head(&mut stream))
        .await
        .expect("a head in time")
        .expect("the pipelined request is answered");
    assert!(next.starts_with("HTTP/1.1 200"), "{next}");
}

#[tokio::test]
async fn an_upgrade_takes_a_fresh_upstream_connection_never_pooled() {
    let origin = EchoOrigin::start().await;
    let proxy = Proxy::start(vec![upstream_of(&origin)], |_| {}).await;
    let client = client();
    let get = || async {
        let (response, _) = fetch(&client, "GET", &proxy.url("/page"), &[]).await;
        assert_eq!(response.status, 200);
    };
    // One pooled connection, idle.
    get().await;
    // The handshake does not take it, and its own connection, refused, is not pooled.
    let (mut refused, head) = handshake(proxy.addr, "/refuse").await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    drop(refused.shutdown().await);
    get().await;
    get().await;
    let heads = origin.heads();
    let paths: Vec<(usize, &str)> = heads
        .iter()
        .map(|(n, head)| (*n, head.split(' ').nth(1).unwrap_or("")))
        .collect();
    assert_eq!(
        paths,
        [(1, "/page"), (2, "/refuse"), (1, "/page"), (1, "/page")]
    );
    wait_for(|| origin.ended.load(Ordering::SeqCst) == 1).await;
    assert_eq!(origin.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_open_tunnel_holds_its_connection_slot() {
    let origin = EchoOrigin::start().await;
    let proxy = Proxy::start(vec![upstream_of(&origin)], |config| {
        config.limits.max_connections = 1;
    })
    .await;
    let (mut ws, head) = handshake(proxy.addr, "/ws").await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert_eq!(echo(&mut ws, OP_TEXT, b"one").await.0, OP_TEXT);
    // A second client waits in the accept queue while the tunnel is open.
    let mut other = TcpStream::connect(proxy.addr).await.expect("connect");
    other
        .write_all(b"GET /page HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(500), other.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "served while the tunnel was open: {early:?}"
    );
    assert_eq!(echo(&mut ws, OP_CLOSE, b"").await.0, OP_CLOSE);
    drop(ws);
    let served = tokio::time::timeout(LIMIT, read_head(&mut other))
        .await
        .expect("served once the tunnel closed")
        .expect("a head");
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
}

/// Waits until `done` holds, failing after [`LIMIT`].
async fn wait_for(done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + LIMIT;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "condition not met in time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
