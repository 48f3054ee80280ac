//! An upgraded client connection (a WebSocket, RFC 6455) joined to its upstream
//! connection: bytes copied both ways as they come, never compressed, until the upstream
//! closes (each end passed on to the other side; a client's end alone leaves the upstream's
//! answer to come), neither sends anything for [`Timeouts::upgrade_idle`] (HAProxy's
//! `timeout tunnel`), or a write to either side makes no progress for [`Timeouts::send`]
//! (nginx's `proxy_send_timeout` and `send_timeout` on an upgraded connection).
//!
//! The tunnel runs in the client connection's own task, after hyper has handed the stream
//! over (see [`ClientLink::hand_over`]): it keeps the connection's slot under
//! `max_connections` and its place in the open-connection gauge, and it is closed, both
//! sides, when the server's shutdown ends the connection tasks (a tunnel holds no shutdown
//! watcher, so that is at once: see `timeouts` in docs/config.md).
//!
//! [`Timeouts::upgrade_idle`]: crate::Timeouts::upgrade_idle
//! [`Timeouts::send`]: crate::Timeouts::send

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;
use tracing::debug;

use crate::counters::Counters;
use crate::exchange::interim::Interim;

/// What a request's exchange may leave to its client connection beside the response:
/// interim heads written before it, and a tunnel that takes the connection over after it.
#[derive(Clone)]
pub(crate) struct ClientLink {
    interim: Interim,
    tunnel: TunnelSlot,
    /// Tells the connection that a tunnel takes it over (its reads lose their deadlines).
    handed_over: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for ClientLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientLink").finish_non_exhaustive()
    }
}

impl ClientLink {
    /// The link of a connection whose `103` heads go to `interim` and whose task runs what
    /// `tunnel` holds once hyper is done with it; `handed_over` is called when a tunnel is
    /// left to run.
    pub(crate) fn new(
        interim: Interim,
        tunnel: &TunnelSlot,
        handed_over: impl Fn() + Send + Sync + 'static,
    ) -> ClientLink {
        ClientLink {
            interim,
            tunnel: tunnel.clone(),
            handed_over: Arc::new(handed_over),
        }
    }

    /// Where the upstream's `103` heads go for this connection.
    pub(crate) fn interim(&self) -> Interim {
        self.interim.clone()
    }

    /// Leaves `tunnel` to run once hyper has written the `101` and handed the connection
    /// over; the client's reads have no deadline from now on but the tunnel's own.
    pub(crate) fn hand_over(&self, tunnel: impl Future<Output = ()> + Send + 'static) {
        (self.handed_over)();
        *self.tunnel.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Box::pin(tunnel));
    }
}

type Pending = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Holds a tunnel between the request that opened it and the connection task that runs it.
#[derive(Clone, Default)]
pub(crate) struct TunnelSlot(Arc<Mutex<Option<Pending>>>);

impl std::fmt::Debug for TunnelSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TunnelSlot")
    }
}

impl TunnelSlot {
    /// Runs the tunnel left here, if any, to its end.
    pub(crate) async fn run(&self) {
        let tunnel = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(tunnel) = tunnel {
            tunnel.await;
        }
    }
}

/// The time limits of a tunnel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Neither side sent anything for this long: the tunnel ends.
    pub(crate) idle: Duration,
    /// A write to either side made no progress for this long: the tunnel ends. Without it, a side
    /// that stops reading but goes on writing (so the tunnel is never idle) would hold both
    /// connections for ever.
    pub(crate) send: Duration,
}

/// Joins the two upgraded connections when hyper hands them over, and copies between them
/// until either closes or `limits` end it. Counted in `counters`' active upgrades while it
/// runs.
pub(crate) async fn run(
    client: OnUpgrade,
    upstream: OnUpgrade,
    limits: Limits,
    counters: Arc<Counters>,
) {
    Counters::bump(&counters.active_upgrades);
    let outcome = async {
        let (client, upstream) = tokio::try_join!(client, upstream).map_err(io::Error::other)?;
        copy_until_idle(TokioIo::new(client), TokioIo::new(upstream), limits).await
    };
    match outcome.await {
        Ok(Ended::Closed(up, down)) => debug!(up, down, "tunnel closed"),
        Ok(Ended::Idle) => debug!(idle = ?limits.idle, "tunnel idle, closed"),
        Err(error) => debug!(%error, "tunnel failed"),
    }
    Counters::drop_one(&counters.active_upgrades);
}

