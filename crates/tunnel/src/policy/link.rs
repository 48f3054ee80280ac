//! The link estimator: the pace the link has shown (from the kernel's acknowledgements or
//! an earlier connection), and whether it would run dry before a block is compressed.

use super::{Policy, Signals, FAST_LINK, WARMUP_ACKED};

impl Policy {
    /// Whether sending a full block of `len` bytes raw now keeps an otherwise idle link busy,
    /// rather than pushing ratio-less bytes into a link that is the bottleneck.
    pub(super) fn link_would_idle(&self, len: usize, signals: &Signals) -> bool {
        if !idle_now(signals) {
            return false;
        }
        let Some(link) = signals.link else {
            // Our queue alone: mix only once even the fastest rung cannot keep up (above it,
            // an idle link first moves the ladder down).
            return self.rung == 0 && self.warmup_left == 0;
        };
        // The current method has been measured, and cannot keep the link busy at the pace
        // the link has shown: the rate at which it limited us, or at least carried what we
        // sent. Before any pace is known an empty queue says nothing: at the start the qdisc
        // and the congestion window take bytes far faster than the link drains them, and a
        // raw block sent then costs a slow link dearly.
        let pace = self.pace();
        let Some(speed) = self.speed else {
            return false;
        };
        if pace <= 0.0 || self.keeps_up(self.rung, pace) {
            return false;
        }
        // And the link really runs dry before this block could be compressed. The kernel has
        // nothing unsent ([`idle_now`]), but what it sent may still queue at the bottleneck:
        // the bytes in flight beyond one minimum round trip's worth merely travelling. That
        // queue must drain sooner. An empty socket says little on its own: a bottleneck
        // queue behind it can hold milliseconds of data, and a raw block sent into it
        // displaces `ratio` compressed ones.
        let travelling = pace * link.min_rtt.as_secs_f64();
        let queued = (link.in_flight as f64 - travelling).max(0.0);
        queued / pace < len as f64 / speed
    }

    /// Whether the link took bytes [`FAST_LINK`] times faster than the fastest rung
    /// compresses.
    pub(super) fn link_too_fast(&self) -> bool {
        let rate = self.pace();
        self.predict(0)
            .is_some_and(|(speed, _)| rate >= FAST_LINK * speed)
    }

    /// The pace the link has shown, in bytes/s: the rate at which it limited us, or the rate
    /// at which it at least carried what we sent (or an earlier connection's, recalled); 0
    /// until an evaluation has measured one.
    pub(super) fn pace(&self) -> f64 {
        self.link_rate.max(self.floor_rate).max(self.recalled)
    }

    /// The rate at which the peer acknowledged bytes during this evaluation (once the link
    /// has shown its pace, [`WARMUP_ACKED`]). If the link limited it (the kernel had bytes
    /// waiting in most of its blocks), it is averaged with the earlier such rates into the
    /// link's rate and returned; otherwise it is kept as what the link at least carries.
    pub(super) fn measure_link(&mut self) -> Option<f64> {
        let first = self.first?;
        let secs = (self.latest.at.saturating_sub(first.at)).as_secs_f64();
        let acked = self.latest.bytes_acked.saturating_sub(first.bytes_acked);
        if secs <= 0.0 || acked == 0 || first.bytes_acked < WARMUP_ACKED {
            return None;
        }
        let rate = acked as f64 / secs;
        if self.backlogged * 2 <= self.seen {
            self.floor_rate = rate;
            return None;
        }
        // The link limited us below a pace remembered from an earlier connection, or below
        // one it carried earlier in this one: the path is not what it was, so both are
        // forgotten. Were the pace carried kept, a link that slows after a fast phase would
        // keep looking fast, every full block would go raw, and none be compressed again.
        if rate < self.recalled {
            self.recalled = 0.0;
            self.recalled_limit = false;
        }
        if rate < self.floor_rate {
            self.floor_rate = 0.0;
        }
        // Acknowledgements come in bursts: smooth over evaluations.
        self.link_rate = if self.link_rate > 0.0 {
            (self.link_rate + rate) / 2.0
        } else {
            rate
        };
        Some(self.link_rate)
    }
}

/// Whether the link has nothing to send: our queue is empty, and so is the kernel's once
/// the link has shown its pace ([`WARMUP_ACKED`]), where the kernel says.
pub(super) fn idle_now(signals: &Signals) -> bool {
    signals.link_idle
        && signals
            .link
            .is_none_or(|link| link.notsent == 0 && link.bytes_acked >= WARMUP_ACKED)
}
