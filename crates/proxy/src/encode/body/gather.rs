//! [`GatherGate`]: one budget for the input that all compressing bodies together hold while
//! they gather encoder calls.
//!
//! # Why
//!
//! The stateless encoder compresses better the more input one call sees, so a body gathers
//! its input (up to [`FlushPolicy::coalesce`](super::FlushPolicy)) before each call. When the
//! proxy is busy, every response in flight has read part of its body and waits its turn on
//! the CPU: a thousand HTTP/2 streams on one core each held half of the 77 KB bench page,
//! 38 MB in all, and with zstd's one call per page 77 MB. The data was only waiting; it could
//! as well have waited in the upstream socket, where it costs the proxy nothing.
//!
//! The gate is HAProxy's buffer wait queue (`tune.buffers.limit`): a body takes a share of
//! the budget before it reads the input of a call, and gives it back once the call is
//! compressed. A body that finds the budget spent waits, holding nothing, with its input left
//! unread in the upstream connection, and is woken in arrival order as shares come back.
//!
//! # No deadlock, no starvation
//!
//! - A body never waits while it holds a share: when its share cannot grow (a body of unknown
//!   length grows it as input arrives), it compresses what it has gathered at once and lets
//!   the share go. Only calls gathered under pressure are cut shorter than the flush policy's.
//! - A body of known length takes its whole call at once, so it is never cut; if its upstream
//!   then stalls for [`STALL`] with the share held while other bodies wait for the budget, the
//!   gathered input is compressed and the share returned, so a stalled upstream cannot keep
//!   other responses waiting. With nobody waiting it keeps its share (and its call whole).
//! - A share never asks for more than the whole budget.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore, TryAcquireError};

use crate::counters::GatherCounters;

/// How long a body of known length may hold its share while its upstream sends nothing.
pub(super) const STALL: Duration = Duration::from_secs(1);

/// The unit of the budget: shares are counted in KiB, so a budget of gigabytes stays within
/// the semaphore's range.
const UNIT: usize = 1024;

/// A budget of input bytes shared by every compressing body of a proxy (see the module docs).
/// Clones share one budget.
#[derive(Clone)]
pub struct GatherGate {
    units: Arc<Semaphore>,
    total: u32,
    /// Bodies waiting in line for a share.
    waiting: Arc<AtomicUsize>,
    /// Where the gate's use is counted.
    counters: Arc<GatherCounters>,
}

impl GatherGate {
    /// A budget of `bytes` (rounded up to whole KiB, at least one).
    pub fn new(bytes: u64) -> GatherGate {
        let total = bytes
            .div_ceil(UNIT as u64)
            .clamp(1, u64::from(u32::MAX >> 3)) as u32;
        GatherGate {
            units: Arc::new(Semaphore::new(total as usize)),
            total,
            waiting: Arc::new(AtomicUsize::new(0)),
            counters: Arc::default(),
        }
    }

    /// The gate, counting its use in `counters` (a proxy's [`Counters::gather`]).
    ///
    /// [`Counters::gather`]: crate::Counters::gather
    pub fn counted(mut self, counters: Arc<GatherCounters>) -> GatherGate {
        self.counters = counters;
        self
    }

    /// Raises the high-water mark of bytes held to what is held now.
    fn note_held(&self) {
        let held = u64::from(self.total).saturating_sub(self.units.available_permits() as u64);
        self.counters
            .peak_held
            .fetch_max(held * UNIT as u64, Ordering::Relaxed);
    }

    /// Bytes of the budget not held by any body now.
    pub fn available(&self) -> u64 {
        self.units.available_permits() as u64 * UNIT as u64
    }

    /// Bodies waiting in line for a share now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The whole budget in bytes.
    pub fn capacity(&self) -> u64 {
        u64::from(self.total) * UNIT as u64
    }

    /// Units for a share of `bytes`, never more than the whole budget.
    fn units_for(&self, bytes: usize) -> u32 {
        bytes.div_ceil(UNIT).clamp(1, self.total as usize) as u32
    }
}

