//! The budget governor: feeds the encoders' live totals to zipwire-adapt's [`Budget`] policy
//! and sets the server's [`Throttle`] switches from its answer (HAProxy's `maxcompcpuusage` and
//! `maxcomprate`).
//!
//! CPU is the time spent inside encoder calls, which run synchronously on the runtime threads,
//! measured as the thread's CPU time (not wall time, which counts waiting for a core), so it
//! is the CPU they cost; it is summed over threads and compared with one core, as HAProxy
//! does. The policy is pure and tested in zipwire-adapt; this module only samples and applies.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::info;
use zipwire_adapt::{Budget, BudgetSpec, BudgetState};

use crate::counters::Counters;
use crate::settings::BudgetLimits;
use zipwire_adapt::Throttle;

/// How often the governor samples the counters.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// The policy's spec for the configured limits, or `None` when neither CPU nor rate is limited.
pub(crate) fn spec(limits: &BudgetLimits) -> Option<BudgetSpec> {
    (limits.max_cpu.is_some() || limits.max_rate.is_some()).then_some(BudgetSpec {
        max_cpu: limits.max_cpu,
        max_rate: limits.max_rate,
        hysteresis: limits.hysteresis,
        window: limits.window,
    })
}

/// One sample: observes the totals at `now` and applies the resulting state. Returns it.
pub(crate) fn step(
    budget: &mut Budget,
    now: Instant,
    counters: &Counters,
    throttle: &Throttle,
) -> BudgetState {
    let busy = Duration::from_nanos(counters.compression.busy_nanos.load(Ordering::Relaxed));
    // Bytes compressed, not those the streams it stepped down store: those would keep the
    // rate over its limit for as long as a long stream runs.
    let bytes = counters.compression.worked_in.load(Ordering::Relaxed);
    let before = budget.state();
    let state = budget.observe(now, busy, bytes);
    if state != before {
        let usage = budget.usage();
        info!(
            ?state,
            cpu_percent = usage.cpu_percent,
            rate = usage.rate,
            "compression budget"
        );
    }
    throttle.apply(state);
    throttle.set_rate_allowance(budget.rate_allowance());
    state
}

/// A budget with its first sample taken now. Call before the server accepts anything: work
/// done before the first sample would count as the baseline, not as usage.
pub(crate) fn start(spec: BudgetSpec, counters: &Counters, throttle: &Throttle) -> Budget {
    let mut budget = Budget::new(spec);
    step(&mut budget, Instant::now(), counters, throttle);
    budget
}

