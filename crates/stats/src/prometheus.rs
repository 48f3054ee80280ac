//! The Prometheus text exposition format, version 0.0.4, of a [`Snapshot`]
//! ([`Snapshot::to_prometheus`]). It builds on `snapshot.rs`, which knows nothing of it.
//!
//! Every metric gets a `# HELP` and a `# TYPE` line before its samples. The metrics, from a
//! [`Snapshot`]:
//!
//! | metric | type | from |
//! | --- | --- | --- |
//! | `zipwire_proxy_requests_total` | counter | [`Snapshot::requests`] |
//! | `zipwire_proxy_requests_by_protocol_total{protocol}` | counter | [`Snapshot::requests_by_protocol`] |
//! | `zipwire_proxy_responses_compressed_total` | counter | [`Snapshot::responses_compressed`] |
//! | `zipwire_proxy_responses_decompressed_total` | counter | [`Snapshot::responses_decompressed`] |
//! | `zipwire_proxy_responses_bypassed_total{reason}` | counter | [`Snapshot::bypassed`] |
//! | `zipwire_proxy_bytes_in_total` | counter | [`Snapshot::bytes_in`] |
//! | `zipwire_proxy_bytes_out_total` | counter | [`Snapshot::bytes_out`] |
//! | `zipwire_proxy_bytes_saved_total` | counter | [`Snapshot::bytes_saved`] |
//! | `zipwire_proxy_compress_seconds_total` | counter | [`Snapshot::compress_seconds`] |
//! | `zipwire_proxy_active_streams` | gauge | [`Snapshot::active_streams`] |
//! | `zipwire_proxy_stream_memory_bytes` | gauge | [`Snapshot::stream_memory_bytes`] |
//! | `zipwire_proxy_throttled{reason}` | gauge | [`Snapshot::throttled`]: 1 for the current reason, 0 for the others in [`THROTTLE_REASONS`] |
//! | `zipwire_proxy_uptime_seconds` | gauge | [`Snapshot::uptime`] |
//! | `zipwire_proxy_connections_total` | counter | [`Snapshot::connections`] |
//! | `zipwire_proxy_connections_active` | gauge | [`Snapshot::active_connections`] |
//! | `zipwire_proxy_tls_handshakes_total` | counter | [`Snapshot::tls_handshakes`] |
//! | `zipwire_proxy_tls_handshake_failures_total` | counter | [`Snapshot::tls_handshake_failures`] |
//! | `zipwire_proxy_upgrades_total` | counter | [`Snapshot::upgrades`] |
//! | `zipwire_proxy_upgrades_active` | gauge | [`Snapshot::active_upgrades`] |
//! | `zipwire_proxy_coding_responses_total{coding}` | counter | [`Snapshot::codings`]: `responses` |
//! | `zipwire_proxy_coding_bytes_in_total{coding}` | counter | [`Snapshot::codings`]: `bytes_in` |
//! | `zipwire_proxy_coding_bytes_out_total{coding}` | counter | [`Snapshot::codings`]: `bytes_out` |
//! | `zipwire_proxy_cache_hits_total` | counter | [`Snapshot::cache`]: `hits` |
//! | `zipwire_proxy_cache_misses_total` | counter | [`Snapshot::cache`]: `misses` |
//! | `zipwire_proxy_cache_revalidations_total` | counter | [`Snapshot::cache`]: `revalidations` |
//! | `zipwire_proxy_cache_stores_total` | counter | [`Snapshot::cache`]: `stores` |
//! | `zipwire_proxy_cache_evictions_total` | counter | [`Snapshot::cache`]: `evictions` |
//! | `zipwire_proxy_cache_invalidations_total` | counter | [`Snapshot::cache`]: `invalidations` |
//! | `zipwire_proxy_cache_coalesced_total` | counter | [`Snapshot::cache`]: `coalesced` |
//! | `zipwire_proxy_cache_bytes` | gauge | [`Snapshot::cache`]: `bytes_held` |
//! | `zipwire_proxy_cache_recompressions_total` | counter | [`Snapshot::cache`]: `recompressions` |
//! | `zipwire_proxy_cache_encoder_seconds_saved_total` | counter | [`Snapshot::cache`]: `encoder_seconds_saved` |
//! | `zipwire_proxy_errors_total{side,status}` | counter | [`Snapshot::errors`]: `side="client",status="4xx"`, `side="upstream",status="502"`, `side="upstream",status="504"`, `side="internal",status="500"` |
//!
//! `sum(zipwire_proxy_throttled)` is 1 while compression is throttled and 0 while it is open.
//! Every error series exists from the start, at 0, so that an alert on
//! `rate(zipwire_proxy_errors_total{status=~"5.."}[5m])` sees the first one.

