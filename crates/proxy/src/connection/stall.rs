//! HTTP/2's send timeout per stream: a response the client leaves no room for is reset, and
//! what stood behind it let go.
//!
//! An HTTP/2 client can stop taking one response without stopping its connection: it keeps
//! the stream's flow-control window shut (RFC 9113 §5.2) and goes on answering PINGs. hyper
//! waits for window before it asks the response body for more, so the body, and everything
//! behind it (the upstream connection, the compressor and its buffers), would be held for as
//! long as the client likes; a client with 128 such streams holds 128 upstream connections,
//! and no read or write of the connection is ever late. nginx resets such a stream after
//! `send_timeout`, and so does this module, after [`Timeouts::send`].
//!
//! Each HTTP/2 response body is [`Watched`]: it notes when it handed hyper a frame (or its
//! head), and clears the note when hyper asks for the next frame. The connection's
//! [`Stalls`] looks at its streams four times per [`Timeouts::send`]; a stream whose note is
//! older than that has its body and its request's [`Served`] dropped at once (the upstream
//! connection closes, the compressor is freed, and a connection with nothing else open goes
//! idle and closes after [`Timeouts::idle`]), and fails when hyper next polls it, which
//! resets the stream rather than ending it as if it were whole. hyper offers no handle to
//! reset a stream from outside the body; that part waits for the client to open the window
//! again or for the connection to end.
//!
//! A body waiting for its upstream is not late: hyper polled it, so no note is kept.
//!
//! [`Timeouts::send`]: crate::Timeouts::send
//! [`Timeouts::idle`]: crate::Timeouts::idle

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Instant;
use tracing::debug;

use crate::connection::keepalive::{BoxError, Served};
use crate::exchange::outgoing::Abandon;

/// Looks this many times per send timeout: a stream is reset between one and 1.25 send
/// timeouts after the client stopped taking it.
const LOOKS_PER_TIMEOUT: u32 = 4;

/// The HTTP/2 streams of one connection whose sends are timed.
#[derive(Clone, Default)]
pub(crate) struct Stalls {
    streams: Arc<Mutex<Registry>>,
}

#[derive(Default)]
struct Registry {
    streams: Vec<Weak<dyn Expire>>,
    /// Streams alive at the last pruning: the list is pruned when it doubles past this.
    alive: usize,
}

impl fmt::Debug for Stalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let registry = self.lock();
        f.debug_struct("Stalls")
            .field("streams", &registry.streams.len())
            .finish()
    }
}

impl Stalls {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `body`, the response to the request `served`, timed from now.
    pub(crate) fn watch<B: Abandon + Send + 'static>(&self, body: B, served: Served) -> Watched<B> {
        let slot = Arc::new(Slot {
            state: Mutex::new(State {
                body: Some(body),
                served: Some(served),
                waiting_since: Some(Instant::now()),
            }),
        });
        let weak: Weak<Slot<B>> = Arc::downgrade(&slot);
        let mut registry = self.lock();
        if registry.streams.len() >= 2 * registry.alive + 16 {
            registry.streams.retain(|stream| stream.strong_count() > 0);
            registry.alive = registry.streams.len();
        }
        registry.streams.push(weak);
        Watched {
            slot,
            rest: Bytes::new(),
        }
    }

    /// Resets, for as long as it runs, the streams that have waited for the client for
    /// `limit`; never completes.
    pub(crate) async fn expire(&self, limit: Duration) {
        let look = (limit / LOOKS_PER_TIMEOUT).max(Duration::from_millis(10));
        loop {
            tokio::time::sleep(look).await;
            let now = Instant::now();
            let streams = {
                let mut registry = self.lock();
                registry.streams.retain(|stream| stream.strong_count() > 0);
                registry.alive = registry.streams.len();
                registry.streams.clone()
            };
            // No lock held here: a stream dropped meanwhile ends its request, which locks
            // the connection's phases.
            for stream in streams.iter().filter_map(Weak::upgrade) {
                if stream.expire(now, limit) {
                    debug!(?limit, "client took nothing of a stream: reset");
                }
            }
        }
    }
}

/// A stream that can be expired.
trait Expire: Send + Sync {
    /// Drops the stream's body if it has waited for the client since before `now - limit`;
    /// whether it did.
    fn expire(&self, now: Instant, limit: Duration) -> bool;
}

