//! HTTP/2 frames written by hand (RFC 9113 §4.1: a 9-byte header, then the payload), for
//! what a well-behaved client library will not do: exceed the stream limit, watch for GOAWAY,
//! and the two floods: rapid reset (CVE-2023-44487) and CONTINUATION (CVE-2024-27316).
//!
//! Header blocks use HPACK's static table and literals without indexing (RFC 7541 §6.1,
//! §6.2.2), so no encoder state is needed.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http2::{bounded, h2_connect, h2_get, BOUND};
use crate::support::*;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

const NO_ERROR: u32 = 0x0;
const ENHANCE_YOUR_CALM: u32 = 0xb;
const CANCEL: u32 = 0x8;
const REFUSED_STREAM: u32 = 0x7;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;

/// One frame as sent or received.
#[derive(Debug)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Frame {
    fn encode(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(payload.len())
            .expect("small frame")
            .to_be_bytes();
        let mut out = Vec::with_capacity(9 + payload.len());
        out.extend_from_slice(&len[1..]);
        out.push(kind);
        out.push(flags);
        out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// The error code of a RST_STREAM or GOAWAY.
    fn error_code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        u32::from_be_bytes(self.payload[at..at + 4].try_into().expect("4 bytes"))
    }
}

/// An HPACK string literal, not Huffman-coded (lengths below 127 fit the prefix).
fn string(out: &mut Vec<u8>, text: &[u8]) {
    assert!(text.len() < 127);
    out.push(text.len() as u8);
    out.extend_from_slice(text);
}

/// A GET of `path` from `authority`: `:method GET` and `:scheme http` from the static table,
/// `:path` and `:authority` as literals with indexed names.
fn get_block(authority: &str, path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86];
    block.push(0x04);
    string(&mut block, path.as_bytes());
    block.push(0x01);
    string(&mut block, authority.as_bytes());
    block
}

/// How a wait for a frame ended.
#[derive(Debug)]
enum Next {
    Frame(Frame),
    /// The server closed the connection (or reset it).
    Closed,
    TimedOut,
}

/// A client connection that speaks HTTP/2 frame by frame, answering SETTINGS and PING as any
/// client must.
struct RawH2 {
    stream: TcpStream,
    buffer: Vec<u8>,
    /// Whether PINGs are answered (a client that never answers keeps hyper's graceful
    /// GOAWAY from finishing).
    answers_pings: bool,
}

impl RawH2 {
    async fn connect(addr: SocketAddr) -> RawH2 {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let mut hello = PREFACE.to_vec();
        hello.extend(Frame::encode(SETTINGS, 0, 0, &[]));
        stream.write_all(&hello).await.expect("preface");
        RawH2 {
            stream,
            buffer: Vec::new(),
            answers_pings: true,
        }
    }

