//! The snapshot value and its JSON form.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The throttle reasons every `/metrics` output lists, at 0 or 1, so their series exist before
/// the first throttle. A reason outside this list still appears while it is the current one.
pub const THROTTLE_REASONS: &[&str] = &["cpu", "rate"];

/// The proxy's counters and gauges at one moment.
///
/// Counters only grow while the process runs; gauges go up and down. The field names are the
/// JSON keys; [`crate::prometheus`] lists the metric each becomes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// Time since the proxy started (JSON: `uptime_seconds`, a number).
    #[serde(rename = "uptime_seconds", with = "seconds")]
    pub uptime: Duration,
    /// Requests received from clients (counter).
    pub requests: u64,
    /// The same requests by the protocol the client spoke: `http/1.0`, `http/1.1`, `h2`
    /// (counters).
    pub requests_by_protocol: BTreeMap<String, u64>,
    /// Responses sent compressed (counter).
    pub responses_compressed: u64,
    /// Gzip responses decoded for clients that do not accept gzip (counter).
    pub responses_decompressed: u64,
    /// Responses passed as they came, by reason (`not_accepted`, `too_small`, `budget`, …;
    /// counters).
    pub bypassed: BTreeMap<String, u64>,
    /// Body bytes read from upstreams (counter).
    pub bytes_in: u64,
    /// Body bytes sent to clients (counter).
    pub bytes_out: u64,
    /// Bytes compression kept off the wire: input minus output of each encoder call that
    /// made less than it took, summed; a call that came out larger (incompressible data)
    /// counts nothing, so the counter never goes down (counter).
    pub bytes_saved: u64,
    /// CPU time spent inside encoder and decoder calls (the threads' CPU time, not wall
    /// time), summed over threads, in seconds (counter).
    pub compress_seconds: f64,
    /// Of `compress_seconds`, the time inside encoder calls alone: what the budget's `max_cpu`
    /// limits (counter).
    #[serde(default)]
    pub encode_seconds: f64,
    /// Bytes the encoders compressed, less those that streams stepped down by the budget only
    /// stored: what the budget's `max_rate` limits (counter).
    #[serde(default)]
    pub compressed_input_bytes: u64,
    /// Response bodies being compressed or decompressed now (gauge).
    pub active_streams: u64,
    /// Bytes of compression buffers and encoder state (zstd, brotli and gzip 4-9 windows)
    /// those streams hold, as the memory gate counts them (gauge).
    pub stream_memory_bytes: u64,
    /// The budget limit compression is throttled by (`cpu`, `rate`), `None` when compression
    /// is open (gauge).
    pub throttled: Option<String>,
    /// Client connections accepted (counter).
    pub connections: u64,
    /// Client connections open now (gauge).
    pub active_connections: u64,
    /// TLS handshakes completed (counter).
    pub tls_handshakes: u64,
    /// TLS handshakes that failed or timed out (counter).
    pub tls_handshake_failures: u64,
    /// Upgrades passed: `101 Switching Protocols` from an upstream, WebSockets (counter).
    pub upgrades: u64,
    /// Upgraded connections open now, tunnels between a client and an upstream (gauge).
    pub active_upgrades: u64,
    /// Requests the proxy answered with an error status of its own, by whose fault (counters).
    pub errors: Errors,
    /// Compressed responses and their encoder bytes, by coding name (`gzip`, `deflate`,
    /// `zstd`, `br`), every coding the proxy produces listed from the start (counters).
    #[serde(default)]
    pub codings: BTreeMap<String, CodingStats>,
    /// The compressed-variant cache (`[cache]`); all zero while it is off.
    #[serde(default)]
    pub cache: CacheStats,
    /// Compression dictionaries (RFC 9842, `[dictionaries]`); all zero while they are off.
    #[serde(default)]
    pub dictionaries: DictionaryStats,
}