use std::fmt::Write as _;

use crate::snapshot::{Snapshot, THROTTLE_REASONS};

/// The content type of [`Snapshot::to_prometheus`]'s output, for the HTTP response.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl Snapshot {
    /// The snapshot in the Prometheus text exposition format 0.0.4; see [`crate::prometheus`].
    pub fn to_prometheus(&self) -> String {
        render(self)
    }
}

fn render(snapshot: &Snapshot) -> String {
    let mut out = Exposition::default();
    out.single(
        "zipwire_proxy_requests_total",
        "Requests received from clients.",
        Kind::Counter,
        Value::Int(snapshot.requests),
    );
    out.family(
        "zipwire_proxy_requests_by_protocol_total",
        "Requests received from clients, by the protocol they spoke (http/1.0, http/1.1, h2).",
        Kind::Counter,
    );
    for (protocol, count) in &snapshot.requests_by_protocol {
        out.sample(
            "zipwire_proxy_requests_by_protocol_total",
            &[("protocol", protocol)],
            Value::Int(*count),
        );
    }
    out.single(
        "zipwire_proxy_responses_compressed_total",
        "Responses sent compressed.",
        Kind::Counter,
        Value::Int(snapshot.responses_compressed),
    );
    out.single(
        "zipwire_proxy_responses_decompressed_total",
        "Gzip responses decoded for clients that do not accept gzip.",
        Kind::Counter,
        Value::Int(snapshot.responses_decompressed),
    );
    out.family(
        "zipwire_proxy_responses_bypassed_total",
        "Responses passed as they came, by reason.",
        Kind::Counter,
    );
    for (reason, count) in &snapshot.bypassed {
        out.sample(
            "zipwire_proxy_responses_bypassed_total",
            &[("reason", reason)],
            Value::Int(*count),
        );
    }
    out.single(
        "zipwire_proxy_bytes_in_total",
        "Body bytes read from upstreams.",
        Kind::Counter,
        Value::Int(snapshot.bytes_in),
    );
    out.single(
        "zipwire_proxy_bytes_out_total",
        "Body bytes sent to clients.",
        Kind::Counter,
        Value::Int(snapshot.bytes_out),
    );
    out.single(
        "zipwire_proxy_bytes_saved_total",
        "Input minus output bytes of compressed responses.",
        Kind::Counter,
        Value::Int(snapshot.bytes_saved),
    );
    out.single(
        "zipwire_proxy_compress_seconds_total",
        "Seconds spent in encoder and decoder calls, summed over threads.",
        Kind::Counter,
        Value::Float(snapshot.compress_seconds),
    );
    out.single(
        "zipwire_proxy_active_streams",
        "Response bodies being compressed or decompressed.",
        Kind::Gauge,
        Value::Int(snapshot.active_streams),
    );
    out.single(
        "zipwire_proxy_stream_memory_bytes",
        "Bytes of compression buffers and encoder state held by active streams.",
        Kind::Gauge,
        Value::Int(snapshot.stream_memory_bytes),
    );
    out.family(
        "zipwire_proxy_throttled",
        "1 for the budget limit compression is throttled by, 0 for the others.",
        Kind::Gauge,
    );
    let current = snapshot.throttled.as_deref();
    for reason in THROTTLE_REASONS {
        let on = current == Some(*reason);
        out.sample(
            "zipwire_proxy_throttled",
            &[("reason", reason)],
            Value::Int(on.into()),
        );
    }
    if let Some(reason) = current.filter(|reason| !THROTTLE_REASONS.contains(reason)) {
        out.sample(
            "zipwire_proxy_throttled",
            &[("reason", reason)],
            Value::Int(1),
        );
    }
    out.single(
        "zipwire_proxy_uptime_seconds",
        "Seconds since the proxy started.",
        Kind::Gauge,
        Value::Float(snapshot.uptime.as_secs_f64()),
    );
    out.single(
        "zipwire_proxy_connections_total",
        "Client connections accepted.",
        Kind::Counter,
        Value::Int(snapshot.connections),
    );
    out.single(
        "zipwire_proxy_connections_active",
        "Client connections open now.",
        Kind::Gauge,
        Value::Int(snapshot.active_connections),
    );
    out.single(
        "zipwire_proxy_tls_handshakes_total",
        "TLS handshakes completed.",
        Kind::Counter,
        Value::Int(snapshot.tls_handshakes),
    );
    out.single(
        "zipwire_proxy_tls_handshake_failures_total",
        "TLS handshakes that failed or timed out.",
        Kind::Counter,
        Value::Int(snapshot.tls_handshake_failures),
    );
    out.single(
        "zipwire_proxy_upgrades_total",
        "Upgrades passed (101 Switching Protocols from an upstream: WebSockets).",
        Kind::Counter,
        Value::Int(snapshot.upgrades),
    );
    out.single(
        "zipwire_proxy_upgrades_active",
        "Upgraded connections open now (WebSocket tunnels).",
        Kind::Gauge,
        Value::Int(snapshot.active_upgrades),
    );
    type Field = fn(&crate::CodingStats) -> u64;
    let per_coding: [(&str, &str, Field); 3] = [
        (
            "zipwire_proxy_coding_responses_total",
            "Responses sent compressed, by coding.",
            |c| c.responses,
        ),
        (
            "zipwire_proxy_coding_bytes_in_total",
            "Bytes taken by the encoders, by coding.",
            |c| c.bytes_in,
        ),
        (
            "zipwire_proxy_coding_bytes_out_total",
            "Bytes produced by the encoders, by coding.",
            |c| c.bytes_out,
        ),
    ];
    for (name, help, field) in per_coding {
        out.family(name, help, Kind::Counter);
        for (coding, stats) in &snapshot.codings {
            out.sample(name, &[("coding", coding)], Value::Int(field(stats)));
        }
    }
    let cache = &snapshot.cache;
    let cached: [(&str, &str, Kind, Value); 10] = [
        (
            "zipwire_proxy_cache_hits_total",
            "Requests answered from the cache without the origin.",
            Kind::Counter,
            Value::Int(cache.hits),
        ),
        (
            "zipwire_proxy_cache_misses_total",
            "Requests the cache had nothing usable for.",
            Kind::Counter,
            Value::Int(cache.misses),
        ),
        (
            "zipwire_proxy_cache_revalidations_total",
            "Stored responses the origin confirmed with a 304.",
            Kind::Counter,
            Value::Int(cache.revalidations),
        ),
        (
            "zipwire_proxy_cache_stores_total",
            "Responses stored.",
            Kind::Counter,
            Value::Int(cache.stores),
        ),
        (
            "zipwire_proxy_cache_evictions_total",
            "Keys the eviction policy dropped.",
            Kind::Counter,
            Value::Int(cache.evictions),
        ),
        (
            "zipwire_proxy_cache_invalidations_total",
            "Keys dropped by purges and unsafe methods.",
            Kind::Counter,
            Value::Int(cache.invalidations),
        ),
        (
            "zipwire_proxy_cache_coalesced_total",
            "Misses that waited for another request filling the same key.",
            Kind::Counter,
            Value::Int(cache.coalesced),
        ),
        (
            "zipwire_proxy_cache_bytes",
            "Bytes the cache holds: bodies, headers and index.",
            Kind::Gauge,
            Value::Int(cache.bytes_held),
        ),
        (
            "zipwire_proxy_cache_recompressions_total",
            "Stored variants recompressed at the best level.",
            Kind::Counter,
            Value::Int(cache.recompressions),
        ),
        (
            "zipwire_proxy_cache_encoder_seconds_saved_total",
            "Encoder seconds not spent thanks to stored variants.",
            Kind::Counter,
            Value::Float(cache.encoder_seconds_saved),
        ),
    ];
    for (name, help, kind, value) in cached {
        out.single(name, help, kind, value);
    }
    out.family(
        "zipwire_proxy_errors_total",
        "Error responses the proxy wrote itself, by whose fault and status.",
        Kind::Counter,
    );
    let errors = &snapshot.errors;
    for (side, status, count) in [
        ("client", "4xx", errors.client),
        ("upstream", "502", errors.upstream),
        ("upstream", "504", errors.upstream_timeout),
        ("internal", "500", errors.internal),
    ] {
        out.sample(
            "zipwire_proxy_errors_total",
            &[("side", side), ("status", status)],
            Value::Int(count),
        );
    }
    out.text
}

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

