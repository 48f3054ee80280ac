//! Unit tests of `prometheus.rs`.

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
        encode_seconds: 0.75,
        compressed_input_bytes: 42_000_000,
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
            enabled: true,
            hits: 900,
            coalesced: 7,
            bytes_held: 1 << 20,
            encoder_seconds_saved: 0.5,
            ..crate::CacheStats::default()
        },
        dictionaries: crate::DictionaryStats {
            enabled: true,
            offered: 9,
            dcz: 5,
            dcb: 2,
            bytes_saved: 1_000,
            ..crate::DictionaryStats::default()
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
        ("zipwire_proxy_encode_seconds_total", None, 0.75),
        (
            "zipwire_proxy_compressed_input_bytes_total",
            None,
            42_000_000.0,
        ),
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
        ("zipwire_proxy_dictionary_offers_total", None, 9.0),
        ("zipwire_proxy_dictionary_bytes_saved_total", None, 1_000.0),
    ];
    for (coding, expected) in [("dcz", 5.0), ("dcb", 2.0)] {
        let labels = [("coding", coding)];
        let name = "zipwire_proxy_dictionary_responses_total";
        assert_eq!(labelled(&samples, name, &labels), expected, "{coding}");
    }
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
    // The cache metrics not in `rows` (5 of them) are at 0; so are 11 of the dictionaries'
    // 13 single metrics, beside the 2 labelled ones.
    assert_eq!(samples.len(), rows.len() + errors.len() + 5 + 5 + 11 + 2);
    assert!(samples.iter().all(|s| s.name.starts_with("zipwire_proxy_")));
}

#[test]
fn empty_snapshot_has_every_family() {
    let text = Snapshot::default().to_prometheus();
    let samples = parse(&text);
    assert_eq!(text.matches("# TYPE ").count(), 49);
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