    async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// The next frame other than SETTINGS and PING (acknowledged here), within `limit`.
    async fn next(&mut self, limit: Duration) -> Next {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self.buffer.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buffer[0], self.buffer[1], self.buffer[2]])
                    as usize;
                if self.buffer.len() >= 9 + len {
                    let frame = Frame {
                        kind: self.buffer[3],
                        flags: self.buffer[4],
                        stream: u32::from_be_bytes(self.buffer[5..9].try_into().expect("4"))
                            & 0x7fff_ffff,
                        payload: self.buffer[9..9 + len].to_vec(),
                    };
                    self.buffer.drain(..9 + len);
                    match (frame.kind, frame.flags & ACK) {
                        (SETTINGS, 0) => {
                            let ack = Frame::encode(SETTINGS, ACK, 0, &[]);
                            let _ = self.stream.write_all(&ack).await;
                            return Next::Frame(frame);
                        }
                        (SETTINGS, _) => continue,
                        (PING, 0) if !self.answers_pings => continue,
                        (PING, 0) => {
                            let pong = Frame::encode(PING, ACK, 0, &frame.payload);
                            let _ = self.stream.write_all(&pong).await;
                            continue;
                        }
                        _ => return Next::Frame(frame),
                    }
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            match tokio::time::timeout_at(deadline, self.stream.read(&mut chunk)).await {
                Err(_) => return Next::TimedOut,
                Ok(Ok(0)) | Ok(Err(_)) => return Next::Closed,
                Ok(Ok(n)) => self.buffer.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

#[tokio::test]
async fn the_stream_limit_is_advertised_and_enforced() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.http2.max_concurrent_streams = 4;
    })
    .await;
    let mut raw = RawH2::connect(proxy.addr).await;
    let Next::Frame(settings) = raw.next(BOUND_RAW).await else {
        panic!("no SETTINGS from the server");
    };
    assert_eq!(settings.kind, SETTINGS);
    let advertised = settings
        .payload
        .chunks(6)
        .find(|entry| u16::from_be_bytes([entry[0], entry[1]]) == SETTINGS_MAX_CONCURRENT_STREAMS)
        .map(|entry| u32::from_be_bytes(entry[2..6].try_into().expect("4 bytes")));
    assert_eq!(advertised, Some(4));
    // Five streams at once, each waiting on a slow origin: the fifth is refused.
    let authority = proxy.addr.to_string();
    let mut burst = Vec::new();
    for id in [1, 3, 5, 7, 9] {
        let block = get_block(&authority, "/slow-body");
        burst.extend(Frame::encode(HEADERS, END_HEADERS | END_STREAM, id, &block));
    }
    raw.send(&burst).await.expect("send");
    let mut answered = Vec::new();
    let mut refused = Vec::new();
    while answered.len() + refused.len() < 5 {
        match raw.next(BOUND_RAW).await {
            Next::Frame(frame) if frame.kind == HEADERS => answered.push(frame.stream),
            Next::Frame(frame) if frame.kind == RST_STREAM => {
                assert_eq!(frame.error_code(), REFUSED_STREAM, "{frame:?}");
                refused.push(frame.stream);
            }
            Next::Frame(_) => {}
            other => panic!("{other:?} before every stream was answered"),
        }
    }
    answered.sort_unstable();
    assert_eq!(answered, [1, 3, 5, 7]);
    assert_eq!(refused, [9]);
}

/// How long a raw client waits for one frame.
const BOUND_RAW: Duration = Duration::from_secs(10);

#[tokio::test]
async fn graceful_shutdown_sends_goaway_and_lets_the_open_stream_finish() {
    let origin = Origin::start().await;
    let mut proxy = Proxy::before(&origin).await;
    let mut raw = RawH2::connect(proxy.addr).await;
    let block = get_block(&proxy.addr.to_string(), "/pause");
    raw.send(&Frame::encode(HEADERS, END_HEADERS | END_STREAM, 1, &block))
        .await
        .expect("send");
    // The response has begun (the origin now pauses 1.5 s): shut down.
    let mut body = Vec::new();
    loop {
        match raw.next(BOUND_RAW).await {
            Next::Frame(frame) if frame.kind == DATA => {
                body.extend_from_slice(&frame.payload);
                break;
            }
            Next::Frame(_) => {}
            other => panic!("{other:?} before the first data"),
        }
    }
    let server = proxy.shut_down();
    let mut goaway = None;
    loop {
        match raw.next(BOUND_RAW).await {
            Next::Frame(frame) if frame.kind == GOAWAY => {
                // The first GOAWAY: no error; the stream in flight goes on.
                goaway.get_or_insert(frame.error_code());
            }
            Next::Frame(frame) if frame.kind == DATA && frame.stream == 1 => {
                body.extend_from_slice(&frame.payload);
                if frame.flags & END_STREAM != 0 {
                    break;
                }
            }
            Next::Frame(frame) if frame.kind == RST_STREAM => panic!("stream reset: {frame:?}"),
            Next::Frame(_) => {}
            other => panic!("{other:?} before the end of the stream"),
        }
    }
    assert_eq!(goaway, Some(NO_ERROR), "GOAWAY before the stream ended");
    let mut expected = PAUSE_FIRST.to_vec();
    expected.extend(html(10_000));
    assert!(body == expected, "the body differs ({} bytes)", body.len());
    // Then the connection closes and the server stops.
    loop {
        match raw.next(BOUND_RAW).await {
            Next::Closed => break,
            Next::Frame(_) => {}
            Next::TimedOut => panic!("the connection stayed open after shutdown"),
        }
    }
    bounded("the server's stop", server)
        .await
        .expect("server task")
        .expect("clean stop");
}

