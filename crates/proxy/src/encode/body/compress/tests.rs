//! Unit tests of [`CompressBody`]: call sizes, flushing, errors, trailers.

use std::convert::Infallible;
use std::error::Error as StdError;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use zipwire_codec::{DecodeError, Decoder, Encoder, Format, Level, Limits};

use super::*;
use crate::encode::body::{BodyError, BodyMeter, FlushPolicy};
use crate::test_bodies::{channel, futures_iter, text, Announced};

fn compress_body<B: Body>(inner: B, policy: FlushPolicy) -> (CompressBody<B>, Arc<BodyMeter>) {
    let meter = Arc::new(BodyMeter::default());
    let encoder = Encoder::new(Format::Gzip, Level::FASTEST).expect("level 1");
    (
        CompressBody::new(inner, encoder, policy, meter.clone()),
        meter,
    )
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    zipwire_codec::decompress(Format::Gzip, data, Limits::default()).expect("valid gzip")
}

/// The flush policy of these tests: 64 KB calls, the given delay.
fn policy(delay: Duration) -> FlushPolicy {
    FlushPolicy {
        coalesce: 64 * 1024,
        delay,
    }
}

/// Reads a compressing body to its end: the bytes sent and the number of data frames.
async fn drain<B>(body: CompressBody<B>) -> (Vec<u8>, usize)
where
    B: Body + Unpin,
    B::Data: bytes::Buf + Unpin,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    let mut body = Box::pin(body);
    let (mut wire, mut frames) = (Vec::new(), 0);
    while let Some(frame) = body.frame().await {
        wire.extend_from_slice(&frame.expect("no error").into_data().expect("data"));
        frames += 1;
    }
    (wire, frames)
}

#[tokio::test]
async fn small_frames_are_coalesced_into_few_calls() {
    let data = text(300_000);
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = data
        .chunks(1_000)
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    let upstream = http_body_util::StreamBody::new(futures_iter(frames));
    let (body, meter) = compress_body(upstream, policy(Duration::from_secs(1)));
    let (wire, frames_out) = drain(body).await;
    assert_eq!(gunzip(&wire), data);
    // 300 frames in, 64 KB calls: 4 full calls and the final one.
    assert_eq!(frames_out, 5);
    assert_eq!(meter.bytes_in.load(Ordering::Relaxed), 300_000);
    assert_eq!(meter.bytes_out.load(Ordering::Relaxed), wire.len() as u64);
}

/// A body that arrives in `frames` and says how much is left when `known`.
struct Frames {
    frames: std::collections::VecDeque<Bytes>,
    known: bool,
}

impl Frames {
    fn new(data: &[u8], frame: usize, known: bool) -> Frames {
        let frames = data.chunks(frame).map(Bytes::copy_from_slice).collect();
        Frames { frames, known }
    }
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.frames.pop_front().map(|data| Ok(Frame::data(data))))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        if self.known {
            http_body::SizeHint::with_exact(self.frames.iter().map(|b| b.len() as u64).sum())
        } else {
            http_body::SizeHint::default()
        }
    }
}

/// The input of each encoder call `body` makes, read back from the frames it sends:
/// each call ends on a sync flush, so each frame decodes on its own after the ones before.
async fn call_sizes(body: CompressBody<Frames>) -> (Vec<u8>, Vec<usize>) {
    let mut body = Box::pin(body);
    let (mut inflate, mut plain, mut sizes) = (Decoder::new(Format::Gzip), Vec::new(), Vec::new());
    while let Some(frame) = body.frame().await {
        let data = frame.expect("no error").into_data().expect("data");
        let before = plain.len();
        inflate.decode_to_vec(&data, &mut plain).expect("decodes");
        sizes.push(plain.len() - before);
    }
    inflate.finish().expect("complete stream");
    (plain, sizes)
}

#[tokio::test]
async fn a_known_length_body_is_cut_into_equal_calls_of_at_most_coalesce() {
    const K: usize = 64 * 1024;
    for (len, frame, calls) in [
        (K, 1_000, vec![K]),
        // The bench page: two calls of 38 KB, not 64 KB and 13 KB.
        (76_799, 16_384, vec![38_400, 38_399]),
        (K + 1, 100_000, vec![32_769, 32_768]),
        (200_000, 7_000, vec![50_000; 4]),
        (1, 1_000, vec![1]),
    ] {
        let data = text(len);
        let (body, meter) = compress_body(
            Frames::new(&data, frame, true),
            policy(Duration::from_secs(1)),
        );
        let (plain, sizes) = call_sizes(body).await;
        assert_eq!(plain, data, "{len}");
        assert_eq!(sizes, calls, "{len} in frames of {frame}");
        assert_eq!(meter.bytes_in.load(Ordering::Relaxed), len as u64);
    }
}

