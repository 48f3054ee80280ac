//! A request body that can be handed to a second upstream when the first could not be
//! connected to.
//!
//! The HTTP client consumes the request it is given, even when the connection fails before a
//! byte is written. The client's body is therefore kept in a shared slot and only taken out
//! on the first poll, which happens after a connection is established: after a connect
//! failure the slot still holds it, untouched, and the next attempt can send it. Nothing is
//! buffered.
//!
//! The body is boxed: the HTTP client keeps a queue of 32 request slots per upstream
//! connection, each as large as the request, so a body inline costs every pooled connection
//! 32 times its size: the queue took 12.3 KB a connection with the body inline, 9.5 KB boxed
//! (heaptrack, 1,000 upstream connections, `bench/proxy.sh MODE=h2`).

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

/// Owns a request body until an attempt starts sending it.
#[derive(Debug)]
pub(crate) struct Replay<B> {
    slot: Arc<Mutex<Option<Box<B>>>>,
    end_stream: bool,
    hint: SizeHint,
}

impl<B: Body> Replay<B> {
    /// Keeps `body` for the attempts to come.
    pub(crate) fn new(body: B) -> Replay<B> {
        Replay {
            end_stream: body.is_end_stream(),
            hint: body.size_hint(),
            slot: Arc::new(Mutex::new(Some(Box::new(body)))),
        }
    }

    /// A body for one attempt: it takes the real body on its first poll.
    pub(crate) fn attempt(&self) -> ReplayBody<B> {
        ReplayBody {
            slot: Some(self.slot.clone()),
            body: None,
            end_stream: self.end_stream,
            hint: self.hint,
        }
    }

    /// Whether no attempt has started sending the body, so another one still can.
    pub(crate) fn is_unsent(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

/// The body of one attempt; see [`Replay`].
#[derive(Debug)]
pub(crate) struct ReplayBody<B> {
    slot: Option<Arc<Mutex<Option<Box<B>>>>>,
    body: Option<Box<B>>,
    end_stream: bool,
    hint: SizeHint,
}

impl<B> Body for ReplayBody<B>
where
    B: Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = &mut *self;
        if let Some(slot) = this.slot.take() {
            this.body = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        }
        match &mut this.body {
            Some(body) => Pin::new(&mut **body).poll_frame(cx),
            // Another attempt took the body: this one can only end.
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.body {
            Some(body) => body.is_end_stream(),
            None => self.end_stream,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.body {
            Some(body) => body.size_hint(),
            None => self.hint,
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};

    use super::*;

    #[tokio::test]
    async fn an_attempt_dropped_unpolled_leaves_the_body_to_the_next() {
        let replay = Replay::new(Full::new(Bytes::from_static(b"payload")));
        assert_eq!(replay.attempt().size_hint().exact(), Some(7));
        drop(replay.attempt());
        assert!(replay.is_unsent());
        let sent = replay.attempt().collect().await.expect("infallible");
        assert_eq!(sent.to_bytes(), "payload");
        assert!(!replay.is_unsent());
        let late = replay.attempt().collect().await.expect("infallible");
        assert!(late.to_bytes().is_empty());
    }
}
