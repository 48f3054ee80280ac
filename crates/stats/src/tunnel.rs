//! The tunnel's counters: a [`TunnelSnapshot`] of one endpoint (`zipwire tunnel server` or
//! `client`), as JSON (`--admin`'s `/stats`, the dashboard's events) and in the Prometheus
//! text format (`/metrics`, every name prefixed `zipwire_tunnel_`).
//!
//! | metric | type | from |
//! | --- | --- | --- |
//! | `zipwire_tunnel_uptime_seconds` | gauge | [`TunnelSnapshot::uptime`] |
//! | `zipwire_tunnel_memory_bytes` | gauge | [`TunnelMemory::in_use`] |
//! | `zipwire_tunnel_memory_max_bytes` | gauge | [`TunnelMemory::max`], absent without a cap |
//! | `zipwire_tunnel_compressing_directions` | gauge | [`TunnelMemory::compressing`] |
//! | `zipwire_tunnel_raw_bytes_total{direction}` | counter | [`Direction::raw`] |
//! | `zipwire_tunnel_wire_bytes_total{direction}` | counter | [`Direction::wire`] |
//! | `zipwire_tunnel_blocks_total{direction,method}` | counter | [`MethodStats::blocks`] |
//! | `zipwire_tunnel_method_raw_bytes_total{direction,method}` | counter | [`MethodStats::raw`] |
//! | `zipwire_tunnel_method_wire_bytes_total{direction,method}` | counter | [`MethodStats::wire`] |
//! | `zipwire_tunnel_codec_seconds_total{direction,method}` | counter | [`MethodStats::seconds`] |
//! | `zipwire_tunnel_raw_blocks_total{direction,reason}` | counter | [`Direction::raw_reasons`] |
//! | `zipwire_tunnel_link_rate_bytes_per_second` | gauge | [`Outgoing::link_rate_bytes_per_s`], absent until measured |
//! | `zipwire_tunnel_link_limited` | gauge | [`Outgoing::link_limited`]: 1 or 0 |
//!
//! `direction` is `outgoing` (what this end sends) or `incoming`.

use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::prometheus::{Exposition, Kind, Value, TUNNEL_PREFIX};

/// One tunnel endpoint's counters at one moment. The field names are the JSON keys.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TunnelSnapshot {
    /// Time since the endpoint started (JSON: `uptime_seconds`, a number).
    #[serde(rename = "uptime_seconds", serialize_with = "seconds")]
    pub uptime: Duration,
    /// The memory cap on compressor state.
    pub memory: TunnelMemory,
    /// What this end sent.
    pub outgoing: Outgoing,
    /// What this end received.
    pub incoming: Direction,
}

/// The memory cap's state in a [`TunnelSnapshot`] (gauges).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TunnelMemory {
    /// Bytes of compressor and decompressor state held.
    pub in_use: u64,
    /// The cap in bytes, `None` (JSON `null`) without one.
    pub max: Option<u64>,
    /// Directions compressing now.
    pub compressing: u64,
}

/// One direction's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Direction {
    /// Uncompressed bytes in all (counter).
    pub raw: u64,
    /// Bytes on the wire, frame headers included (counter).
    pub wire: u64,
    /// Per method used, by name (`raw`, `deflate-6`, `zstd-3`, ...), in the tunnel's order
    /// (a JSON object).
    #[serde(serialize_with = "in_order")]
    pub methods: Vec<(String, MethodStats)>,
    /// Frames sent raw, per reason, every reason listed (the sender's side only; a JSON
    /// object).
    #[serde(serialize_with = "in_order")]
    pub raw_reasons: Vec<(String, u64)>,
}

/// The outgoing direction: its counters and the link's pace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Outgoing {
    /// The counters.
    #[serde(flatten)]
    pub counts: Direction,
    /// The link's rate as last measured, `None` (JSON `null`) until measured.
    pub link_rate_bytes_per_s: Option<u64>,
    /// Whether the link, not the sender, set that pace.
    pub link_limited: bool,
}

/// One method's counters in a [`Direction`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MethodStats {
    /// Frames.
    pub blocks: u64,
    /// Uncompressed bytes.
    pub raw: u64,
    /// Bytes on the wire, frame headers included.
    pub wire: u64,
    /// Time spent compressing (sender) or decompressing (receiver), in seconds.
    pub seconds: f64,
}