#[derive(Clone, Copy)]
enum Value {
    Int(u64),
    Float(f64),
}

#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    /// A metric with one unlabelled sample.
    fn single(&mut self, name: &str, help: &str, kind: Kind, value: Value) {
        self.family(name, help, kind);
        self.sample(name, &[], value);
    }

    fn family(&mut self, name: &str, help: &str, kind: Kind) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        // Writing to a String cannot fail.
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    /// A sample with `labels` (names as they are, values escaped).
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: Value) {
        self.text.push_str(name);
        for (i, (label, value)) in labels.iter().enumerate() {
            let open = if i == 0 { "{" } else { "," };
            let _ = write!(self.text, "{open}{label}=\"{}\"", escape_label(value));
        }
        if !labels.is_empty() {
            self.text.push('}');
        }
        let _ = match value {
            Value::Int(n) => writeln!(self.text, " {n}"),
            Value::Float(x) => writeln!(self.text, " {}", float(x)),
        };
    }
}

/// A float as the format spells it: Go's `ParseFloat` syntax plus `NaN`, `+Inf`, `-Inf`.
fn float(x: f64) -> String {
    if x.is_nan() {
        "NaN".to_owned()
    } else if x.is_infinite() {
        if x > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        // Rust's shortest round-trip form, never an exponent: a valid Go float.
        format!("{x}")
    }
}

