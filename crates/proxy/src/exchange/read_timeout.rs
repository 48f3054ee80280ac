//! An upstream body that fails when the upstream goes silent for too long: nginx's
//! `proxy_read_timeout`, HAProxy's `timeout server`.
//!
//! A response whose upstream stops sending mid-body would otherwise hold its client, its
//! buffers and (for a compressed body of known length, whose head waits for the first call)
//! even its head until the client gives up. The error ends the body like any upstream failure:
//! the client's connection is aborted, never given a clean end.
//!
//! One timer per body, made the first time the upstream has nothing ready and re-armed only
//! when it fires early: a frame costs a clock read, not a timer update.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::uri::Authority;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::error::ProxyError;

/// Why an upstream body failed, and which upstream it came from.
#[derive(Debug)]
pub(crate) struct UpstreamBodyError {
    upstream: Authority,
    cause: Cause,
}

#[derive(Debug)]
enum Cause {
    /// Nothing came for the read timeout.
    Silent(Duration),
    /// The connection failed (reset, malformed framing).
    Failed(Box<dyn StdError + Send + Sync>),
}

impl UpstreamBodyError {
    /// The error to answer with when nothing has been sent to the client yet: 504 for a
    /// silent upstream, 502 for a failed one.
    pub(crate) fn into_proxy_error(self) -> ProxyError {
        match self.cause {
            Cause::Silent(after) => ProxyError::UpstreamTimeout {
                upstream: self.upstream,
                after,
            },
            Cause::Failed(source) => ProxyError::Upstream {
                upstream: self.upstream,
                source,
            },
        }
    }
}

impl fmt::Display for UpstreamBodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            Cause::Silent(after) => {
                write!(f, "upstream {} sent nothing for {after:?}", self.upstream)
            }
            Cause::Failed(_) => write!(f, "upstream {} body failed", self.upstream),
        }
    }
}

impl StdError for UpstreamBodyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.cause {
            Cause::Silent(_) => None,
            Cause::Failed(source) => Some(source.as_ref()),
        }
    }
}

/// A body that fails when `inner` yields nothing for `limit`; its errors name the upstream.
pub(crate) struct ReadTimeout<B> {
    inner: B,
    upstream: Authority,
    limit: Duration,
    /// When the upstream last yielded (or the body was made).
    last: Instant,
    timer: Option<Pin<Box<Sleep>>>,
}

impl<B> ReadTimeout<B> {
    /// Wraps the body `upstream` is sending; the first frame is due within `limit` from now.
    pub(crate) fn new(inner: B, upstream: Authority, limit: Duration) -> ReadTimeout<B> {
        ReadTimeout {
            inner,
            upstream,
            limit,
            last: Instant::now(),
            timer: None,
        }
    }
}

impl<B> ReadTimeout<B> {
    fn error(&self, cause: Cause) -> UpstreamBodyError {
        UpstreamBodyError {
            upstream: self.upstream.clone(),
            cause,
        }
    }
}

impl<B> Body for ReadTimeout<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    type Data = Bytes;
    type Error = UpstreamBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            this.last = Instant::now();
            return Poll::Ready(
                frame.map(|frame| frame.map_err(|e| this.error(Cause::Failed(e.into())))),
            );
        }
        // A limit too far to represent never expires.
        let Some(due) = this.last.checked_add(this.limit) else {
            return Poll::Pending;
        };
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
        while timer.as_mut().poll(cx).is_ready() {
            if Instant::now() >= due {
                return Poll::Ready(Some(Err(this.error(Cause::Silent(this.limit)))));
            }
            // Frames came since the timer was set: wait out the rest of the new limit.
            timer.as_mut().reset(due);
        }
        Poll::Pending
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
    use http_body_util::BodyExt;
    use tokio::sync::mpsc;

    use crate::test_bodies::{channel, ChannelBody, Item};

    /// A body fed by `tx`, from upstream `o:1`, cut after `limit` of silence.
    fn timed(limit: Duration) -> (mpsc::Sender<Item>, ReadTimeout<ChannelBody>) {
        let (tx, inner) = channel();
        (
            tx,
            ReadTimeout::new(inner, Authority::from_static("o:1"), limit),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn frames_within_the_limit_pass_and_silence_fails() {
        let (tx, mut body) = timed(Duration::from_secs(10));
        for _ in 0..3 {
            // Each frame comes 8 s after the last: never 10 s of silence.
            let send = tx.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(8)).await;
                let _ = send
                    .send(Ok(Frame::data(Bytes::from_static(b"part"))))
                    .await;
            });
            let frame = body.frame().await.expect("a frame").expect("no timeout");
            assert_eq!(frame.into_data().expect("data"), "part");
        }
        let started = Instant::now();
        let error = body.frame().await.expect("an item").expect_err("a timeout");
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert_eq!(error.to_string(), "upstream o:1 sent nothing for 10s");
        assert_eq!(error.into_proxy_error().status(), 504);
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn the_end_of_the_body_passes() {
        let (tx, mut body) = timed(Duration::from_secs(1));
        drop(tx);
        assert!(body.frame().await.is_none());
    }
}
