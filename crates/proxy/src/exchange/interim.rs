//! Interim responses (`103 Early Hints`, RFC 8297) passed from an upstream to an HTTP/1.1
//! client, written on the client's stream beside hyper.
//!
//! hyper's server has no way to send a 1xx response (one returned from the service becomes
//! a 500), but its client reports the ones it reads (`hyper::ext::on_informational`, which
//! hyper-util's legacy client keeps, as it passes request extensions through). So the
//! upstream request gets a callback that serializes each `103` head into an [`Interim`]
//! shared with the client's stream wrapper ([`TimedStream`]), and the wrapper writes it
//! between hyper's own writes. That is sound because of when it writes:
//!
//! - Only in `poll_flush`. hyper's buffered writer calls its stream's `poll_flush` only once
//!   it has handed over everything it buffered; so whatever hyper wrote for earlier
//!   responses (a pipelined request's predecessor included) is on the stream before an
//!   interim head starts, and nothing of the current response can be, as hyper writes it
//!   only after the service returns it.
//! - Once a head has started, every later write finishes it first: a head is never cut.
//! - The service closes the [`Interim`] before it returns its final response: a head not
//!   started by then is dropped (it would come after the final head otherwise). Before
//!   closing, the service lets the connection flush for a moment ([`Interim::settle`]),
//!   which hyper does in the same turn in which it polls the service.
//! - It is opened only for HTTP/1.1 requests: RFC 9110 §15.2 forbids 1xx responses to an
//!   HTTP/1.0 client, and an HTTP/2 connection is not a stream of HTTP/1.1 heads.
//!
//! [`TimedStream`]: crate::connection::keepalive::TimedStream

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::StatusCode;
use tokio::io::AsyncWrite;

use zipwire_rules::forward;

/// Bytes of 103 heads that may wait for a client that does not read them: hints are advisory, so an
/// upstream that sends them faster than the client reads loses the later ones instead of growing
/// the proxy's memory (unbounded, one upstream's flood of hints would take 100 MB in 18 s).
const MAX_WAITING: usize = 16 * 1024;

/// The longest a final response waits for interim heads still queued to start.
const SETTLE_LIMIT: Duration = Duration::from_millis(200);

/// The interim heads of the request being served on one client connection.
#[derive(Clone, Debug, Default)]
pub(crate) struct Interim(Arc<Mutex<State>>);

#[derive(Debug, Default)]
struct State {
    /// Whether heads are taken: a request is served and its final head not yet returned.
    open: bool,
    /// Heads queued, not yet started.
    queued: BytesMut,
    /// A head being written: finished before anything else is written.
    writing: Bytes,
    /// The connection's task, woken to flush what was queued.
    connection: Option<Waker>,
    /// The service waiting for the queue to start ([`Interim::settle`]).
    settling: Option<Waker>,
}

impl Interim {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts taking heads for a request.
    pub(crate) fn open(&self) {
        let mut state = self.lock();
        state.open = true;
        state.queued.clear();
    }

    /// Asks the upstream client to pass `request`'s `103` responses here.
    pub(crate) fn register<B>(&self, request: &mut http::Request<B>) {
        let interim = self.clone();
        hyper::ext::on_informational(request, move |response| {
            if response.status() == StatusCode::EARLY_HINTS {
                interim.push(&early_hints(response.headers()));
            }
        });
    }