#[tokio::test]
async fn a_body_of_unknown_length_is_cut_every_coalesce_bytes() {
    let data = text(150_000);
    let (body, _) = compress_body(
        Frames::new(&data, 50_000, false),
        policy(Duration::from_secs(1)),
    );
    let (plain, sizes) = call_sizes(body).await;
    assert_eq!(plain, data);
    assert_eq!(sizes, [65_536, 65_536, 150_000 - 2 * 65_536]);
}

#[tokio::test]
async fn an_unknown_length_input_buffer_grows_with_what_arrives_and_never_past_one_call() {
    let (tx, upstream) = channel();
    let (body, _) = compress_body(upstream, policy(Duration::from_secs(60)));
    let mut body = Box::pin(body);
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    let mut most = 0;
    for (i, chunk) in text(200_000).chunks(1_000).enumerate() {
        tx.send(Ok(Frame::data(Bytes::copy_from_slice(chunk))))
            .await
            .expect("open");
        let _ = body.as_mut().poll_frame(&mut cx);
        let capacity = body.pending.capacity();
        most = most.max(capacity);
        if i == 4 {
            // 5 KB arrived: one growth step, not a whole call's buffer.
            assert_eq!(capacity, GROW_STEP);
        }
    }
    assert_eq!(most, 64 * 1024);
}

#[tokio::test]
async fn a_known_length_input_buffer_is_one_call_from_the_first_frame() {
    let (tx, inner) = channel();
    let upstream = Announced::new(inner, 76_799);
    let (body, _) = compress_body(upstream, policy(Duration::from_secs(60)));
    let mut body = Box::pin(body);
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    tx.send(Ok(Frame::data(Bytes::from(text(16_384)))))
        .await
        .expect("open");
    assert!(body.as_mut().poll_frame(&mut cx).is_pending());
    // Two calls of 38,400 and 38,399 bytes: the first call's buffer, whole, at once.
    assert_eq!(body.pending.capacity(), 38_400);
}

#[tokio::test(start_paused = true)]
async fn a_pausing_upstream_is_flushed_after_the_delay() {
    let (tx, upstream) = channel();
    let (body, _) = compress_body(upstream, policy(Duration::from_millis(20)));
    let mut body = Box::pin(body);
    tx.send(Ok(Frame::data(Bytes::from_static(b"event: one\n\n"))))
        .await
        .expect("open");
    let started = tokio::time::Instant::now();
    let first = body
        .frame()
        .await
        .expect("a frame")
        .expect("no error")
        .into_data()
        .expect("data");
    assert_eq!(started.elapsed(), Duration::from_millis(20));
    // What was sent so far decodes on its own: the call ended with a sync flush.
    let mut inflate = Decoder::new(Format::Gzip);
    let mut plain = Vec::new();
    inflate.decode_to_vec(&first, &mut plain).expect("decodes");
    assert_eq!(plain, b"event: one\n\n");
    drop(tx);
    let rest = body.collect().await.expect("no error").to_bytes();
    inflate.decode_to_vec(&rest, &mut plain).expect("decodes");
    inflate.finish().expect("complete stream");
}

#[tokio::test(start_paused = true)]
async fn a_pause_in_a_body_of_known_length_does_not_cut_the_call() {
    let (tx, inner) = channel();
    let upstream = Announced::new(inner, 20);
    let (body, _) = compress_body(upstream, policy(Duration::from_millis(20)));
    let mut body = Box::pin(body);
    tx.send(Ok(Frame::data(Bytes::from_static(b"0123456789"))))
        .await
        .expect("open");
    let waited = tokio::time::timeout(Duration::from_secs(5), body.frame()).await;
    assert!(waited.is_err(), "flushed after a pause");
    tx.send(Ok(Frame::data(Bytes::from_static(b"abcdefghij"))))
        .await
        .expect("open");
    drop(tx);
    let mut frames = Vec::new();
    while let Some(frame) = body.frame().await {
        frames.push(frame.expect("no error").into_data().expect("data"));
    }
    assert_eq!(frames.len(), 1, "one call for the whole body");
    assert_eq!(gunzip(&frames.concat()), b"0123456789abcdefghij");
}

