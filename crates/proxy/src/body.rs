//! Streaming bodies: compress an upstream body as it arrives, or decompress a gzip one for a
//! client that does not accept gzip (nginx's `gunzip`).
//!
//! Both wrap any [`http_body::Body`] and are independent of the HTTP version. Memory per stream
//! is bounded: [`CompressBody`] holds at most [`FlushPolicy::coalesce`] bytes of input plus one
//! upstream frame, [`DecompressBody`] one upstream frame and one output chunk; the next frame is
//! only pulled when the connection has taken the previous one, so a slow client slows the
//! upstream read instead of filling memory.
//!
//! An upstream error mid-body is passed on as an error, never as a clean end: the server then
//! aborts the client connection, and the client never receives a complete-looking gzip stream
//! for a body that was cut short.

use std::cell::RefCell;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};
use tokio::time::Sleep;
use zipwire_codec::{
    DecodeError, Decoder, Encoder, Format, Level, Limits, Scratch, StatefulEncoder,
};

thread_local! {
    /// One encoder scratch per runtime thread, shared by every stream that thread polls.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// How a [`CompressBody`] groups upstream data into encoder calls.
///
/// The stateless encoder compresses each call on its own, so bigger calls compress better:
/// HAProxy compresses each 16 kB buffer alone; gathering 64 kB gives the encoder four times the
/// context. The delay keeps streaming responses live when the upstream pauses.
///
/// The delay applies to bodies of unknown length (chunked or close-delimited: streams, events,
/// long polls). A body whose length the upstream announced is gathered call by call whatever
/// the pauses: under load the proxy's own run queue makes such pauses (a task waits its turn to
/// read data already in the socket), and flushing on them cut the bench page into extra calls
/// (ratio 2.64-2.69 against 2.72-2.74). nginx's gzip, by default, never flushes on a pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushPolicy {
    /// Input bytes gathered before an encoder call is made.
    pub coalesce: usize,
    /// Longest time gathered input of a body of unknown length waits for more while the
    /// upstream has nothing ready. Zero compresses whatever is there as soon as the upstream
    /// pauses (server-sent events), whatever the body's length.
    pub delay: Duration,
}

impl Default for FlushPolicy {
    fn default() -> FlushPolicy {
        FlushPolicy {
            coalesce: 64 * 1024,
            delay: Duration::from_millis(20),
        }
    }
}

/// Counters a compressing or decompressing body adds to as it runs, call by call.
#[derive(Debug, Default)]
pub struct BodyMeter {
    /// Bytes read from the upstream body.
    pub bytes_in: AtomicU64,
    /// Bytes handed to the client.
    pub bytes_out: AtomicU64,
    /// Time spent inside encoder or decoder calls, in nanoseconds.
    pub busy_nanos: AtomicU64,
    /// Server-wide totals that every call is added to as well, so that a budget sees a long
    /// stream's work while it runs, not when it ends.
    totals: Option<Arc<BodyMeter>>,
}

impl BodyMeter {
    /// A meter for one stream that also adds every call to `totals`.
    pub fn with_totals(totals: Arc<BodyMeter>) -> BodyMeter {
        BodyMeter {
            totals: Some(totals),
            ..BodyMeter::default()
        }
    }

    fn record(&self, bytes_in: usize, bytes_out: usize, busy: Duration) {
        let busy = busy.as_nanos().min(u128::from(u64::MAX)) as u64;
        for meter in std::iter::once(self).chain(self.totals.as_deref()) {
            meter.bytes_in.fetch_add(bytes_in as u64, Ordering::Relaxed);
            meter
                .bytes_out
                .fetch_add(bytes_out as u64, Ordering::Relaxed);
            meter.busy_nanos.fetch_add(busy, Ordering::Relaxed);
        }
    }
}

