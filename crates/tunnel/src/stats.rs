//! Byte and block counters per direction, shared by all of an endpoint's connections, and
//! the report printed at exit (with `-v`) and on SIGUSR1, in the words of ssh's
//! `compress outgoing: raw data N, compressed M, factor F`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::frame::Method;
use crate::policy::RawReason;

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

/// The counters of both directions of an endpoint.
#[derive(Debug, Default)]
pub struct Stats {
    outgoing: Mutex<DirectionCounts>,
    incoming: Mutex<DirectionCounts>,
}

impl Stats {
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
        assert_eq!(stats.outgoing().highest(), Some(zstd));
    }
}
