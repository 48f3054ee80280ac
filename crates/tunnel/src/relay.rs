//! One forwarded connection: the local TCP stream on one side, the tunnel's TLS stream on the
//! other, three loops between them.
//!
//! - The **sender** reads what the local side has ready (up to a block; it flushes when no
//!   more input is ready rather than per packet), asks the [`Policy`], compresses off the
//!   async threads and hands the frame to the writer.
//! - The **writer** owns the TLS write half. Whether it is waiting for a frame (rather than
//!   for the socket) is what the policy watches: waiting means the link could take data now
//!   and no compressed block is ready.
//! - The **receiver** reads frames, decodes them and writes the bytes to the local side.
//!
//! An end frame half-closes the local side, so half-close propagates. Any error (a local
//! reset, a corrupt frame, a peer that vanished without an end frame) resets the local
//! connection, so the application sees an error rather than a clean, silently truncated end,
//! and an abort frame tells the peer to do the same. After the peer's end frame the receiver
//! goes on reading until the peer closes TLS: an abort then (the peer's side failed while
//! this side was still sending), or a close without TLS's `close_notify`, still fails the
//! connection, and pings are still answered.

use std::fmt;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use zipwire_adapt::cpu::Work;

use crate::blocks::{BlockEncoder, BlockError};
use crate::frame::{self, Codec, FrameError, Method, DATA_HEADER_LEN};
use crate::handshake::{ACCEPT_DEFLATE, ACCEPT_ZSTD};
use crate::keepalive::{self, Heard};
use crate::memory::Hold;
use crate::policy::{Decision, Link, Policy, RawReason, Sent, Signals};
use crate::shared::choice_for;
pub use crate::shared::Shared;
use crate::tcp_info::{LinkProbe, TcpInfo};

mod idle;
mod receive;

use receive::receive_loop;

/// What a block compresses with when the memory cap has room for no other method: stateless
/// deflate at level 1 (see [`fit_memory`]).
const STATELESS_FALLBACK: Method = Method {
    codec: Codec::Deflate,
    level: 1,
};

/// Frames the writer's queue holds before the sender waits.
const QUEUE_FRAMES: usize = 4;

/// Blocks smaller than this are compressed on the async thread: handing them to the blocking
/// pool would cost more than compressing them.
const INLINE_LIMIT: usize = 16 * 1024;

/// How long the writer may go on flushing (an abort frame, say) once the connection failed.
const FLUSH_GRACE: Duration = Duration::from_secs(2);

/// Why a forwarded connection ended badly.
#[derive(Debug)]
pub enum RelayError {
    /// Reading from the local side failed.
    LocalRead(io::Error),
    /// Writing to the local side failed.
    LocalWrite(io::Error),
    /// The tunnel connection failed.
    Tunnel(io::Error),
    /// The tunnel connection ended without an end frame.
    PeerVanished,
    /// The peer sent an abort frame.
    PeerAborted(String),
    /// The peer sent a malformed frame.
    Frame(FrameError),
    /// The peer sent a frame that does not decode.
    Block(BlockError),
    /// The peer stayed silent through the keepalive's pings for this long.
    PeerSilent(Duration),
    /// The endpoint is shutting down and its grace period is over.
    Shutdown,
    /// Another loop of the connection failed first.
    Cancelled,
}

impl fmt::Display for RelayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RelayError::LocalRead(e) => write!(f, "reading the forwarded connection: {e}"),
            RelayError::LocalWrite(e) => write!(f, "writing the forwarded connection: {e}"),
            RelayError::Tunnel(e) => write!(f, "tunnel connection: {e}"),
            RelayError::PeerVanished => f.write_str("tunnel peer closed the connection mid-stream"),
            RelayError::PeerAborted(reason) => write!(f, "tunnel peer aborted: {reason}"),
            RelayError::Frame(e) => write!(f, "malformed frame from the peer: {e}"),
            RelayError::Block(e) => write!(f, "bad frame from the peer: {e}"),
            RelayError::Shutdown => f.write_str("tunnel endpoint shutting down"),
            RelayError::PeerSilent(silence) => write!(
                f,
                "tunnel peer silent for {:.1} s despite pings: declared dead",
                silence.as_secs_f64()
            ),
            RelayError::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl std::error::Error for RelayError {}

