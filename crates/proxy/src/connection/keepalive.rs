//! The two client read timeouts nginx users expect: [`Timeouts::idle`] (nginx's
//! `keepalive_timeout`) bounds the gap between requests on a kept-alive connection, and
//! [`Timeouts::header_read`] (`client_header_timeout`) the reading of one request head, from
//! the connection's start or from the first byte of a later request.
//!
//! hyper has only the second, and starts it as soon as it waits for the next request, so it
//! would close an idle connection after `header_read`. Its timer is therefore off, and the
//! connection's reads are timed here instead: [`Phases`] knows whether a request is being
//! served (set by the service, cleared when the response body is dropped), and a read that
//! waits past the current phase's deadline fails, which ends the connection as hyper's own
//! timer did (no response, the socket closed).
//!
//! On HTTP/2 many requests (streams) share the connection: it is serving while any stream is
//! open and idle from the moment the last one ends. Its reads do not start a head: between
//! requests a client sends frames that are no request (PING and SETTINGS acknowledgements,
//! WINDOW_UPDATE), so the connection stays idle until a stream opens, and a header block
//! that never ends is bounded by the idle deadline (and by h2's own header list limit). At
//! the idle deadline it is not cut but told ([`Phases::idle_expired`]), so that it can close
//! with GOAWAY (RFC 9113 §9.1: a client then knows that no request of its was dropped); a
//! client that does not close within `header_read` after that is cut.
//!
//! Writes have one deadline whatever the phase, [`Timeouts::send`] (nginx's `send_timeout`):
//! a write the client does not take within it fails, which ends the connection, and with it
//! the responses it was carrying and their upstream connections. It is counted from the
//! first write that had to wait, and a write that makes any progress starts it again, so a
//! slow reader is never cut, only one that stopped. On HTTP/2 a client can also stop one
//! stream without stopping the socket, by leaving its window shut; [`crate::connection::stall`]
//! times those.
//!
//! [`Timeouts::idle`]: crate::Timeouts::idle
//! [`Timeouts::header_read`]: crate::Timeouts::header_read
//! [`Timeouts::send`]: crate::Timeouts::send

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::connection::graceful::Close;
use crate::connection::stall::{Stalls, Watched};
use crate::exchange::interim::Interim;
use crate::exchange::more::MoreToCome;
use crate::exchange::outgoing::Abandon;
use crate::settings::Timeouts;

/// Where a client connection stands, shared by its reads and its requests.
#[derive(Clone, Debug)]
pub(crate) struct Phases {
    shared: Arc<Mutex<Shared>>,
    /// Interim responses written on the connection's stream beside hyper.
    interim: Interim,
    header_read: Duration,
    idle: Duration,
    send: Duration,
    /// HTTP/2: the streams whose sends are timed.
    stalls: Stalls,
}

#[derive(Debug)]
struct Shared {
    phase: Phase,
    /// Requests being served: one at a time on HTTP/1, streams on HTTP/2.
    open: usize,
    /// HTTP/2: reads between requests leave the connection idle.
    multiplexed: bool,
    /// HTTP/2: the idle deadline passed and the connection was told to close.
    idle_expired: bool,
    /// HTTP/2: the client cancels too many requests ([`MAX_CANCELLED`]); the connection is
    /// told to close at once.
    abusive: bool,
    /// The task waiting for `idle_expired`.
    closer: Option<Waker>,
    /// The read waiting for the connection, woken when a response ends so that it arms the
    /// idle deadline.
    reader: Option<Waker>,
    /// HTTP/2: requests whose response head was ready, and those the client cancelled (reset)
    /// before it was ([`Answer`]).
    answered: u32,
    cancelled: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Reading a request head, since the connection opened or the head's first byte came.
    Head(Instant),
    /// Requests are being served: no read deadline here (the request body has its own).
    Busy,
    /// Waiting for the next request since the last response ended.
    Idle(Instant),
    /// Upgraded: the stream belongs to a tunnel, which has its own idle timeout, for good.
    Tunnel,
}

