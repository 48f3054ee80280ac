//! A client socket that can tell the kernel more of a response follows (`MSG_MORE`).
//!
//! A compressed body of known length reaches the connection one encoder call at a time: the
//! haproxy.org page is the head with its first call, then the second call about 100 µs
//! later. Written as they come, the two pieces are two loopback segments, and each wakes a
//! client that waits in `epoll_wait`: under load those wakeups alone were 3% of the proxy's
//! profile. While the body has more to come, its writes carry `MSG_MORE`, so the kernel holds
//! a partial segment until the rest is written without it (the body's last frame): one
//! segment, one wakeup. HAProxy sends the same way (its `option http-no-delay` turns it off).
//!
//! The kernel holds such data until the rest is written, an ACK arrives for data in flight,
//! or its probe timer fires (the retransmission timeout: 200 ms on loopback, at least that
//! elsewhere), so a stalled upstream delays what was already compressed by no more than
//! that. Only bodies gathered call by call whatever the pauses (known length, see
//! [`crate::encode::body::FlushPolicy`]) raise the flag; streams flush without it.
//!
//! Written by hand because neither tokio nor hyper pass send flags; `socket2` makes the
//! `sendmsg` call. Elsewhere than Linux the flag is ignored.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::exchange::more::MoreToCome;

/// A client connection's stream: writes carry `MSG_MORE` while its [`MoreToCome`] is raised.
#[derive(Debug)]
pub(crate) struct CorkedStream {
    inner: TcpStream,
    more: MoreToCome,
}

impl CorkedStream {
    /// Wraps `inner`; writes follow `more`.
    pub(crate) fn new(inner: TcpStream, more: MoreToCome) -> CorkedStream {
        CorkedStream { inner, more }
    }

    #[cfg(target_os = "linux")]
    fn poll_send(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        if !self.more.is_more() {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        }
        let flags = libc::MSG_MORE | libc::MSG_NOSIGNAL;
        loop {
            std::task::ready!(self.inner.poll_write_ready(cx))?;
            let sent = self.inner.try_io(tokio::io::Interest::WRITABLE, || {
                socket2::SockRef::from(&self.inner).send_vectored_with_flags(bufs, flags)
            });
            match sent {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                sent => return Poll::Ready(sent),
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn poll_send(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
}

impl Drop for CorkedStream {
    fn drop(&mut self) {
        if self.more.is_cut_short() {
            // A zero linger makes the close send RST.
            let _ = socket2::SockRef::from(&self.inner).set_linger(Some(std::time::Duration::ZERO));
        }
    }
}

impl AsyncRead for CorkedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CorkedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_send(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_send(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    async fn pair() -> (CorkedStream, MoreToCome, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let client = TcpStream::connect(addr).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        server.set_nodelay(true).expect("nodelay");
        let more = MoreToCome::default();
        (CorkedStream::new(server, more.clone()), more, client)
    }

    /// Reads what arrives within `wait`.
    async fn read_for(client: &mut TcpStream, wait: Duration) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let deadline = tokio::time::Instant::now() + wait;
        while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, client.read(&mut buf)).await {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    #[tokio::test]
    async fn without_the_flag_writes_go_out_at_once() {
        let (mut server, _more, mut client) = pair().await;
        server.write_all(b"head").await.expect("write");
        assert_eq!(
            read_for(&mut client, Duration::from_millis(100)).await,
            b"head"
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn with_the_flag_a_partial_segment_waits() {
        let (mut server, more, mut client) = pair().await;
        more.set(true);
        server.write_all(&[7; 3000]).await.expect("write");
        let written = std::time::Instant::now();
        let mut buf = [0u8; 4096];
        let n = client.read(&mut buf).await.expect("read");
        // Nothing else is written: the kernel sends the partial segment when its probe timer
        // fires (200 ms on loopback). Without MSG_MORE it arrives at once.
        assert!(n > 0);
        assert!(
            written.elapsed() >= Duration::from_millis(150),
            "arrived after {:?}",
            written.elapsed()
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_write_without_the_flag_sends_what_was_held() {
        let (mut server, more, mut client) = pair().await;
        more.set(true);
        let first: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        server.write_all(&first).await.expect("write");
        more.set(false);
        server.write_all(b"end").await.expect("write");
        let got = read_for(&mut client, Duration::from_millis(500)).await;
        assert_eq!(&got[..first.len()], &first[..]);
        assert_eq!(&got[first.len()..], b"end");
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn held_data_goes_out_by_itself_if_the_rest_never_comes() {
        let (mut server, more, mut client) = pair().await;
        more.set(true);
        server.write_all(b"partial").await.expect("write");
        assert_eq!(
            read_for(&mut client, Duration::from_secs(1)).await,
            b"partial"
        );
    }
}