/// The encoder a [`CompressBody`] drives: the stateless one for levels 1-3, zlib-rs with a
/// 32 KB window for levels 4-9.
pub enum BodyEncoder {
    /// Levels 1-3: a few bytes of state per stream; each call is compressed on its own, so
    /// [`FlushPolicy::coalesce`] sets the ratio. Follows the step-down switch.
    Stateless(Encoder),
    /// Levels 4-9: about 256 KB per stream; later calls refer back to earlier data. Keeps its
    /// level when the step-down switch is set (zlib-rs has no stored-only mode here).
    Stateful(StatefulEncoder),
}

impl BodyEncoder {
    /// A fresh stream of `format` at `level`, stateless when the level allows it.
    pub fn new(format: Format, level: Level) -> BodyEncoder {
        match Encoder::new(format, level) {
            Ok(encoder) => BodyEncoder::Stateless(encoder),
            Err(_) => BodyEncoder::Stateful(StatefulEncoder::new(format, level)),
        }
    }
}

impl From<Encoder> for BodyEncoder {
    fn from(encoder: Encoder) -> BodyEncoder {
        BodyEncoder::Stateless(encoder)
    }
}

impl From<StatefulEncoder> for BodyEncoder {
    fn from(encoder: StatefulEncoder) -> BodyEncoder {
        BodyEncoder::Stateful(encoder)
    }
}

impl fmt::Debug for BodyEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyEncoder::Stateless(encoder) => f.debug_tuple("Stateless").field(encoder).finish(),
            BodyEncoder::Stateful(encoder) => f.debug_tuple("Stateful").field(encoder).finish(),
        }
    }
}

/// Why a streaming body stopped with an error.
#[non_exhaustive]
#[derive(Debug)]
pub enum BodyError {
    /// The upstream body failed (connection reset, timeout): the response is incomplete.
    Upstream(Box<dyn StdError + Send + Sync>),
    /// The upstream's gzip body does not decode.
    Decode(DecodeError),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::Upstream(e) => write!(f, "upstream body failed: {e}"),
            BodyError::Decode(_) => f.write_str("upstream gzip body does not decode"),
        }
    }
}

impl StdError for BodyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            BodyError::Upstream(e) => Some(e.as_ref()),
            BodyError::Decode(e) => Some(e),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading upstream, compressing.
    Streaming,
    /// The final block went out; trailers, if any, come next.
    Trailers,
    /// Nothing more to send.
    Done,
}

impl State {
    /// Whether the body has nothing more to yield. With no trailers to come, the final
    /// block's frame ends it, so the connection can write the last chunk and the chunked
    /// terminator together.
    fn is_end(&self, trailers: &Option<HeaderMap>) -> bool {
        match self {
            State::Streaming => false,
            State::Trailers => trailers.is_none(),
            State::Done => true,
        }
    }

    /// Past the last block: what `poll_frame` returns next, the trailers if any and then the
    /// end. `None` while streaming.
    fn end(&mut self, trailers: &mut Option<HeaderMap>) -> Option<Option<Frame<Bytes>>> {
        match *self {
            State::Streaming => None,
            State::Trailers => {
                *self = State::Done;
                Some(trailers.take().map(Frame::trailers))
            }
            State::Done => Some(None),
        }
    }
}

/// Smallest growth of the input buffer, so a body arriving in small frames is not copied on
/// every frame.
const GROW_STEP: usize = 16 * 1024;

/// A body that compresses another body as it streams.
pub struct CompressBody<B: Body> {
    inner: B,
    encoder: BodyEncoder,
    pending: Vec<u8>,
    /// Input bytes of the call being gathered (see [`Self::call_size`]).
    call: usize,
    /// The part of an upstream frame past the end of the last call, taken before anything new.
    carry: Option<B::Data>,
    policy: FlushPolicy,
    timer: Option<Pin<Box<Sleep>>>,
    trailers: Option<HeaderMap>,
    state: State,
    store_only: Option<Arc<AtomicBool>>,
    meter: Arc<BodyMeter>,
}

