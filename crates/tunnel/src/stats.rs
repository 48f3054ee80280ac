//! Byte and block counters per direction, shared by all of an endpoint's connections, and
//! the report printed at exit (with `-v`) and on SIGUSR1, in the words of ssh's
//! `compress outgoing: raw data N, compressed M, factor F`; and the same numbers as a
//! [`TunnelSnapshot`] for the admin listener's `/stats`, `/metrics` and dashboard
//! ([`Stats::snapshot`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use zipwire_stats::tunnel::{Direction, MethodStats, Outgoing, TunnelMemory, TunnelSnapshot};

use crate::frame::Method;
use crate::memory::MemoryCap;
use crate::policy::{Pace, RawReason};

/// Counters for one method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MethodCounts {
    /// Frames.
    pub blocks: u64,
    /// Uncompressed bytes.
    pub raw: u64,
    /// Bytes on the wire, frame headers included.
    pub wire: u64,
    /// Time spent compressing (sender) or decompressing (receiver).
    pub time: Duration,
}

/// Counters for one direction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirectionCounts {
    /// Per method actually used, raw included.
    pub methods: BTreeMap<Method, MethodCounts>,
    /// Raw frames, per reason (the sender's side only).
    pub raw_reasons: BTreeMap<RawReason, u64>,
}

impl DirectionCounts {
    /// Uncompressed bytes in all.
    pub fn raw(&self) -> u64 {
        self.methods.values().map(|c| c.raw).sum()
    }

    /// Wire bytes in all.
    pub fn wire(&self) -> u64 {
        self.methods.values().map(|c| c.wire).sum()
    }

    /// The highest compressing method used, if any.
    pub fn highest(&self) -> Option<Method> {
        self.methods
            .keys()
            .copied()
            .filter(|m| *m != Method::RAW)
            .max()
    }
}

/// The counters of both directions of an endpoint, and its memory cap's state.
#[derive(Debug, Default)]
pub struct Stats {
    outgoing: Mutex<DirectionCounts>,
    incoming: Mutex<DirectionCounts>,
    link: Mutex<Option<Pace>>,
    memory: MemoryCap,
}

impl Stats {
    /// Counters that report on `memory` too.
    pub fn new(memory: MemoryCap) -> Stats {
        Stats {
            memory,
            ..Stats::default()
        }
    }

    /// The memory cap these counters report on.
    pub fn memory(&self) -> &MemoryCap {
        &self.memory
    }

    /// Counts a frame sent.
    pub fn sent(
        &self,
        method: Method,
        raw: usize,
        wire: usize,
        time: Duration,
        reason: Option<RawReason>,
    ) {
        let mut d = self.outgoing.lock().unwrap_or_else(PoisonError::into_inner);
        add(&mut d, method, raw, wire, time);
        if let Some(reason) = reason {
            *d.raw_reasons.entry(reason).or_default() += 1;
        }
    }

    /// Counts a frame received.
    pub fn received(&self, method: Method, raw: usize, wire: usize, time: Duration) {
        let mut d = self.incoming.lock().unwrap_or_else(PoisonError::into_inner);
        add(&mut d, method, raw, wire, time);
    }

    /// Records the link's pace as the latest connection measured it.
    pub fn link_measured(&self, pace: Pace) {
        *self.link.lock().unwrap_or_else(PoisonError::into_inner) = Some(pace);
    }