#[tokio::test]
async fn zero_delay_flushes_as_soon_as_the_upstream_pauses() {
    let (tx, upstream) = channel();
    let (body, _) = compress_body(upstream, policy(Duration::ZERO));
    let mut body = Box::pin(body);
    tx.send(Ok(Frame::data(Bytes::from_static(b"data: 1\n\n"))))
        .await
        .expect("open");
    let first = body
        .frame()
        .await
        .expect("a frame")
        .expect("no error")
        .into_data()
        .expect("data");
    let mut plain = Vec::new();
    Decoder::new(Format::Gzip)
        .decode_to_vec(&first, &mut plain)
        .expect("decodes");
    assert_eq!(plain, b"data: 1\n\n");
}

#[tokio::test]
async fn an_upstream_error_is_an_error_not_a_clean_end() {
    let (tx, upstream) = channel();
    let (body, _) = compress_body(upstream, FlushPolicy::default());
    let mut body = Box::pin(body);
    tx.send(Ok(Frame::data(Bytes::from(text(100_000)))))
        .await
        .expect("open");
    tx.send(Err(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "reset",
    )))
    .await
    .expect("open");
    let mut wire = Vec::new();
    let mut failed = false;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => wire.extend_from_slice(&frame.into_data().expect("data")),
            Err(BodyError::Upstream(_)) => failed = true,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(failed);
    // What reached the client is a valid prefix but never a complete gzip stream.
    let mut decoder = Decoder::new(Format::Gzip);
    decoder
        .decode_to_vec(&wire, &mut Vec::new())
        .expect("valid prefix");
    assert_eq!(decoder.finish(), Err(DecodeError::Truncated));
}

#[tokio::test]
async fn step_down_switches_running_streams_to_stored_blocks() {
    let data = text(200_000);
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = data
        .chunks(50_000)
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    let upstream = http_body_util::StreamBody::new(futures_iter(frames));
    let flag = Arc::new(AtomicBool::new(true));
    let (body, _) = compress_body(
        upstream,
        FlushPolicy {
            coalesce: 50_000,
            delay: Duration::from_secs(1),
        },
    );
    let wire = body
        .with_step_down(flag)
        .collect()
        .await
        .expect("no error")
        .to_bytes();
    assert!(wire.len() > data.len(), "stored, not compressed");
    assert_eq!(gunzip(&wire), data);
}

/// The budget flips while a body is half sent: the calls made before go out compressed, the
/// rest of that body as stored blocks, at a stateless and at a stateful level alike, and the
/// whole still decodes.
#[tokio::test]
async fn step_down_mid_body_stores_the_rest_of_a_running_stream() {
    const CALL: usize = 50_000;
    let data = text(4 * CALL);
    for level in [Level::FAST, Level::DEFAULT] {
        let (tx, upstream) = channel();
        let flag = Arc::new(AtomicBool::new(false));
        let policy = FlushPolicy {
            coalesce: CALL,
            delay: Duration::from_secs(10),
        };
        let encoder = BodyEncoder::new(Format::Gzip, level);
        let meter = Arc::new(BodyMeter::default());
        let mut body = Box::pin(
            CompressBody::new(upstream, encoder, policy, meter.clone())
                .with_step_down(flag.clone()),
        );
        let mut sizes = Vec::new();
        for (i, chunk) in data.chunks(CALL).enumerate() {
            if i == 2 {
                flag.store(true, Ordering::Relaxed);
            }
            tx.send(Ok(Frame::data(Bytes::copy_from_slice(chunk))))
                .await
                .expect("body alive");
            if i == 3 {
                drop(tx);
                break;
            }
            let frame = body.frame().await.expect("a frame").expect("no error");
            sizes.push(frame.into_data().expect("data"));
        }
        while let Some(frame) = body.frame().await {
            sizes.push(frame.expect("no error").into_data().expect("data"));
        }
        let lens: Vec<usize> = sizes.iter().map(Bytes::len).collect();
        assert!(
            lens[0] * 4 < CALL && lens[1] * 4 < CALL,
            "{level:?}: compressed before the flip: {lens:?}"
        );
        let after: usize = lens[2..].iter().sum();
        assert!(
            after > 2 * CALL,
            "{level:?}: stored after the flip: {lens:?}"
        );
        let wire: Vec<u8> = sizes.concat();
        assert_eq!(gunzip(&wire), data, "{level:?}");
        // The stored calls are not compression work: the rate budget, which reads
        // `worked_in`, must be able to open again while such a stream runs on.
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        assert_eq!(read(&meter.bytes_in), data.len() as u64, "{level:?}");
        assert_eq!(read(&meter.worked_in), 2 * CALL as u64, "{level:?}");
    }
}

