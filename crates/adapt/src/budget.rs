//! The CPU and rate budget: HAProxy's `maxcompcpuusage` and `maxcomprate`, with hysteresis.
//!
//! The caller sums two counters over every thread that compresses — time spent inside the
//! encoder and input bytes handed to it — and feeds their running totals to
//! [`Budget::observe`] now and then (every few milliseconds, or on every response; both
//! work). The budget keeps a few samples of those totals, measures the increase over the last
//! [`BudgetSpec::window`], and compares it with the limits:
//!
//! - CPU is the share of one core spent compressing, in percent: 500 ms of encoder time in a
//!   one-second window is 50%. With several threads it can exceed 100.
//! - Rate is input bytes per second.
//!
//! Over a limit the state becomes [`BudgetState::Throttled`]; it becomes
//! [`BudgetState::Open`] again only when every limited measure is below
//! `(1 - hysteresis) × limit`. Between the two thresholds the state does not change, so a load
//! that hovers around a limit does not flip compression on and off on every observation.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

/// The limits a [`Budget`] enforces.
///
/// Mirrors the proxy's `BudgetLimits` without its memory cap (that one is a [`MemoryGate`]),
/// so this crate depends on no server.
///
/// [`MemoryGate`]: crate::MemoryGate
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BudgetSpec {
    /// Percent of one core spent compressing, summed over threads. `None`: no limit.
    pub max_cpu: Option<f64>,
    /// Input bytes per second compressed, summed over threads. `None`: no limit.
    pub max_rate: Option<u64>,
    /// How far below a limit usage must fall before compression resumes, as a fraction of the
    /// limit: with 0.1 and `max_cpu` 50, throttling starts above 50% and ends below 45%.
    /// Values outside 0-1 are clamped. Default 0.1.
    pub hysteresis: f64,
    /// The span over which usage is measured. Default one second.
    pub window: Duration,
}

impl Default for BudgetSpec {
    fn default() -> BudgetSpec {
        BudgetSpec {
            max_cpu: None,
            max_rate: None,
            hysteresis: 0.1,
            window: Duration::from_secs(1),
        }
    }
}

/// Whether new responses may be compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetState {
    /// Under budget: compress.
    Open,
    /// Over budget: pass new responses uncompressed, step running ones down to stored blocks.
    Throttled(ThrottleReason),
}

impl BudgetState {
    /// Whether this is [`BudgetState::Throttled`].
    pub fn is_throttled(self) -> bool {
        matches!(self, BudgetState::Throttled(_))
    }
}

/// Which limit a [`BudgetState::Throttled`] budget is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThrottleReason {
    /// [`BudgetSpec::max_cpu`].
    Cpu,
    /// [`BudgetSpec::max_rate`].
    Rate,
}

impl ThrottleReason {
    /// A short lower-case name, for metric labels and logs: `cpu` or `rate`.
    pub fn as_str(self) -> &'static str {
        match self {
            ThrottleReason::Cpu => "cpu",
            ThrottleReason::Rate => "rate",
        }
    }
}

impl fmt::Display for ThrottleReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Usage measured over the last window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// Percent of one core spent compressing.
    pub cpu_percent: f64,
    /// Input bytes compressed per second.
    pub rate: f64,
}

/// The CPU and rate budget; see the [module documentation](self).
#[derive(Clone, Debug)]
pub struct Budget {
    spec: BudgetSpec,
    /// Oldest first. The front is the newest sample at or before `now - window` once the
    /// budget has run that long; later samples are at least `window / SLOTS` apart.
    samples: VecDeque<Sample>,
    state: BudgetState,
    usage: Usage,
}

/// Samples kept per window: usage is measured over the window to within `window / SLOTS`,
/// however often [`Budget::observe`] is called, in constant memory.
const SLOTS: u32 = 32;

#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Instant,
    busy: Duration,
    bytes: u64,
}