/// HELP text escapes backslash and line feed.
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Label values escape backslash, double quote and line feed.
fn escape_label(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};
    use std::time::Duration;

    use super::*;

    /// One sample line read back.
    #[derive(Debug, PartialEq)]
    struct Sample {
        name: String,
        labels: Vec<(String, String)>,
        value: f64,
    }

    /// A strict reader for the subset of the format `render` writes: checks metric and label
    /// names, that every sample's family has exactly one HELP and one TYPE before it, that
    /// counters end in `_total`, and unescapes label values.
    fn parse(text: &str) -> Vec<Sample> {
        assert!(text.ends_with('\n'), "the last line ends with a line feed");
        let mut helps = HashMap::new();
        let mut types = HashMap::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').expect("HELP name text");
                assert!(is_metric_name(name), "{name}");
                assert!(!help.is_empty());
                assert!(
                    helps.insert(name.to_owned(), help.to_owned()).is_none(),
                    "one HELP for {name}"
                );
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
                assert!(helps.contains_key(name), "HELP before TYPE for {name}");
                assert!(matches!(kind, "counter" | "gauge"), "{kind}");
                if kind == "counter" {
                    assert!(name.ends_with("_total"), "counter {name} ends in _total");
                }
                assert!(
                    types.insert(name.to_owned(), kind.to_owned()).is_none(),
                    "one TYPE for {name}"
                );
            } else {
                assert!(
                    !line.starts_with('#') && !line.is_empty(),
                    "unexpected line {line:?}"
                );
                let sample = parse_sample(line);
                assert!(
                    types.contains_key(&sample.name),
                    "TYPE before {}",
                    sample.name
                );
                samples.push(sample);
            }
        }
        samples
    }

    fn parse_sample(line: &str) -> Sample {
        let name_end = line.find(['{', ' ']).expect("a name");
        let name = &line[..name_end];
        assert!(is_metric_name(name), "{name}");
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(mut inner) = rest.strip_prefix('{') {
            loop {
                if let Some(after) = inner.strip_prefix('}') {
                    rest = after;
                    break;
                }
                let (label, quoted) = inner.split_once("=\"").expect("label=\"value\"");
                assert!(is_label_name(label), "{label}");
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let end = loop {
                    match chars.next().expect("closing quote") {
                        (i, '"') => break i,
                        (_, '\\') => match chars.next().expect("escaped char").1 {
                            '\\' => value.push('\\'),
                            '"' => value.push('"'),
                            'n' => value.push('\n'),
                            other => panic!("bad escape \\{other}"),
                        },
                        (_, '\n') => panic!("raw line feed in a label value"),
                        (_, c) => value.push(c),
                    }
                };
                labels.push((label.to_owned(), value));
                inner = &quoted[end + 1..];
                inner = inner.strip_prefix(',').unwrap_or(inner);
            }
        }
        let value = rest.strip_prefix(' ').expect("space before the value");
        Sample {
            name: name.to_owned(),
            labels,
            value: parse_value(value),
        }
    }

    fn parse_value(text: &str) -> f64 {
        match text {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            _ => text.parse().unwrap_or_else(|_| panic!("value {text:?}")),
        }
    }

    fn is_metric_name(name: &str) -> bool {
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    }

    fn is_label_name(name: &str) -> bool {
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with("__")
    }

    fn value_of(samples: &[Sample], name: &str, reason: Option<&str>) -> f64 {
        let labels: Vec<(&str, &str)> = reason.map(|r| vec![("reason", r)]).unwrap_or_default();
        labelled(samples, name, &labels)
    }

    fn labelled(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
        let labels: Vec<(String, String)> = labels
            .iter()
            .map(|(l, v)| ((*l).to_owned(), (*v).to_owned()))
            .collect();
        samples
            .iter()
            .find(|s| s.name == name && s.labels == labels)
            .unwrap_or_else(|| panic!("no sample {name} {labels:?}"))
            .value
    }

    fn sample_snapshot() -> Snapshot {
        let mut bypassed = BTreeMap::new();
        bypassed.insert("not_accepted".to_owned(), 12);
        bypassed.insert("too_small".to_owned(), 300);
        Snapshot {
            uptime: Duration::from_millis(90_250),
            requests: 1_000,
            requests_by_protocol: [("http/1.1".to_owned(), 300), ("h2".to_owned(), 700)].into(),
            responses_compressed: 600,
            responses_decompressed: 3,
            bypassed,
            bytes_in: 50_000_000,
            bytes_out: 17_000_000,
            bytes_saved: 33_000_000,
            compress_seconds: 0.875,
            active_streams: 7,
            stream_memory_bytes: 7 * 65_536,
            throttled: Some("rate".to_owned()),
            connections: 250,
            active_connections: 11,
            tls_handshakes: 240,
            tls_handshake_failures: 9,
            upgrades: 6,
            active_upgrades: 4,
            errors: crate::Errors {
                client: 5,
                upstream: 3,
                upstream_timeout: 2,
                internal: 1,
            },
            codings: BTreeMap::from([(
                "br".to_owned(),
                crate::CodingStats {
                    responses: 4,
                    bytes_in: 4_000,
                    bytes_out: 1_000,
                },
            )]),
            cache: crate::CacheStats {
                hits: 900,
                coalesced: 7,
                bytes_held: 1 << 20,
                encoder_seconds_saved: 0.5,
                ..crate::CacheStats::default()
            },
        }
    }

    #[test]
    fn every_metric_reads_back() {
        let samples = parse(&sample_snapshot().to_prometheus());
        let rows: &[(&str, Option<&str>, f64)] = &[
            ("zipwire_proxy_requests_total", None, 1_000.0),
            ("zipwire_proxy_responses_compressed_total", None, 600.0),
            ("zipwire_proxy_cache_hits_total", None, 900.0),
            ("zipwire_proxy_cache_misses_total", None, 0.0),
            ("zipwire_proxy_cache_coalesced_total", None, 7.0),
            ("zipwire_proxy_cache_bytes", None, 1_048_576.0),
            ("zipwire_proxy_cache_encoder_seconds_saved_total", None, 0.5),
            ("zipwire_proxy_responses_decompressed_total", None, 3.0),
            (
                "zipwire_proxy_responses_bypassed_total",
                Some("not_accepted"),
                12.0,
            ),
            (
                "zipwire_proxy_responses_bypassed_total",
                Some("too_small"),
                300.0,
            ),
            ("zipwire_proxy_bytes_in_total", None, 50_000_000.0),
            ("zipwire_proxy_bytes_out_total", None, 17_000_000.0),
            ("zipwire_proxy_bytes_saved_total", None, 33_000_000.0),
            ("zipwire_proxy_compress_seconds_total", None, 0.875),
            ("zipwire_proxy_active_streams", None, 7.0),
            ("zipwire_proxy_stream_memory_bytes", None, 458_752.0),
            ("zipwire_proxy_throttled", Some("cpu"), 0.0),
            ("zipwire_proxy_throttled", Some("rate"), 1.0),
            ("zipwire_proxy_uptime_seconds", None, 90.25),
            ("zipwire_proxy_connections_total", None, 250.0),
            ("zipwire_proxy_connections_active", None, 11.0),
            ("zipwire_proxy_tls_handshakes_total", None, 240.0),
            ("zipwire_proxy_tls_handshake_failures_total", None, 9.0),
            ("zipwire_proxy_upgrades_total", None, 6.0),
            ("zipwire_proxy_upgrades_active", None, 4.0),
        ];
        for (name, expected) in [
            ("zipwire_proxy_coding_responses_total", 4.0),
            ("zipwire_proxy_coding_bytes_in_total", 4_000.0),
            ("zipwire_proxy_coding_bytes_out_total", 1_000.0),
        ] {
            let labels = [("coding", "br")];
            assert_eq!(labelled(&samples, name, &labels), expected, "{name}");
        }
        for (name, reason, expected) in rows {
            assert_eq!(
                value_of(&samples, name, *reason),
                *expected,
                "{name} {reason:?}"
            );
        }
        let errors = [
            ("client", "4xx", 5.0),
            ("upstream", "502", 3.0),
            ("upstream", "504", 2.0),
            ("internal", "500", 1.0),
        ];
        for (side, status, expected) in errors {
            let labels = [("side", side), ("status", status)];
            assert_eq!(
                labelled(&samples, "zipwire_proxy_errors_total", &labels),
                expected,
                "{labels:?}"
            );
        }
        for (protocol, expected) in [("http/1.1", 300.0), ("h2", 700.0)] {
            let labels = [("protocol", protocol)];
            assert_eq!(
                labelled(
                    &samples,
                    "zipwire_proxy_requests_by_protocol_total",
                    &labels
                ),
                expected,
                "{labels:?}"
            );
        }
        // The cache metrics not in `rows` (5 of them) are at 0.
        assert_eq!(samples.len(), rows.len() + errors.len() + 5 + 5);
        assert!(samples.iter().all(|s| s.name.starts_with("zipwire_proxy_")));
    }

    #[test]
    fn empty_snapshot_has_every_family() {
        let text = Snapshot::default().to_prometheus();
        let samples = parse(&text);
        assert_eq!(text.matches("# TYPE ").count(), 33);
        // Every error series is there at 0 before the first error.
        let errors = samples
            .iter()
            .filter(|s| s.name == "zipwire_proxy_errors_total")
            .inspect(|s| assert_eq!(s.value, 0.0, "{s:?}"))
            .count();
        assert_eq!(errors, 4);
        // No bypass samples yet; both throttle reasons at 0.
        assert!(!samples
            .iter()
            .any(|s| s.name == "zipwire_proxy_responses_bypassed_total"));
        assert_eq!(
            value_of(&samples, "zipwire_proxy_throttled", Some("cpu")),
            0.0
        );
        assert_eq!(
            value_of(&samples, "zipwire_proxy_throttled", Some("rate")),
            0.0
        );
        assert_eq!(
            value_of(&samples, "zipwire_proxy_uptime_seconds", None),
            0.0
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let odd = "a\"quote\\slash\nline é";
        let mut snapshot = Snapshot {
            throttled: Some(odd.to_owned()),
            ..Snapshot::default()
        };
        snapshot.bypassed.insert(odd.to_owned(), 9);
        let text = snapshot.to_prometheus();
        assert!(
            text.contains(r#"{reason="a\"quote\\slash\nline é"} 9"#),
            "{text}"
        );
        let samples = parse(&text);
        assert_eq!(
            value_of(
                &samples,
                "zipwire_proxy_responses_bypassed_total",
                Some(odd)
            ),
            9.0
        );
        // A reason outside the known list still shows while it is current.
        assert_eq!(
            value_of(&samples, "zipwire_proxy_throttled", Some(odd)),
            1.0
        );
    }

    #[test]
    fn floats_use_the_format_spelling() {
        assert_eq!(float(0.1), "0.1");
        assert_eq!(float(1e-9), "0.000000001");
        assert_eq!(float(2.0), "2");
        assert_eq!(float(f64::NAN), "NaN");
        assert_eq!(float(f64::INFINITY), "+Inf");
        assert_eq!(float(f64::NEG_INFINITY), "-Inf");
        let snapshot = Snapshot {
            compress_seconds: f64::NAN,
            ..Snapshot::default()
        };
        let samples = parse(&snapshot.to_prometheus());
        assert!(value_of(&samples, "zipwire_proxy_compress_seconds_total", None).is_nan());
    }

    #[test]
    fn help_text_is_escaped() {
        assert_eq!(escape_help("a\\b\nc\"d"), "a\\\\b\\nc\"d");
    }
}