#[tokio::test]
async fn stateful_levels_stream_through_the_same_body() {
    let data = text(200_000);
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = data
        .chunks(10_000)
        .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
        .collect();
    let upstream = http_body_util::StreamBody::new(futures_iter(frames));
    let encoder = BodyEncoder::new(Format::Zlib, Level::DEFAULT);
    // The stateful encoder holds zlib-rs's state; the stateless one none.
    assert!(encoder.as_encode().memory() > 0);
    let policy = FlushPolicy {
        coalesce: 16 * 1024,
        delay: Duration::from_secs(1),
    };
    let body = CompressBody::new(upstream, encoder, policy, Arc::new(BodyMeter::default()));
    let wire = body.collect().await.expect("no error").to_bytes();
    let plain =
        zipwire_codec::decompress(Format::Zlib, &wire, Limits::default()).expect("valid zlib");
    assert_eq!(plain, data);
    let stateless = BodyEncoder::new(Format::Gzip, Level::MAX_STATELESS);
    assert_eq!(stateless.as_encode().memory(), 0);
}

#[tokio::test]
async fn trailers_follow_the_final_block() {
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", http::HeaderValue::from_static("abc"));
    let frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![
        Ok(Frame::data(Bytes::from_static(b"hello"))),
        Ok(Frame::trailers(trailers.clone())),
    ];
    let upstream = http_body_util::StreamBody::new(futures_iter(frames));
    let (body, _) = compress_body(upstream, FlushPolicy::default());
    let collected = body.collect().await.expect("no error");
    assert_eq!(collected.trailers(), Some(&trailers));
    assert_eq!(gunzip(&collected.to_bytes()), b"hello");
}

#[tokio::test]
async fn digest_trailers_are_dropped_from_a_compressed_body() {
    let mut trailers = HeaderMap::new();
    trailers.insert(
        "content-digest",
        http::HeaderValue::from_static("sha-256=:x:"),
    );
    trailers.insert("content-md5", http::HeaderValue::from_static("y"));
    trailers.insert("x-checksum", http::HeaderValue::from_static("abc"));
    let only_digests = {
        let mut only = trailers.clone();
        only.remove("x-checksum");
        only
    };
    for (sent, received) in [
        (
            trailers,
            Some(HeaderMap::from_iter([(
                http::HeaderName::from_static("x-checksum"),
                http::HeaderValue::from_static("abc"),
            )])),
        ),
        // Nothing left: no trailer section at all.
        (only_digests, None),
    ] {
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![
            Ok(Frame::data(Bytes::from_static(b"hello"))),
            Ok(Frame::trailers(sent)),
        ];
        let upstream = http_body_util::StreamBody::new(futures_iter(frames));
        let (body, _) = compress_body(upstream, FlushPolicy::default());
        let collected = body.collect().await.expect("no error");
        assert_eq!(collected.trailers(), received.as_ref());
        assert_eq!(gunzip(&collected.to_bytes()), b"hello");
    }
}

#[tokio::test]
async fn the_final_block_ends_the_body_unless_trailers_follow() {
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", http::HeaderValue::from_static("abc"));
    for with_trailers in [false, true] {
        let mut frames: Vec<Result<Frame<Bytes>, Infallible>> =
            vec![Ok(Frame::data(Bytes::from_static(b"hello")))];
        if with_trailers {
            frames.push(Ok(Frame::trailers(trailers.clone())));
        }
        let upstream = http_body_util::StreamBody::new(futures_iter(frames));
        let (body, _) = compress_body(upstream, FlushPolicy::default());
        let mut body = Box::pin(body);
        assert!(!body.is_end_stream());
        let last = body.frame().await.expect("a frame").expect("no error");
        assert!(last.is_data());
        // Without trailers the connection may end the body with this frame.
        assert_eq!(body.is_end_stream(), !with_trailers);
        if with_trailers {
            let next = body.frame().await.expect("a frame").expect("no error");
            assert!(next.is_trailers());
            assert!(body.is_end_stream());
        }
        assert!(body.frame().await.is_none());
    }
}