impl fmt::Debug for GatherGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatherGate")
            .field("capacity", &self.capacity())
            .field("available", &self.available())
            .finish()
    }
}

type Acquire = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

/// One body's place at the gate: the share it holds, or its wait for one.
pub(super) struct Share {
    gate: GatherGate,
    held: Option<OwnedSemaphorePermit>,
    waiting: Option<(u32, Acquire)>,
    /// Whether this place in line has been counted as a wait.
    counted_wait: bool,
}

/// What [`Share::reserve`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Reserve {
    /// The share covers the bytes asked for.
    Ready,
    /// The share cannot grow now: compress what was gathered and let it go.
    Cut,
    /// Nothing is held and the budget is spent: the task is woken when a share comes back.
    Wait,
    /// The gate is closed (it never is): go on without it.
    Unlimited,
}

impl Share {
    /// A body's place at `gate`, holding nothing yet.
    pub(super) fn new(gate: GatherGate) -> Share {
        Share {
            gate,
            held: None,
            waiting: None,
            counted_wait: false,
        }
    }

    /// The whole budget in bytes: the most any share can cover.
    pub(super) fn capacity(&self) -> usize {
        usize::try_from(self.gate.capacity()).unwrap_or(usize::MAX)
    }

    /// Bytes the share covers now.
    pub(super) fn held(&self) -> usize {
        self.held
            .as_ref()
            .map_or(0, |permit| permit.num_permits() * UNIT)
    }

    /// Makes the share cover `bytes`: grows it at once if the budget allows; otherwise a share
    /// already held is [`Reserve::Cut`], and an empty one waits in line
    /// ([`Reserve::Wait`], with `cx` woken when it may go on).
    pub(super) fn reserve(&mut self, bytes: usize, cx: &mut Context<'_>) -> Reserve {
        let want = self.gate.units_for(bytes);
        let have = self.held.as_ref().map_or(0, |p| p.num_permits() as u32);
        if have >= want {
            return Reserve::Ready;
        }
        if have > 0 {
            return match Arc::clone(&self.gate.units).try_acquire_many_owned(want - have) {
                Ok(more) => {
                    if let Some(held) = self.held.as_mut() {
                        held.merge(more);
                    }
                    self.gate.note_held();
                    Reserve::Ready
                }
                Err(TryAcquireError::NoPermits | TryAcquireError::Closed) => Reserve::Cut,
            };
        }
        // Holding nothing: join the line, or keep the place already taken in it. A place
        // taken for fewer units than now asked for is kept: the rest is asked for later.
        let (_, acquire) = self.waiting.get_or_insert_with(|| {
            self.gate.waiting.fetch_add(1, Ordering::Relaxed);
            let units = Arc::clone(&self.gate.units);
            (want, Box::pin(units.acquire_many_owned(want)))
        });
        match acquire.as_mut().poll(cx) {
            Poll::Ready(Ok(permit)) => {
                self.leave_line();
                self.held = Some(permit);
                self.gate.note_held();
                self.reserve(bytes, cx)
            }
            Poll::Ready(Err(_)) => {
                self.leave_line();
                Reserve::Unlimited
            }
            Poll::Pending => {
                if !std::mem::replace(&mut self.counted_wait, true) {
                    self.gate.counters.waits.fetch_add(1, Ordering::Relaxed);
                }
                Reserve::Wait
            }
        }
    }

    /// Gives the share back: the call it covered was compressed.
    pub(super) fn release(&mut self) {
        self.held = None;
    }

    /// Whether other bodies wait in line for the budget.
    pub(super) fn others_wait(&self) -> bool {
        self.gate.waiting() > 0
    }

    fn leave_line(&mut self) {
        self.counted_wait = false;
        if self.waiting.take().is_some() {
            self.gate.waiting.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.leave_line();
    }
}

impl fmt::Debug for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Share")
            .field("held", &self.held())
            .field("waiting", &self.waiting.as_ref().map(|(units, _)| *units))
            .finish()
    }
}

#[cfg(test)]
mod tests;
