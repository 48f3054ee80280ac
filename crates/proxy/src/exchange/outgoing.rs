//! The body the proxy sends to a client, and the access log line written when it ends.
//!
//! Whatever the response filter chose (pass, compress, decompress, headers only, or an error
//! page of the proxy's own), the connection sees one body type. It counts the bytes going
//! out, and its `Drop` writes the access log line and settles the counters, so that a body
//! cut short (upstream failure, client gone) is logged as well as a complete one.
//!
//! The head of a response waits, briefly, for the start of its body (see
//! [`ResponseBody::hold_first_frame`]), so that both leave in one write.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body::{Body, Frame, SizeHint};
use tracing::{info, Span};

use crate::counters::Counters;
use crate::dictionary::fill::DictionaryFill;
use crate::dictionary::{estimate, Dictionaries, Use};
use crate::encode::body::{BodyError, BodyMeter, CompressBody, DecompressBody};
use crate::error::ProxyError;
use crate::exchange::more::MoreToCome;
use crate::exchange::read_timeout::UpstreamBodyError;
use crate::exchange::upstream::UpstreamBody;
use zipwire_adapt::Permit;
use zipwire_cache::fill::Fill;
use zipwire_dictionary::DictCoding;
use zipwire_rules::negotiate::Coding;
use zipwire_rules::Bypass;

/// A response body on its way to the client.
pub(crate) struct ResponseBody {
    stream: Stream,
    /// What the stream yielded before the head went out, given out first.
    held: Option<Polled>,
    /// Raised while more of the body follows at once (see [`Self::cork_between_calls`]).
    more: Option<Lowered>,
    log: AccessLog,
}

/// What a stream yields: a frame, an error, or its end.
type Polled = Option<Result<Frame<Bytes>, BodyError>>;

enum Stream {
    /// Headers only: HEAD, 204, 304, or a body that was already sent.
    Empty,
    /// A page the proxy wrote itself (errors).
    Page(Option<Bytes>),
    /// The upstream body as it is.
    Pass(Counted<UpstreamBody>),
    /// The upstream body, compressed.
    Compress(CompressBody<Counted<UpstreamBody>>),
    /// The upstream gzip body, decoded.
    Decompress(DecompressBody<Counted<UpstreamBody>>),
}

/// What was done to a body, for the access log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transform {
    /// Passed or headers-only.
    None,
    /// Encoded in this coding; `codec` measured the encoder.
    Compress(Coding),
    /// Encoded in a dictionary coding, in place of the ordinary coding the client would
    /// have got.
    Dictionary(DictCoding, Coding),
    /// Decoded.
    Decompress,
}

impl ResponseBody {
    fn new(stream: Stream, log: AccessLog) -> ResponseBody {
        ResponseBody {
            stream,
            held: None,
            more: None,
            log,
        }
    }

    /// A body with nothing in it.
    pub(crate) fn empty(mut log: AccessLog) -> ResponseBody {
        // The connection does not poll a body that says it has ended.
        log.outcome = Outcome::Complete;
        ResponseBody::new(Stream::Empty, log)
    }

    /// A short page written by the proxy.
    pub(crate) fn page(text: &'static str, log: AccessLog) -> ResponseBody {
        ResponseBody::new(Stream::Page(Some(Bytes::from_static(text.as_bytes()))), log)
    }

    /// A body held whole in memory (a cached response).
    pub(crate) fn stored(body: Bytes, log: AccessLog) -> ResponseBody {
        ResponseBody::new(Stream::Page(Some(body)), log)
    }

    /// The upstream body, passed as it is.
    pub(crate) fn pass(upstream: UpstreamBody, mut log: AccessLog) -> ResponseBody {
        ResponseBody::new(Stream::Pass(log.counted(upstream)), log)
    }

    /// The upstream body, compressed by `wrap` (given the counted upstream and the meter the
    /// encoder must record into).
    pub(crate) fn compress(
        upstream: UpstreamBody,
        mut log: AccessLog,
        transform: Transform,
        wrap: impl FnOnce(Counted<UpstreamBody>, Arc<BodyMeter>) -> CompressBody<Counted<UpstreamBody>>,
    ) -> ResponseBody {
        let codec = log.start_stream(transform);
        ResponseBody::new(Stream::Compress(wrap(log.counted(upstream), codec)), log)
    }

