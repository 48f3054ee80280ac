//! Server-sent events (HTML Living Standard §9.2): one `data:` event per tick, each the
//! [`Source`]'s JSON, for as long as the viewer stays.
//!
//! A stream owns one timer and samples only when hyper polls it after a tick: a viewer whose
//! socket is full is not polled, so its ticks are skipped rather than queued, and no buffer
//! grows. At most [`MAX_VIEWERS`] streams exist at once.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::{Interval, MissedTickBehavior};

use crate::routes::Source;

/// How often a viewer gets an event.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// Most event streams open at once; the next viewer gets `503 Service Unavailable`.
pub const MAX_VIEWERS: usize = 8;

/// How long a browser waits before reconnecting a dropped stream (the `retry:` field).
const RETRY_MS: u32 = 2000;

/// The count of open streams, shared by a dashboard's responses.
#[derive(Debug, Default)]
pub(crate) struct Viewers {
    open: AtomicUsize,
}

impl Viewers {
    /// A seat for one more viewer, or `None` when [`MAX_VIEWERS`] are watching.
    pub(crate) fn join(self: &Arc<Self>) -> Option<Seat> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_VIEWERS).then_some(n + 1)
            })
            .ok()
            .map(|_| Seat {
                viewers: self.clone(),
            })
    }

    /// Streams open now.
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

/// One viewer's place, given back when its stream is dropped (the client went away).
#[derive(Debug)]
pub(crate) struct Seat {
    viewers: Arc<Viewers>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.viewers.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One viewer's stream of events.
pub struct EventStream {
    ticks: Interval,
    source: Arc<dyn Source>,
    samples: Arc<AtomicU64>,
    first: bool,
    _seat: Seat,
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("first", &self.first)
            .finish_non_exhaustive()
    }
}

impl EventStream {
    /// A stream whose first event is due now. Must be called within a Tokio runtime.
    pub(crate) fn new(source: Arc<dyn Source>, samples: Arc<AtomicU64>, seat: Seat) -> Self {
        let mut ticks = tokio::time::interval(INTERVAL);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
        EventStream {
            ticks,
            source,
            samples,
            first: true,
            _seat: seat,
        }
    }

    /// The next event, once its tick has come.
    pub(crate) fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Bytes> {
        match self.ticks.poll_tick(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => {
                self.samples.fetch_add(1, Ordering::Relaxed);
                let data = self.source.sample();
                let mut event = String::with_capacity(data.len() + 32);
                if std::mem::take(&mut self.first) {
                    event.push_str(&format!("retry: {RETRY_MS}\n"));
                }
                push_data(&mut event, &data);
                Poll::Ready(Bytes::from(event))
            }
        }
    }
}

/// Appends `data` as one event: a `data:` field per line (a line break inside a field would
/// end it), then the blank line that dispatches the event.
fn push_data(event: &mut String, data: &str) {
    for line in data.lines() {
        event.push_str("data: ");
        event.push_str(line);
        event.push('\n');
    }
    event.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_line_document_is_one_event() {
        let mut event = String::new();
        push_data(&mut event, "{\n  \"a\": 1\n}");
        assert_eq!(event, "data: {\ndata:   \"a\": 1\ndata: }\n\n");
    }

    #[test]
    fn seats_are_capped_and_given_back() {
        let viewers = Arc::new(Viewers::default());
        let seats: Vec<Seat> = (0..MAX_VIEWERS).filter_map(|_| viewers.join()).collect();
        assert_eq!(seats.len(), MAX_VIEWERS);
        assert!(viewers.join().is_none(), "one viewer past the cap");
        drop(seats);
        assert_eq!(viewers.open(), 0);
        assert!(viewers.join().is_some());
    }
}