/// Samples every [`TICK`] until the task is dropped.
pub(crate) async fn govern(mut budget: Budget, counters: Arc<Counters>, throttle: Throttle) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + TICK, TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        step(&mut budget, Instant::now(), &counters, &throttle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zipwire_adapt::ThrottleReason;

    fn add_work(counters: &Counters, busy: Duration, bytes: u64) {
        let meter = &counters.compression;
        meter
            .busy_nanos
            .fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
        meter.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        meter.worked_in.fetch_add(bytes, Ordering::Relaxed);
    }

    #[test]
    fn stored_bytes_of_stepped_down_streams_do_not_keep_the_rate_throttled() {
        let limits = BudgetLimits {
            max_rate: Some(100_000),
            ..BudgetLimits::default()
        };
        let (counters, throttle) = (Counters::default(), Throttle::default());
        let mut budget = start(spec(&limits).expect("limited"), &counters, &throttle);
        let began = Instant::now();
        add_work(&counters, Duration::from_millis(1), 500_000);
        let state = step(&mut budget, began + TICK, &counters, &throttle);
        assert_eq!(state, BudgetState::Throttled(ThrottleReason::Rate));
        // A long stream runs on stepped down: a megabyte a tick goes through it, stored.
        let mut state = state;
        for tick in 2..=40u32 {
            let meter = &counters.compression;
            meter.bytes_in.fetch_add(1_000_000, Ordering::Relaxed);
            state = step(&mut budget, began + TICK * tick, &counters, &throttle);
        }
        assert_eq!(
            state,
            BudgetState::Open,
            "compresses again when it recovers"
        );
    }

    #[test]
    fn work_done_right_after_start_counts_as_usage() {
        // The governor's first sample is taken by `start`, not by the spawned task: the task may
        // first run after a fast first request has already finished, and that request would become
        // the baseline.
        let limits = BudgetLimits {
            max_rate: Some(10_000),
            ..BudgetLimits::default()
        };
        let (counters, throttle) = (Counters::default(), Throttle::default());
        let mut budget = start(spec(&limits).expect("limited"), &counters, &throttle);
        add_work(&counters, Duration::from_millis(1), 50_000);
        let state = step(&mut budget, Instant::now() + TICK, &counters, &throttle);
        assert_eq!(state, BudgetState::Throttled(ThrottleReason::Rate));
    }

    #[test]
    fn no_limits_means_no_governor() {
        assert!(spec(&BudgetLimits::default()).is_none());
        let limited = BudgetLimits {
            max_rate: Some(1_000_000),
            ..BudgetLimits::default()
        };
        assert_eq!(spec(&limited).and_then(|s| s.max_rate), Some(1_000_000));
    }

    #[test]
    fn over_the_cpu_limit_flips_both_switches_and_back_with_hysteresis() {
        let limits = BudgetLimits {
            max_cpu: Some(50.0),
            ..BudgetLimits::default()
        };
        let mut budget = Budget::new(spec(&limits).expect("limited"));
        let (counters, throttle) = (Counters::default(), Throttle::default());
        let start = Instant::now();
        // 80% of a core for two seconds: throttled, both switches on, reason CPU.
        let mut state = BudgetState::Open;
        for tick in 1..=20u32 {
            add_work(&counters, TICK * 8 / 10, 100_000);
            state = step(&mut budget, start + TICK * tick, &counters, &throttle);
        }
        assert_eq!(state, BudgetState::Throttled(ThrottleReason::Cpu));
        assert!(throttle.is_bypassing_new() && throttle.is_stepped_down());
        assert_eq!(throttle.reason(), Some(ThrottleReason::Cpu));
        // 47%: inside the hysteresis band (45-50%), still throttled.
        for tick in 21..=40u32 {
            add_work(&counters, TICK * 47 / 100, 100_000);
            state = step(&mut budget, start + TICK * tick, &counters, &throttle);
        }
        assert!(state.is_throttled());
        // 20%: open again, switches off.
        for tick in 41..=60u32 {
            add_work(&counters, TICK / 5, 100_000);
            state = step(&mut budget, start + TICK * tick, &counters, &throttle);
        }
        assert_eq!(state, BudgetState::Open);
        assert!(!throttle.is_bypassing_new() && !throttle.is_stepped_down());
        assert_eq!(throttle.reason(), None);
    }

    #[test]
    fn responses_admitted_between_two_looks_hold_the_rate() {
        // 1 MB/s. Between two looks of the governor, responses of 100 KB each ask to be
        // compressed: only the window's allowance of them is admitted, where the state switch
        // alone let all of them through until the next look (a 1 MiB/s limit held 27 MB/s).
        let limits = BudgetLimits {
            max_rate: Some(1_000_000),
            ..BudgetLimits::default()
        };
        let (counters, throttle) = (Counters::default(), Throttle::default());
        assert!(
            (0..1000).all(|_| throttle.admit(100_000)),
            "no limit, no allowance"
        );
        let mut budget = start(spec(&limits).expect("limited"), &counters, &throttle);
        let admitted = (0..100).filter(|_| throttle.admit(100_000)).count();
        assert_eq!(admitted, 10, "a window's worth");
        // Those 10 compressed during the next tick: nothing is left until the window moves on.
        add_work(&counters, Duration::from_millis(1), 1_000_000);
        let began = Instant::now();
        step(&mut budget, began + TICK, &counters, &throttle);
        assert!(!throttle.admit(100_000));
        // A window later, with nothing compressed meanwhile, the allowance is whole again.
        step(&mut budget, began + TICK * 12, &counters, &throttle);
        assert!(throttle.admit(100_000));
    }
}