    /// The upstream gzip body, decoded by `wrap`.
    pub(crate) fn decompress(
        upstream: UpstreamBody,
        mut log: AccessLog,
        wrap: impl FnOnce(
            Counted<UpstreamBody>,
            Arc<BodyMeter>,
        ) -> DecompressBody<Counted<UpstreamBody>>,
    ) -> ResponseBody {
        let codec = log.start_stream(Transform::Decompress);
        ResponseBody::new(Stream::Decompress(wrap(log.counted(upstream), codec)), log)
    }

    /// Reads the first frame of the body before the head is sent, so that the connection
    /// writes the head and the body's start together: one write, and one wakeup of the
    /// client, fewer per response, and a small response whole in one segment. nginx does the
    /// same (its `postpone_output` keeps a head until body bytes follow it).
    ///
    /// The head waits as long as the body's first bytes would, and never past
    /// `read_timeout` plus [`HEAD_GRACE`]: a compressed body gathered call by call (known
    /// length, non-zero delay) until its first call is done, whatever the pauses; another
    /// compressed or decompressed body at most `delay` (the flush delay); with a zero delay
    /// (event streams) not at all. A passed body is only looked at: its first frame joins the
    /// head if it came with the upstream's head.
    pub(crate) async fn hold_first_frame(&mut self, delay: Duration, read_timeout: Duration) {
        let whole_call = self.gathers_whole_calls();
        let cap = read_timeout.saturating_add(HEAD_GRACE);
        let stream = &mut self.stream;
        let first = match stream {
            Stream::Compress(_) | Stream::Decompress(_) if !delay.is_zero() => {
                let wait = if whole_call { cap } else { delay.min(cap) };
                tokio::time::timeout(wait, poll_fn(|cx| stream.poll_frame(cx)))
                    .await
                    .ok()
            }
            Stream::Pass(_) => match poll_fn(|cx| Poll::Ready(stream.poll_frame(cx))).await {
                Poll::Ready(first) => Some(first),
                Poll::Pending => None,
            },
            _ => None,
        };
        if let Some(first) = first {
            if first.is_none() {
                // The connection will not poll a body that says it has ended.
                self.log.outcome = Outcome::Complete;
            }
            self.held = Some(first);
        }
    }

    /// Whether this is a compressed body gathered call by call whatever the pauses.
    fn gathers_whole_calls(&self) -> bool {
        matches!(&self.stream, Stream::Compress(body) if body.gathers_whole_calls())
    }

    /// Lets the connection hold a compressed body's calls in the kernel until the last one
    /// is written, so they leave as one segment (see `connection/cork.rs`). Only a body gathered
    /// call by call whatever the pauses raises `more`: a body that flushes on pauses
    /// (unknown length, or a zero delay) must not wait in the kernel.
    pub(crate) fn cork_between_calls(&mut self, more: MoreToCome) {
        if self.gathers_whole_calls() {
            self.more = Some(Lowered(more));
        }
    }

    /// Gives back, with its log, a body whose upstream failed (or whose gzip did not decode)
    /// before anything was sent, so that the client gets 502 or 504 rather than a head and a
    /// cut connection.
    pub(crate) fn failed_early(self) -> Result<ResponseBody, Box<(ProxyError, AccessLog)>> {
        match self.held {
            Some(Some(Err(BodyError::Decode(error)))) => {
                let mut log = self.log;
                log.transform = Transform::None;
                Err(Box::new((ProxyError::Gunzip(error), log)))
            }
            Some(Some(Err(BodyError::Upstream(error)))) => match error.downcast() {
                Ok(error) => {
                    let error: Box<UpstreamBodyError> = error;
                    let mut log = self.log;
                    // What the client gets is the proxy's page, not a transformed body.
                    log.transform = Transform::None;
                    Err(Box::new((error.into_proxy_error(), log)))
                }
                Err(error) => Ok(ResponseBody {
                    held: Some(Some(Err(BodyError::Upstream(error)))),
                    ..self
                }),
            },
            held => Ok(ResponseBody { held, ..self }),
        }
    }
}

