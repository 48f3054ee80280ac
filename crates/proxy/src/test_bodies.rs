//! Bodies for unit tests.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::mpsc;

/// What a [`ChannelBody`] yields.
pub(crate) type Item = Result<Frame<Bytes>, std::io::Error>;

/// A body fed through a channel, so tests control pauses, errors and the end.
pub(crate) struct ChannelBody(mpsc::Receiver<Item>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        self.0.poll_recv(cx)
    }
}

/// A body of known length that arrives through a channel: its size hint counts down what is
/// left, as hyper's does for a `Content-Length` body.
pub(crate) struct Announced {
    inner: ChannelBody,
    left: u64,
}

impl Announced {
    /// `inner`, announced as `len` bytes long.
    pub(crate) fn new(inner: ChannelBody, len: u64) -> Announced {
        Announced { inner, left: len }
    }
}

impl Body for Announced {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            let n = frame.data_ref().map_or(0, |data| data.len() as u64);
            self.left = self.left.saturating_sub(n);
        }
        polled
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

/// A channel body and the sender that feeds it.
pub(crate) fn channel() -> (mpsc::Sender<Item>, ChannelBody) {
    let (tx, rx) = mpsc::channel(64);
    (tx, ChannelBody(rx))
}

/// Text that compresses as a web page does.
pub(crate) fn text(len: usize) -> Vec<u8> {
    b"<li class=\"item\">zipwire compresses streams</li>\n"
        .iter()
        .cycle()
        .take(len)
        .copied()
        .collect()
}

/// A stream over a vector of frames (what `futures::stream::iter` does).
pub(crate) fn futures_iter<T: Unpin>(items: Vec<T>) -> VecStream<T> {
    VecStream(items.into_iter())
}

/// The stream [`futures_iter`] makes.
pub(crate) struct VecStream<T>(std::vec::IntoIter<T>);

impl<T: Unpin> futures_core::Stream for VecStream<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<T>> {
        Poll::Ready(self.0.next())
    }
}