impl Budget {
    /// A budget enforcing `spec`, open until observations say otherwise.
    ///
    /// A zero window is treated as one nanosecond; the hysteresis is clamped to 0-1.
    pub fn new(spec: BudgetSpec) -> Budget {
        let hysteresis = if spec.hysteresis.is_nan() {
            0.0
        } else {
            spec.hysteresis.clamp(0.0, 1.0)
        };
        let window = spec.window.max(Duration::from_nanos(1));
        Budget {
            spec: BudgetSpec {
                hysteresis,
                window,
                ..spec
            },
            samples: VecDeque::with_capacity(SLOTS as usize + 2),
            state: BudgetState::Open,
            usage: Usage::default(),
        }
    }

    /// Records the running totals at `now` and returns the state they lead to.
    ///
    /// `busy_total` is the time spent compressing and `bytes_in_total` the input bytes
    /// compressed since some fixed start, summed over threads: both only grow. A total that
    /// goes down (a counter reset) counts as no increase, and a `now` earlier than the last
    /// observation as the same instant.
    ///
    /// Until the budget has run one window, the time before the first observation counts as
    /// idle: a burst right after start is averaged over the whole window.
    pub fn observe(
        &mut self,
        now: Instant,
        busy_total: Duration,
        bytes_in_total: u64,
    ) -> BudgetState {
        let now = self.samples.back().map_or(now, |last| now.max(last.at));
        let sample = Sample {
            at: now,
            busy: busy_total,
            bytes: bytes_in_total,
        };
        self.record(sample);
        self.usage = self.measure(sample);
        self.state = self.next_state(self.usage);
        self.state
    }

    /// The state the last observation led to ([`BudgetState::Open`] before any).
    pub fn state(&self) -> BudgetState {
        self.state
    }

    /// The usage measured at the last observation (zero before any).
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// The limits, with the hysteresis and window as [`Budget::new`] adjusted them.
    pub fn spec(&self) -> BudgetSpec {
        self.spec
    }

    /// Input bytes that may still be admitted for compression in the current window, as of
    /// the last observation: `max_rate` over one window less what the window compressed.
    /// `None` without a rate limit.
    ///
    /// A state switch set on each observation lets every response that starts between two
    /// observations through, whatever its size: with observations 100 ms apart a 1 MiB/s
    /// limit let 27 MB/s through (measured 2026-11-28). A caller that takes each response's
    /// expected input from this allowance as it admits it holds the rate over each window.
    pub fn rate_allowance(&self) -> Option<u64> {
        self.spec.max_rate.map(|limit| {
            let window = self.spec.window.as_secs_f64();
            let left = (limit as f64 - self.usage.rate) * window;
            // Saturating float-to-int: negative is 0, past u64::MAX is u64::MAX.
            left as u64
        })
    }

    fn record(&mut self, sample: Sample) {
        let spacing = self.spec.window / SLOTS;
        let due = self
            .samples
            .back()
            .is_none_or(|last| sample.at.duration_since(last.at) >= spacing);
        if due {
            self.samples.push_back(sample);
        }
        // Keep one sample at or before the window's start as the baseline; drop older ones.
        let start = sample.at.checked_sub(self.spec.window);
        while let (Some(start), Some(second)) = (start, self.samples.get(1)) {
            if second.at > start {
                break;
            }
            self.samples.pop_front();
        }
        // Only reachable when samples are closer than `spacing` apart, which `due` prevents;
        // kept so memory stays bounded whatever the clock does.
        while self.samples.len() > SLOTS as usize + 2 {
            self.samples.pop_front();
        }
    }

    fn measure(&self, now: Sample) -> Usage {
        let Some(base) = self.samples.front() else {
            return Usage::default();
        };
        let span = now.at.duration_since(base.at).max(self.spec.window);
        let seconds = span.as_secs_f64();
        let busy = now.busy.saturating_sub(base.busy).as_secs_f64();
        let bytes = now.bytes.saturating_sub(base.bytes) as f64;
        Usage {
            cpu_percent: busy / seconds * 100.0,
            rate: bytes / seconds,
        }
    }

