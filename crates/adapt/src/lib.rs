//! zipwire's adaptation policy: decisions about how much compression the machine can afford,
//! made from observations the caller feeds in.
//!
//! # Brief overview
//!
//! - [`Budget`] turns cumulative counters (time spent compressing, input bytes compressed)
//!   into CPU percent and bytes per second over a sliding window and says whether compression
//!   is [`BudgetState::Open`] or [`BudgetState::Throttled`], with hysteresis so the state does
//!   not flap around a limit (HAProxy's `maxcompcpuusage` and `maxcomprate`).
//! - [`MemoryGate`] caps the total memory of compression buffers: a stream takes a
//!   [`Permit`] for its buffers before it starts compressing and gives it back on drop.
//! - [`LogThrottle`] lets a repeated warning through once per interval, with a count.
//! - [`cpu::thread_cpu`] and [`cpu::Work`]: the calling thread's CPU time, which the proxy
//!   and the tunnel count compression in.
//! - [`rng::SplitMix64`]: the seeded generator of made-up data (demo site, built-in sample,
//!   test inputs).
//! - [`sniff`] says, from magic numbers and a sampled entropy, that a block will not
//!   compress before a compressor spends time on it (the tunnel and the drop-in libz).
//!
//! # Design
//!
//! Policy is pure: nothing in it reads a clock, spawns a thread or touches a socket. The caller
//! passes an [`Instant`](std::time::Instant) with each observation, so the tests drive the
//! policy through synthetic time, bursts and quiet periods without sleeping. The proxy and the
//! tunnel (which share these limits) measure, this crate decides; the one measurement they
//! share, the thread's CPU time, is [`cpu`], apart from the policy.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use zipwire_adapt::{Budget, BudgetSpec, BudgetState, ThrottleReason};
//!
//! let spec = BudgetSpec { max_cpu: Some(50.0), ..BudgetSpec::default() };
//! let mut budget = Budget::new(spec);
//! let start = Instant::now();
//! budget.observe(start, Duration::ZERO, 0);
//! // 800 ms of compression in one second: 80% of a core, over the 50% limit.
//! let state = budget.observe(start + Duration::from_secs(1), Duration::from_millis(800), 0);
//! assert_eq!(state, BudgetState::Throttled(ThrottleReason::Cpu));
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod budget;
pub mod cpu;
pub mod log_throttle;
pub mod memory;
pub mod rng;
pub mod sniff;
pub mod throttle;

pub use budget::{Budget, BudgetSpec, BudgetState, ThrottleReason, Usage};
pub use log_throttle::LogThrottle;
pub use memory::{MemoryGate, Permit};
pub use throttle::Throttle;