/// The forwarded connection, shared by the sender and the receiver. Unlike tokio's owned
/// halves, dropping it never half-closes the socket: a failed connection must end with a
/// reset, and a FIN sent on drop would reach the application first and look like a clean end.
#[derive(Clone)]
struct Local(Arc<TcpStream>);

impl Local {
    async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.0.readable().await?;
            match self.0.try_read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                result => return result,
            }
        }
    }

    async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            self.0.writable().await?;
            match self.0.try_write(buf) {
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn shutdown_write(&self) -> io::Result<()> {
        socket2::SockRef::from(&*self.0).shutdown(std::net::Shutdown::Write)
    }

    /// Makes the last close send a reset instead of a clean end.
    fn reset_on_close(&self) {
        let _ = socket2::SockRef::from(&*self.0).set_linger(Some(Duration::ZERO));
    }

    /// Undoes [`Local::reset_on_close`]: the connection ended cleanly, and the last close
    /// must not discard bytes the application has not read yet.
    fn close_cleanly(&self) {
        let _ = socket2::SockRef::from(&*self.0).set_linger(None);
    }
}

/// What the writer is handed.
enum Outgoing {
    Frame(Vec<u8>),
    End,
    Abort(String),
    Ping,
    Pong,
}

/// Carries `local` over `tunnel` until both directions have ended, or one fails;
/// `peer_accepts` is what the peer said it accepts in the handshake, and `probe` reads the
/// kernel's view of the tunnel's TCP connection for the policy; `path` names the way the
/// tunnel comes (the peer's address on a server), whose remembered pace a new connection
/// starts from.
///
/// The local connection is reset on close from the start and set back to a plain close only
/// when both directions ended cleanly: whatever drops it early (a failure, a runtime shut
/// down) the application sees an error, never a clean end of a cut stream.
///
/// # Errors
///
/// The first [`RelayError`]; the local connection has been reset then.
pub async fn relay<S>(
    local: TcpStream,
    tunnel: S,
    probe: Option<LinkProbe>,
    peer_accepts: u8,
    shared: Arc<Shared>,
    path: Option<IpAddr>,
) -> Result<(), RelayError>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let _live = shared.drain.enter();
    let local = Local(Arc::new(local));
    local.reset_on_close();
    let (tunnel_r, tunnel_w) = tokio::io::split(tunnel);
    let writer_waiting = Arc::new(AtomicBool::new(true));
    let (tx, rx) = mpsc::channel(QUEUE_FRAMES);
    let (cancel, cancelled) = watch::channel(false);

    let choice = choice_for(&shared.choice, peer_accepts);
    let zstd = peer_accepts & ACCEPT_ZSTD != 0;
    let mut policy = Policy::new(choice, zstd);
    if let Some(pace) = shared.recall_pace(path, Instant::now()) {
        policy.recall_pace(pace);
    }
    let acked = probe.as_ref().and_then(LinkProbe::try_clone);
    // What a block compresses with when the memory cap has room for nothing else.
    let fallback = (peer_accepts & ACCEPT_DEFLATE != 0).then_some(STATELESS_FALLBACK);
    let sender = send_loop(
        local.clone(),
        tx.clone(),
        writer_waiting.clone(),
        (policy, probe, fallback),
        (shared.clone(), path),
    );
    let heard = Arc::new(Heard::new());
    let watcher = watch_loop(tx.downgrade(), (heard.clone(), acked), shared.clone());
    let receiver = receive_loop(tunnel_r, local.clone(), tx, (heard, shared.clone()));
    let writer = write_loop(tunnel_w, rx, writer_waiting);

    let stop = Stop {
        cancel: &cancel,
        cancelled,
        local: &local,
    };
    let loops = async {
        tokio::join!(
            stop.run(sender, Duration::ZERO),
            stop.run(receiver, Duration::ZERO),
            stop.run(writer, FLUSH_GRACE),
        )
    };
    tokio::pin!(loops);
    let watched = stop.run(watcher, Duration::ZERO);
    tokio::pin!(watched);
    // The watcher never ends on its own accord unless the connection must be aborted; then
    // the loops still run until the writer has flushed the abort frame.
    let (watched, (sent, received, written)) = tokio::select! {
        biased;
        results = &mut loops => (Ok(()), results),
        watched = &mut watched => (watched, loops.await),
    };
    let result = [watched, sent, received, written]
        .into_iter()
        .filter_map(Result::err)
        .find(|e| !matches!(e, RelayError::Cancelled))
        .map_or(Ok(()), Err);
    if result.is_ok() {
        local.close_cleanly();
    }
    result
}