    fn next_state(&self, usage: Usage) -> BudgetState {
        let cpu = Measure::new(usage.cpu_percent, self.spec.max_cpu, self.spec.hysteresis);
        let rate = Measure::new(
            usage.rate,
            self.spec.max_rate.map(|limit| limit as f64),
            self.spec.hysteresis,
        );
        if cpu.is_over() {
            return BudgetState::Throttled(ThrottleReason::Cpu);
        }
        if rate.is_over() {
            return BudgetState::Throttled(ThrottleReason::Rate);
        }
        let BudgetState::Throttled(reason) = self.state else {
            return BudgetState::Open;
        };
        // In the hysteresis band: stay throttled, naming the reason that still holds.
        let (current, other, other_reason) = match reason {
            ThrottleReason::Cpu => (cpu, rate, ThrottleReason::Rate),
            ThrottleReason::Rate => (rate, cpu, ThrottleReason::Cpu),
        };
        if current.is_holding() {
            BudgetState::Throttled(reason)
        } else if other.is_holding() {
            BudgetState::Throttled(other_reason)
        } else {
            BudgetState::Open
        }
    }
}

/// One measure against its limit.
#[derive(Clone, Copy)]
struct Measure {
    value: f64,
    limit: Option<f64>,
    hysteresis: f64,
}

impl Measure {
    fn new(value: f64, limit: Option<f64>, hysteresis: f64) -> Measure {
        Measure {
            value,
            limit,
            hysteresis,
        }
    }

    /// Above the limit: throttle.
    fn is_over(self) -> bool {
        self.limit.is_some_and(|limit| self.value > limit)
    }

