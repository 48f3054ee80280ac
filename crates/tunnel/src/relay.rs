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
//! and an abort frame tells the peer to do the same.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use zipwire_adapt::Budget;

use crate::blocks::{BlockDecoder, BlockEncoder, BlockError};
use crate::drain::Drain;
use crate::frame::{self, FrameError, Head, Method, DATA_HEADER_LEN};
use crate::pace_memory::PaceMemory;
use crate::policy::{Choice, Decision, Link, Policy, RawReason, Sent, Signals};
use crate::stats::Stats;
use crate::tcp_info::LinkProbe;

/// Frames the writer's queue holds before the sender waits.
const QUEUE_FRAMES: usize = 4;

/// Blocks smaller than this are compressed on the async thread: handing them to the blocking
/// pool would cost more than compressing them.
const INLINE_LIMIT: usize = 16 * 1024;

/// How long the writer may go on flushing (an abort frame, say) once the connection failed.
const FLUSH_GRACE: Duration = Duration::from_secs(2);

/// What every connection of an endpoint shares.
pub struct Shared {
    /// What the user asked for.
    pub choice: Choice,
    /// Bytes per block, 16 to 256 KB.
    pub block_size: usize,
    /// The endpoint's counters.
    pub stats: Arc<Stats>,
    /// The `--max-cpu` budget, if any.
    pub budget: Option<Mutex<Budget>>,
    /// The live forwarded connections, and the signal that aborts them on shutdown.
    pub drain: Arc<Drain>,
    compress_nanos: AtomicU64,
    compress_bytes: AtomicU64,
    pace: Mutex<PaceMemory>,
}

impl Shared {
    /// Shared state for an endpoint.
    pub fn new(choice: Choice, block_size: usize, budget: Option<Budget>) -> Shared {
        Shared {
            choice,
            block_size: block_size.clamp(16 * 1024, frame::MAX_BLOCK),
            stats: Arc::new(Stats::default()),
            budget: budget.map(Mutex::new),
            drain: Arc::new(Drain::default()),
            compress_nanos: AtomicU64::new(0),
            compress_bytes: AtomicU64::new(0),
            pace: Mutex::new(PaceMemory::default()),
        }
    }

    fn pace_memory(&self) -> std::sync::MutexGuard<'_, PaceMemory> {
        self.pace.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a compression against the CPU budget; returns whether the budget is spent.
    fn spend(&self, time: Duration, bytes: usize) -> bool {
        let nanos = self
            .compress_nanos
            .fetch_add(time.as_nanos() as u64, Ordering::Relaxed)
            + time.as_nanos() as u64;
        let total = self
            .compress_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed)
            + bytes as u64;
        self.throttled_after(Duration::from_nanos(nanos), total)
    }

    fn throttled(&self) -> bool {
        let nanos = self.compress_nanos.load(Ordering::Relaxed);
        let bytes = self.compress_bytes.load(Ordering::Relaxed);
        self.throttled_after(Duration::from_nanos(nanos), bytes)
    }

    fn throttled_after(&self, busy: Duration, bytes: u64) -> bool {
        let Some(budget) = &self.budget else {
            return false;
        };
        let mut budget = budget.lock().unwrap_or_else(PoisonError::into_inner);
        budget.observe(Instant::now(), busy, bytes).is_throttled()
    }
}

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
}