/// Watches a connection from outside its data: ends, with the error to abort it with, when
/// the endpoint shuts down or the keepalive declares the peer dead. It queues pings and the
/// abort frame for the peer itself (through a weak sender, so that it never keeps the
/// writer waiting for more frames).
async fn watch_loop(
    tx: mpsc::WeakSender<Outgoing>,
    (heard, acked): (Arc<Heard>, Option<LinkProbe>),
    shared: Arc<Shared>,
) -> Result<(), RelayError> {
    let dead = async {
        let Some(config) = shared.keepalive else {
            return std::future::pending().await;
        };
        let ping = || {
            if let Some(tx) = tx.upgrade() {
                // A full queue means frames are going out anyway.
                let _ = tx.try_send(Outgoing::Ping);
            }
        };
        // Data waited at the last look (in the queue, the kernel or on the path: see
        // `keepalive::data_waiting`) and more of the stream was acknowledged by the peer's TCP
        // since. Only while data waits: a path that swallows bytes (a hung middlebox) still
        // acknowledges pings. Data waiting in the kernel or on the path counts as well as the
        // queue: else a burst draining through a slow link's deep queue (8 Mbit/s, pings every
        // 100 ms) would have the peer declared dead mid-transfer, as would an upload whose end
        // frame had gone.
        // While data waits, a stall shorter than TCP's own retransmission timeout (before
        // backoff, so that a dead path is still found) is no sign of death either: on a path
        // whose queue holds seconds, a lost segment stalls the acknowledgements for longer
        // than a short keepalive's limit.
        let mut last: Option<TcpInfo> = None;
        let mut queued_then = false;
        let mut progress = Instant::now();
        let taking = || {
            let now = acked.as_ref().and_then(LinkProbe::read);
            let waited = keepalive::data_waiting(queued_then, last.as_ref(), config.count);
            let more = matches!((last, now), (Some(a), Some(b)) if b.bytes_acked > a.bytes_acked);
            if more {
                progress = Instant::now();
            }
            let retrying = now.is_some_and(|info| progress.elapsed() < info.rto);
            last = now;
            queued_then = tx
                .upgrade()
                .is_some_and(|tx| tx.capacity() < tx.max_capacity());
            waited && (more || retrying)
        };
        keepalive::wait_for_death(config, &heard, ping, taking).await
    };
    let error = tokio::select! {
        () = shared.drain.aborted() => RelayError::Shutdown,
        silence = dead => RelayError::PeerSilent(silence),
    };
    if let Some(tx) = tx.upgrade() {
        let abort = Outgoing::Abort(error.to_string());
        let _ = tokio::time::timeout(FLUSH_GRACE, tx.send(abort)).await;
    }
    Err(error)
}

/// Stops a connection's loops together.
struct Stop<'a> {
    cancel: &'a watch::Sender<bool>,
    cancelled: watch::Receiver<bool>,
    local: &'a Local,
}