/// The most a [`Watched`] body hands hyper at once: one DATA frame at HTTP/2's default
/// `SETTINGS_MAX_FRAME_SIZE`. hyper asks for more only once h2 has sent all it holds, so the note
/// times one piece through the client's window, not a whole 64 KiB encoder call: a client that
/// opens its window a little at a time takes a piece per `send`, and is not reset while it reads
/// (timed by whole calls, one taking 1,000 bytes a second would be reset after 5 s of a 5 s
/// `send`).
const PIECE: usize = 16 * 1024;

/// An HTTP/2 response body, timed while hyper does not ask for it.
pub(crate) struct Watched<B> {
    slot: Arc<Slot<B>>,
    /// What is left of the body's last data frame, handed out [`PIECE`] at a time.
    rest: Bytes,
}

struct Slot<B> {
    state: Mutex<State<B>>,
}

struct State<B> {
    /// `None` once expired.
    body: Option<B>,
    served: Option<Served>,
    /// Since when hyper holds what the body gave it and has not asked for more.
    waiting_since: Option<Instant>,
}

impl<B> Slot<B> {
    fn lock(&self) -> MutexGuard<'_, State<B>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<B: Abandon + Send> Expire for Slot<B> {
    fn expire(&self, now: Instant, limit: Duration) -> bool {
        // Held: hyper is polling the body, which is not waiting for the client.
        let Ok(mut state) = self.state.try_lock() else {
            return false;
        };
        let late = state
            .waiting_since
            .is_some_and(|since| now.saturating_duration_since(since) >= limit);
        if !late {
            return false;
        }
        state.waiting_since = None;
        if let Some(body) = state.body.as_mut() {
            body.abandoned();
        }
        let taken = (state.body.take(), state.served.take());
        drop(state);
        // Dropped with no lock held: the body's upstream connection closes and its access
        // log line is written; the request ends.
        drop(taken);
        true
    }
}

/// The error a stream expired by the send timeout fails with.
#[derive(Debug)]
struct SendTimeout;

impl fmt::Display for SendTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("client send timeout: the client left the stream no window")
    }
}

impl std::error::Error for SendTimeout {}

