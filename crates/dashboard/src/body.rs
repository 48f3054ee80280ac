//! The admin listener's response body: a whole buffer or a live event stream.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

use crate::events::EventStream;

/// A response body: [`Body::full`] for a page or a document, or a stream of server-sent
/// events that ends only when the client goes away.
#[derive(Debug)]
pub struct Body {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Full(Option<Bytes>),
    Events(Box<EventStream>),
}

impl Body {
    /// A body of these bytes.
    pub fn full(bytes: impl Into<Bytes>) -> Body {
        let bytes = bytes.into();
        Body {
            inner: Inner::Full((!bytes.is_empty()).then_some(bytes)),
        }
    }

    /// An event stream's body.
    pub(crate) fn events(stream: EventStream) -> Body {
        Body {
            inner: Inner::Events(Box::new(stream)),
        }
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match &mut self.get_mut().inner {
            Inner::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Inner::Events(stream) => stream.poll_event(cx).map(|b| Some(Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.inner, Inner::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            Inner::Events(_) => SizeHint::default(),
        }
    }
}