/// The dictionaries' counters in a [`Snapshot`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DictionaryStats {
    /// Whether dictionaries are on (`mode` is not `off`).
    pub enabled: bool,
    /// Requests that named a dictionary and listed `dcz` or `dcb` (counter).
    pub offered: u64,
    /// Responses sent as `dcz` (counter).
    pub dcz: u64,
    /// Responses sent as `dcb` (counter).
    pub dcb: u64,
    /// Requests naming a dictionary the proxy does not hold for their origin (counter).
    pub unknown: u64,
    /// Requests the cross-origin check kept from a dictionary coding (counter).
    pub refused: u64,
    /// Responses the proxy marked with `Use-As-Dictionary` itself (counter).
    pub marked: u64,
    /// Dictionaries stored (counter).
    pub stored: u64,
    /// Dictionaries dropped to stay within the caps, or expired (counter).
    pub evicted: u64,
    /// Dictionaries held (gauge).
    pub held: u64,
    /// Bytes the dictionary store holds (gauge).
    pub bytes_held: u64,
    /// Identity bytes of the bodies sent in a dictionary coding (counter).
    pub bytes_in: u64,
    /// Bytes those bodies took on the wire (counter).
    pub bytes_out: u64,
    /// Bytes they saved against the coding each client would have got otherwise, estimated
    /// from that coding's ratio (counter).
    pub bytes_saved: u64,
    /// Site dictionaries built and published (counter).
    #[serde(default)]
    pub site_built: u64,
    /// Site dictionaries served to clients (counter).
    #[serde(default)]
    pub site_fetches: u64,
}

/// The cache's counters in a [`Snapshot`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheStats {
    /// Whether the cache is on (`[cache]` configured); every counter stays 0 while it is off.
    #[serde(default)]
    pub enabled: bool,
    /// Requests answered from a fresh stored response without asking the origin (counter).
    pub hits: u64,
    /// Requests for which nothing usable was stored, or whose entry the origin replaced
    /// (counter).
    pub misses: u64,
    /// Stored responses the origin confirmed with a 304 (counter).
    pub revalidations: u64,
    /// Responses stored (counter).
    pub stores: u64,
    /// Keys the eviction policy dropped (counter).
    pub evictions: u64,
    /// Keys dropped by purges and unsafe methods (counter).
    pub invalidations: u64,
    /// Misses that waited for another request filling the same key instead of asking the
    /// origin at once (counter).
    #[serde(default)]
    pub coalesced: u64,
    /// Bytes held: bodies, headers and index (gauge).
    pub bytes_held: u64,
    /// Variants recompressed at the best level (counter).
    pub recompressions: u64,
    /// Encoder time that responses served from stored variants did not spend, in seconds
    /// (counter).
    pub encoder_seconds_saved: f64,
}

/// One coding's counters in a [`Snapshot`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodingStats {
    /// Responses whose body was compressed in this coding.
    pub responses: u64,
    /// Bytes the coding's encoders took.
    pub bytes_in: u64,
    /// Bytes the coding's encoders produced.
    pub bytes_out: u64,
}

/// Error responses the proxy wrote itself, by whose fault and status (counters). A client
/// error is any 4xx the proxy answers (malformed request, refused target); the others are
/// the 5xx an operator alerts on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Errors {
    /// The client's fault: a 4xx.
    pub client: u64,
    /// An upstream failed or could not be reached: 502.
    pub upstream: u64,
    /// An upstream sent nothing in time: 504.
    pub upstream_timeout: u64,
    /// The proxy's own failure: 500.
    pub internal: u64,
}

impl Snapshot {
    /// The snapshot as a pretty-printed JSON object (keys as the field names, `throttled`
    /// `null` when open). A non-finite `compress_seconds` is written as `null`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("a Snapshot serializes: its maps have string keys and nothing can fail")
    }

    /// Responses passed uncompressed, all reasons together.
    pub fn bypassed_total(&self) -> u64 {
        self.bypassed
            .values()
            .fold(0, |sum, n| sum.saturating_add(*n))
    }
}

/// `Duration` as a number of seconds, which is what JSON readers expect.
mod seconds {
    use std::time::Duration;

