//! The two switches a budget policy flips from outside the server (HAProxy's
//! `maxcompcpuusage` and `maxcomprate` act the same way): one stops new responses from being
//! compressed, the other steps running streams down to stored blocks.
//!
//! The server only reads them; whoever measures CPU and rate (zipwire-adapt's budget, driven
//! by the server's counters) sets them, with its own hysteresis.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};
use std::sync::Arc;

use crate::{BudgetState, ThrottleReason};

/// Switches shared between the server and a budget policy. Cloning shares them.
#[derive(Clone, Debug)]
pub struct Throttle {
    /// While set, responses that would be compressed pass uncompressed, counted as
    /// `Bypass::Budget` (zipwire-rules). Default off.
    pub bypass_new: Arc<AtomicBool>,
    /// While set, running compressed streams write stored blocks (levels 1-3; see
    /// zipwire-codings' `BodyEncoder`). Default off.
    pub step_down: Arc<AtomicBool>,
    /// Why the switches are set, for stats: 0 none, 1 CPU, 2 rate.
    reason: Arc<AtomicU8>,
    /// Input bytes the rate budget lets responses start compressing with until the policy
    /// looks again; each admitted response takes its expected input ([`Throttle::admit`]).
    /// `i64::MAX` without a rate limit.
    rate_allowance: Arc<AtomicI64>,
}

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle {
            bypass_new: Arc::default(),
            step_down: Arc::default(),
            reason: Arc::default(),
            rate_allowance: Arc::new(AtomicI64::new(i64::MAX)),
        }
    }
}

impl Throttle {
    /// Whether new responses must pass uncompressed.
    pub fn is_bypassing_new(&self) -> bool {
        self.bypass_new.load(Ordering::Relaxed)
    }

    /// Takes `bytes`, a response's expected input, from the rate allowance: whether the
    /// response may be compressed. Admitted while anything is left, so a response larger
    /// than what is left still goes (the allowance goes below zero, and the next ones wait
    /// for the policy's next look).
    pub fn admit(&self, bytes: u64) -> bool {
        // No rate limit: nothing to take (and no write to a line every thread reads).
        if self.rate_allowance.load(Ordering::Relaxed) == i64::MAX {
            return true;
        }
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.rate_allowance.fetch_sub(bytes, Ordering::Relaxed) > 0
    }

    /// Sets the rate allowance from the policy's last look (`None`: no rate limit).
    pub fn set_rate_allowance(&self, bytes: Option<u64>) {
        // A limited allowance stays below `i64::MAX`, which means "no limit".
        let allowance = bytes.map_or(i64::MAX, |b| {
            i64::try_from(b).unwrap_or(i64::MAX).min(i64::MAX - 1)
        });
        self.rate_allowance.store(allowance, Ordering::Relaxed);
    }

    /// Whether running streams are stepped down to stored blocks.
    pub fn is_stepped_down(&self) -> bool {
        self.step_down.load(Ordering::Relaxed)
    }

    /// Sets both switches from a budget's state.
    pub fn apply(&self, state: BudgetState) {
        let throttled = state.is_throttled();
        self.bypass_new.store(throttled, Ordering::Relaxed);
        self.step_down.store(throttled, Ordering::Relaxed);
        let reason = match state {
            BudgetState::Throttled(ThrottleReason::Cpu) => 1,
            BudgetState::Throttled(ThrottleReason::Rate) => 2,
            _ => 0,
        };
        self.reason.store(reason, Ordering::Relaxed);
    }

    /// The reason set by the last [`Throttle::apply`], if throttled.
    pub fn reason(&self) -> Option<ThrottleReason> {
        match self.reason.load(Ordering::Relaxed) {
            1 => Some(ThrottleReason::Cpu),
            2 => Some(ThrottleReason::Rate),
            _ => None,
        }
    }
}
