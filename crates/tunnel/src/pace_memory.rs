//! The link's pace, remembered across the forwarded connections of one endpoint, as TCP
//! remembers a path's metrics across connections.
//!
//! Each forwarded connection has its own policy, and a policy learns the link's pace only
//! from what its own connection sent. On a link far faster than the compressor, a fresh
//! policy compresses its first dozens of blocks before it knows that raw blocks deliver more,
//! which costs a 30 MB transfer on an unshaped link a fifth of its rate. Connections of one
//! path travel alike, so each new one starts from the pace the last ones on its path
//! measured: a client has one path (its server), a server one per client address
//! ([`crate::relay`]'s `path`). Only the pace is shared, never data or compression state (see the crate's
//! security notes).

use std::time::{Duration, Instant};

use crate::policy::Pace;

/// How long a measured pace is trusted without a newer measurement at least as fast.
pub const REMEMBER_FOR: Duration = Duration::from_secs(30);

/// The pace the endpoint's connections measured most recently.
#[derive(Debug, Default)]
pub struct PaceMemory {
    best: Option<(Pace, Instant)>,
}

impl PaceMemory {
    /// Records what a connection measured at `now`. A rate at which the link limited a
    /// transfer replaces what was known (the newest word on the path); a rate the link at
    /// least carried replaces it only if faster, or if the old one has expired, since a
    /// sender that set its own pace says nothing against a faster link.
    pub fn remember(&mut self, pace: Pace, now: Instant) {
        let fresh = |at: Instant| now.saturating_duration_since(at) <= REMEMBER_FOR;
        self.best = match (pace, self.best) {
            (Pace::AtLeast(rate), Some((best, at))) if fresh(at) && rate <= best.rate() => {
                Some((best, at))
            }
            (pace, _) if pace.rate().is_finite() && pace.rate() > 0.0 => Some((pace, now)),
            (_, kept) => kept,
        };
    }

    /// The pace to start a new connection from, unless it is older than [`REMEMBER_FOR`].
    pub fn recall(&self, now: Instant) -> Option<Pace> {
        self.best
            .filter(|&(_, at)| now.saturating_duration_since(at) <= REMEMBER_FOR)
            .map(|(pace, _)| pace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_faster_floor_or_any_limit_replaces_a_slower_floor_does_not() {
        let t0 = Instant::now();
        let mut memory = PaceMemory::default();
        assert_eq!(memory.recall(t0), None);
        memory.remember(Pace::AtLeast(2e9), t0);
        memory.remember(Pace::AtLeast(7e8), t0 + Duration::from_secs(1));
        assert_eq!(
            memory.recall(t0 + Duration::from_secs(2)),
            Some(Pace::AtLeast(2e9))
        );
        memory.remember(Pace::Limited(1.2e6), t0 + Duration::from_secs(3));
        assert_eq!(
            memory.recall(t0 + Duration::from_secs(4)),
            Some(Pace::Limited(1.2e6))
        );
        memory.remember(Pace::AtLeast(5e6), t0 + Duration::from_secs(5));
        assert_eq!(
            memory.recall(t0 + Duration::from_secs(6)),
            Some(Pace::AtLeast(5e6))
        );
        memory.remember(Pace::AtLeast(f64::NAN), t0 + Duration::from_secs(7));
        assert_eq!(
            memory.recall(t0 + Duration::from_secs(8)),
            Some(Pace::AtLeast(5e6))
        );
    }

    #[test]
    fn a_pace_expires_unless_measured_again() {
        let t0 = Instant::now();
        let mut memory = PaceMemory::default();
        memory.remember(Pace::AtLeast(2e9), t0);
        let later = t0 + REMEMBER_FOR + Duration::from_secs(1);
        assert_eq!(memory.recall(later), None);
        // Once expired, a slower floor is the best knowledge there is.
        memory.remember(Pace::AtLeast(7e8), later);
        assert_eq!(memory.recall(later), Some(Pace::AtLeast(7e8)));
    }
}
