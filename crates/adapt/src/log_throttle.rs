//! How often a repeated warning is logged: a client, a scanner or a lack of descriptors can
//! make one failure happen thousands of times a second, and a log line for each drowns the
//! log (and costs more than the failure). The tunnel's accept loop and login warnings, the
//! proxy's and the admin listener's accept loops use it.

use std::time::{Duration, Instant};

/// Lets a repeated warning through at most once per interval, counting what it held back.
#[derive(Debug)]
pub struct LogThrottle {
    every: Duration,
    last: Option<Instant>,
    held: u64,
}

impl LogThrottle {
    /// At most one warning per `every`.
    pub fn new(every: Duration) -> LogThrottle {
        LogThrottle {
            every,
            last: None,
            held: 0,
        }
    }

    /// Whether to log now; if so, how many were held back since the last time.
    pub fn due(&mut self, now: Instant) -> Option<u64> {
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
    fn a_throttled_warning_comes_once_per_interval_with_a_count() {
        let mut throttle = LogThrottle::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(throttle.due(t0), Some(0));
        for ms in 1..100 {
            assert_eq!(throttle.due(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(throttle.due(t0 + Duration::from_secs(11)), Some(99));
    }
}
