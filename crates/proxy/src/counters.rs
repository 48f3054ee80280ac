//! What the server counts while it runs, as plain atomics: the stats crate renders them
//! (Prometheus text, JSON) and the budget policy reads them, without the server knowing
//! either.
//!
//! Every counter is a running total (`Relaxed` increments, read whenever a snapshot is
//! taken) except the two `active_*` gauges.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::encode::body::BodyMeter;
use zipwire_cache::CacheCounters;

use crate::error::{ProxyError, Side};
use zipwire_rules::negotiate::Coding;
use zipwire_rules::Bypass;

/// The counters one [`Server`](crate::Server) shares between its connections.
#[derive(Debug, Default)]
pub struct Counters {
    /// Client connections accepted.
    pub connections: AtomicU64,
    /// Client connections open now (a gauge).
    pub active_connections: AtomicU64,
    /// TLS handshakes completed.
    pub tls_handshakes: AtomicU64,
    /// TLS handshakes that failed or did not finish within the handshake timeout.
    pub tls_handshake_failures: AtomicU64,
    /// Requests received, answered by an upstream or by the proxy itself.
    pub requests: AtomicU64,
    /// The same requests by the protocol the client spoke.
    pub requests_by_protocol: ProtocolCounters,
    /// Responses whose body was compressed.
    pub compressed: AtomicU64,
    /// Upstream gzip responses decoded for a client without gzip.
    pub decompressed: AtomicU64,
    /// Responses passed untransformed, by reason (HEAD responses whose headers were rewritten
    /// count as [`Bypass::Head`]).
    pub bypassed: BypassCounters,
    /// Requests answered with an error status by the proxy, by whose fault.
    pub errors: ErrorCounters,
    /// Response body bytes read from upstreams (before compression).
    pub bytes_in: AtomicU64,
    /// Response body bytes sent to clients (after compression).
    pub bytes_out: AtomicU64,
    /// Encoder totals, updated call by call: bytes taken (a subset of `bytes_in`), bytes
    /// produced (a subset of `bytes_out`) and time spent in encoder calls.
    pub compression: Arc<BodyMeter>,
    /// Decoder totals (nginx `gunzip`), updated call by call.
    pub decompression: Arc<BodyMeter>,
    /// Response bodies being compressed or decompressed now (a gauge).
    pub active_streams: AtomicU64,
    /// Upgrades passed (a `101 Switching Protocols` from an upstream: WebSockets).
    pub upgrades: AtomicU64,
    /// Upgraded connections open now, each a tunnel between a client and an upstream (a
    /// gauge).
    pub active_upgrades: AtomicU64,
    /// Compressed responses and their bytes, by coding.
    pub codings: CodingCounters,
    /// The compressed-variant cache: hits, misses, stores, memory held.
    pub cache: Arc<CacheCounters>,
    /// The gather budget's use ([`GatherGate`](crate::GatherGate)).
    pub gather: Arc<GatherCounters>,
    /// Compression dictionaries: offers, uses by coding, the store.
    pub dictionaries: Arc<crate::DictionaryCounters>,
}

/// How the gather budget ([`GatherGate`](crate::GatherGate)) was used.
#[derive(Debug, Default)]
pub struct GatherCounters {
    /// Times a body found the budget spent and waited in line for a share.
    pub waits: AtomicU64,
    /// The most bytes of the budget held at once by all bodies together (a high-water mark).
    pub peak_held: AtomicU64,
}