impl<B> Watched<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    /// The body's next frame; an error once the stream expired.
    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut state = self.slot.lock();
        state.waiting_since = None;
        let Some(body) = state.body.as_mut() else {
            return Poll::Ready(Some(Err(Box::new(SendTimeout))));
        };
        if self.rest.is_empty() {
            match std::task::ready!(Pin::new(body).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.rest = data,
                    Err(trailers) => {
                        state.waiting_since = Some(Instant::now());
                        return Poll::Ready(Some(Ok(trailers)));
                    }
                },
                Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
                None => return Poll::Ready(None),
            }
        }
        let piece = self.rest.split_to(self.rest.len().min(PIECE));
        state.waiting_since = Some(Instant::now());
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    /// The body's, with nothing left of its last frame; never the end once expired, so that
    /// the stream is reset, not ended.
    pub(crate) fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
            && self
                .slot
                .lock()
                .body
                .as_ref()
                .is_some_and(Body::is_end_stream)
    }

    /// The body's and what is left of its last frame, or nothing known once expired.
    pub(crate) fn size_hint(&self) -> SizeHint {
        let state = self.slot.lock();
        let Some(body) = state.body.as_ref() else {
            return SizeHint::default();
        };
        let body = body.size_hint();
        let rest = self.rest.len() as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(body.lower().saturating_add(rest));
        if let Some(upper) = body.upper() {
            hint.set_upper(upper.saturating_add(rest));
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::connection::keepalive::Phases;
    use crate::settings::Timeouts;

    const SEND: Duration = Duration::from_secs(8);

    /// A body of endless frames, or of none when `pending`, that says when it is dropped.
    struct Source {
        pending: bool,
        dropped: Arc<AtomicBool>,
    }

    impl Body for Source {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            if self.pending {
                return Poll::Pending;
            }
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"data")))))
        }
    }

    impl Abandon for Source {
        fn abandoned(&mut self) {}
    }

    impl Abandon for Bytes {
        fn abandoned(&mut self) {}
    }

    impl Abandon for http_body_util::Full<Bytes> {
        fn abandoned(&mut self) {}
    }

    impl Drop for Source {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    fn connection() -> (Phases, Stalls) {
        let phases = Phases::new(&Timeouts {
            send: SEND,
            ..Timeouts::default()
        });
        (phases, Stalls::default())
    }

    fn source(pending: bool) -> (Source, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let source = Source {
            pending,
            dropped: dropped.clone(),
        };
        (source, dropped)
    }

    fn poll(watched: &mut Watched<Source>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        watched.poll_frame(&mut Context::from_waker(std::task::Waker::noop()))
    }

    fn expiring(stalls: &Stalls) -> tokio::task::JoinHandle<()> {
        let stalls = stalls.clone();
        tokio::spawn(async move { stalls.expire(SEND).await })
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_the_client_takes_nothing_of_is_dropped_and_then_fails() {
        let (phases, stalls) = connection();
        let (source, dropped) = source(false);
        let mut watched = stalls.watch(source, phases.serve());
        assert!(matches!(poll(&mut watched), Poll::Ready(Some(Ok(_)))));
        assert_eq!(phases.open(), 1);
        let expiring = expiring(&stalls);
        tokio::time::sleep(SEND - Duration::from_millis(1)).await;
        assert!(!dropped.load(Ordering::SeqCst), "dropped before its time");
        tokio::time::sleep(SEND / LOOKS_PER_TIMEOUT + Duration::from_millis(2)).await;
        // The body and the request are let go, though hyper never came back.
        assert!(dropped.load(Ordering::SeqCst), "still held");
        assert_eq!(phases.open(), 0);
        // hyper's next poll fails, so that the stream is reset, never ended as if whole.
        assert!(!watched.is_end_stream());
        let Poll::Ready(Some(Err(error))) = poll(&mut watched) else {
            panic!("expired streams fail");
        };
        assert!(error.to_string().contains("send timeout"), "{error}");
        expiring.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_hyper_never_polled_is_timed_from_its_head() {
        let (phases, stalls) = connection();
        let (source, dropped) = source(false);
        let _watched = stalls.watch(source, phases.serve());
        let expiring = expiring(&stalls);
        tokio::time::sleep(SEND + SEND / LOOKS_PER_TIMEOUT + Duration::from_millis(2)).await;
        assert!(dropped.load(Ordering::SeqCst));
        assert_eq!(phases.open(), 0);
        expiring.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn streams_taken_in_time_or_waiting_for_their_upstream_are_kept() {
        let (phases, stalls) = connection();
        let (taken, taken_dropped) = source(false);
        let mut taken = stalls.watch(taken, phases.serve());
        let (waiting, waiting_dropped) = source(true);
        let mut waiting = stalls.watch(waiting, phases.serve());
        let expiring = expiring(&stalls);
        assert!(poll(&mut waiting).is_pending());
        for _ in 0..20 {
            assert!(matches!(poll(&mut taken), Poll::Ready(Some(Ok(_)))));
            tokio::time::sleep(SEND / 2).await;
        }
        assert!(!taken_dropped.load(Ordering::SeqCst));
        assert!(!waiting_dropped.load(Ordering::SeqCst));
        assert_eq!(phases.open(), 2);
        expiring.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_large_frame_goes_out_a_piece_at_a_time_each_timed_on_its_own() {
        let (phases, stalls) = connection();
        let data: Bytes = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        let mut watched = stalls.watch(http_body_util::Full::new(data.clone()), phases.serve());
        let expiring = {
            let stalls = stalls.clone();
            tokio::spawn(async move { stalls.expire(SEND).await })
        };
        let mut got = Vec::new();
        let mut pieces = 0;
        while !watched.is_end_stream() {
            let mut cx = Context::from_waker(std::task::Waker::noop());
            let Poll::Ready(Some(Ok(frame))) = watched.poll_frame(&mut cx) else {
                panic!("a piece of the frame");
            };
            let piece = frame.into_data().expect("data");
            assert!(piece.len() <= PIECE);
            got.extend_from_slice(&piece);
            pieces += 1;
            // Each piece takes most of the send timeout; the whole frame far more.
            tokio::time::sleep(SEND - SEND / LOOKS_PER_TIMEOUT - Duration::from_millis(1)).await;
        }
        assert_eq!(pieces, 5);
        assert_eq!(got, data);
        assert_eq!(
            phases.open(),
            1,
            "reset while the client took piece after piece"
        );
        expiring.abort();
    }

    #[test]
    fn dropped_streams_do_not_pile_up() {
        let phases = Phases::new(&Timeouts::default());
        let stalls = Stalls::default();
        let keep: Vec<_> = (0..10)
            .map(|_| stalls.watch(Bytes::new(), phases.serve()))
            .collect();
        for _ in 0..10_000 {
            drop(stalls.watch(Bytes::new(), phases.serve()));
        }
        let listed = stalls.lock().streams.len();
        assert!(listed < 64, "{listed} streams listed for 10 alive");
        drop(keep);
        assert_eq!(phases.open(), 0);
    }
}