impl Phases {
    /// The phases of a connection accepted now under `timeouts`.
    pub(crate) fn new(timeouts: &Timeouts) -> Phases {
        Phases {
            shared: Arc::new(Mutex::new(Shared {
                phase: Phase::Head(Instant::now()),
                open: 0,
                multiplexed: false,
                idle_expired: false,
                abusive: false,
                closer: None,
                reader: None,
                answered: 0,
                cancelled: 0,
            })),
            stalls: Stalls::default(),
            interim: Interim::default(),
            header_read: timeouts.header_read,
            idle: timeouts.idle,
            send: timeouts.send,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The connection speaks HTTP/2: it is idle while no stream is open, whatever it reads.
    pub(crate) fn multiplex(&self) {
        self.lock().multiplexed = true;
    }

    /// The connection's interim responses, shared with its stream.
    pub(crate) fn interim(&self) -> Interim {
        self.interim.clone()
    }

    /// A request head was read whole: the request is served until `Served` is dropped.
    pub(crate) fn serve(&self) -> Served {
        let mut shared = self.lock();
        shared.open += 1;
        shared.phase = Phase::Busy;
        Served(self.clone())
    }

    /// A request's [`Answer`]: dropped before [`Answer::given`], the client cancelled it.
    pub(crate) fn answer(&self) -> Answer {
        Answer(Some(self.clone()))
    }

    /// Requests being served now.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.lock().open
    }

    /// The TLS handshake ended: the first head's time ([`Timeouts::header_read`]) counts from now,
    /// as nginx times `ssl_handshake_timeout` and then `client_header_timeout`. Counted from the
    /// accept, it would leave a slow handshake's client almost no time for its head, and a
    /// `handshake_timeout` above `header_read` would do nothing.
    pub(crate) fn handshake_done(&self) {
        let mut shared = self.lock();
        if let Phase::Head(_) = shared.phase {
            shared.phase = Phase::Head(Instant::now());
        }
    }

    /// The connection was upgraded: no read deadline from now on, whatever else ends.
    pub(crate) fn tunnel(&self) {
        self.lock().phase = Phase::Tunnel;
    }

    fn read_some(&self) {
        let mut shared = self.lock();
        if let (Phase::Idle(_), false) = (shared.phase, shared.multiplexed) {
            shared.phase = Phase::Head(Instant::now());
        }
    }

    /// Completes when an HTTP/2 connection has been idle for `idle`: time to close it
    /// gracefully; or when its client cancels too many requests ([`MAX_CANCELLED`]): time
    /// to close it at once. Never completes on HTTP/1, whose idle reads fail instead.
    ///
    /// Meanwhile, on HTTP/2, it resets the streams that the client has left without room to
    /// send for [`Timeouts::send`] (see [`crate::connection::stall`]).
    pub(crate) async fn idle_expired(&self) -> Close {
        let multiplexed = self.lock().multiplexed;
        let told = self.told_idle();
        if multiplexed {
            tokio::select! {
                close = told => close,
                () = self.stalls.expire(self.send) => Close::Gracefully,
            }
        } else {
            told.await
        }
    }

    async fn told_idle(&self) -> Close {
        std::future::poll_fn(|cx| {
            let mut shared = self.lock();
            if shared.abusive {
                return Poll::Ready(Close::Now);
            }
            if shared.idle_expired {
                return Poll::Ready(Close::Gracefully);
            }
            shared.closer = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// When a read waiting now must give up, if ever, and whether that only tells the
    /// connection to close; remembers `waker` for the end of a response.
    fn deadline(&self, waker: &Waker) -> Option<(Instant, Expiry)> {
        let mut shared = self.lock();
        match shared.phase {
            Phase::Head(since) => Some((since.checked_add(self.header_read)?, Expiry::Fail)),
            Phase::Idle(since) if shared.multiplexed && !shared.idle_expired => {
                Some((since.checked_add(self.idle)?, Expiry::Tell))
            }
            Phase::Idle(since) if shared.multiplexed => Some((
                since
                    .checked_add(self.idle)?
                    .checked_add(self.header_read)?,
                Expiry::Fail,
            )),
            Phase::Idle(since) => Some((since.checked_add(self.idle)?, Expiry::Fail)),
            Phase::Busy => {
                shared.reader = Some(waker.clone());
                None
            }
            Phase::Tunnel => None,
        }
    }

    /// The idle deadline of an HTTP/2 connection passed, or (`abusive`) its client cancels
    /// too many requests ([`MAX_CANCELLED`]): wakes [`Phases::idle_expired`], which closes it.
    fn tell_idle(&self, abusive: bool) {
        let closer = {
            let mut shared = self.lock();
            shared.idle_expired = true;
            shared.abusive |= abusive;
            shared.closer.take()
        };
        if let Some(closer) = closer {
            closer.wake();
        }
    }
}

/// What a passed read deadline does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expiry {
    /// The read fails, which ends the connection.
    Fail,
    /// The connection is told to close itself ([`Phases::idle_expired`]).
    Tell,
}

/// HTTP/2 requests a client may cancel before their response head, past as many as it let
/// be answered, before the connection is closed at once ([`Close::Now`]): the rapid reset of
/// CVE-2023-44487 with each `RST_STREAM` one write after its `HEADERS`, which h2's count of
/// streams reset before the server accepted them never sees. Each such request costs an
/// upstream request and, its connection closed unread, an upstream connection. A browser
/// cancels a few (a page left, a prefetch dropped), never a hundred more than it reads.
pub(crate) const MAX_CANCELLED: u32 = 100;

/// Whether one request was answered: given when its response head is ready; dropped without
/// that, the client cancelled the request, and too many cancels close an HTTP/2 connection
/// ([`MAX_CANCELLED`]).
#[derive(Debug)]
pub(crate) struct Answer(Option<Phases>);

impl Answer {
    /// The response head is ready.
    pub(crate) fn given(mut self) {
        if let Some(phases) = self.0.take() {
            let mut shared = phases.lock();
            shared.answered = shared.answered.saturating_add(1);
        }
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        let Some(phases) = self.0.take() else {
            return;
        };
        let (cancelled, answered) = {
            let mut shared = phases.lock();
            shared.cancelled = shared.cancelled.saturating_add(1);
            let abusive = shared.multiplexed
                && !shared.idle_expired
                && shared.cancelled.saturating_sub(shared.answered) >= MAX_CANCELLED;
            if !abusive {
                return;
            }
            (shared.cancelled, shared.answered)
        };
        tracing::warn!(
            cancelled,
            answered,
            "HTTP/2 client cancels its requests before their answers (rapid reset): closing the connection"
        );
        phases.tell_idle(true);
    }
}

/// Held while a request is served; the drop of the last one open starts the idle wait.
#[derive(Debug)]
pub(crate) struct Served(Phases);

impl Drop for Served {
    fn drop(&mut self) {
        let reader = {
            let mut shared = self.0.lock();
            shared.open = shared.open.saturating_sub(1);
            if shared.open > 0 {
                return;
            }
            if shared.phase != Phase::Tunnel {
                shared.phase = Phase::Idle(Instant::now());
            }
            shared.reader.take()
        };
        if let Some(reader) = reader {
            reader.wake();
        }
    }
}

/// A response body that holds its request's [`Served`] until the connection drops it.
pub(crate) enum ServedBody<B> {
    /// HTTP/1: the connection's writes are timed; a body that fails resets the connection.
    Direct {
        /// The response body.
        inner: B,
        /// Raised when `inner` fails.
        cut: MoreToCome,
        /// Ends the request when dropped.
        _served: Served,
    },
    /// HTTP/2: the stream's sends are timed as well ([`crate::connection::stall`]).
    Watched(Watched<B>),
}

impl<B: Abandon + Send + 'static> ServedBody<B> {
    /// `inner`, ending the request when it is dropped; on HTTP/1 `cut` short if it fails,
    /// on HTTP/2 timed as it is sent.
    pub(crate) fn new(inner: B, served: Served, cut: MoreToCome) -> ServedBody<B> {
        if !served.0.lock().multiplexed {
            return ServedBody::Direct {
                inner,
                cut,
                _served: served,
            };
        }
        let stalls = served.0.stalls.clone();
        ServedBody::Watched(stalls.watch(inner, served))
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for ServedBody<B>
where
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ServedBody::Direct { inner, cut, .. } => {
                let polled = ready!(Pin::new(inner).poll_frame(cx));
                if let Some(Err(_)) = &polled {
                    cut.cut_short();
                }
                Poll::Ready(polled.map(|frame| frame.map_err(Into::into)))
            }
            ServedBody::Watched(watched) => watched.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ServedBody::Direct { inner, .. } => inner.is_end_stream(),
            ServedBody::Watched(watched) => watched.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ServedBody::Direct { inner, .. } => inner.size_hint(),
            ServedBody::Watched(watched) => watched.size_hint(),
        }
    }
}

/// The error a response body ends with, as hyper takes it.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A client stream whose reads fail past the deadline of the connection's phase, and whose
/// writes fail when the client takes nothing for [`Timeouts::send`].
#[derive(Debug)]
pub(crate) struct TimedStream<S> {
    inner: S,
    phases: Phases,
    timer: Option<Pin<Box<Sleep>>>,
    /// Armed when a write first has to wait, and disarmed by one that makes progress.
    write_timer: Option<Pin<Box<Sleep>>>,
    write_waiting: bool,
}

impl<S> TimedStream<S> {
    /// `inner`, read and written under `phases`.
    pub(crate) fn new(inner: S, phases: Phases) -> TimedStream<S> {
        TimedStream {
            inner,
            phases,
            timer: None,
            write_timer: None,
            write_waiting: false,
        }
    }