    /// Not yet below the reopening threshold: a throttled budget stays throttled.
    fn is_holding(self) -> bool {
        self.limit
            .is_some_and(|limit| self.value >= limit * (1.0 - self.hysteresis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Drives a budget through synthetic time: each step adds busy time and bytes over an
    /// interval, then observes.
    struct Clock {
        budget: Budget,
        now: Instant,
        busy: Duration,
        bytes: u64,
    }

    impl Clock {
        fn new(spec: BudgetSpec) -> Clock {
            let now = Instant::now();
            let mut budget = Budget::new(spec);
            assert_eq!(budget.observe(now, Duration::ZERO, 0), BudgetState::Open);
            Clock {
                budget,
                now,
                busy: Duration::ZERO,
                bytes: 0,
            }
        }

        /// `steps` observations `every` apart, each after `busy` of compression over `bytes`.
        fn run(&mut self, steps: u32, every: Duration, busy: Duration, bytes: u64) -> BudgetState {
            let mut state = self.budget.state();
            for _ in 0..steps {
                self.now += every;
                self.busy += busy;
                self.bytes += bytes;
                state = self.budget.observe(self.now, self.busy, self.bytes);
            }
            state
        }
    }

    fn cpu_limit(percent: f64) -> BudgetSpec {
        BudgetSpec {
            max_cpu: Some(percent),
            ..BudgetSpec::default()
        }
    }

    fn rate_limit(bytes_per_second: u64) -> BudgetSpec {
        BudgetSpec {
            max_rate: Some(bytes_per_second),
            ..BudgetSpec::default()
        }
    }

    const CPU: BudgetState = BudgetState::Throttled(ThrottleReason::Cpu);
    const RATE: BudgetState = BudgetState::Throttled(ThrottleReason::Rate);

    #[test]
    fn steady_under_the_limit_stays_open() {
        let mut clock = Clock::new(cpu_limit(50.0));
        // 4 ms busy every 10 ms: 40%, for ten seconds.
        assert_eq!(clock.run(1000, ms(10), ms(4), 1000), BudgetState::Open);
        let usage = clock.budget.usage();
        assert!((usage.cpu_percent - 40.0).abs() < 0.5, "{usage:?}");
        assert!((usage.rate - 100_000.0).abs() < 1000.0, "{usage:?}");
    }

    #[test]
    fn burst_over_the_limit_throttles() {
        let mut clock = Clock::new(cpu_limit(50.0));
        assert_eq!(clock.run(200, ms(10), ms(2), 0), BudgetState::Open);
        // 9 ms busy every 10 ms: the window average climbs past 50% within the second.
        let mut throttled_after = None;
        for step in 1..=100 {
            if clock.run(1, ms(10), ms(9), 0) == CPU {
                throttled_after = Some(step);
                break;
            }
        }
        let step = throttled_after.expect("a sustained 90% load throttles");
        // 20% baseline: after n steps of 90% the average is 20 + 0.7n%, over 50 at n = 43.
        assert!((40..=50).contains(&step), "throttled after {step} steps");
    }

    #[test]
    fn short_burst_averaged_over_the_window_stays_open() {
        let mut clock = Clock::new(cpu_limit(50.0));
        assert_eq!(clock.run(100, ms(10), ms(1), 0), BudgetState::Open);
        // 100 ms fully busy, then quiet: 100 + 9 ms over the window, about 11%.
        assert_eq!(clock.run(10, ms(10), ms(10), 0), BudgetState::Open);
        assert_eq!(clock.run(100, ms(10), Duration::ZERO, 0), BudgetState::Open);
    }

    #[test]
    fn hysteresis_band_holds_the_state() {
        // Throttle above 50%, reopen below 45%.
        let mut clock = Clock::new(cpu_limit(50.0));
        assert_eq!(clock.run(200, ms(10), ms(6), 0), CPU);
        // 47%: inside the band, still throttled however long it lasts.
        assert_eq!(clock.run(300, ms(10), Duration::from_micros(4700), 0), CPU);
        // 44%: below the band, open again once the window has slid past the 47% period.
        assert_eq!(
            clock.run(200, ms(10), Duration::from_micros(4400), 0),
            BudgetState::Open
        );
        // Back to 47% from open: inside the band, still open.
        assert_eq!(
            clock.run(300, ms(10), Duration::from_micros(4700), 0),
            BudgetState::Open
        );
    }

    #[test]
    fn zero_hysteresis_reopens_just_below_the_limit() {
        let mut clock = Clock::new(BudgetSpec {
            hysteresis: 0.0,
            ..cpu_limit(50.0)
        });
        assert_eq!(clock.run(200, ms(10), ms(6), 0), CPU);
        assert_eq!(
            clock.run(200, ms(10), Duration::from_micros(4900), 0),
            BudgetState::Open
        );
    }

    #[test]
    fn window_slides_past_an_old_burst() {
        let mut clock = Clock::new(rate_limit(1_000_000));
        // 2 MB/s for 600 ms: 1.2 MB in the window, over the limit by the end.
        assert_eq!(clock.run(60, ms(10), Duration::ZERO, 20_000), RATE);
        // Idle: the burst is still inside the window for a while...
        assert_eq!(clock.run(40, ms(10), Duration::ZERO, 0), RATE);
        // ...and once it has left, the rate is zero and the budget reopens.
        assert_eq!(clock.run(70, ms(10), Duration::ZERO, 0), BudgetState::Open);
        assert_eq!(clock.budget.usage().rate, 0.0);
    }

    #[test]
    fn sparse_observations_average_over_the_gap() {
        let mut clock = Clock::new(rate_limit(1_000_000));
        // One observation after ten seconds: 5 MB over ten seconds is 500 kB/s.
        assert_eq!(
            clock.run(1, 10 * SECOND, Duration::ZERO, 5_000_000),
            BudgetState::Open
        );
        assert!((clock.budget.usage().rate - 500_000.0).abs() < 1.0);
        // 1.5 MB in the next second alone is over.
        assert_eq!(clock.run(1, SECOND, Duration::ZERO, 1_500_000), RATE);
    }

    #[test]
    fn frequent_observations_keep_memory_bounded() {
        let mut clock = Clock::new(cpu_limit(50.0));
        clock.run(
            100_000,
            Duration::from_micros(10),
            Duration::from_micros(1),
            1,
        );
        assert!(clock.budget.samples.len() <= SLOTS as usize + 2);
        let usage = clock.budget.usage();
        assert!((usage.cpu_percent - 10.0).abs() < 0.5, "{usage:?}");
    }

    #[test]
    fn both_limits() {
        let spec = BudgetSpec {
            max_cpu: Some(50.0),
            max_rate: Some(1_000_000),
            ..BudgetSpec::default()
        };
        let mut clock = Clock::new(spec);
        // Cheap bytes: rate over, CPU fine.
        assert_eq!(clock.run(150, ms(10), ms(1), 20_000), RATE);
        // Expensive and fast: CPU wins the name.
        assert_eq!(clock.run(150, ms(10), ms(8), 20_000), CPU);
        // CPU falls away, rate stays over: the reason follows.
        assert_eq!(clock.run(150, ms(10), ms(1), 20_000), RATE);
        // Rate in its band (950 kB/s), CPU low: still throttled for rate.
        assert_eq!(clock.run(150, ms(10), ms(1), 9_500), RATE);
        // Both low: open.
        assert_eq!(clock.run(150, ms(10), ms(1), 5_000), BudgetState::Open);
    }

    #[test]
    fn band_of_the_other_limit_holds_a_throttle() {
        let spec = BudgetSpec {
            max_cpu: Some(50.0),
            max_rate: Some(1_000_000),
            ..BudgetSpec::default()
        };
        let mut clock = Clock::new(spec);
        assert_eq!(clock.run(150, ms(10), ms(8), 9_500), CPU);
        // CPU drops out, rate sits in its band: every measure must be below its threshold to
        // reopen, so the throttle stays, now named for the rate.
        assert_eq!(clock.run(150, ms(10), ms(1), 9_500), RATE);
        assert_eq!(clock.run(150, ms(10), ms(1), 1_000), BudgetState::Open);
    }

    #[test]
    fn no_limits_never_throttle() {
        let mut clock = Clock::new(BudgetSpec::default());
        assert_eq!(
            clock.run(500, ms(10), ms(40), 100_000_000),
            BudgetState::Open
        );
        let usage = clock.budget.usage();
        assert!(usage.cpu_percent > 300.0, "{usage:?}");
    }

    #[test]
    fn start_up_counts_the_time_before_the_first_observation_as_idle() {
        let mut clock = Clock::new(cpu_limit(50.0));
        // 10 ms fully busy right after start: 1% of the first window.
        assert_eq!(clock.run(1, ms(10), ms(10), 0), BudgetState::Open);
        assert!((clock.budget.usage().cpu_percent - 1.0).abs() < 1e-9);
    }

    #[test]
    fn counter_reset_and_clock_going_back_are_tolerated() {
        let mut clock = Clock::new(rate_limit(1_000));
        let now = clock.now;
        assert_eq!(
            clock.budget.observe(now + SECOND, ms(5), 500),
            BudgetState::Open
        );
        // Totals going down and time going back read as "nothing happened".
        assert_eq!(
            clock.budget.observe(now, Duration::ZERO, 0),
            BudgetState::Open
        );
        assert_eq!(clock.budget.usage().rate, 0.0);
    }

    #[test]
    fn spec_is_sanitised() {
        let budget = Budget::new(BudgetSpec {
            hysteresis: f64::NAN,
            window: Duration::ZERO,
            ..BudgetSpec::default()
        });
        assert_eq!(budget.spec().hysteresis, 0.0);
        assert_eq!(budget.spec().window, Duration::from_nanos(1));
        let budget = Budget::new(BudgetSpec {
            hysteresis: 3.0,
            ..BudgetSpec::default()
        });
        assert_eq!(budget.spec().hysteresis, 1.0);
    }

    #[test]
    fn names() {
        assert_eq!(ThrottleReason::Cpu.to_string(), "cpu");
        assert_eq!(ThrottleReason::Rate.as_str(), "rate");
        assert!(CPU.is_throttled());
        assert!(!BudgetState::Open.is_throttled());
    }

    #[test]
    fn the_rate_allowance_is_what_the_window_has_left() {
        let spec = BudgetSpec {
            max_rate: Some(1_000_000),
            ..BudgetSpec::default()
        };
        let start = Instant::now();
        let mut budget = Budget::new(spec);
        budget.observe(start, Duration::ZERO, 0);
        assert_eq!(budget.rate_allowance(), Some(1_000_000));
        // 300 KB compressed over the window: 700 KB left.
        budget.observe(start + Duration::from_secs(1), Duration::ZERO, 300_000);
        let left = budget.rate_allowance().expect("a rate limit");
        assert!((699_000..=701_000).contains(&left), "{left}");
        // Over the limit: nothing left, never negative.
        budget.observe(start + Duration::from_secs(2), Duration::ZERO, 3_000_000);
        assert_eq!(budget.rate_allowance(), Some(0));
        assert_eq!(Budget::new(BudgetSpec::default()).rate_allowance(), None);
    }
}