impl<B: Body> CompressBody<B> {
    /// Wraps `inner`, compressing with `encoder` (a fresh stream: an [`Encoder`] of levels
    /// 1-3, a [`StatefulEncoder`], or a [`BodyEncoder`]).
    pub fn new(
        inner: B,
        encoder: impl Into<BodyEncoder>,
        policy: FlushPolicy,
        meter: Arc<BodyMeter>,
    ) -> CompressBody<B> {
        CompressBody {
            inner,
            encoder: encoder.into(),
            pending: Vec::new(),
            call: policy.coalesce,
            carry: None,
            policy,
            timer: None,
            trailers: None,
            state: State::Streaming,
            store_only: None,
            meter,
        }
    }

    /// Follows a budget's step-down switch: while it is set, calls of a stateless encoder write
    /// stored blocks.
    pub fn with_step_down(mut self, store_only: Arc<AtomicBool>) -> CompressBody<B> {
        self.store_only = Some(store_only);
        self
    }

    /// Whether calls are gathered whole whatever the pauses: the upstream announced the body's
    /// length and the flush delay is not zero (see [`FlushPolicy`]). Otherwise gathered input
    /// is compressed when the upstream pauses, at once or after the delay.
    pub fn gathers_whole_calls(&self) -> bool {
        !self.policy.delay.is_zero() && self.inner.size_hint().upper().is_some()
    }

    /// Makes room for `more` bytes of input. A body of known length gets its whole call at
    /// once: its bytes are on their way, and growing in steps would copy the input again at
    /// each step. Otherwise the buffer grows in steps with what arrives and never past the
    /// call, never by doubling: with hundreds of streams waiting on slow upstreams,
    /// half-filled buffers are most of the proxy's memory.
    fn grow_pending(&mut self, more: usize, known_length: bool) {
        let need = self.pending.len() + more;
        if need <= self.pending.capacity() {
            return;
        }
        let step = if known_length {
            self.call
        } else {
            self.pending.capacity() + GROW_STEP
        };
        let target = need.max(step).min(self.call.max(need));
        self.pending.reserve_exact(target - self.pending.len());
    }

    /// Input bytes for the next call, which starts with a frame of `first` bytes after which
    /// the upstream says `rest` more will come, if it knows.
    ///
    /// A body of known length is cut into the fewest calls of at most `coalesce` bytes, all
    /// of the same size: a 77 KB page is two calls of 38 KB rather than 64 KB and 13 KB. The
    /// short tail call would compress poorly on its own; two halves lose 2% of ratio against
    /// one 77 KB call, but compress 12% faster (on the haproxy.org page the encoder finds
    /// fewer, costlier matches in a smaller window) and hold half the memory while gathering.
    /// A body of unknown length is cut every `coalesce` bytes.
    fn call_size(&self, first: usize, rest: Option<u64>) -> usize {
        let coalesce = self.policy.coalesce.max(1);
        match rest {
            Some(rest) => {
                let body = rest.saturating_add(first as u64);
                let calls = body.div_ceil(coalesce as u64).max(1);
                usize::try_from(body.div_ceil(calls)).map_or(coalesce, |call| call.max(1))
            }
            None => coalesce,
        }
    }