/// How a tunnel ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// One side closed: its end was passed on to the other, then both were closed. Bytes
    /// copied client to upstream and upstream to client, up to then.
    Closed(u64, u64),
    /// Neither side sent anything for the idle time.
    Idle,
}

/// Copies `a` (the client) to `b` (the upstream) and `b` to `a` until the upstream's end of stream,
/// or nothing was read from either for `idle`; then both are dropped, which closes them. Each end
/// is passed on to the other side as a shutdown. The client's end alone does not end the tunnel: a
/// client that half-closes after its Close frame still gets the server's Close frame and last
/// messages, which a tunnel ended at the first end would drop. The server's end does (RFC 6455
/// §7.1.1: the server closes first), so a client that never closes holds nothing. A write that
/// makes no progress for `limits.send` fails the tunnel with [`io::ErrorKind::TimedOut`].
pub(crate) async fn copy_until_idle<A, B>(a: A, b: B, limits: Limits) -> io::Result<Ended>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let start = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let (mut a_read, mut a_write) = tokio::io::split(Active::new(a, start, last.clone()));
    let (mut b_read, mut b_write) = tokio::io::split(Active::new(b, start, last.clone()));
    let up = AtomicU64::new(0);
    let down = AtomicU64::new(0);
    let forward = pass(&mut a_read, &mut b_write, &up, limits.send);
    let backward = pass(&mut b_read, &mut a_write, &down, limits.send);
    tokio::pin!(forward, backward);
    let mut forward_ended = false;
    loop {
        let since = Duration::from_millis(last.load(Ordering::Relaxed));
        let due = start + since + limits.idle;
        tokio::select! {
            passed = &mut forward, if !forward_ended => {
                passed?;
                forward_ended = true;
            }
            passed = &mut backward => {
                passed?;
                break;
            }
            () = tokio::time::sleep_until(due) => {
                if Duration::from_millis(last.load(Ordering::Relaxed)) == since {
                    return Ok(Ended::Idle);
                }
            }
        }
    }
    Ok(Ended::Closed(
        up.load(Ordering::Relaxed),
        down.load(Ordering::Relaxed),
    ))
}

/// Copies `from` to `to` until `from` ends, then shuts `to` down; counts into `copied`.
/// Fails when a write (or the shutdown) makes no progress for `stall`.
async fn pass<R, W>(from: &mut R, to: &mut W, copied: &AtomicU64, stall: Duration) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; COPY_BUF];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return within(stall, to.shutdown()).await;
        }
        let mut rest = &buf[..n];
        while !rest.is_empty() {
            let written = within(stall, to.write(rest)).await?;
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            rest = &rest[written..];
            copied.fetch_add(written as u64, Ordering::Relaxed);
        }
    }
}

/// `write`'s result, or [`io::ErrorKind::TimedOut`] if it takes longer than `limit`.
async fn within<T>(limit: Duration, write: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    tokio::time::timeout(limit, write).await.map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "a write made no progress for the send timeout",
        )
    })?
}

/// Bytes read per call on each side (tokio's `copy` uses 8 KiB; a WebSocket message of
/// a few hundred KiB then takes fewer wake-ups).
const COPY_BUF: usize = 16 * 1024;

/// A stream that notes when it last read something.
struct Active<S> {
    inner: S,
    start: Instant,
    last: Arc<AtomicU64>,
}