/// How much longer than the upstream read timeout a head may wait for its body's first
/// call. An upstream silent since its last bytes is cut by the read timeout, counted from
/// those bytes, and its client gets a 504; had the head's wait been the read timeout itself,
/// counted from before those bytes arrived, it would end first by a hair and send a 200 whose
/// body is then cut. The cap is only there for an upstream that trickles too slowly to fill
/// the call but never falls silent for the read timeout.
const HEAD_GRACE: Duration = Duration::from_secs(1);

/// A [`MoreToCome`] flag lowered when the body holding it is dropped, so a body cut short
/// leaves nothing corked for the connection's next response.
struct Lowered(MoreToCome);

impl Drop for Lowered {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

impl Stream {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Polled> {
        match self {
            Stream::Empty => Poll::Ready(None),
            Stream::Page(page) => Poll::Ready(page.take().map(|page| Ok(Frame::data(page)))),
            Stream::Pass(body) => Pin::new(body)
                .poll_frame(cx)
                .map(|frame| frame.map(|result| result.map_err(|e| BodyError::Upstream(e.into())))),
            Stream::Compress(body) => Pin::new(body).poll_frame(cx),
            Stream::Decompress(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Stream::Empty => true,
            Stream::Page(page) => page.is_none(),
            Stream::Pass(body) => body.is_end_stream(),
            Stream::Compress(body) => body.is_end_stream(),
            Stream::Decompress(body) => body.is_end_stream(),
        }
    }
}

/// A response body that can be told it is dropped by the send timeout: whatever it gave hyper last
/// may never have reached the client, so its access log line must not say "complete".
pub(crate) trait Abandon {
    /// The send timeout expired the stream; the body is dropped next.
    fn abandoned(&mut self);
}

impl Abandon for ResponseBody {
    fn abandoned(&mut self) {
        self.log.outcome = Outcome::Failed("client send timeout".to_owned());
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        let polled = match this.held.take() {
            Some(held) => Poll::Ready(held),
            None => this.stream.poll_frame(cx),
        };
        if let (Poll::Ready(polled), Some(Lowered(more))) = (&polled, &this.more) {
            more.set(matches!(polled, Some(Ok(_))) && !this.stream.is_end_stream());
        }
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.log.sent(data.len());
                }
                if this.stream.is_end_stream() {
                    // The connection ends the body with this frame and polls no further.
                    this.log.outcome = Outcome::Complete;
                }
            }
            Poll::Ready(Some(Err(error))) => this.log.outcome = Outcome::Failed(error.to_string()),
            Poll::Ready(None) => this.log.outcome = Outcome::Complete,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.held {
            Some(held) => held.is_none(),
            None => self.stream.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        let hint = match &self.stream {
            Stream::Empty => SizeHint::with_exact(0),
            Stream::Page(page) => {
                SizeHint::with_exact(page.as_ref().map_or(0, |page| page.len() as u64))
            }
            Stream::Pass(body) => body.size_hint(),
            Stream::Compress(body) => body.size_hint(),
            Stream::Decompress(body) => body.size_hint(),
        };
        // The connection frames the body by this hint: it must count the held frame.
        let held = match &self.held {
            Some(None) => return SizeHint::with_exact(0),
            Some(Some(Ok(frame))) => frame.data_ref().map_or(0, |data| data.len() as u64),
            _ => 0,
        };
        let mut total = SizeHint::new();
        total.set_lower(hint.lower() + held);
        if let Some(upper) = hint.upper() {
            total.set_upper(upper + held);
        }
        total
    }
}

/// The status logged for a request whose client left before its response (nginx's 499,
/// "client closed request"; no response carries it).
const CLIENT_CLOSED_REQUEST: u16 = 499;

/// How a response ended, as far as the body could tell.
#[derive(Debug)]
enum Outcome {
    /// Dropped before its end: the client went away, or the server shut down.
    Dropped,
    /// Sent in full.
    Complete,
    /// Stopped by an error; the connection is aborted.
    Failed(String),
}

/// One request's access log record, written when its response body is dropped.
pub(crate) struct AccessLog {
    span: Span,
    method: Method,
    path: String,
    /// The client's protocol, `http/1.1` unless [`AccessLog::set_protocol`] says otherwise.
    protocol: &'static str,
    /// The status sent, once there is a response: a record dropped without one is a client that
    /// left before it, logged as nginx's 499 rather than as a 200 it never got.
    status: Option<StatusCode>,
    started: Instant,
    counters: Arc<Counters>,
    received: Arc<AtomicU64>,
    sent: u64,
    transform: Transform,
    /// Why the body was not transformed, where a rule said so (`not_accepted`, `budget`, …).
    bypass: Option<Bypass>,
    codec: Option<Arc<BodyMeter>>,
    outcome: Outcome,
    /// Compression buffer memory this response holds against the cap, released on drop.
    permit: Option<Permit>,
    /// Whether the line is written (the counters are kept either way).
    write_line: bool,
    /// The cache fill the upstream body feeds, given to it when the body is made.
    fill: Option<Box<Fill>>,
    /// The dictionary the upstream body becomes, copied as it streams.
    dictionary_fill: Option<Box<DictionaryFill>>,
    /// The dictionary the body was sent against, and the server's dictionaries that count it
    /// when it ends (`None` where the caller counted it: a cache hit).
    dictionary: Option<(Use, Option<Arc<Dictionaries>>)>,
}

impl AccessLog {
    /// A record for a request received at `started`; the path is logged without its query,
    /// which may hold tokens.
    pub(crate) fn new(
        method: Method,
        path: &str,
        started: Instant,
        counters: Arc<Counters>,
    ) -> AccessLog {
        AccessLog {
            span: Span::current(),
            method,
            path: path.to_owned(),
            protocol: "http/1.1",
            status: None,
            started,
            counters,
            received: Arc::new(AtomicU64::new(0)),
            sent: 0,
            transform: Transform::None,
            bypass: None,
            codec: None,
            outcome: Outcome::Dropped,
            permit: None,
            write_line: true,
            fill: None,
            dictionary_fill: None,
            dictionary: None,
        }
    }