    /// The upstream has nothing ready: compress what was gathered at once when the delay is
    /// zero, after `delay` when the body's length is unknown, else wait for the call to fill.
    fn wait_for_more(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if self.pending.is_empty() {
            return Poll::Pending;
        }
        if !self.policy.delay.is_zero() {
            if self.gathers_whole_calls() {
                return Poll::Pending;
            }
            let delay = self.policy.delay;
            let timer = self
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(delay)));
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        Poll::Ready(Some(Ok(Frame::data(self.compress(false)))))
    }

    /// Runs one encoder call over the gathered input.
    fn compress(&mut self, is_final: bool) -> Bytes {
        let started = Instant::now();
        let mut out = Vec::with_capacity(self.pending.len() / 2 + 64);
        // The state machine calls `finish` once, in `State::Streaming`, and nothing after, so
        // neither encoder can report `EncodeError::Finished`.
        let result = match &mut self.encoder {
            BodyEncoder::Stateless(encoder) => {
                if let Some(flag) = &self.store_only {
                    encoder.set_store_only(flag.load(Ordering::Relaxed));
                }
                SCRATCH.with(|scratch| {
                    let mut scratch = scratch.borrow_mut();
                    if is_final {
                        encoder.finish(&mut scratch, &self.pending, &mut out)
                    } else {
                        encoder.encode(&mut scratch, &self.pending, &mut out)
                    }
                })
            }
            BodyEncoder::Stateful(encoder) => {
                if is_final {
                    encoder.finish(&self.pending, &mut out)
                } else {
                    encoder.encode(&self.pending, &mut out)
                }
            }
        };
        debug_assert!(result.is_ok(), "encoder used after finish");
        self.meter
            .record(self.pending.len(), out.len(), started.elapsed());
        if is_final {
            // Nothing more will be gathered: give the buffer back now rather than when the
            // client has read the last frame.
            self.pending = Vec::new();
        } else {
            self.pending.clear();
        }
        self.timer = None;
        // The frame waits in the connection's queue until the client reads it: do not keep the
        // unused half of the estimate with it (shrinking in place costs no copy in practice).
        if out.capacity() - out.len() > 4096 {
            out.shrink_to_fit();
        }
        Bytes::from(out)
    }
}

impl<B> Body for CompressBody<B>
where
    B: Body + Unpin,
    B::Data: bytes::Buf + Unpin,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        loop {
            if let Some(end) = this.state.end(&mut this.trailers) {
                return Poll::Ready(end.map(Ok));
            }
            // What a frame held past the end of the last call comes before anything new.
            let mut data = match this.carry.take() {
                Some(data) => data,
                None => match Pin::new(&mut this.inner).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                        Ok(data) => data,
                        Err(frame) => {
                            if let Ok(trailers) = frame.into_trailers() {
                                this.trailers = Some(trailers);
                            }
                            continue;
                        }
                    },
                    Poll::Ready(Some(Err(e))) => {
                        this.state = State::Done;
                        return Poll::Ready(Some(Err(BodyError::Upstream(e.into()))));
                    }
                    Poll::Ready(None) => {
                        let last = this.compress(true);
                        this.state = State::Trailers;
                        return Poll::Ready(Some(Ok(Frame::data(last))));
                    }
                    Poll::Pending => return this.wait_for_more(cx),
                },
            };
            let rest = this.inner.size_hint().upper();
            let available = bytes::Buf::remaining(&data);
            if this.pending.is_empty() {
                this.call = this.call_size(available, rest);
            }
            let mut take = available.min(this.call - this.pending.len());
            this.grow_pending(take, rest.is_some());
            while take > 0 {
                let chunk = bytes::Buf::chunk(&data);
                let n = chunk.len().min(take);
                this.pending.extend_from_slice(&chunk[..n]);
                bytes::Buf::advance(&mut data, n);
                take -= n;
            }
            let more = bytes::Buf::has_remaining(&data) || rest != Some(0);
            if bytes::Buf::has_remaining(&data) {
                this.carry = Some(data);
            }
            // A full call goes out now, unless it is the body's last: that one waits for the
            // end, so it can be the final block.
            if this.pending.len() >= this.call && more {
                return Poll::Ready(Some(Ok(Frame::data(this.compress(false)))));
            }
        }
    }
    fn is_end_stream(&self) -> bool {
        self.state.is_end(&self.trailers)
    }
}

impl<B: Body> fmt::Debug for CompressBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompressBody")
            .field("state", &self.state)
            .field("pending", &self.pending.len())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// Output produced per decoder step: the most a [`DecompressBody`] holds at once.
