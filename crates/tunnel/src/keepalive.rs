//! Noticing a silently dead path, as ssh does: TCP keepalive on every socket (ssh's
//! `TCPKeepAlive yes`, with the system's timers), and optionally pings inside the tunnel
//! connection (ssh's `ServerAliveInterval` and `ServerAliveCountMax`).
//!
//! TCP keepalive alone takes the kernel's two hours and more to give up. With an interval,
//! an end that has heard nothing from the peer for an interval sends a ping frame, which
//! the peer answers with a pong; after [`Keepalive::count`] intervals more without a frame of
//! any kind the peer is declared dead and the forwarded connection is reset (and an abort
//! sent, should the path come back). Only the end that asks for it pings; the other end just
//! answers, so it works against any peer of protocol version 2.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::tcp_info::TcpInfo;

/// Unanswered intervals after which the peer is declared dead (ssh's `ServerAliveCountMax`
/// default).
pub const DEFAULT_COUNT: u32 = 3;

/// How an end pings its peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    /// Silence after which a ping goes out.
    pub interval: Duration,
    /// Pings left unanswered before the peer is declared dead.
    pub count: u32,
}

impl Keepalive {
    /// Pings after `interval` of silence, [`DEFAULT_COUNT`] times.
    pub fn every(interval: Duration) -> Keepalive {
        Keepalive {
            interval,
            count: DEFAULT_COUNT,
        }
    }
}

/// When the peer was last heard from, for one forwarded connection.
#[derive(Debug)]
pub(crate) struct Heard {
    start: Instant,
    last_ms: AtomicU64,
    listening: AtomicBool,
    /// The receiver is writing to the local side and reads nothing from the peer meanwhile:
    /// a slow application, not a silent peer.
    deaf: AtomicBool,
}

impl Heard {
    pub(crate) fn new() -> Heard {
        Heard {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
            listening: AtomicBool::new(true),
            deaf: AtomicBool::new(false),
        }
    }

    /// The receiver stops reading the peer for a while (see [`Heard::deaf`]); silence then
    /// means nothing.
    pub(crate) fn deafen(&self) {
        self.deaf.store(true, Ordering::Relaxed);
    }

    /// The receiver reads the peer again: the silence counts from now.
    pub(crate) fn undeafen(&self) {
        self.frame();
        self.deaf.store(false, Ordering::Relaxed);
    }

    /// A frame came in.
    pub(crate) fn frame(&self) {
        let now = self.start.elapsed().as_millis() as u64;
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// The peer's direction has ended: nothing more will be heard, and silence means
    /// nothing.
    pub(crate) fn stop_listening(&self) {
        self.listening.store(false, Ordering::Relaxed);
    }

    fn silence(&self) -> Option<Duration> {
        if !self.listening.load(Ordering::Relaxed) || self.deaf.load(Ordering::Relaxed) {
            return None;
        }
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        Some(self.start.elapsed().saturating_sub(last))
    }
}

/// Pings the peer (through `ping`) whenever it has been silent for an interval; returns the
/// silence once it has lasted `count` intervals more. Never returns while the peer talks
/// (any frame, a pong included, ends the silence), while `taking` says the peer takes more of
/// the data this end pushes (an upload to a slow peer: the peer reads nothing of the tunnel
/// while it writes to its own slow side, so it answers no ping, and this end's pings wait
/// behind its data anyway), while the receiver is busy writing locally, or once the peer's
/// direction has ended.
pub(crate) async fn wait_for_death(
    keepalive: Keepalive,
    heard: &Heard,
    ping: impl Fn(),
    mut taking: impl FnMut() -> bool,
) -> Duration {
    let interval = keepalive.interval.max(Duration::from_millis(10));
    let limit = interval * keepalive.count.saturating_add(1);
    loop {
        tokio::time::sleep(interval).await;
        if taking() {
            heard.frame();
        }
        match heard.silence() {
            Some(silence) if silence >= limit => return silence,
            Some(silence) if silence >= interval => ping(),
            _ => {}
        }
    }
}

/// Whether data of this end's (not only its pings and pongs) waited to reach the peer when
/// `info` was read: frames queued for the writer (`queued`), bytes the kernel had not sent, or
/// more segments unacknowledged than this end's own chatter makes (a ping an interval, at most
/// `count` + 1 before the peer is declared dead, and as many pongs). Data waiting in the
/// kernel or on the path counts as well as data in the queue: pings wait behind it, and the
/// peer, answering none yet, is taking what it can (a burst drained through a slow link with a
/// deep queue, an upload whose end frame has gone).
pub(crate) fn data_waiting(queued: bool, info: Option<&TcpInfo>, count: u32) -> bool {
    let chatter = count.saturating_add(1).saturating_mul(2);
    queued || info.is_some_and(|info| info.notsent > 0 || info.unacked > chatter)
}

/// Turns on TCP keepalive for `tcp`, with the system's timers (as ssh's `TCPKeepAlive`).
pub fn tcp_keepalive(tcp: &TcpStream) {
    let _ = socket2::SockRef::from(tcp).set_keepalive(true);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(notsent: u32, unacked: u32) -> TcpInfo {
        TcpInfo {
            notsent,
            unacked,
            ..TcpInfo::default()
        }
    }

    #[test]
    fn pings_alone_are_no_data_waiting() {
        // Count 3: up to 4 pings and 4 pongs may sit unacknowledged on a path that has died.
        assert!(!data_waiting(false, None, 3));
        assert!(!data_waiting(false, Some(&info(0, 0)), 3));
        assert!(!data_waiting(false, Some(&info(0, 8)), 3));
    }

    #[test]
    fn data_in_the_queue_the_kernel_or_the_path_waits() {
        assert!(data_waiting(true, None, 3));
        assert!(data_waiting(false, Some(&info(1, 0)), 3));
        assert!(data_waiting(false, Some(&info(0, 9)), 3));
        assert!(data_waiting(false, Some(&info(0, 200)), 3));
    }
}