/// zstd and brotli refer back across calls: a body of known length up to two calls is one
/// call (its state lives for that call only), a longer one is cut every `coalesce` bytes, and
/// either decodes. gzip's stateless calls stay equal halves.
#[tokio::test]
async fn a_windowed_coding_gets_a_known_length_body_of_two_calls_in_one() {
    use zipwire_codings::{BrotliEncoder, BrotliLevel, ZstdEncoder, ZstdLevel};
    const K: usize = 64 * 1024;
    let make = |coding: &str| -> BodyEncoder {
        match coding {
            "zstd" => ZstdEncoder::new(ZstdLevel::DEFAULT, 17).into(),
            "br" => BrotliEncoder::new(BrotliLevel::DEFAULT, 17).into(),
            _ => BodyEncoder::new(Format::Gzip, Level::FAST),
        }
    };
    for (coding, len, call) in [
        ("zstd", 77_000, 77_000),
        ("br", 77_000, 77_000),
        ("gzip", 77_000, 38_500),
        ("zstd", 200_000, K),
        ("br", 200_000, K),
    ] {
        let data = text(len);
        let upstream = Frames::new(&data, 10_000, true);
        let meter = Arc::new(BodyMeter::default());
        let body = CompressBody::new(
            upstream,
            make(coding),
            policy(Duration::from_secs(1)),
            meter,
        );
        let rest = (len - 10_000) as u64;
        assert_eq!(
            body.call_size(10_000, Some(rest)),
            call,
            "{coding}, {len} bytes"
        );
        let (wire, _) = drain(body).await;
        let plain = match coding {
            "zstd" => ::zstd::stream::decode_all(&wire[..]).expect("valid zstd"),
            "br" => {
                let mut plain = Vec::new();
                let mut decoder = ::brotli::Decompressor::new(&wire[..], 4096);
                std::io::Read::read_to_end(&mut decoder, &mut plain).expect("valid brotli");
                plain
            }
            _ => gunzip(&wire),
        };
        assert_eq!(plain, data, "{coding}, {len} bytes");
    }
}

/// A zstd or brotli encoder keeps full calls of a stream back for better matches: when the
/// upstream then pauses with nothing new gathered, what it holds is still flushed after the
/// delay, and decodes.
#[tokio::test(start_paused = true)]
async fn a_pause_flushes_what_a_windowed_encoder_held_back() {
    use zipwire_codings::{BrotliEncoder, BrotliLevel, ZstdEncoder, ZstdLevel};
    let sent = text(4_000);
    for zstd in [true, false] {
        let encoder: BodyEncoder = if zstd {
            ZstdEncoder::new(ZstdLevel::DEFAULT, 19).into()
        } else {
            BrotliEncoder::new(BrotliLevel::DEFAULT, 19).into()
        };
        let (tx, upstream) = channel();
        let policy = FlushPolicy {
            coalesce: 1_000,
            delay: Duration::from_millis(20),
        };
        let meter = Arc::new(BodyMeter::default());
        let mut body = Box::pin(CompressBody::new(upstream, encoder, policy, meter));
        // Four full calls, then the upstream pauses.
        tx.send(Ok(Frame::data(Bytes::from(sent.clone()))))
            .await
            .expect("open");
        let mut wire = Vec::new();
        let started = tokio::time::Instant::now();
        while decoded_prefix(zstd, &wire).len() < sent.len() {
            let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
                .await
                .expect("flushed within the delay")
                .expect("a frame")
                .expect("no error");
            wire.extend_from_slice(&frame.into_data().expect("data"));
        }
        assert!(started.elapsed() < Duration::from_secs(1), "zstd {zstd}");
        assert_eq!(decoded_prefix(zstd, &wire), sent, "zstd {zstd}");
        drop(tx);
        while let Some(frame) = body.frame().await {
            wire.extend_from_slice(&frame.expect("no error").into_data().expect("data"));
        }
        assert_eq!(
            decoded_prefix(zstd, &wire),
            sent,
            "zstd {zstd}: whole stream"
        );
    }
}