const DECODE_CHUNK: usize = 64 * 1024;

/// A body that decodes a gzip upstream body for a client that does not accept gzip.
pub struct DecompressBody<B> {
    inner: B,
    decoder: Decoder,
    input: Bytes,
    upstream_done: bool,
    state: State,
    trailers: Option<HeaderMap>,
    meter: Arc<BodyMeter>,
}

impl<B> DecompressBody<B> {
    /// Wraps `inner`, a gzip body; `limits` caps what one response may decode to.
    pub fn new(inner: B, limits: Limits, meter: Arc<BodyMeter>) -> DecompressBody<B> {
        DecompressBody {
            inner,
            decoder: Decoder::new(Format::Gzip).with_limits(limits),
            input: Bytes::new(),
            upstream_done: false,
            state: State::Streaming,
            trailers: None,
            meter,
        }
    }

    /// Decodes from the buffered input into at most one chunk.
    fn step(&mut self) -> Result<Bytes, DecodeError> {
        let started = Instant::now();
        let mut out = vec![0; DECODE_CHUNK];
        let progress = self.decoder.decode(&self.input, &mut out)?;
        bytes::Buf::advance(&mut self.input, progress.consumed);
        out.truncate(progress.produced);
        if self.decoder.is_done() {
            // Bytes after the gzip stream are ignored, as `gzip -d` does with trailing garbage.
            self.input = Bytes::new();
        }
        self.meter
            .record(progress.consumed, progress.produced, started.elapsed());
        Ok(Bytes::from(out))
    }
}

impl<B> Body for DecompressBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        loop {
            if let Some(end) = this.state.end(&mut this.trailers) {
                return Poll::Ready(end.map(Ok));
            }
            if !this.input.is_empty() {
                match this.step() {
                    Ok(out) if !out.is_empty() => return Poll::Ready(Some(Ok(Frame::data(out)))),
                    Ok(_) => {}
                    Err(e) => {
                        this.state = State::Done;
                        return Poll::Ready(Some(Err(BodyError::Decode(e))));
                    }
                }
                if !this.input.is_empty() && !this.decoder.is_done() {
                    continue;
                }
            }
            if this.upstream_done {
                this.state = State::Trailers;
                if let Err(e) = this.decoder.finish() {
                    this.state = State::Done;
                    return Poll::Ready(Some(Err(BodyError::Decode(e))));
                }
                continue;
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => this.input = data,
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            this.trailers = Some(trailers);
                        }
                    }
                },
                Poll::Ready(Some(Err(e))) => {
                    this.state = State::Done;
                    return Poll::Ready(Some(Err(BodyError::Upstream(e.into()))));
                }
                Poll::Ready(None) => this.upstream_done = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.state.is_end(&self.trailers)
    }
}

