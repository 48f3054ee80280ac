//! The client's request body on its way upstream: cut when the client goes silent for too
//! long (nginx's `client_body_timeout`), its errors marked as the client's, and its end
//! announced so that the upstream's time to answer starts only then.
//!
//! The silence is counted only while the upstream connection waits for the client: from
//! the first poll that finds nothing ready after a frame, to the next frame. A body not
//! polled (the upstream is slow to read) is not the client's fault: that wait is the
//! upstream's, and [`Sent::upstream_stalled`] ends it after the upstream timeout (nginx's
//! `proxy_send_timeout`, the write side of HAProxy's `timeout server`), counted from the
//! frame the upstream connection last took to the next time it asks for one.
//!
//! A failed body fails the upstream request with it; the HTTP client then closes that
//! connection instead of pooling it, so a stalled upload holds no origin connection.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

use crate::error::ProxyError;

/// Why a request body failed: the client's doing either way.
#[derive(Debug)]
pub(crate) enum ClientBodyError {
    /// Nothing came for the client body timeout.
    Silent(Duration),
    /// The client's framing was wrong or its connection ended mid-body.
    Failed(hyper::Error),
    /// The body grew past `limits.max_body`, these bytes.
    TooLarge(u64),
}

impl fmt::Display for ClientBodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientBodyError::Silent(after) => {
                write!(f, "client sent no request body for {after:?}")
            }
            ClientBodyError::Failed(_) => f.write_str("request body failed"),
            ClientBodyError::TooLarge(limit) => {
                write!(f, "request body over limits.max_body ({limit} bytes)")
            }
        }
    }
}

impl StdError for ClientBodyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ClientBodyError::Silent(_) | ClientBodyError::TooLarge(_) => None,
            ClientBodyError::Failed(source) => Some(source),
        }
    }
}

/// The client-side error an upstream request failed with, when its request body failed:
/// `error`'s chain holds a [`ClientBodyError`]. `None` when the failure was the upstream's.
pub(crate) fn client_failure(
    error: Box<dyn StdError + Send + Sync>,
) -> Result<ProxyError, Box<dyn StdError + Send + Sync>> {
    let mut cause: Option<&(dyn StdError + 'static)> = Some(error.as_ref());
    while let Some(current) = cause {
        match current.downcast_ref::<ClientBodyError>() {
            Some(ClientBodyError::Silent(after)) => {
                return Ok(ProxyError::ClientTimeout { after: *after })
            }
            Some(ClientBodyError::Failed(_)) => {
                return Ok(ProxyError::ClientBody { source: error })
            }
            Some(ClientBodyError::TooLarge(_)) => return Ok(too_large()),
            None => cause = current.source(),
        }
    }
    Err(error)
}

/// Completes once the request body has been sent whole (at once for a request without one).
#[derive(Debug)]
pub(crate) struct Sent {
    end: Option<oneshot::Receiver<()>>,
    handed: Arc<Handed>,
}

impl Sent {
    /// Waits for the end of the body. A body dropped before its end also ends the wait: the
    /// request it belonged to fails on its own.
    pub(crate) async fn wait(&mut self) {
        if let Some(receiver) = &mut self.end {
            let _ = receiver.await;
            self.end = None;
        }
    }

    /// Completes when the upstream connection has left a frame of the body untaken for
    /// `limit`: it took the frame and has not asked for the next one since, so the upstream
    /// is not reading. Never completes while the connection waits for the client.
    pub(crate) fn upstream_stalled(&self, limit: Duration) -> impl Future<Output = ()> {
        let handed = self.handed.clone();
        async move {
            loop {
                let due = match handed.since() {
                    Some(since) => match since.checked_add(limit) {
                        Some(due) => due,
                        None => return std::future::pending().await,
                    },
                    None => Instant::now() + limit,
                };
                tokio::time::sleep_until(due).await;
                if handed.since().is_some_and(|since| since.elapsed() >= limit) {
                    return;
                }
            }
        }
    }
}

/// When the upstream connection took the body's last frame, while it has not asked for the
/// next one.
#[derive(Debug, Default)]
struct Handed(Mutex<Option<Instant>>);

impl Handed {
    fn since(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, since: Option<Instant>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = since;
    }
}

/// 413 for a request body over `limits.max_body`.
pub(crate) fn too_large() -> ProxyError {
    ProxyError::Refused {
        status: http::StatusCode::PAYLOAD_TOO_LARGE,
        reason: "request body over limits.max_body",
    }
}

/// A request body with a limit on the client's silences and on its size; see the module
/// documentation.
#[derive(Debug)]
pub(crate) struct RequestBody {
    inner: Incoming,
    limit: Duration,
    /// The most bytes passed on (`limits.max_body`), and the bytes passed so far.
    max_body: Option<u64>,
    taken: u64,
    /// Since when the upstream side has been waiting for the client, if it is.
    waiting_since: Option<Instant>,
    timer: Option<Pin<Box<Sleep>>>,
    sent: Option<oneshot::Sender<()>>,
    handed: Arc<Handed>,
}

impl RequestBody {
    /// Wraps the client's body; the client may pause at most `limit` between two frames,
    /// and send at most `max_body` bytes.
    pub(crate) fn new(
        inner: Incoming,
        limit: Duration,
        max_body: Option<u64>,
    ) -> (RequestBody, Sent) {
        let (sender, receiver) = oneshot::channel();
        let done = inner.is_end_stream();
        let handed = Arc::new(Handed::default());
        let body = RequestBody {
            inner,
            limit,
            max_body,
            taken: 0,
            waiting_since: None,
            timer: None,
            sent: (!done).then_some(sender),
            handed: handed.clone(),
        };
        let sent = Sent {
            end: (!done).then_some(receiver),
            handed,
        };
        (body, sent)
    }

    fn announce_end(&mut self) {
        if let Some(sent) = self.sent.take() {
            let _ = sent.send(());
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        let this = &mut *self;
        this.handed.set(None);
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.waiting_since = None;
                if let (Some(max), Some(data)) = (this.max_body, frame.data_ref()) {
                    // Nothing past the limit goes upstream: the frame that crosses it fails
                    // the body instead.
                    this.taken = this.taken.saturating_add(data.len() as u64);
                    if this.taken > max {
                        return Poll::Ready(Some(Err(ClientBodyError::TooLarge(max))));
                    }
                }
                if this.inner.is_end_stream() {
                    this.announce_end();
                } else {
                    this.handed.set(Some(Instant::now()));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(ClientBodyError::Failed(error)))),
            Poll::Ready(None) => {
                this.announce_end();
                Poll::Ready(None)
            }
            Poll::Pending => {
                let since = *this.waiting_since.get_or_insert_with(Instant::now);
                // A limit too far to represent never expires.
                let Some(due) = since.checked_add(this.limit) else {
                    return Poll::Pending;
                };
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
                if timer.deadline() != due {
                    timer.as_mut().reset(due);
                }
                if timer.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(Err(ClientBodyError::Silent(this.limit))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_request_body_failure_is_the_clients() {
        let silent: Box<dyn StdError + Send + Sync> =
            Box::new(ClientBodyError::Silent(Duration::from_secs(2)));
        let failure = client_failure(silent).expect("the client's");
        assert_eq!(failure.status(), 408);
        assert_eq!(failure.side(), crate::Side::Client);
        let upstream: Box<dyn StdError + Send + Sync> = "connection reset".into();
        let failure = client_failure(upstream).expect_err("the upstream's");
        assert_eq!(failure.to_string(), "connection reset");
    }
}
