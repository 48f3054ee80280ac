//! The relay's receiver: frames read from the tunnel, decoded and written to the local side;
//! after the peer's end frame, what may still come (pings, an abort) until the peer closes TLS.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::{Local, Outgoing, RelayError};
use crate::blocks::BlockDecoder;
use crate::frame::{self, FrameError, Head};
use crate::keepalive::Heard;
use crate::shared::{accepted, Shared};

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

    /// The next frame's head and its length, reading as much as it takes; `None` where the
    /// stream ended cleanly between frames. A stream that ends inside a frame is the peer
    /// vanishing.
    async fn next_head(&mut self) -> Result<Option<(Head, usize)>, RelayError> {
        loop {
            if let Some(parsed) = frame::parse_head(self.unread()).map_err(RelayError::Frame)? {
                return Ok(Some(parsed));
            }
            let want = self.unread().len() + 1;
            if !self.fill(want).await.map_err(tunnel_read_error)? {
                return if self.unread().is_empty() {
                    Ok(None)
                } else {
                    Err(RelayError::PeerVanished)
                };
            }
        }
    }
}

/// The receiver: reads frames, answers pings, decodes data frames and writes their bytes to
/// the local side, until the peer's end frame (then [`after_end`]) or an error.
pub(super) async fn receive_loop<R: AsyncRead>(
    tunnel: tokio::io::ReadHalf<R>,
    local: Local,
    tx: mpsc::Sender<Outgoing>,
    (heard, shared): (Arc<Heard>, Arc<Shared>),
) -> Result<(), RelayError> {
    let accepts = shared.accepts();
    let mut reader = FrameReader {
        inner: tunnel,
        buf: Vec::new(),
        pos: 0,
    };
    let mut decoder = BlockDecoder::new();
    let mut memory = shared.memory.hold();
    let mut out = Vec::new();
    let mut last_busy = Instant::now();
    let result = async {
        loop {
            let Some((head, used)) = reader.next_head().await? else {
                return Err(RelayError::PeerVanished);
            };
            heard.frame();
            let header = match head {
                Head::End => {
                    reader.pos += used;
                    local.shutdown_write().map_err(RelayError::LocalWrite)?;
                    return Ok(());
                }
                Head::Abort(reason) => return Err(RelayError::PeerAborted(reason)),
                Head::Ping => {
                    reader.pos += used;
                    // A full queue means frames are going to the peer anyway.
                    let _ = tx.try_send(Outgoing::Pong);
                    continue;
                }
                Head::Pong => {
                    reader.pos += used;
                    continue;
                }
                Head::Data(header) => header,
            };
            if !accepted(header.method.codec, accepts) {
                return Err(RelayError::Frame(FrameError::NotAccepted(header.method)));
            }
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
            memory.settle(decoder.memory_size());
            shared
                .stats
                .received(header.method, out.len(), frame_len, start.elapsed());
            reader.pos += frame_len;
            // A slow application holds this loop here, and the peer goes unheard meanwhile.
            heard.deafen();
            let written = write_telling_peer(&local, &out, &tx, &mut last_busy).await;
            heard.undeafen();
            written.map_err(RelayError::LocalWrite)?;
        }
    }
    .await;
    if let Err(error) = &result {
        heard.stop_listening();
        // Tell the peer, unless it is the one that gave up.
        if !matches!(
            error,
            RelayError::PeerAborted(_) | RelayError::PeerVanished | RelayError::Tunnel(_)
        ) {
            // Within the grace, as the sender's abort (see `send_loop`).
            let abort = Outgoing::Abort(error.to_string());
            let _ = tokio::time::timeout(super::FLUSH_GRACE, tx.send(abort)).await;
        }
        return result;
    }
    // The peer's direction has ended, and nothing will be decoded again: its decoders and
    // their memory go now, not when the whole connection ends, so that a half-closed
    // download does not hold its zstd window against the memory cap.
    drop(decoder);
    drop(memory);
    // From here this loop does not keep the writer open: once this side's sender has ended, the
    // writer closes TLS, and the peer, reading on as here, sees the close.
    let weak = tx.downgrade();
    drop(tx);
    let result = after_end(&mut reader, weak, &heard).await;
    heard.stop_listening();
    result
}

/// How often a receiver held by a slow application tells the peer it is alive: the peer's
/// shortest keepalive interval (`--keepalive-interval` is at least 100 ms).
const BUSY_PONG: Duration = Duration::from_millis(100);

/// Writes `out` to the local side; while the write waits on a slow application, sends the
/// peer an unasked pong every [`BUSY_PONG`] (`last` is when the last one went out).
///
/// The peer's pings queue in the tunnel behind the data this end has yet to write, up to
/// the kernel's receive buffer (megabytes) and every frame its sender still holds: answered
/// only when this end gets to them, they would leave a peer whose keepalive interval is
/// short taking this end for dead (an 8 MB upload to a target that reads 1.3 MB/s would be
/// reset with pings every 400 ms). A pong from an end that is writing shows that it lives and works
/// (a path that has stopped carrying the peer's bytes leaves it nothing to write), and any
/// version-2 peer takes an unasked pong as it takes an answer. A write that completes at
/// once sends nothing.
async fn write_telling_peer(
    local: &Local,
    out: &[u8],
    tx: &mpsc::Sender<Outgoing>,
    last: &mut Instant,
) -> io::Result<()> {
    let write = local.write_all(out);
    tokio::pin!(write);
    loop {
        tokio::select! {
            biased;
            written = &mut write => return written,
            () = tokio::time::sleep_until((*last + BUSY_PONG).into()) => {
                // A full queue means frames are going to the peer anyway.
                let _ = tx.try_send(Outgoing::Pong);
                *last = Instant::now();
            }
        }
    }
}

/// Reads what follows the peer's end frame, until the peer closes TLS: an abort (its side
/// failed while this side was still sending) fails the connection, as does a close without
/// TLS's `close_notify`; pings are answered while the writer is open.
async fn after_end<R: AsyncRead>(
    reader: &mut FrameReader<tokio::io::ReadHalf<R>>,
    tx: mpsc::WeakSender<Outgoing>,
    heard: &Heard,
) -> Result<(), RelayError> {
    loop {
        let Some((head, used)) = reader.next_head().await? else {
            return Ok(());
        };
        heard.frame();
        reader.pos += used;
        match head {
            Head::Ping => {
                if let Some(tx) = tx.upgrade() {
                    let _ = tx.try_send(Outgoing::Pong);
                }
            }
            Head::Pong => {}
            Head::Abort(reason) => return Err(RelayError::PeerAborted(reason)),
            Head::End | Head::Data(_) => return Err(RelayError::Frame(FrameError::AfterEnd)),
        }
    }
}

/// A TLS read error: an end without TLS's close_notify is the peer vanishing.
fn tunnel_read_error(e: io::Error) -> RelayError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        RelayError::PeerVanished
    } else {
        RelayError::Tunnel(e)
    }
}