    /// Copies the upstream body into the dictionary store as it streams.
    pub(crate) fn dictionary_fill(&mut self, fill: DictionaryFill) {
        self.dictionary_fill = Some(Box::new(fill));
    }

    /// Says the body is sent in `used`'s dictionary coding: logged, and counted by
    /// `dictionaries` when the body ends, if given.
    pub(crate) fn dictionary(&mut self, used: Use, dictionaries: Option<Arc<Dictionaries>>) {
        self.dictionary = Some((used, dictionaries));
    }

    /// Copies the upstream body into the cache as it streams (a storable miss).
    pub(crate) fn fill(&mut self, fill: Option<Box<Fill>>) {
        self.fill = fill;
    }

    /// Keeps the counters but writes no line (`access_log = false`).
    pub(crate) fn silence(&mut self) {
        self.write_line = false;
    }

    /// Keeps a memory permit until the response is done.
    pub(crate) fn hold(&mut self, permit: Permit) {
        self.permit = Some(permit);
    }

    /// Sets the protocol the client spoke (`http/1.0`, `http/1.1`, `h2`).
    pub(crate) fn set_protocol(&mut self, protocol: &'static str) {
        self.protocol = protocol;
    }

    /// Sets the status sent to the client.
    pub(crate) fn set_status(&mut self, status: StatusCode) {
        self.status = Some(status);
    }

    /// Says why the body was passed as it came, if a rule did (the same reasons as the
    /// `bypassed` counters), so that a line says why a response was not compressed.
    pub(crate) fn set_bypass(&mut self, bypass: Option<Bypass>) {
        self.bypass = bypass;
    }

    /// Says what was done to a body made whole before it went out (a cache hit).
    pub(crate) fn set_transform(&mut self, transform: Transform) {
        self.transform = transform;
    }

