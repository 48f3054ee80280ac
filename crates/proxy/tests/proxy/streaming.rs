//! Bodies stream through the proxy: large ones are never held whole, pauses reach the client,
//! and an upstream failure is never turned into a clean end.

use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zipwire_codec::{DecodeError, Decoder, Format};

use crate::support::*;

const GZIP: &[(&str, &str)] = &[("accept-encoding", "gzip")];

#[tokio::test]
async fn a_big_streamed_body_is_compressed_in_full() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (head, body) = fetch(&client(), "GET", &proxy.url("/big"), GZIP).await;
    assert_eq!(head.headers["content-encoding"], "gzip");
    let expected = big();
    assert_eq!(gunzip(&body), expected);
    assert_eq!(Proxy::count(&proxy.stats.bytes_in), expected.len() as u64);
}

#[tokio::test]
async fn a_pausing_upstream_reaches_the_client_before_it_resumes() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let started = Instant::now();
    let response = client()
        .request(request("GET", &proxy.url("/pause"), GZIP))
        .await
        .expect("a response");
    assert_eq!(response.headers()["content-encoding"], "gzip");
    let mut body = Gunzipping::new(response.into_body());
    let first = body.at_least(PAUSE_FIRST.len()).await;
    // The flush delay (20 ms) sent the first part while the upstream was still pausing.
    assert!(
        started.elapsed() < PAUSE,
        "first part after {:?}",
        started.elapsed()
    );
    assert_eq!(first, PAUSE_FIRST);
    let plain = body.finish().await;
    assert_eq!(&plain[PAUSE_FIRST.len()..], &html(10_000)[..]);
}

/// A gzip response body, decoded as it arrives.
pub(crate) struct Gunzipping {
    body: hyper::body::Incoming,
    decoder: Decoder,
    plain: Vec<u8>,
}

impl Gunzipping {
    pub(crate) fn new(body: hyper::body::Incoming) -> Gunzipping {
        Gunzipping {
            body,
            decoder: Decoder::new(Format::Gzip),
            plain: Vec::new(),
        }
    }

    /// Reads frames until at least `len` bytes are decoded, and returns what is decoded.
    pub(crate) async fn at_least(&mut self, len: usize) -> &[u8] {
        while self.plain.len() < len {
            let frame = self.body.frame().await.expect("a frame").expect("no error");
            if let Ok(data) = frame.into_data() {
                self.decoder
                    .decode_to_vec(&data, &mut self.plain)
                    .expect("valid gzip");
            }
        }
        &self.plain
    }

    /// Reads the rest, which must end the gzip stream, and returns the whole body decoded.
    pub(crate) async fn finish(mut self) -> Vec<u8> {
        let rest = self.body.collect().await.expect("complete").to_bytes();
        self.decoder
            .decode_to_vec(&rest, &mut self.plain)
            .expect("valid gzip");
        self.decoder.finish().expect("a complete stream");
        self.plain
    }
}

#[tokio::test]
async fn the_head_goes_out_with_the_first_block() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let mut stream = tokio::net::TcpStream::connect(proxy.addr)
        .await
        .expect("connect");
    stream
        .write_all(b"GET /late.html HTTP/1.1\r\nhost: t\r\naccept-encoding: gzip\r\n\r\n")
        .await
        .expect("write");
    let started = Instant::now();
    let mut first = vec![0; 64 * 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut first))
        .await
        .expect("an answer")
        .expect("read");
    // The origin sent its head at once and its body (of known length) after the pause: the
    // proxy's head waited for the compressed body and came in the same read.
    assert!(
        started.elapsed() >= PAUSE / 2,
        "head after {:?}",
        started.elapsed()
    );
    let (head, body) = split_head(&first[..n]);
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(body.len() > 20, "first read: {} body bytes", body.len());
}

#[tokio::test]
async fn a_late_stream_does_not_hold_the_head_past_the_flush_delay() {
    // A flush delay long enough to measure on a loaded machine, well short of the origin's
    // 1.5 s pause before its first byte.
    const DELAY: Duration = Duration::from_millis(300);
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.compression.flush.delay = DELAY;
    })
    .await;
    let started = Instant::now();
    let response = client()
        .request(request("GET", &proxy.url("/late-stream"), GZIP))
        .await
        .expect("a response");
    let head_after = started.elapsed();
    // A body of unknown length holds the head for the flush delay, waiting for a first call
    // to send with it, and not longer: not until the origin's first byte.
    assert!(
        head_after >= DELAY && head_after < DELAY + Duration::from_millis(900),
        "head after {head_after:?}, flush delay {DELAY:?}, origin pause {PAUSE:?}"
    );
    assert_eq!(response.headers()["content-encoding"], "gzip");
    let body = response.into_body().collect().await.expect("complete");
    assert_eq!(gunzip(&body.to_bytes()), html(10_000));
}