/// What a streaming zstd or brotli decoder gives for the bytes received so far.
fn decoded_prefix(zstd: bool, wire: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut reader: Box<dyn Read + '_> = if zstd {
        Box::new(::zstd::stream::read::Decoder::new(wire).expect("decoder"))
    } else {
        Box::new(::brotli::Decompressor::new(wire, 4096))
    };
    let mut plain = Vec::new();
    let mut buf = [0u8; 1024];
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        plain.extend_from_slice(&buf[..n]);
    }
    plain
}

/// `bytes_saved` is a Prometheus counter: an incompressible body, which comes out a little
/// larger than it went in, must not take back what a compressible one saved (as it would if
/// the figure were the totals' input minus output).
#[tokio::test]
async fn what_was_saved_is_never_taken_back() {
    let meter = Arc::new(BodyMeter::default());
    let mut noise = vec![0u8; 200_000];
    let mut state = 0x9e37_79b9_u32;
    for byte in &mut noise {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        *byte = state as u8;
    }
    let mut saved = Vec::new();
    for data in [text(50_000), noise.clone(), noise] {
        let upstream = http_body_util::Full::new(Bytes::from(data.clone()));
        let encoder = Encoder::new(Format::Gzip, Level::FASTEST).expect("level 1");
        let one = Arc::new(BodyMeter::with_totals(meter.clone()));
        let body = CompressBody::new(upstream, encoder, policy(Duration::from_secs(1)), one);
        let (wire, _) = drain(body).await;
        assert_eq!(gunzip(&wire), data);
        saved.push(meter.saved.load(Ordering::Relaxed));
    }
    let (total_in, total_out) = (
        meter.bytes_in.load(Ordering::Relaxed),
        meter.bytes_out.load(Ordering::Relaxed),
    );
    assert!(saved[0] > 30_000, "{saved:?}");
    assert_eq!(saved[1], saved[0], "{saved:?}");
    assert_eq!(saved[2], saved[0], "{saved:?}");
    // The old figure fell below what the text alone saved.
    assert!(total_in.saturating_sub(total_out) < saved[0]);
}

/// A zstd stream that steps down frees its window: its memory-gate permit shrinks to the
/// buffers of a call at once, not when the body ends, so new responses can compress again.
#[tokio::test]
async fn a_stepped_down_window_gives_its_memory_back_to_the_gate() {
    use zipwire_adapt::MemoryGate;
    use zipwire_codings::{Encode, ZstdEncoder, ZstdLevel};
    const CALL: usize = 50_000;
    let encoder = ZstdEncoder::new(ZstdLevel::DEFAULT, 20);
    let state = encoder.memory().max(1 << 20) as u64;
    let gate = MemoryGate::new(Some(64 << 20));
    let permit = gate
        .try_acquire(2 * CALL as u64 + state)
        .expect("room in the gate");
    let (tx, upstream) = channel();
    let flag = Arc::new(AtomicBool::new(false));
    let policy = FlushPolicy {
        coalesce: CALL,
        delay: Duration::from_millis(50),
    };
    let mut body = Box::pin(
        CompressBody::new(upstream, encoder, policy, Arc::new(BodyMeter::default()))
            .with_step_down(flag.clone())
            .with_permit(permit),
    );
    let data = text(3 * CALL);
    let mut chunks = data.chunks(CALL);
    let frame = |chunk: &[u8]| Ok(Frame::data(Bytes::copy_from_slice(chunk)));
    let first = chunks.next().expect("a call");
    tx.send(frame(first)).await.expect("body alive");
    body.frame().await.expect("a frame").expect("no error");
    let before = gate.in_use();
    assert_eq!(
        before,
        2 * CALL as u64 + state,
        "the whole permit while compressing"
    );
    flag.store(true, Ordering::Relaxed);
    let second = chunks.next().expect("a call");
    tx.send(frame(second)).await.expect("body alive");
    body.frame().await.expect("a frame").expect("no error");
    assert_eq!(gate.in_use(), 2 * CALL as u64, "the window went back");
    drop(body);
    assert_eq!(gate.in_use(), 0, "the rest goes with the body");
}