#[tokio::test]
async fn an_idle_h2_connection_is_closed_with_goaway() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.idle = Duration::from_secs(1);
    })
    .await;
    let mut raw = RawH2::connect(proxy.addr).await;
    let block = get_block(&proxy.addr.to_string(), "/small.txt");
    raw.send(&Frame::encode(HEADERS, END_HEADERS | END_STREAM, 1, &block))
        .await
        .expect("send");
    loop {
        match raw.next(BOUND_RAW).await {
            Next::Frame(frame) if frame.kind == DATA && frame.flags & END_STREAM != 0 => break,
            Next::Frame(_) => {}
            other => panic!("{other:?} before the end of the response"),
        }
    }
    let ended = Instant::now();
    let mut goaway = None;
    loop {
        match raw.next(BOUND_RAW).await {
            Next::Frame(frame) if frame.kind == GOAWAY => {
                goaway.get_or_insert((frame.error_code(), ended.elapsed()));
            }
            Next::Frame(_) => {}
            Next::Closed => break,
            Next::TimedOut => panic!("the idle connection stayed open"),
        }
    }
    // RFC 9113 §9.1: GOAWAY before the close, so the client knows no request was dropped.
    let (code, after) = goaway.expect("GOAWAY before the close");
    assert_eq!(code, NO_ERROR);
    assert!(
        after >= Duration::from_millis(800),
        "GOAWAY after {after:?}"
    );
}

#[tokio::test]
async fn an_h2_connection_without_a_request_is_closed_after_header_read() {
    let origin = Origin::start().await;
    // header_read 1 s (the tests' setting); idle stays 60 s.
    let proxy = Proxy::before(&origin).await;
    let mut raw = RawH2::connect(proxy.addr).await;
    let started = Instant::now();
    loop {
        match raw.next(BOUND_RAW).await {
            Next::Closed => break,
            Next::Frame(_) => {}
            Next::TimedOut => panic!("open after {:?}", started.elapsed()),
        }
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(800),
        "closed after {waited:?}"
    );
    assert_eq!(origin.hits.load(Ordering::SeqCst), 0);
}

/// What a flood against the proxy left: whether the attacking connection was closed and
/// with which GOAWAY code, and how many frames it got out.
#[derive(Debug)]
struct FloodOutcome {
    goaway: Option<u32>,
    closed: bool,
    sent: usize,
}

/// Sends `frames` in batches on `raw` until all are sent or the proxy closes the
/// connection, then reads until it closes (or `BOUND_RAW` passes).
async fn flood(mut raw: RawH2, frames: impl Iterator<Item = Vec<u8>>) -> FloodOutcome {
    let mut sent = 0;
    let mut batch = Vec::new();
    let mut write_failed = false;
    for frame in frames {
        batch.extend(frame);
        sent += 1;
        if batch.len() >= 16 * 1024 {
            if raw.send(&batch).await.is_err() {
                write_failed = true;
                break;
            }
            batch.clear();
        }
    }
    if !write_failed {
        write_failed = raw.send(&batch).await.is_err();
    }
    let mut goaway = None;
    let closed = loop {
        match raw.next(BOUND_RAW).await {
            Next::Frame(frame) if frame.kind == GOAWAY => {
                goaway = Some(frame.error_code());
            }
            Next::Frame(_) => {}
            Next::Closed => break true,
            Next::TimedOut => break write_failed,
        }
    };
    FloodOutcome {
        goaway,
        closed,
        sent,
    }
}