#[tokio::test]
async fn a_stalling_upstream_does_not_hold_back_what_was_compressed() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let started = Instant::now();
    let response = client()
        .request(request("GET", &proxy.url("/stall.html"), GZIP))
        .await
        .expect("a response");
    let mut body = Gunzipping::new(response.into_body());
    // The first two of the three 50 KB calls were compressed before the origin stalled:
    // corked or not, they reach the client while it stalls.
    body.at_least(100_000).await;
    assert!(
        started.elapsed() < PAUSE,
        "100 KB after {:?}",
        started.elapsed()
    );
    assert_eq!(body.finish().await, html(150_000));
}

#[tokio::test]
async fn event_stream_events_are_compressed_one_by_one() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let started = Instant::now();
    let response = client()
        .request(request("GET", &proxy.url("/events"), GZIP))
        .await
        .expect("a response");
    assert_eq!(response.headers()["content-encoding"], "gzip");
    let mut body = response.into_body();
    let mut decoder = Decoder::new(Format::Gzip);
    let mut plain = Vec::new();
    while plain.is_empty() {
        let frame = body.frame().await.expect("a frame").expect("no error");
        if let Ok(data) = frame.into_data() {
            decoder
                .decode_to_vec(&data, &mut plain)
                .expect("valid gzip");
        }
    }
    assert!(started.elapsed() < PAUSE);
    assert_eq!(plain, b"data: one\n\n");
    let rest = body.collect().await.expect("complete").to_bytes();
    decoder
        .decode_to_vec(&rest, &mut plain)
        .expect("valid gzip");
    assert_eq!(plain, b"data: one\n\ndata: two\n\n");
}

#[tokio::test]
async fn an_upstream_dying_mid_body_aborts_the_client() {
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let client = client();
    for headers in [GZIP, &[]] {
        let response = client
            .request(request("GET", &proxy.url("/dies"), headers))
            .await
            .expect("a response head");
        let mut body = response.into_body();
        let mut wire = Vec::new();
        let mut failed = false;
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            match body.frame().await {
                Some(Ok(frame)) => wire.extend_from_slice(&frame.into_data().unwrap_or_default()),
                Some(Err(_)) => {
                    failed = true;
                    break;
                }
                None => break,
            }
        }
        assert!(failed, "the client saw a clean end ({headers:?})");
        if !headers.is_empty() {
            // What arrived is a valid prefix, never a complete gzip stream.
            let mut decoder = Decoder::new(Format::Gzip);
            decoder
                .decode_to_vec(&wire, &mut Vec::new())
                .expect("valid prefix");
            assert_eq!(decoder.finish(), Err(DecodeError::Truncated));
        }
    }
    assert_eq!(Proxy::count(&proxy.stats.active_streams), 0);
}

#[tokio::test]
async fn a_silent_upstream_is_cut_after_the_read_timeout() {
    let origin = Origin::start().await;
    // The test proxy's `upstream_response` is 2 s: the longest an upstream may go silent.
    let proxy = Proxy::before(&origin).await;
    let client = client();
    for (headers, status) in [(GZIP, 504), (&[][..], 200)] {
        let started = Instant::now();
        let (head, outcome) = tokio::time::timeout(Duration::from_secs(10), async {
            let response = client
                .request(request("GET", &proxy.url("/hang.html"), headers))
                .await
                .expect("a response head");
            let (head, body) = response.into_parts();
            (head, body.collect().await.map(|body| body.to_bytes()))
        })
        .await
        .expect("an outcome within 10 s");
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(6),
            "cut after {elapsed:?} ({headers:?})"
        );
        // Compressed: the head was waiting for the first call, so the client gets 504.
        // Passed: the head and the first part went out, and the body is cut.
        assert_eq!(head.status, status, "{headers:?}");
        assert_eq!(outcome.is_err(), status == 200, "{headers:?}");
    }
    assert_eq!(Proxy::count(&proxy.stats.active_streams), 0);
}
