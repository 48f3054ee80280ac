//! Stopping an endpoint without faking a clean end.
//!
//! Dropping a runtime closes every socket it holds, and a plain close sends FIN: the
//! application behind a forwarded connection would read a clean end of stream in the middle
//! of a transfer. So an endpoint that stops first lets its forwarded connections finish for a
//! grace period, then aborts what is left: each gets an abort frame to the peer and a reset
//! of its local side, exactly as when the connection fails. (The relay also arms the reset
//! from the start and disarms it only on a clean end, so even a socket that outlives the
//! shutdown closes with a reset.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// How long aborted connections get to send their abort frames and reset.
pub const ABORT_WAIT: Duration = Duration::from_secs(5);

/// How often the shutdown looks at the number of live connections.
const POLL: Duration = Duration::from_millis(20);

/// The live forwarded connections of an endpoint, and the signal that aborts them.
#[derive(Debug)]
pub struct Drain {
    live: AtomicUsize,
    abort: watch::Sender<bool>,
}

/// How a shutdown went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Forwarded connections open when it began.
    pub open: usize,
    /// Of those, how many were aborted at the end of the grace period.
    pub cut: usize,
    /// Of the aborted ones, how many had not ended [`ABORT_WAIT`] later.
    pub stuck: usize,
}

/// One live forwarded connection; it stops counting when dropped.
#[derive(Debug)]
pub struct Entered(Arc<Drain>);

impl Drop for Entered {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Default for Drain {
    fn default() -> Drain {
        Drain {
            live: AtomicUsize::new(0),
            abort: watch::Sender::new(false),
        }
    }
}

impl Drain {
    /// Forwarded connections alive now.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Counts a forwarded connection until the guard is dropped.
    pub fn enter(self: &Arc<Self>) -> Entered {
        self.live.fetch_add(1, Ordering::AcqRel);
        Entered(self.clone())
    }

    /// Resolves once the endpoint aborts its connections (never, if it does not).
    pub async fn aborted(&self) {
        let mut rx = self.abort.subscribe();
        if rx.wait_for(|aborted| *aborted).await.is_err() {
            // The sender lives as long as `self`: this is not reached, and if it were, no
            // abort was asked for.
            std::future::pending::<()>().await;
        }
    }

    /// Waits up to `grace` for the live connections to end, then aborts the rest and waits
    /// up to [`ABORT_WAIT`] for them to go. Call it once the endpoint accepts no more.
    pub async fn shutdown(&self, grace: Duration) -> Outcome {
        let open = self.live();
        self.wait_idle(grace).await;
        let cut = self.live();
        if cut == 0 {
            return Outcome {
                open,
                ..Outcome::default()
            };
        }
        self.abort.send_replace(true);
        self.wait_idle(ABORT_WAIT).await;
        Outcome {
            open,
            cut,
            stuck: self.live(),
        }
    }

    async fn wait_idle(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.live() > 0 && Instant::now() < deadline {
            tokio::time::sleep(POLL.min(deadline - Instant::now())).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_get_the_grace_then_are_aborted() {
        let drain = Arc::new(Drain::default());
        assert_eq!(
            drain.shutdown(Duration::from_secs(5)).await,
            Outcome::default()
        );
        let finishing = drain.enter();
        let stubborn = drain.enter();
        let aborted = {
            let drain = drain.clone();
            tokio::spawn(async move {
                drain.aborted().await;
                drop(stubborn);
            })
        };
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(finishing);
        });
        let outcome = drain.shutdown(Duration::from_millis(1500)).await;
        assert_eq!(
            outcome,
            Outcome {
                open: 2,
                cut: 1,
                stuck: 0
            }
        );
        aborted.await.unwrap();
    }
}