impl<S> Active<S> {
    fn new(inner: S, start: Instant, last: Arc<AtomicU64>) -> Active<S> {
        Active { inner, start, last }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Active<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            let millis = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.last.fetch_max(millis, Ordering::Relaxed);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Active<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
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

    /// An idle time of `idle` seconds and a send time of 30 s.
    fn limits(idle: u64) -> Limits {
        Limits {
            idle: Duration::from_secs(idle),
            send: Duration::from_secs(30),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_side_that_stops_reading_ends_the_tunnel_after_the_send_time() {
        // The upstream never reads but writes a byte a second, so the tunnel is never idle;
        // the client writes until the upstream's side is full.
        let (mut client, a) = tokio::io::duplex(1024);
        let (mut upstream, b) = tokio::io::duplex(1024);
        let started = Instant::now();
        let tunnel = tokio::spawn(copy_until_idle(a, b, limits(10)));
        let writer = tokio::spawn(async move {
            let chunk = [7u8; 256];
            while client.write_all(&chunk).await.is_ok() {}
        });
        let mut ticks = 0;
        while !tunnel.is_finished() && ticks < 100 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if upstream.write_all(b"x").await.is_err() {
                break;
            }
            ticks += 1;
        }
        let ended = tokio::time::timeout(Duration::from_secs(5), tunnel)
            .await
            .expect("the tunnel ended")
            .expect("joined");
        let error = ended.expect_err("a stalled write ends the tunnel");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(
            started.elapsed() <= Duration::from_secs(32),
            "{:?}",
            started.elapsed()
        );
        writer.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn silence_on_both_sides_ends_the_tunnel_after_idle() {
        let (mut client, a) = tokio::io::duplex(1024);
        let (mut upstream, b) = tokio::io::duplex(1024);
        let started = Instant::now();
        let tunnel = tokio::spawn(copy_until_idle(a, b, limits(10)));
        // Traffic at 6 s moves the deadline to 16 s.
        tokio::time::sleep(Duration::from_secs(6)).await;
        client.write_all(b"ping").await.expect("write");
        let mut buf = [0u8; 4];
        upstream.read_exact(&mut buf).await.expect("read");
        assert_eq!(&buf, b"ping");
        let ended = tunnel.await.expect("joined").expect("no error");
        assert_eq!(ended, Ended::Idle);
        assert_eq!(started.elapsed(), Duration::from_secs(16));
        // Both sides see the end.
        assert_eq!(client.read(&mut buf).await.expect("read"), 0);
        assert_eq!(upstream.read(&mut buf).await.expect("read"), 0);
    }

    #[tokio::test]
    async fn the_upstreams_end_ends_the_tunnel() {
        let (mut client, a) = tokio::io::duplex(1024);
        let (mut upstream, b) = tokio::io::duplex(1024);
        let tunnel = tokio::spawn(copy_until_idle(a, b, limits(60)));
        upstream.write_all(b"bye").await.expect("write");
        upstream.shutdown().await.expect("shutdown");
        // The client never closes: the tunnel ends anyway, and the client reads the end.
        let ended = tunnel.await.expect("joined").expect("no error");
        assert_eq!(ended, Ended::Closed(0, 3));
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.expect("read");
        assert_eq!(rest, b"bye");
    }

    #[tokio::test]
    async fn after_the_clients_end_the_upstreams_answer_still_comes() {
        let (mut client, a) = tokio::io::duplex(1024);
        let (mut upstream, b) = tokio::io::duplex(1024);
        let tunnel = tokio::spawn(copy_until_idle(a, b, limits(60)));
        upstream.write_all(b"de").await.expect("write");
        let mut back = [0u8; 2];
        client.read_exact(&mut back).await.expect("read");
        assert_eq!(&back, b"de");
        client.write_all(b"abc").await.expect("write");
        client.shutdown().await.expect("shutdown");
        // The upstream gets what was sent, then the end...
        let mut got = Vec::new();
        upstream.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, b"abc");
        // ...and may still answer (a WebSocket server's Close frame) before it ends too.
        upstream.write_all(b"bye").await.expect("write");
        upstream.shutdown().await.expect("shutdown");
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.expect("read");
        assert_eq!(rest, b"bye");
        let ended = tunnel.await.expect("joined").expect("no error");
        assert_eq!(ended, Ended::Closed(3, 5));
    }
}