impl Stop<'_> {
    /// Runs `task`; if it fails, arms the reset of the local connection (before any other
    /// loop can let go of it) and tells the others to stop. Stops `task` itself `grace`
    /// after another loop failed.
    async fn run<F>(&self, task: F, grace: Duration) -> Result<(), RelayError>
    where
        F: std::future::Future<Output = Result<(), RelayError>>,
    {
        let mut cancelled = self.cancelled.clone();
        let stop = async {
            let _ = cancelled.wait_for(|c| *c).await;
            tokio::time::sleep(grace).await;
        };
        let result = tokio::select! {
            result = task => result,
            () = stop => Err(RelayError::Cancelled),
        };
        if let Err(error) = &result {
            if !matches!(error, RelayError::Cancelled) {
                self.local.reset_on_close();
            }
            let _ = self.cancel.send(true);
        }
        result
    }
}

/// Reads up to one block: waits for the first bytes, then takes what else is ready without
/// waiting. Returns 0 at the end of the stream.
async fn read_block(local: &Local, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = local.read(buf).await?;
    while filled > 0 && filled < buf.len() {
        match local.0.try_read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

async fn send_loop(
    local: Local,
    tx: mpsc::Sender<Outgoing>,
    writer_waiting: Arc<AtomicBool>,
    (mut policy, probe, fallback): (Policy, Option<LinkProbe>, Option<Method>),
    (shared, path): (Arc<Shared>, Option<IpAddr>),
) -> Result<(), RelayError> {
    let mut encoder = Some(Box::new(BlockEncoder::new()));
    let mut memory = shared.memory.hold();
    let mut block = vec![0u8; shared.block_size];
    let began = Instant::now();
    loop {
        block.resize(shared.block_size, 0);
        let waited = match encoder.as_deref_mut() {
            Some(enc) => idle::wait_for_data(&local, enc, &mut memory, idle::IDLE_RELEASE).await,
            None => Ok(()),
        };
        let read = match waited {
            Ok(()) => read_block(&local, &mut block).await,
            Err(e) => Err(e),
        };
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                // Not without a limit: with the queue full behind a tunnel that does not drain
                // (the peer's application reads nothing), the abort would wait for ever and
                // the connection would never end. Past the grace the tunnel is dropped, and
                // the peer sees that instead.
                let abort = Outgoing::Abort(format!("forwarded connection failed: {e}"));
                let _ = tokio::time::timeout(FLUSH_GRACE, tx.send(abort)).await;
                return Err(RelayError::LocalRead(e));
            }
        };
        if n == 0 {
            let _ = tx.send(Outgoing::End).await;
            return Ok(());
        }
        block.truncate(n);
        let signals = Signals {
            full: n == shared.block_size,
            link_idle: writer_waiting.load(Ordering::Acquire) || tx.capacity() == tx.max_capacity(),
            cpu_throttled: shared.budget.is_some() && shared.throttled(),
            link: probe.as_ref().and_then(|p| link_state(p, began)),
        };
        let decision = match policy.decide(&block, signals) {
            Decision::Compress(method) => {
                let enc = encoder.get_or_insert_with(Box::default);
                fit_memory(enc, method, (&mut policy, fallback), &mut memory)
                    .map_or(Decision::Raw(RawReason::MemoryCap), Decision::Compress)
            }
            raw => raw,
        };
        let mut measured = None;
        let mut frame = Vec::with_capacity(n + DATA_HEADER_LEN);
        let (method, reason, time) = match decision {
            Decision::Raw(reason) => {
                let mut enc = encoder.take().unwrap_or_default();
                let used = enc
                    .encode_frame(Method::RAW, &block, &mut frame)
                    .map_err(RelayError::LocalRead)?;
                encoder = Some(enc);
                (used, Some(reason), Duration::ZERO)
            }
            Decision::Compress(method) => {
                let enc = encoder.take().unwrap_or_default();
                let (enc, returned, result, time) = compress(enc, method, block, frame).await;
                memory.settle(enc.memory_size());
                encoder = Some(enc);
                (block, frame) = returned;
                let used = result.map_err(RelayError::LocalRead)?;
                if policy.compressed(n, frame.len()) && used == method {
                    measured = Some((n, frame.len()));
                }
                if shared.budget.is_some() {
                    shared.spend(time, n);
                }
                let reason = (used == Method::RAW).then_some(RawReason::NoGain);
                (used, reason, time)
            }
        };
        shared.stats.sent(method, n, frame.len(), time, reason);
        let waited = match tx.try_send(Outgoing::Frame(frame)) {
            Ok(()) => Duration::ZERO,
            Err(mpsc::error::TrySendError::Full(frame)) => {
                let start = Instant::now();
                tx.send(frame).await.map_err(|_| RelayError::Cancelled)?;
                start.elapsed()
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(RelayError::Cancelled),
        };
        if signals.full {
            policy.full_block_sent(Sent {
                signals,
                waited,
                worked: time,
                compressed: measured,
            });
            if let Some(pace) = policy.measured_pace() {
                shared.stats.link_measured(pace);
                shared.remember_pace(path, pace, Instant::now());
            }
        }
    }
}

/// The method the memory cap has room for: `method`, or for the automatic policy the first
/// rung below it that fits ([`Policy::memory_short`]). With nothing lower (a fixed level, or
/// the ladder's first rung), a method whose state this direction already holds goes on
/// (there is nothing to give back without ending its stream, and nothing smaller to ask
/// for); else `fallback`, the stateless deflate encoder, whose scratch is the least memory
/// that compresses (a few hundred kilobytes against zstd-1's 1.4 MB; were such blocks sent
/// raw, a transfer on a slow link that found the cap full would take 4-6 times as long).
/// `None` when not even that fits: the block goes raw.
fn fit_memory(
    encoder: &BlockEncoder,
    method: Method,
    (policy, fallback): (&mut Policy, Option<Method>),
    memory: &mut Hold,
) -> Option<Method> {
    let mut method = method;
    while !memory.admit(encoder.memory_with(method)) {
        method = match policy.memory_short() {
            Some(lower) => lower,
            None if encoder.memory_with(method) <= memory.bytes() => return Some(method),
            None => {
                return fallback.filter(|&stateless| {
                    stateless != method && memory.admit(encoder.memory_with(stateless))
                })
            }
        };
    }
    Some(method)
}

/// The kernel's view of the link, in the policy's terms.
fn link_state(probe: &LinkProbe, start: Instant) -> Option<Link> {
    let info = probe.read()?;
    Some(Link {
        notsent: info.notsent,
        bytes_acked: info.bytes_acked,
        in_flight: info.in_flight,
        min_rtt: info.min_rtt,
        at: start.elapsed(),
    })
}

type Buffers = (Vec<u8>, Vec<u8>);

/// Compresses `block` into `frame`, on the blocking pool unless the block is small; also
/// returns the CPU time the compression took (not the time queued for the pool).
async fn compress(
    mut encoder: Box<BlockEncoder>,
    method: Method,
    block: Vec<u8>,
    mut frame: Vec<u8>,
) -> (Box<BlockEncoder>, Buffers, io::Result<Method>, Duration) {
    let inline = block.len() < INLINE_LIMIT;
    let job = move || {
        let work = Work::start();
        let result = encoder.encode_frame(method, &block, &mut frame);
        (encoder, (block, frame), result, work.done())
    };
    if inline {
        return job();
    }
    match tokio::task::spawn_blocking(job).await {
        Ok(done) => done,
        // The closure does not panic on any input; should the pool refuse it, say so.
        Err(e) => (
            Box::default(),
            (Vec::new(), Vec::new()),
            Err(io::Error::other(format!("compression task failed: {e}"))),
            Duration::ZERO,
        ),
    }
}

async fn write_loop<W: AsyncWrite>(
    tunnel: tokio::io::WriteHalf<W>,
    mut rx: mpsc::Receiver<Outgoing>,
    waiting: Arc<AtomicBool>,
) -> Result<(), RelayError> {
    let mut tunnel = tunnel;
    loop {
        if rx.is_empty() {
            waiting.store(true, Ordering::Release);
        }
        let Some(message) = rx.recv().await else {
            break;
        };
        waiting.store(false, Ordering::Release);
        let aborting = matches!(message, Outgoing::Abort(_));
        match message {
            Outgoing::Frame(bytes) => {
                tunnel.write_all(&bytes).await.map_err(RelayError::Tunnel)?;
            }
            Outgoing::End => {
                let mut end = Vec::new();
                frame::write_end(&mut end);
                tunnel.write_all(&end).await.map_err(RelayError::Tunnel)?;
            }
            // The peer reads frames after our end until we close TLS (see `after_end`), so
            // pings and pongs still go out. (Against a peer that stops reading at an end frame, a
            // keepalive's ping after our end is left unread.)
            Outgoing::Ping => tunnel
                .write_all(frame::PING)
                .await
                .map_err(RelayError::Tunnel)?,
            Outgoing::Pong => tunnel
                .write_all(frame::PONG)
                .await
                .map_err(RelayError::Tunnel)?,
            Outgoing::Abort(reason) => {
                let mut abort = Vec::new();
                frame::write_abort(&reason, &mut abort);
                tunnel.write_all(&abort).await.map_err(RelayError::Tunnel)?;
            }
        }
        if aborting || rx.is_empty() {
            tunnel.flush().await.map_err(RelayError::Tunnel)?;
        }
        if aborting {
            break;
        }
    }
    // Both directions are done (or aborted): close TLS cleanly.
    tunnel.shutdown().await.map_err(RelayError::Tunnel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryCap;
    use crate::policy::Choice;

    #[test]
    fn a_fixed_level_keeps_what_it_holds_and_a_newcomer_falls_back_to_stateless_deflate() {
        let zstd9 = Method::new(Codec::Zstd, 9).unwrap();
        let block = b"memory cap, fixed level, fallback; ".repeat(4000);
        let cap = MemoryCap::new(Some(20 << 20));
        let fixed = || Policy::new(Choice::Fixed(zstd9), true);
        let fit = |encoder: &BlockEncoder, policy: &mut Policy, hold: &mut Hold| {
            fit_memory(encoder, zstd9, (policy, Some(STATELESS_FALLBACK)), hold)
        };
        // Alone, the first direction takes zstd-9's 15.5 MB.
        let (mut first, mut first_hold, mut first_policy) =
            (BlockEncoder::new(), cap.hold(), fixed());
        assert_eq!(fit(&first, &mut first_policy, &mut first_hold), Some(zstd9));
        first.encode_frame(zstd9, &block, &mut Vec::new()).unwrap();
        first_hold.settle(first.memory_size());
        // A second: its share (10 MiB) has no room for zstd-9, the cap has for deflate-1.
        let (second, mut second_hold, mut second_policy) =
            (BlockEncoder::new(), cap.hold(), fixed());
        assert_eq!(
            fit(&second, &mut second_policy, &mut second_hold),
            Some(STATELESS_FALLBACK)
        );
        // The first, now past its share, goes on with the context it holds: sending raw would
        // free nothing, the context held all the same.
        assert_eq!(fit(&first, &mut first_policy, &mut first_hold), Some(zstd9));
        assert!(cap.in_use() <= 20 << 20, "{cap:?}");
        // With no fallback (a peer that takes no deflate) the newcomer sends raw.
        let mut third_hold = cap.hold();
        let none = fit_memory(
            &BlockEncoder::new(),
            zstd9,
            (&mut fixed(), None),
            &mut third_hold,
        );
        assert_eq!(none, None);
    }

    #[test]
    fn compression_time_is_cpu_time_not_time_queued_for_the_pool() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            // The one thread of the blocking pool is busy (sleeping) for 400 ms.
            let busy =
                tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(400)));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let block: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 97) as u8).collect();
            let method = Method::new(Codec::Zstd, 1).unwrap();
            let start = Instant::now();
            let (_, _, result, time) = compress(Box::default(), method, block, Vec::new()).await;
            let wall = start.elapsed();
            result.unwrap();
            busy.await.unwrap();
            assert!(
                wall >= Duration::from_millis(300),
                "{wall:?}: the pool was not busy"
            );
            assert!(
                time < Duration::from_millis(150),
                "{time:?} counted for {wall:?} of wall time"
            );
        });
    }
}