    /// Counts a transformed stream as active and returns the meter its codec records into.
    fn start_stream(&mut self, transform: Transform) -> Arc<BodyMeter> {
        Counters::bump(&self.counters.active_streams);
        self.transform = transform;
        let meter = match transform {
            Transform::Decompress => BodyMeter::with_totals(self.counters.decompression.clone()),
            Transform::Compress(coding) => {
                BodyMeter::with_totals(self.counters.compression.clone())
                    .with_coding_totals(self.counters.codings.get(coding).meter.clone())
            }
            // Not in the ordinary coding's totals: its ratio estimates what a delta saved.
            Transform::Dictionary(..) => BodyMeter::with_totals(self.counters.compression.clone()),
            Transform::None => BodyMeter::with_totals(self.counters.compression.clone()),
        };
        let meter = Arc::new(meter);
        self.codec = Some(meter.clone());
        meter
    }

    /// Wraps the upstream body so that what it yields is counted.
    fn counted(&mut self, inner: UpstreamBody) -> Counted<UpstreamBody> {
        Counted {
            inner,
            received: self.received.clone(),
            counters: self.counters.clone(),
            fill: self.fill.take(),
            dictionary: self.dictionary_fill.take(),
        }
    }

    fn sent(&mut self, bytes: usize) {
        self.sent += bytes as u64;
        Counters::add(&self.counters.bytes_out, bytes as u64);
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        let counters = &self.counters;
        if self.codec.is_some() {
            // The codec's bytes and time went to the server totals call by call.
            Counters::drop_one(&counters.active_streams);
        }
        let received = self.received.load(Ordering::Relaxed);
        let mut dictionary = String::new();
        if let Some((used, dictionaries)) = &self.dictionary {
            dictionary = used.describe();
            if let (Outcome::Complete, Transform::Dictionary(_, ordinary), Some(dictionaries)) =
                (&self.outcome, self.transform, dictionaries)
            {
                let meter = &counters.codings.get(ordinary).meter;
                let ordinary = estimate(meter, received);
                dictionaries.count_use(used, received, self.sent, ordinary);
            }
        }
        if !self.write_line {
            return;
        }
        let ratio = if self.sent == 0 {
            1.0
        } else {
            (received as f64 / self.sent as f64 * 100.0).round() / 100.0
        };
        let outcome = match &self.outcome {
            Outcome::Complete => "complete",
            Outcome::Dropped => "dropped",
            Outcome::Failed(_) => "failed",
        };
        let error = match &self.outcome {
            Outcome::Failed(error) => error.as_str(),
            _ => "",
        };
        let _entered = self.span.enter();
        info!(
            method = %self.method,
            path = %self.path,
            protocol = self.protocol,
            status = self.status.map_or(CLIENT_CLOSED_REQUEST, |status| status.as_u16()),
            bytes_in = received,
            bytes_out = self.sent,
            ratio,
            transform = ?self.transform,
            bypass = self.bypass.map_or("", Bypass::as_str),
            dictionary,
            duration = ?self.started.elapsed(),
            outcome,
            error,
            "access"
        );
    }
}

/// An upstream body whose data is counted as it is read, and copied into the cache when it
/// is a storable miss (and into the dictionary store when it becomes a dictionary): a fill
/// ends when the body ends as framed, never on an error.
pub(crate) struct Counted<B> {
    inner: B,
    received: Arc<AtomicU64>,
    counters: Arc<Counters>,
    fill: Option<Box<Fill>>,
    dictionary: Option<Box<DictionaryFill>>,
}

impl<B> Body for Counted<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let bytes = data.len() as u64;
                    this.received.fetch_add(bytes, Ordering::Relaxed);
                    Counters::add(&this.counters.bytes_in, bytes);
                    if let Some(fill) = &mut this.fill {
                        fill.data(data);
                    }
                    if let Some(fill) = &mut this.dictionary {
                        fill.data(data);
                    }
                }
                // A reader may stop at the last frame without polling for the end.
                if this.inner.is_end_stream() {
                    if let Some(fill) = &mut this.fill {
                        fill.end();
                    }
                    if let Some(fill) = &mut this.dictionary {
                        fill.end();
                    }
                }
            }
            Poll::Ready(None) => {
                if let Some(fill) = &mut this.fill {
                    fill.end();
                }
                if let Some(fill) = &mut this.dictionary {
                    fill.end();
                }
            }
            Poll::Ready(Some(Err(_))) => {
                this.fill = None;
                this.dictionary = None;
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