/// Carries `local` over `tunnel` until both directions have ended, or one fails; `zstd` says
/// whether the peer decodes zstd frames, and `probe` reads the kernel's view of the tunnel's
/// TCP connection for the policy.
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
    zstd: bool,
    shared: Arc<Shared>,
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

    let mut policy = Policy::new(shared.choice.clone(), zstd);
    if let Some(pace) = shared.pace_memory().recall(Instant::now()) {
        policy.recall_pace(pace);
    }
    let sender = send_loop(
        local.clone(),
        tx.clone(),
        writer_waiting.clone(),
        (policy, probe),
        shared.clone(),
    );
    let watcher = watch_loop(tx.downgrade(), shared.clone());
    let receiver = receive_loop(tunnel_r, local.clone(), tx, shared.clone());
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
/// the endpoint shuts down. It queues the abort frame for the peer itself (through a weak
/// sender, so that it never keeps the writer waiting for more frames).
async fn watch_loop(tx: mpsc::WeakSender<Outgoing>, shared: Arc<Shared>) -> Result<(), RelayError> {
    shared.drain.aborted().await;
    let error = RelayError::Shutdown;
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
    (mut policy, probe): (Policy, Option<LinkProbe>),
    shared: Arc<Shared>,
) -> Result<(), RelayError> {
    let mut encoder = Some(Box::new(BlockEncoder::new()));
    let mut block = vec![0u8; shared.block_size];
    let began = Instant::now();
    loop {
        block.resize(shared.block_size, 0);
        let n = match read_block(&local, &mut block).await {
            Ok(n) => n,
            Err(e) => {
                let _ = tx
                    .send(Outgoing::Abort(format!("forwarded connection failed: {e}")))
                    .await;
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
        let decision = policy.decide(&block, signals);
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
                let start = Instant::now();
                let (enc, returned, result) = compress(enc, method, block, frame).await;
                let time = start.elapsed();
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
                shared.pace_memory().remember(pace, Instant::now());
            }
        }
    }
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

/// Compresses `block` into `frame`, on the blocking pool unless the block is small.
async fn compress(
    mut encoder: Box<BlockEncoder>,
    method: Method,
    block: Vec<u8>,
    mut frame: Vec<u8>,
) -> (Box<BlockEncoder>, Buffers, io::Result<Method>) {
    if block.len() < INLINE_LIMIT {
        let result = encoder.encode_frame(method, &block, &mut frame);
        return (encoder, (block, frame), result);
    }
    let job = tokio::task::spawn_blocking(move || {
        let result = encoder.encode_frame(method, &block, &mut frame);
        (encoder, (block, frame), result)
    });
    match job.await {
        Ok(done) => done,
        // The closure does not panic on any input; should the pool refuse it, say so.
        Err(e) => (
            Box::default(),
            (Vec::new(), Vec::new()),
            Err(io::Error::other(format!("compression task failed: {e}"))),
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

/// Frames read from the tunnel, buffered.
struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Makes at least `need` unread bytes available; false at the end of the stream.
    async fn fill(&mut self, need: usize) -> io::Result<bool> {
        while self.buf.len() - self.pos < need {
            if self.pos > 0 && self.pos * 2 >= self.buf.len() {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            self.buf.reserve(need.max(64 * 1024));
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn unread(&self) -> &[u8] {
        &self.buf[self.pos..]
    }
}

async fn receive_loop<R: AsyncRead>(
    tunnel: tokio::io::ReadHalf<R>,
    local: Local,
    tx: mpsc::Sender<Outgoing>,
    shared: Arc<Shared>,
) -> Result<(), RelayError> {
    let mut reader = FrameReader {
        inner: tunnel,
        buf: Vec::new(),
        pos: 0,
    };
    let mut decoder = BlockDecoder::new();
    let mut out = Vec::new();
    let result = async {
        loop {
            let (head, used) = loop {
                match frame::parse_head(reader.unread()).map_err(RelayError::Frame)? {
                    Some(parsed) => break parsed,
                    None => {
                        let want = reader.unread().len() + 1;
                        if !reader.fill(want).await.map_err(tunnel_read_error)? {
                            return Err(RelayError::PeerVanished);
                        }
                    }
                }
            };
            let header = match head {
                Head::End => {
                    reader.pos += used;
                    local.shutdown_write().map_err(RelayError::LocalWrite)?;
                    return Ok(());
                }
                Head::Abort(reason) => return Err(RelayError::PeerAborted(reason)),
                Head::Data(header) => header,
            };
            let frame_len = used + header.payload_len as usize;
            if !reader.fill(frame_len).await.map_err(tunnel_read_error)? {
                return Err(RelayError::PeerVanished);
            }
            let payload = &reader.unread()[used..frame_len];
            let start = Instant::now();
            out.clear();
            decoder
                .decode(&header, payload, &mut out)
                .map_err(RelayError::Block)?;
            shared
                .stats
                .received(header.method, out.len(), frame_len, start.elapsed());
            reader.pos += frame_len;
            local
                .write_all(&out)
                .await
                .map_err(RelayError::LocalWrite)?;
        }
    }
    .await;
    if let Err(error) = &result {
        // Tell the peer, unless it is the one that gave up.
        if !matches!(
            error,
            RelayError::PeerAborted(_) | RelayError::PeerVanished | RelayError::Tunnel(_)
        ) {
            let _ = tx.send(Outgoing::Abort(error.to_string())).await;
        }
    }
    result
}

/// A TLS read error: an end without TLS's close_notify is the peer vanishing.
fn tunnel_read_error(e: io::Error) -> RelayError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        RelayError::PeerVanished
    } else {
        RelayError::Tunnel(e)
    }
}