    /// Runs one write operation on the stream under the send deadline.
    fn timed_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        write: impl FnOnce(&mut S, &Interim, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if let Poll::Ready(result) = write(&mut self.inner, &self.phases.interim, cx) {
            self.write_waiting = false;
            return Poll::Ready(result);
        }
        let Some(due) = Instant::now().checked_add(self.phases.send) else {
            return Poll::Pending;
        };
        let timer = self
            .write_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        if !self.write_waiting {
            self.write_waiting = true;
            timer.as_mut().reset(due);
        }
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "client send timeout: the client took nothing of the response",
        )))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for TimedStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        if let Poll::Ready(result) = Pin::new(&mut this.inner).poll_read(cx, buf) {
            if buf.filled().len() > before {
                this.phases.read_some();
            }
            return Poll::Ready(result);
        }
        loop {
            let Some((due, expiry)) = this.phases.deadline(cx.waker()) else {
                return Poll::Pending;
            };
            let timer = this
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
            if timer.deadline() != due {
                timer.as_mut().reset(due);
            }
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if expiry == Expiry::Fail {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "client read timeout (header_read or idle)",
                )));
            }
            // Told; the next deadline is the one that fails.
            this.phases.tell_idle(false);
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TimedStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.timed_write(cx, |inner, interim, cx| {
            ready!(interim.poll_finish(inner, cx))?;
            Pin::new(inner).poll_write(cx, buf)
        })
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.timed_write(cx, |inner, interim, cx| {
            ready!(interim.poll_finish(inner, cx))?;
            Pin::new(inner).poll_write_vectored(cx, bufs)
        })
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    /// Writes the interim heads queued first (see [`crate::exchange::interim`] for why
    /// only here).
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.timed_write(cx, |inner, interim, cx| {
            ready!(interim.poll_drain(inner, cx))?;
            Pin::new(inner).poll_flush(cx)
        })
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.timed_write(cx, |inner, interim, cx| {
            ready!(interim.poll_finish(inner, cx))?;
            Pin::new(inner).poll_shutdown(cx)
        })
    }
}

#[cfg(test)]
mod tests;
