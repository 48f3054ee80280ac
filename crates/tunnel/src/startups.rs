//! Unauthenticated connections, capped as ssh's `MaxStartups` and `LoginGraceTime` cap them:
//! at most [`Limits::max_startups`] connections may be in the TLS handshake or the hello at
//! once, and each gets one deadline, [`Limits::login_grace`], for both.
//!
//! When the cap is reached, a new connection evicts the oldest unauthenticated one rather than
//! being refused: a flood of half-open connections then cannot keep a legitimate client out,
//! which completes its handshake in milliseconds, while the flood's connections wait. The
//! same eviction frees a descriptor when accepting fails for want of one.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Default for [`Limits::max_startups`] (ssh's `MaxStartups` starts dropping at 10; a tunnel
/// server sees more clients at once).
pub const DEFAULT_MAX_STARTUPS: usize = 64;

/// Default for [`Limits::login_grace`].
pub const DEFAULT_LOGIN_GRACE: Duration = Duration::from_secs(10);

/// The server's limits on unauthenticated connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections in the TLS handshake or the hello at once.
    pub max_startups: usize,
    /// Time from accept to a complete hello: TLS and the hello together.
    pub login_grace: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_startups: DEFAULT_MAX_STARTUPS,
            login_grace: DEFAULT_LOGIN_GRACE,
        }
    }
}

/// The unauthenticated connections of a server, oldest first.
#[derive(Debug)]
pub(crate) struct Startups {
    max: usize,
    inner: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    next: u64,
    waiting: VecDeque<(u64, oneshot::Sender<()>)>,
}

/// One unauthenticated connection; it leaves the queue when dropped. `evicted` resolves
/// when a newer connection pushed it out.
#[derive(Debug)]
pub(crate) struct Startup {
    id: u64,
    owner: Arc<Startups>,
    pub(crate) evicted: oneshot::Receiver<()>,
}

impl Startups {
    pub(crate) fn new(max: usize) -> Startups {
        Startups {
            max: max.max(1),
            inner: Mutex::new(Queue::default()),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a connection, evicting the oldest when the cap is reached; returns it and
    /// whether one was evicted.
    pub(crate) fn admit(self: &Arc<Self>) -> (Startup, bool) {
        let (tx, evicted) = oneshot::channel();
        let mut queue = self.queue();
        let mut pushed_out = false;
        while queue.waiting.len() >= self.max {
            if let Some((_, oldest)) = queue.waiting.pop_front() {
                pushed_out |= oldest.send(()).is_ok();
            }
        }
        let id = queue.next;
        queue.next += 1;
        queue.waiting.push_back((id, tx));
        let startup = Startup {
            id,
            owner: self.clone(),
            evicted,
        };
        (startup, pushed_out)
    }

    /// Evicts the oldest unauthenticated connection, if any (to free its descriptor).
    pub(crate) fn evict_oldest(&self) -> bool {
        let oldest = self.queue().waiting.pop_front();
        oldest.is_some_and(|(_, tx)| tx.send(()).is_ok())
    }
}

impl Drop for Startup {
    fn drop(&mut self) {
        let mut queue = self.owner.queue();
        if let Some(at) = queue.waiting.iter().position(|(id, _)| *id == self.id) {
            queue.waiting.remove(at);
        }
    }
}

/// Lets a repeated warning through at most once per interval, counting what it held back.
#[derive(Debug)]
pub(crate) struct Throttle {
    every: Duration,
    last: Option<Instant>,
    held: u64,
}

impl Throttle {
    pub(crate) fn new(every: Duration) -> Throttle {
        Throttle {
            every,
            last: None,
            held: 0,
        }
    }

    /// Whether to log now; if so, how many were held back since the last time.
    pub(crate) fn due(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.duration_since(last) < self.every => {
                self.held += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.held))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_is_evicted_and_leaving_frees_a_place() {
        let startups = Arc::new(Startups::new(2));
        let (mut first, out) = startups.admit();
        assert!(!out);
        let (second, out) = startups.admit();
        assert!(!out);
        let (_third, out) = startups.admit();
        assert!(out);
        assert!(first.evicted.try_recv().is_ok());
        drop(second);
        let (mut fourth, out) = startups.admit();
        assert!(!out);
        assert!(fourth.evicted.try_recv().is_err());
    }

    #[test]
    fn a_throttled_warning_comes_once_per_interval_with_a_count() {
        let mut throttle = Throttle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(throttle.due(t0), Some(0));
        for ms in 1..100 {
            assert_eq!(throttle.due(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(throttle.due(t0 + Duration::from_secs(11)), Some(99));
    }
}