    /// The link's pace as last measured, if any connection measured it.
    pub fn link(&self) -> Option<Pace> {
        *self.link.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counters at this moment, for the admin listener: `/stats` is its JSON
    /// ([`TunnelSnapshot::to_json`]: `uptime_seconds`, `memory`, then `outgoing` and
    /// `incoming` with their methods in this crate's order and every raw reason, 0 included),
    /// `/metrics` its Prometheus text.
    pub fn snapshot(&self, uptime: Duration) -> TunnelSnapshot {
        let direction = |d: DirectionCounts| Direction {
            raw: d.raw(),
            wire: d.wire(),
            methods: d
                .methods
                .iter()
                .map(|(method, c)| {
                    let stats = MethodStats {
                        blocks: c.blocks,
                        raw: c.raw,
                        wire: c.wire,
                        seconds: c.time.as_secs_f64(),
                    };
                    (method.to_string(), stats)
                })
                .collect(),
            raw_reasons: RawReason::ALL
                .iter()
                .map(|reason| {
                    let n = d.raw_reasons.get(reason).copied().unwrap_or(0);
                    (reason.as_str().to_owned(), n)
                })
                .collect(),
        };
        let link = self.link().filter(|pace| pace.rate().is_finite());
        TunnelSnapshot {
            uptime,
            memory: TunnelMemory {
                in_use: self.memory.in_use(),
                max: self.memory.max(),
                compressing: self.memory.compressing() as u64,
            },
            outgoing: Outgoing {
                counts: direction(self.outgoing()),
                link_rate_bytes_per_s: link.map(|pace| pace.rate().round() as u64),
                link_limited: matches!(link, Some(Pace::Limited(_))),
            },
            incoming: direction(self.incoming()),
        }
    }

    /// [`Stats::snapshot`] as JSON, the admin listener's `/stats` and the dashboard's events.
    pub fn to_json(&self, uptime: Duration) -> String {
        self.snapshot(uptime).to_json()
    }

    /// A copy of the outgoing counters.
    pub fn outgoing(&self) -> DirectionCounts {
        self.outgoing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A copy of the incoming counters.
    pub fn incoming(&self) -> DirectionCounts {
        self.incoming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The report: two ssh-style lines, then the detail per method and why blocks went raw.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for (name, d) in [("outgoing", self.outgoing()), ("incoming", self.incoming())] {
            let (raw, wire) = (d.raw(), d.wire());
            let factor = if raw == 0 {
                0.0
            } else {
                wire as f64 / raw as f64
            };
            let _ = writeln!(
                out,
                "compress {name}: raw data {raw}, compressed {wire}, factor {factor:.2}"
            );
            for (method, c) in &d.methods {
                let _ = write!(
                    out,
                    "  {method}: {} blocks, {} -> {} bytes, {:.3} s",
                    c.blocks,
                    c.raw,
                    c.wire,
                    c.time.as_secs_f64()
                );
                if *method == Method::RAW && !d.raw_reasons.is_empty() {
                    let reasons: Vec<String> = d
                        .raw_reasons
                        .iter()
                        .map(|(r, n)| format!("{} {n}", r.as_str()))
                        .collect();
                    let _ = write!(out, " ({})", reasons.join(", "));
                }
                out.push('\n');
            }
        }
        let max = self
            .memory
            .max()
            .map_or("no cap".to_owned(), |max| format!("cap {max}"));
        let _ = writeln!(
            out,
            "memory: {} bytes held ({max}), {} directions compressing",
            self.memory.in_use(),
            self.memory.compressing()
        );
        out
    }
}

fn add(d: &mut DirectionCounts, method: Method, raw: usize, wire: usize, time: Duration) {
    let c = d.methods.entry(method).or_default();
    c.blocks += 1;
    c.raw += raw as u64;
    c.wire += wire as u64;
    c.time += time;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Codec;

    #[test]
    fn the_report_adds_up_like_ssh_does() {
        let stats = Stats::default();
        let zstd = Method::new(Codec::Zstd, 3).unwrap();
        stats.sent(zstd, 1000, 250, Duration::from_millis(2), None);
        stats.sent(
            Method::RAW,
            1000,
            1011,
            Duration::ZERO,
            Some(RawReason::LinkIdle),
        );
        let report = stats.report();
        assert!(
            report.starts_with("compress outgoing: raw data 2000, compressed 1261, factor 0.63\n"),
            "{report}"
        );
        assert!(
            report.contains("raw: 1 blocks, 1000 -> 1011 bytes, 0.000 s (link-idle 1)"),
            "{report}"
        );
        assert!(report.contains("compress incoming: raw data 0, compressed 0, factor 0.00"));
        assert!(
            report.ends_with("memory: 0 bytes held (cap 268435456), 0 directions compressing\n"),
            "{report}"
        );
        assert_eq!(stats.outgoing().highest(), Some(zstd));
    }

    #[test]
    fn the_json_has_both_directions_every_reason_and_the_link() {
        let stats = Stats::default();
        let zstd = Method::new(Codec::Zstd, 3).unwrap();
        stats.sent(zstd, 1000, 250, Duration::from_millis(2), None);
        stats.sent(Method::RAW, 10, 21, Duration::ZERO, Some(RawReason::Tiny));
        stats.received(Method::RAW, 7, 18, Duration::ZERO);
        let json = stats.to_json(Duration::from_millis(1500));
        assert!(
            json.starts_with(
                "{\"uptime_seconds\":1.5,\"memory\":{\"in_use\":0,\"max\":268435456,\"compressing\":0},\"outgoing\":{\"raw\":1010,\"wire\":271,\"methods\":{"
            ),
            "{json}"
        );
        assert!(
            json.contains("\"zstd-3\":{\"blocks\":1,\"raw\":1000,\"wire\":250,\"seconds\":0.002}"),
            "{json}"
        );
        assert!(
            json.contains("\"tiny\":1,") && json.contains("\"link-idle\":0"),
            "{json}"
        );
        assert!(
            json.contains("\"link_rate_bytes_per_s\":null,\"link_limited\":false}"),
            "{json}"
        );
        assert!(json.ends_with("\"incoming\":{\"raw\":7,\"wire\":18,\"methods\":{\"raw\":{\"blocks\":1,\"raw\":7,\"wire\":18,\"seconds\":0.0}},\"raw_reasons\":{\"off\":0,\"magic\":0,\"entropy\":0,\"no-gain\":0,\"backoff\":0,\"link-idle\":0,\"cpu-cap\":0,\"tiny\":0,\"mem-cap\":0}}}"), "{json}");
        stats.link_measured(Pace::Limited(1.25e6));
        let json = stats.to_json(Duration::ZERO);
        assert!(
            json.contains("\"link_rate_bytes_per_s\":1250000,\"link_limited\":true}"),
            "{json}"
        );
    }
}