impl TunnelSnapshot {
    /// The snapshot as one JSON object (compact).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a TunnelSnapshot serializes: nothing can fail")
    }

    /// The snapshot in the Prometheus text exposition format 0.0.4, names prefixed
    /// `zipwire_tunnel_` (the module lists them).
    pub fn to_prometheus(&self) -> String {
        let mut out = Exposition::new(TUNNEL_PREFIX);
        out.single(
            "uptime_seconds",
            "Seconds since the endpoint started.",
            Kind::Gauge,
            Value::Float(self.uptime.as_secs_f64()),
        );
        out.single(
            "memory_bytes",
            "Bytes of compressor and decompressor state held.",
            Kind::Gauge,
            Value::Int(self.memory.in_use),
        );
        if let Some(max) = self.memory.max {
            out.single(
                "memory_max_bytes",
                "The cap on compressor state (--max-memory).",
                Kind::Gauge,
                Value::Int(max),
            );
        }
        out.single(
            "compressing_directions",
            "Directions compressing now.",
            Kind::Gauge,
            Value::Int(self.memory.compressing),
        );
        let directions = [
            ("outgoing", &self.outgoing.counts),
            ("incoming", &self.incoming),
        ];
        for (name, help, field) in [
            (
                "raw_bytes_total",
                "Uncompressed bytes, by direction.",
                (|d| d.raw) as fn(&Direction) -> u64,
            ),
            (
                "wire_bytes_total",
                "Bytes on the wire, frame headers included, by direction.",
                |d| d.wire,
            ),
        ] {
            out.family(name, help, Kind::Counter);
            for (direction, d) in directions {
                out.sample(name, &[("direction", direction)], Value::Int(field(d)));
            }
        }
        type Field = fn(&MethodStats) -> Value;
        let per_method: [(&str, &str, Field); 4] = [
            ("blocks_total", "Frames, by direction and method.", |m| {
                Value::Int(m.blocks)
            }),
            (
                "method_raw_bytes_total",
                "Uncompressed bytes, by direction and method.",
                |m| Value::Int(m.raw),
            ),
            (
                "method_wire_bytes_total",
                "Bytes on the wire, by direction and method.",
                |m| Value::Int(m.wire),
            ),
            (
                "codec_seconds_total",
                "Seconds spent compressing (outgoing) or decompressing (incoming), by method.",
                |m| Value::Float(m.seconds),
            ),
        ];
        for (name, help, field) in per_method {
            out.family(name, help, Kind::Counter);
            for (direction, d) in directions {
                for (method, stats) in &d.methods {
                    let labels = [("direction", direction), ("method", method.as_str())];
                    out.sample(name, &labels, field(stats));
                }
            }
        }
        out.family(
            "raw_blocks_total",
            "Frames sent raw, by direction and reason.",
            Kind::Counter,
        );
        for (direction, d) in directions {
            for (reason, n) in &d.raw_reasons {
                let labels = [("direction", direction), ("reason", reason.as_str())];
                out.sample("raw_blocks_total", &labels, Value::Int(*n));
            }
        }
        if let Some(rate) = self.outgoing.link_rate_bytes_per_s {
            out.single(
                "link_rate_bytes_per_second",
                "The link's rate as last measured.",
                Kind::Gauge,
                Value::Int(rate),
            );
        }
        out.single(
            "link_limited",
            "1 when the link, not the sender, set the measured pace.",
            Kind::Gauge,
            Value::Int(self.outgoing.link_limited.into()),
        );
        out.finish()
    }
}

/// A `Duration` as a number of seconds.
fn seconds<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(value.as_secs_f64())
}

/// Pairs as a JSON object, in their order.
fn in_order<T: Serialize, S: Serializer>(
    pairs: &[(String, T)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TunnelSnapshot {
        let direction = |raw| Direction {
            raw,
            wire: raw / 2,
            methods: vec![(
                "zstd-3".to_owned(),
                MethodStats {
                    blocks: 2,
                    raw,
                    wire: raw / 2,
                    seconds: 0.5,
                },
            )],
            raw_reasons: vec![("off".to_owned(), 0), ("tiny".to_owned(), 3)],
        };
        TunnelSnapshot {
            uptime: Duration::from_millis(1500),
            memory: TunnelMemory {
                in_use: 10,
                max: None,
                compressing: 1,
            },
            outgoing: Outgoing {
                counts: direction(1000),
                link_rate_bytes_per_s: Some(1_250_000),
                link_limited: true,
            },
            incoming: direction(70),
        }
    }

    #[test]
    fn json_keeps_the_keys_and_their_order() {
        let json = sample().to_json();
        assert!(
            json.starts_with("{\"uptime_seconds\":1.5,\"memory\":{\"in_use\":10,\"max\":null,\"compressing\":1},\"outgoing\":{\"raw\":1000,\"wire\":500,\"methods\":{\"zstd-3\":"),
            "{json}"
        );
        assert!(
            json.contains("\"raw_reasons\":{\"off\":0,\"tiny\":3},\"link_rate_bytes_per_s\":1250000,\"link_limited\":true},\"incoming\":{\"raw\":70,"),
            "{json}"
        );
    }

    #[test]
    fn metrics_are_named_for_the_tunnel() {
        let text = sample().to_prometheus();
        for line in [
            "# TYPE zipwire_tunnel_raw_bytes_total counter",
            "zipwire_tunnel_raw_bytes_total{direction=\"outgoing\"} 1000",
            "zipwire_tunnel_wire_bytes_total{direction=\"incoming\"} 35",
            "zipwire_tunnel_blocks_total{direction=\"outgoing\",method=\"zstd-3\"} 2",
            "zipwire_tunnel_codec_seconds_total{direction=\"incoming\",method=\"zstd-3\"} 0.5",
            "zipwire_tunnel_raw_blocks_total{direction=\"outgoing\",reason=\"tiny\"} 3",
            "zipwire_tunnel_link_rate_bytes_per_second 1250000",
            "zipwire_tunnel_link_limited 1",
            "zipwire_tunnel_uptime_seconds 1.5",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains("memory_max_bytes"), "{text}");
        assert!(text
            .lines()
            .all(|l| l.starts_with("# ") || l.starts_with("zipwire_tunnel_")));
    }
}