    use serde::{de, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        value: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(value.as_secs_f64())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        Duration::try_from_secs_f64(seconds).map_err(|_| {
            de::Error::invalid_value(
                de::Unexpected::Float(seconds),
                &"a non-negative number of seconds",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn sample() -> Snapshot {
        let mut snapshot = Snapshot {
            uptime: Duration::from_millis(12_500),
            requests: 1_000,
            responses_compressed: 700,
            responses_decompressed: 5,
            bytes_in: 10_000_000,
            bytes_out: 3_500_000,
            bytes_saved: 6_500_000,
            compress_seconds: 1.25,
            encode_seconds: 1.0,
            compressed_input_bytes: 8_000_000,
            active_streams: 42,
            stream_memory_bytes: 42 * 65_536,
            throttled: Some("cpu".to_owned()),
            connections: 90,
            active_connections: 3,
            tls_handshakes: 80,
            tls_handshake_failures: 6,
            upgrades: 8,
            active_upgrades: 2,
            errors: Errors {
                client: 4,
                upstream: 2,
                upstream_timeout: 1,
                internal: 0,
            },
            ..Snapshot::default()
        };
        snapshot.bypassed.insert("too_small".to_owned(), 200);
        snapshot.bypassed.insert("type".to_owned(), 95);
        snapshot.codings.insert(
            "zstd".to_owned(),
            CodingStats {
                responses: 600,
                bytes_in: 9_000_000,
                bytes_out: 3_000_000,
            },
        );
        snapshot
            .requests_by_protocol
            .insert("http/1.1".to_owned(), 400);
        snapshot.requests_by_protocol.insert("h2".to_owned(), 600);
        snapshot
    }

    #[test]
    fn json_fields() {
        let snapshot = sample();
        let json: Value = serde_json::from_str(&snapshot.to_json()).expect("valid JSON");
        assert_eq!(json["uptime_seconds"], 12.5);
        assert_eq!(json["requests"], 1_000);
        assert_eq!(json["requests_by_protocol"]["h2"], 600);
        assert_eq!(json["requests_by_protocol"]["http/1.1"], 400);
        assert_eq!(json["responses_compressed"], 700);
        assert_eq!(json["responses_decompressed"], 5);
        assert_eq!(json["bypassed"]["too_small"], 200);
        assert_eq!(json["bypassed"]["type"], 95);
        assert_eq!(json["bytes_in"], 10_000_000);
        assert_eq!(json["bytes_out"], 3_500_000);
        assert_eq!(json["bytes_saved"], 6_500_000);
        assert_eq!(json["compress_seconds"], 1.25);
        assert_eq!(json["encode_seconds"], 1.0);
        assert_eq!(json["compressed_input_bytes"], 8_000_000);
        assert_eq!(json["cache"]["enabled"], false);
        assert_eq!(json["active_streams"], 42);
        assert_eq!(json["stream_memory_bytes"], 42 * 65_536);
        assert_eq!(json["throttled"], "cpu");
        assert_eq!(json["connections"], 90);
        assert_eq!(json["active_connections"], 3);
        assert_eq!(json["tls_handshakes"], 80);
        assert_eq!(json["tls_handshake_failures"], 6);
        assert_eq!(json["upgrades"], 8);
        assert_eq!(json["active_upgrades"], 2);
        assert_eq!(
            json["errors"],
            serde_json::json!({"client": 4, "upstream": 2, "upstream_timeout": 1, "internal": 0})
        );
        assert_eq!(
            json["codings"]["zstd"],
            serde_json::json!({"responses": 600, "bytes_in": 9_000_000, "bytes_out": 3_000_000})
        );
        let keys = json.as_object().expect("an object").len();
        assert_eq!(keys, 25, "one key per field");
    }

    #[test]
    fn json_round_trips() {
        for snapshot in [sample(), Snapshot::default()] {
            let text = snapshot.to_json();
            let value: Value = serde_json::from_str(&text).expect("valid JSON");
            let back: Snapshot = serde_json::from_value(value).expect("reads back");
            assert_eq!(back, snapshot);
        }
    }

    #[test]
    fn open_budget_is_null() {
        let json: Value = serde_json::from_str(&Snapshot::default().to_json()).expect("valid JSON");
        assert_eq!(json["throttled"], Value::Null);
        assert_eq!(json["bypassed"], serde_json::json!({}));
    }

    #[test]
    fn negative_uptime_is_rejected() {
        let mut value: Value = serde_json::from_str(&sample().to_json()).expect("valid JSON");
        value["uptime_seconds"] = serde_json::json!(-1.0);
        let err = serde_json::from_value::<Snapshot>(value).expect_err("negative uptime");
        assert!(err.to_string().contains("non-negative"), "{err}");
    }

    #[test]
    fn bypassed_total_adds_reasons() {
        assert_eq!(sample().bypassed_total(), 295);
        assert_eq!(Snapshot::default().bypassed_total(), 0);
    }
}
