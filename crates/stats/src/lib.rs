//! zipwire's statistics: a [`Snapshot`] of the proxy's counters and gauges and a
//! [`TunnelSnapshot`] of a tunnel endpoint's, written as JSON (the admin listeners' `/stats`)
//! or in the Prometheus text exposition format (`/metrics`).
//!
//! # Brief overview
//!
//! - [`Snapshot`] is a plain value: numbers copied out of the live counters at one moment.
//!   Whoever keeps the counters (the proxy's server) builds it; this crate only formats it, so
//!   it depends on no other zipwire crate and any of them may use it.
//! - [`Snapshot::to_json`] gives one JSON object whose field names are the struct's.
//! - [`Snapshot::to_prometheus`] gives text format 0.0.4: a `# HELP` and a `# TYPE` line per
//!   metric, names prefixed `zipwire_proxy_`, counters ending in `_total`, bypass and throttle
//!   reasons as a `reason` label, errors by `side` and `status` ([`prometheus`] lists every
//!   metric).
//! - [`TunnelSnapshot::to_json`] and [`TunnelSnapshot::to_prometheus`] do the same for a
//!   tunnel endpoint, names prefixed `zipwire_tunnel_` ([`tunnel`] lists them).
//!
//! # Why hand-written
//!
//! The Prometheus client crates keep their own registry of live metrics; the proxy's counters
//! are already atomics in its own types, and the text format is a dozen lines of escaping
//! rules, so formatting a snapshot directly costs less than a registry and its dependencies.
//!
//! # Example
//!
//! ```
//! use zipwire_stats::Snapshot;
//!
//! let mut snapshot = Snapshot { requests: 3, responses_compressed: 2, ..Snapshot::default() };
//! snapshot.bypassed.insert("too_small".to_owned(), 1);
//!
//! let metrics = snapshot.to_prometheus();
//! assert!(metrics.contains("\nzipwire_proxy_requests_total 3\n"));
//! assert!(metrics.contains("\nzipwire_proxy_responses_bypassed_total{reason=\"too_small\"} 1\n"));
//!
//! let json: serde_json::Value = serde_json::from_str(&snapshot.to_json()).unwrap();
//! assert_eq!(json["responses_compressed"], 2);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod prometheus;
mod snapshot;
pub mod tunnel;

pub use snapshot::{CacheStats, CodingStats, DictionaryStats, Errors, Snapshot, THROTTLE_REASONS};
pub use tunnel::TunnelSnapshot;