impl Counters {
    /// Adds one to a running total.
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n` to a running total.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Takes one from a gauge.
    pub(crate) fn drop_one(gauge: &AtomicU64) {
        gauge.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Compressed responses and their encoder bytes, one [`CodingCounter`] per coding.
#[derive(Debug, Default)]
pub struct CodingCounters {
    counters: [CodingCounter; 4],
}

impl CodingCounters {
    /// Every coding the proxy produces, in the order [`CodingCounters::iter`] reports them.
    pub const CODINGS: [Coding; 4] = [Coding::Gzip, Coding::Deflate, Coding::Zstd, Coding::Br];

    /// The counters of `coding`.
    pub fn get(&self, coding: Coding) -> &CodingCounter {
        let index = match coding {
            Coding::Gzip => 0,
            Coding::Deflate => 1,
            Coding::Zstd => 2,
            Coding::Br => 3,
        };
        &self.counters[index]
    }

    /// Every coding with its counters, in a fixed order.
    pub fn iter(&self) -> impl Iterator<Item = (Coding, &CodingCounter)> + '_ {
        Self::CODINGS
            .iter()
            .map(|&coding| (coding, self.get(coding)))
    }
}

/// One coding's counters.
#[derive(Debug, Default)]
pub struct CodingCounter {
    /// Responses whose body was compressed in this coding.
    pub responses: AtomicU64,
    /// The encoder's bytes taken and produced, and its time, call by call (a share of
    /// [`Counters::compression`]).
    pub meter: Arc<BodyMeter>,
}

/// One counter per [`Bypass`] reason.
#[derive(Debug, Default)]
pub struct BypassCounters {
    counts: [AtomicU64; Bypass::COUNT],
}

impl BypassCounters {
    /// Responses passed for `reason` so far.
    pub fn get(&self, reason: Bypass) -> u64 {
        self.counts[reason.index()].load(Ordering::Relaxed)
    }

    /// Every reason with its count, in a fixed order.
    pub fn iter(&self) -> impl Iterator<Item = (Bypass, u64)> + '_ {
        Bypass::ALL.iter().map(|&reason| (reason, self.get(reason)))
    }

    /// Counts one response passed for `reason`.
    pub(crate) fn add(&self, reason: Bypass) {
        Counters::bump(&self.counts[reason.index()]);
    }
}

/// Requests counted by the protocol version the client spoke: `http/1.0` (and 0.9),
/// `http/1.1`, `h2` (the ALPN names, RFC 7301 §6).
#[derive(Debug, Default)]
pub struct ProtocolCounters {
    http10: AtomicU64,
    http11: AtomicU64,
    h2: AtomicU64,
}

impl ProtocolCounters {
    /// Every protocol's name with its count, in a fixed order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        [
            ("http/1.0", &self.http10),
            ("http/1.1", &self.http11),
            ("h2", &self.h2),
        ]
        .into_iter()
        .map(|(name, count)| (name, count.load(Ordering::Relaxed)))
    }

    /// Counts one request received in `version`.
    pub(crate) fn add(&self, version: http::Version) {
        Counters::bump(protocol_slot(self, version));
    }
}

/// The counter for `version`; HTTP/3 and later are not served, and would count as h2.
fn protocol_slot(counters: &ProtocolCounters, version: http::Version) -> &AtomicU64 {
    if version == http::Version::HTTP_09 || version == http::Version::HTTP_10 {
        &counters.http10
    } else if version == http::Version::HTTP_11 {
        &counters.http11
    } else {
        &counters.h2
    }
}

/// The protocol name [`ProtocolCounters`] and the access log use for `version`.
pub(crate) fn protocol_name(version: http::Version) -> &'static str {
    if version == http::Version::HTTP_09 || version == http::Version::HTTP_10 {
        "http/1.0"
    } else if version == http::Version::HTTP_11 {
        "http/1.1"
    } else {
        "h2"
    }
}

/// Error responses the proxy writes itself, by [`Side`], upstream ones by status.
#[derive(Debug, Default)]
pub struct ErrorCounters {
    /// The client's fault (4xx from the proxy, or from hyper for a request it cannot parse),
    /// and the 501 for a request the proxy does not implement (CONNECT, a transfer coding
    /// other than chunked).
    pub client: AtomicU64,
    /// An upstream failed or could not be reached (502).
    pub upstream: AtomicU64,
    /// An upstream sent nothing in time (504).
    pub upstream_timeout: AtomicU64,
    /// The proxy's own (500).
    pub internal: AtomicU64,
}

impl ErrorCounters {
    /// Counts the error response written for `error`.
    pub(crate) fn add(&self, error: &ProxyError) {
        Counters::bump(match error.side() {
            Side::Client => &self.client,
            Side::Upstream if error.status() == http::StatusCode::GATEWAY_TIMEOUT => {
                &self.upstream_timeout
            }
            Side::Upstream => &self.upstream,
            Side::Internal => &self.internal,
        });
    }

    /// Counts a client connection that ended with `error`, when hyper answered it with an
    /// error status of its own: a request it could not parse (400, 431, 414, 505) never
    /// reaches the proxy's service, and is the client's fault all the same.
    pub(crate) fn add_connection_error(&self, error: &(dyn std::error::Error + 'static)) {
        let hyper = error.downcast_ref::<hyper::Error>();
        if hyper.is_some_and(hyper::Error::is_parse) {
            Counters::bump(&self.client);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_slot() {
        for (i, reason) in Bypass::ALL.iter().enumerate() {
            assert_eq!(reason.index(), i, "{reason}");
        }
    }

    #[test]
    fn requests_are_counted_by_protocol() {
        let counters = ProtocolCounters::default();
        counters.add(http::Version::HTTP_2);
        counters.add(http::Version::HTTP_2);
        counters.add(http::Version::HTTP_11);
        counters.add(http::Version::HTTP_10);
        let counts: Vec<_> = counters.iter().collect();
        assert_eq!(counts, [("http/1.0", 1), ("http/1.1", 1), ("h2", 2)]);
        for (version, name) in [
            (http::Version::HTTP_10, "http/1.0"),
            (http::Version::HTTP_11, "http/1.1"),
            (http::Version::HTTP_2, "h2"),
        ] {
            assert_eq!(protocol_name(version), name);
        }
    }

    #[test]
    fn bypass_counts_are_kept_apart() {
        let counters = BypassCounters::default();
        counters.add(Bypass::Budget);
        counters.add(Bypass::Budget);
        counters.add(Bypass::Type);
        assert_eq!(counters.get(Bypass::Budget), 2);
        assert_eq!(counters.get(Bypass::Type), 1);
        assert_eq!(counters.iter().map(|(_, n)| n).sum::<u64>(), 3);
    }
}