/// Runs `attack` against a fresh proxy while a well-behaved h2 client fetches a page on
/// another connection; checks that client is served within a generous bound, and that the
/// memory allocated at once during the attack grew by less than `max_growth_kib` over what
/// was live before it. The caller runs alone in a child process
/// ([`zipwire_testkit::alloc::alone`]), so the count is of this test's origin, proxy and
/// clients only.
async fn under_attack(
    attack: impl FnOnce(SocketAddr) -> tokio::task::JoinHandle<FloodOutcome>,
    max_growth_kib: u64,
) -> FloodOutcome {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (send, _driver) = h2_connect(proxy.addr).await;
    let (head, _) = h2_get(&send, proxy.addr, "/page.html", &[]).await;
    assert_eq!(head.status, 200);
    let before = zipwire_testkit::alloc::reset_peak();
    let attack = attack(proxy.addr);
    let mut slowest = Duration::ZERO;
    let mut served = 0;
    let deadline = Instant::now() + BOUND;
    while !attack.is_finished() || served < 3 {
        assert!(
            Instant::now() < deadline,
            "the attack still ran after {BOUND:?} ({served} pages served)"
        );
        let started = Instant::now();
        let (head, body) = h2_get(
            &send,
            proxy.addr,
            "/page.html",
            &[("accept-encoding", "gzip")],
        )
        .await;
        assert_eq!(head.status, 200);
        assert_eq!(gunzip(&body), html(50_000));
        slowest = slowest.max(started.elapsed());
        served += 1;
    }
    let outcome = bounded("the attack", attack).await.expect("attack task");
    let growth = (zipwire_testkit::alloc::peak() - before).max(0) as u64 / 1024;
    eprintln!("{outcome:?}; good client: {served} pages, slowest {slowest:?}; peak +{growth} KiB");
    assert!(slowest < Duration::from_secs(5), "slowest page {slowest:?}");
    assert!(
        growth < max_growth_kib,
        "allocations peaked {growth} KiB above the start"
    );
    assert!(
        origin.hits.load(Ordering::SeqCst) < 10_000,
        "every attacking stream reached the origin"
    );
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rapid_reset_flood_is_cut_off_and_others_are_served() {
    const STREAMS: u32 = 20_000;
    if !zipwire_testkit::alloc::alone(
        "http2_raw::a_rapid_reset_flood_is_cut_off_and_others_are_served",
    ) {
        return;
    }
    let outcome = under_attack(
        |addr| {
            tokio::spawn(async move {
                let raw = RawH2::connect(addr).await;
                let block = get_block(&addr.to_string(), "/page.html");
                let frames = (0..STREAMS).flat_map(move |i| {
                    let id = 2 * i + 1;
                    [
                        Frame::encode(HEADERS, END_HEADERS | END_STREAM, id, &block),
                        Frame::encode(RST_STREAM, 0, id, &CANCEL.to_be_bytes()),
                    ]
                });
                flood(raw, frames).await
            })
        },
        2 * 1024,
    )
    .await;
    // Closed, with GOAWAY ENHANCE_YOUR_CALM when it arrives before the reset of the unread
    // frames does. Unprotected, the proxy would serve all 20,000 streams and keep the
    // connection.
    assert!(outcome.closed, "{outcome:?}");
    assert!(
        outcome.goaway.is_none_or(|code| code == ENHANCE_YOUR_CALM),
        "{outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_one_write_after_their_headers_are_cut_off_too() {
    // Each RST_STREAM goes with the next stream's HEADERS, so hyper has accepted every
    // stream it resets and h2's count of resets before accept never moves: the proxy must
    // cut them off itself, or all 1,000 streams go to the origin, each on a new upstream
    // connection.
    resets_one_write_later(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_from_a_client_that_never_answers_ping_are_cut_off_too() {
    // hyper's graceful GOAWAY waits for the client's PING answer and takes new streams
    // meanwhile: a connection told to close that way alone would let a client that never
    // answers send all 1,000 streams to the origin.
    resets_one_write_later(false).await;
}

/// 1,000 streams, each reset in the write that opens the next, from a client that answers
/// PINGs or not: the connection closes (with no GOAWAY, or GOAWAY NO_ERROR when the close
/// comes while a graceful one is under way) and few of them reach the origin.
async fn resets_one_write_later(answers_pings: bool) {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let addr = proxy.addr;
    let mut raw = RawH2::connect(addr).await;
    raw.answers_pings = answers_pings;
    let mut closed = false;
    let block = get_block(&addr.to_string(), "/slow-body");
    let mut goaway = None;
    let mut sent = 0;
    for i in 0..1000u32 {
        let id = 2 * i + 1;
        let mut write = Frame::encode(HEADERS, END_HEADERS | END_STREAM, id, &block);
        if i > 0 {
            write.extend(Frame::encode(RST_STREAM, 0, id - 2, &CANCEL.to_be_bytes()));
        }
        if raw.send(&write).await.is_err() {
            break;
        }
        sent += 1;
        // Reads what came (PINGs are answered or not), a millisecond per stream.
        match raw.next(Duration::from_millis(1)).await {
            Next::Frame(frame) if frame.kind == GOAWAY => {
                goaway.get_or_insert(frame.error_code());
            }
            Next::Closed => {
                closed = true;
                break;
            }
            _ => {}
        }
    }
    while !closed {
        match raw.next(BOUND_RAW).await {
            Next::Frame(frame) if frame.kind == GOAWAY => {
                goaway.get_or_insert(frame.error_code());
            }
            Next::Frame(_) => {}
            Next::Closed => closed = true,
            Next::TimedOut => break,
        }
    }
    let hits = origin.hits.load(Ordering::SeqCst);
    eprintln!("sent {sent}, goaway {goaway:?}, closed {closed}, origin hits {hits}");
    assert!(closed, "still open after {sent} streams");
    assert!(goaway.is_none_or(|code| code == NO_ERROR), "{goaway:?}");
    assert!(hits < 400, "{hits} of {sent} streams reached the origin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_flood_is_cut_off_and_others_are_served() {
    // 100 MB of header block if it were all taken.
    const FRAMES: usize = 100_000;
    if !zipwire_testkit::alloc::alone(
        "http2_raw::a_continuation_flood_is_cut_off_and_others_are_served",
    ) {
        return;
    }
    let outcome = under_attack(
        |addr| {
            tokio::spawn(async move {
                let raw = RawH2::connect(addr).await;
                let start = get_block(&addr.to_string(), "/page.html");
                // One header of ~1 KB per frame: a literal with a new name.
                let mut field = vec![0x00];
                string(&mut field, b"x-flood");
                let value = vec![b'a'; 1_000];
                field.push(0x7f);
                // Length 1000 in HPACK's 7-bit prefix integer: 127 + 873.
                field.extend([0xe9, 0x06]);
                field.extend(&value);
                let frames = std::iter::once(Frame::encode(HEADERS, END_STREAM, 1, &start))
                    .chain((0..FRAMES).map(move |_| Frame::encode(CONTINUATION, 0, 1, &field)));
                flood(raw, frames).await
            })
        },
        2 * 1024,
    )
    .await;
    assert!(outcome.closed, "{outcome:?}");
    assert!(
        outcome.goaway.is_none_or(|code| code == ENHANCE_YOUR_CALM),
        "{outcome:?}"
    );
    assert!(
        outcome.sent < FRAMES,
        "all {FRAMES} frames were taken: {outcome:?}"
    );
}