impl<B> fmt::Debug for DecompressBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecompressBody")
            .field("state", &self.state)
            .field("buffered", &self.input.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::BodyExt;
    use zipwire_codec::Level;

    use super::*;
    use crate::test_bodies::{channel, ChannelBody};

    fn compress_body<B: Body>(inner: B, policy: FlushPolicy) -> (CompressBody<B>, Arc<BodyMeter>) {
        let meter = Arc::new(BodyMeter::default());
        let encoder = Encoder::new(Format::Gzip, Level::FASTEST).expect("level 1");
        (
            CompressBody::new(inner, encoder, policy, meter.clone()),
            meter,
        )
    }

    fn text(len: usize) -> Vec<u8> {
        b"<li class=\"item\">zipwire compresses streams</li>\n"
            .iter()
            .cycle()
            .take(len)
            .copied()
            .collect()
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
        let (mut inflate, mut plain, mut sizes) =
            (Decoder::new(Format::Gzip), Vec::new(), Vec::new());
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
        let upstream = Announced {
            inner,
            left: 76_799,
        };
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

    /// A body of known length that arrives through a channel.
    struct Announced {
        inner: ChannelBody,
        left: u64,
    }

    impl Body for Announced {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            let polled = Pin::new(&mut self.inner).poll_frame(cx);
            if let Poll::Ready(Some(Ok(frame))) = &polled {
                let n = frame.data_ref().map_or(0, |data| data.len() as u64);
                self.left -= n;
            }
            polled
        }

        fn size_hint(&self) -> http_body::SizeHint {
            http_body::SizeHint::with_exact(self.left)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_in_a_body_of_known_length_does_not_cut_the_call() {
        let (tx, inner) = channel();
        let upstream = Announced { inner, left: 20 };
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

    #[tokio::test]
    async fn stateful_levels_stream_through_the_same_body() {
        let data = text(200_000);
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = data
            .chunks(10_000)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let upstream = http_body_util::StreamBody::new(futures_iter(frames));
        let encoder = BodyEncoder::new(Format::Zlib, Level::DEFAULT);
        assert!(matches!(encoder, BodyEncoder::Stateful(_)));
        let policy = FlushPolicy {
            coalesce: 16 * 1024,
            delay: Duration::from_secs(1),
        };
        let body = CompressBody::new(upstream, encoder, policy, Arc::new(BodyMeter::default()));
        let wire = body.collect().await.expect("no error").to_bytes();
        let plain =
            zipwire_codec::decompress(Format::Zlib, &wire, Limits::default()).expect("valid zlib");
        assert_eq!(plain, data);
        assert!(matches!(
            BodyEncoder::new(Format::Gzip, Level::MAX_STATELESS),
            BodyEncoder::Stateless(_)
        ));
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

    #[tokio::test]
    async fn gzip_upstream_is_decoded_for_clients_without_gzip() {
        let data = text(500_000);
        let gz = zipwire_codec::compress(Format::Gzip, Level::DEFAULT, &data);
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = gz
            .chunks(7_000)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let upstream = http_body_util::StreamBody::new(futures_iter(frames));
        let meter = Arc::new(BodyMeter::default());
        let mut body = Box::pin(DecompressBody::new(upstream, Limits::default(), meter));
        let mut plain = Vec::new();
        while let Some(frame) = body.frame().await {
            let chunk = frame.expect("no error").into_data().expect("data");
            assert!(chunk.len() <= DECODE_CHUNK);
            plain.extend_from_slice(&chunk);
        }
        assert_eq!(plain, data);
    }

    #[tokio::test]
    async fn truncated_or_corrupt_gzip_upstream_is_an_error() {
        let data = text(50_000);
        let gz = zipwire_codec::compress(Format::Gzip, Level::FASTEST, &data);
        let mut corrupt = gz.clone();
        corrupt[gz.len() - 6] ^= 0xff; // inside the CRC/ISIZE trailer
        for (name, bytes) in [
            ("truncated", gz[..gz.len() - 3].to_vec()),
            ("corrupt", corrupt),
        ] {
            let frames: Vec<Result<Frame<Bytes>, Infallible>> =
                vec![Ok(Frame::data(Bytes::from(bytes)))];
            let upstream = http_body_util::StreamBody::new(futures_iter(frames));
            let body =
                DecompressBody::new(upstream, Limits::default(), Arc::new(BodyMeter::default()));
            let result = body.collect().await;
            assert!(matches!(result, Err(BodyError::Decode(_))), "{name}");
        }
    }

    /// A stream over a vector of frames (what `futures::stream::iter` does).
    fn futures_iter<T: Unpin>(items: Vec<T>) -> VecStream<T> {
        VecStream(items.into_iter())
    }

    struct VecStream<T>(std::vec::IntoIter<T>);

    impl<T: Unpin> futures_core::Stream for VecStream<T> {
        type Item = T;

        fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<T>> {
            Poll::Ready(self.0.next())
        }
    }
}
