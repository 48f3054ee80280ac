//! A send timeout for admin connections (nginx's `send_timeout`): a write that the client
//! takes nothing of for [`SEND_TIMEOUT`] fails, which ends the connection.
//!
//! A dashboard viewer that stops reading (a suspended laptop, a stuck script) would otherwise hold
//! its event stream, and one of the [`MAX_VIEWERS`](crate::MAX_VIEWERS) seats, for as long as TCP
//! lets it: the peer still acknowledges window probes, so that is for good. The events are small
//! (about 2 KB a second), so the socket's send buffer is kept small too ([`SEND_BUFFER`]; Linux
//! would grow it to 4 MB, half an hour of events) and a stopped viewer shows, and gives its seat
//! up, within a few minutes.
//!
//! Written here: tokio and hyper have no write timeout, and the proxy's own (in its
//! connection phases) is tied to its keep-alive rules.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// How long a write may wait with no byte taken before the connection fails.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// The admin sockets' send buffer (`SO_SNDBUF`; the kernel doubles it for its own use).
pub const SEND_BUFFER: usize = 64 * 1024;

/// A stream whose writes fail after [`SEND_TIMEOUT`] (or the given timeout) without progress.
#[derive(Debug)]
pub(crate) struct SendTimeout<S> {
    inner: S,
    timeout: Duration,
    /// Armed by the first write that had to wait; cleared by any write that went through.
    waiting: Option<Pin<Box<Sleep>>>,
}

impl<S> SendTimeout<S> {
    pub(crate) fn new(inner: S, timeout: Duration) -> SendTimeout<S> {
        SendTimeout {
            inner,
            timeout,
            waiting: None,
        }
    }

    /// A write (or flush) came back `result`: clears the deadline on progress, arms it on a
    /// first wait, and fails once it has passed.
    fn after<T>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if result.is_ready() {
            self.waiting = None;
            return result;
        }
        let timeout = self.timeout;
        let sleep = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took nothing within the send timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for SendTimeout<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for SendTimeout<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.after(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.after(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.after(cx, result)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_write_nobody_takes_fails_after_the_timeout_and_progress_restarts_it() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut stream = SendTimeout::new(near, Duration::from_secs(30));
        let chunk = [7u8; 1024];
        // The buffer fills; the next write waits.
        stream.write_all(&chunk).await.expect("room for one");
        let started = Instant::now();
        // The reader takes the buffer after 20 s: the wait ends in time.
        let reader = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(20)).await;
            let mut buf = [0u8; 1024];
            far.read_exact(&mut buf).await.expect("read");
            far
        });
        stream
            .write_all(&chunk)
            .await
            .expect("taken within the timeout");
        assert_eq!(started.elapsed(), Duration::from_secs(20));
        let _far = reader.await.expect("reader");
        // Nobody reads now: the next write fails 30 s after it began to wait.
        let started = Instant::now();
        let err = stream
            .write_all(&chunk)
            .await
            .expect_err("a stalled reader");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }
}