    /// Queues a serialized head and wakes the connection to write it; drops it when the
    /// heads waiting for the client already hold [`MAX_WAITING`] bytes.
    fn push(&self, head: &[u8]) {
        let waker = {
            let mut state = self.lock();
            let waiting = state.queued.len() + state.writing.len();
            if !state.open || waiting + head.len() > MAX_WAITING {
                return;
            }
            state.queued.extend_from_slice(head);
            state.connection.clone()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Waits until no queued head is left unstarted, at most [`SETTLE_LIMIT`], then stops
    /// taking heads and drops any still queued: the final response comes next.
    pub(crate) async fn close(&self) {
        let _ =
            tokio::time::timeout(SETTLE_LIMIT, std::future::poll_fn(|cx| self.settle(cx))).await;
        let mut state = self.lock();
        state.open = false;
        state.queued.clear();
    }

    /// Ready once nothing queued waits to start.
    fn settle(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.lock();
        if state.queued.is_empty() {
            return Poll::Ready(());
        }
        state.settling = Some(cx.waker().clone());
        Poll::Pending
    }

    /// For the stream's `poll_flush`: starts what is queued and writes it whole to `inner`.
    pub(crate) fn poll_drain<S: AsyncWrite + Unpin>(
        &self,
        inner: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_write_out(inner, cx, true)
    }

    /// For the stream's writes: finishes a head already started (never starts one).
    pub(crate) fn poll_finish<S: AsyncWrite + Unpin>(
        &self,
        inner: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        self.poll_write_out(inner, cx, false)
    }

    fn poll_write_out<S: AsyncWrite + Unpin>(
        &self,
        inner: &mut S,
        cx: &mut Context<'_>,
        start: bool,
    ) -> Poll<io::Result<()>> {
        let mut state = self.lock();
        state.connection = Some(cx.waker().clone());
        if start && !state.queued.is_empty() {
            let queued = state.queued.split().freeze();
            let mut writing = BytesMut::from(std::mem::take(&mut state.writing));
            writing.extend_from_slice(&queued);
            state.writing = writing.freeze();
            if let Some(service) = state.settling.take() {
                service.wake();
            }
        }
        while !state.writing.is_empty() {
            let written = match Pin::new(&mut *inner)
                .poll_write_vectored(cx, &[IoSlice::new(&state.writing)])
            {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            };
            state.writing.advance(written);
        }
        Poll::Ready(Ok(()))
    }
}

/// A `103 Early Hints` head with the end-to-end fields of the upstream's (its `Link`s).
fn early_hints(headers: &http::HeaderMap) -> Vec<u8> {
    let mut fields = headers.clone();
    forward::strip_hop_by_hop(&mut fields);
    fields.remove(http::header::CONTENT_LENGTH);
    let mut head = b"HTTP/1.1 103 Early Hints\r\n".to_vec();
    for (name, value) in &fields {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn hints() -> Vec<u8> {
        b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n".to_vec()
    }

    #[tokio::test]
    async fn a_queued_head_goes_out_on_flush_only() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        let interim = Interim::default();
        interim.open();
        interim.push(&hints());
        let waker = futures_noop();
        let mut cx = Context::from_waker(&waker);
        // A write does not start it.
        assert!(interim.poll_finish(&mut server, &mut cx).is_ready());
        assert!(interim.poll_drain(&mut server, &mut cx).is_ready());
        drop(server);
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, hints());
    }

    #[test]
    fn hints_a_client_does_not_read_stop_piling_up() {
        let interim = Interim::default();
        interim.open();
        for _ in 0..10_000 {
            interim.push(&hints());
        }
        let waiting = interim.lock().queued.len();
        assert!(
            waiting <= MAX_WAITING && waiting + hints().len() > MAX_WAITING,
            "{waiting} bytes wait"
        );
    }

    #[tokio::test]
    async fn a_closed_interim_drops_what_was_not_started() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        let interim = Interim::default();
        interim.push(&hints());
        interim.open();
        interim.push(&hints());
        interim.close().await;
        interim.push(&hints());
        let waker = futures_noop();
        let mut cx = Context::from_waker(&waker);
        assert!(interim.poll_drain(&mut server, &mut cx).is_ready());
        drop(server);
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.expect("read");
        assert!(got.is_empty());
    }

    #[test]
    fn only_end_to_end_fields_are_passed() {
        let mut headers = http::HeaderMap::new();
        headers.append("link", "</a.css>; rel=preload".parse().expect("valid"));
        headers.append("connection", "x-hop".parse().expect("valid"));
        headers.append("x-hop", "1".parse().expect("valid"));
        assert_eq!(
            early_hints(&headers),
            b"HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n"
        );
    }

    fn futures_noop() -> Waker {
        Waker::noop().clone()
    }
}
