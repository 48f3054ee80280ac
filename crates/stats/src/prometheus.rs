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
//! | `zipwire_proxy_encode_seconds_total` | counter | [`Snapshot::encode_seconds`] |
//! | `zipwire_proxy_compressed_input_bytes_total` | counter | [`Snapshot::compressed_input_bytes`] |
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
//! | `zipwire_proxy_dictionary_responses_total{coding}` | counter | [`Snapshot::dictionaries`]: `dcz`, `dcb` |
//! | `zipwire_proxy_dictionary_offers_total` | counter | [`Snapshot::dictionaries`]: `offered` |
//! | `zipwire_proxy_dictionary_unknown_total` | counter | [`Snapshot::dictionaries`]: `unknown` |
//! | `zipwire_proxy_dictionary_refused_total` | counter | [`Snapshot::dictionaries`]: `refused` |
//! | `zipwire_proxy_dictionary_marked_total` | counter | [`Snapshot::dictionaries`]: `marked` |
//! | `zipwire_proxy_dictionary_stored_total` | counter | [`Snapshot::dictionaries`]: `stored` |
//! | `zipwire_proxy_dictionary_evicted_total` | counter | [`Snapshot::dictionaries`]: `evicted` |
//! | `zipwire_proxy_dictionaries` | gauge | [`Snapshot::dictionaries`]: `held` |
//! | `zipwire_proxy_dictionary_bytes` | gauge | [`Snapshot::dictionaries`]: `bytes_held` |
//! | `zipwire_proxy_dictionary_bytes_in_total` | counter | [`Snapshot::dictionaries`]: `bytes_in` |
//! | `zipwire_proxy_dictionary_bytes_out_total` | counter | [`Snapshot::dictionaries`]: `bytes_out` |
//! | `zipwire_proxy_dictionary_bytes_saved_total` | counter | [`Snapshot::dictionaries`]: `bytes_saved` |
//! | `zipwire_proxy_dictionary_site_built_total` | counter | [`Snapshot::dictionaries`]: `site_built` |
//! | `zipwire_proxy_dictionary_site_fetches_total` | counter | [`Snapshot::dictionaries`]: `site_fetches` |
//! | `zipwire_proxy_errors_total{side,status}` | counter | [`Snapshot::errors`]: `side="client",status="4xx"`, `side="upstream",status="502"`, `side="upstream",status="504"`, `side="internal",status="500"` |
//!
//! The `side="client"` series also counts the `501`s answered to requests the proxy does not
//! implement (CONNECT, a transfer coding other than chunked): they are the client's doing, and an
//! alert on the proxy's 5xx should not fire for them.
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
    let mut out = Exposition::new(PROXY_PREFIX);
    out.single(
        "requests_total",
        "Requests received from clients.",
        Kind::Counter,
        Value::Int(snapshot.requests),
    );
    out.family(
        "requests_by_protocol_total",
        "Requests received from clients, by the protocol they spoke (http/1.0, http/1.1, h2).",
        Kind::Counter,
    );
    for (protocol, count) in &snapshot.requests_by_protocol {
        out.sample(
            "requests_by_protocol_total",
            &[("protocol", protocol)],
            Value::Int(*count),
        );
    }
    out.single(
        "responses_compressed_total",
        "Responses sent compressed.",
        Kind::Counter,
        Value::Int(snapshot.responses_compressed),
    );
    out.single(
        "responses_decompressed_total",
        "Gzip responses decoded for clients that do not accept gzip.",
        Kind::Counter,
        Value::Int(snapshot.responses_decompressed),
    );
    out.family(
        "responses_bypassed_total",
        "Responses passed as they came, by reason.",
        Kind::Counter,
    );
    for (reason, count) in &snapshot.bypassed {
        out.sample(
            "responses_bypassed_total",
            &[("reason", reason)],
            Value::Int(*count),
        );
    }
    out.single(
        "bytes_in_total",
        "Body bytes read from upstreams.",
        Kind::Counter,
        Value::Int(snapshot.bytes_in),
    );
    out.single(
        "bytes_out_total",
        "Body bytes sent to clients.",
        Kind::Counter,
        Value::Int(snapshot.bytes_out),
    );
    out.single(
        "bytes_saved_total",
        "Input minus output bytes of compressed responses.",
        Kind::Counter,
        Value::Int(snapshot.bytes_saved),
    );
    out.single(
        "compress_seconds_total",
        "Seconds spent in encoder and decoder calls, summed over threads.",
        Kind::Counter,
        Value::Float(snapshot.compress_seconds),
    );
    out.single(
        "encode_seconds_total",
        "Seconds spent in encoder calls alone, summed over threads: what max_cpu limits.",
        Kind::Counter,
        Value::Float(snapshot.encode_seconds),
    );
    out.single(
        "compressed_input_bytes_total",
        "Bytes the encoders compressed (not those stepped-down streams stored): what max_rate limits.",
        Kind::Counter,
        Value::Int(snapshot.compressed_input_bytes),
    );
    out.single(
        "active_streams",
        "Response bodies being compressed or decompressed.",
        Kind::Gauge,
        Value::Int(snapshot.active_streams),
    );
    out.single(
        "stream_memory_bytes",
        "Bytes of compression buffers and encoder state held by active streams.",
        Kind::Gauge,
        Value::Int(snapshot.stream_memory_bytes),
    );
    out.family(
        "throttled",
        "1 for the budget limit compression is throttled by, 0 for the others.",
        Kind::Gauge,
    );
    let current = snapshot.throttled.as_deref();
    for reason in THROTTLE_REASONS {
        let on = current == Some(*reason);
        out.sample("throttled", &[("reason", reason)], Value::Int(on.into()));
    }
    if let Some(reason) = current.filter(|reason| !THROTTLE_REASONS.contains(reason)) {
        out.sample("throttled", &[("reason", reason)], Value::Int(1));
    }
    out.single(
        "uptime_seconds",
        "Seconds since the proxy started.",
        Kind::Gauge,
        Value::Float(snapshot.uptime.as_secs_f64()),
    );
    out.single(
        "connections_total",
        "Client connections accepted.",
        Kind::Counter,
        Value::Int(snapshot.connections),
    );
    out.single(
        "connections_active",
        "Client connections open now.",
        Kind::Gauge,
        Value::Int(snapshot.active_connections),
    );
    out.single(
        "tls_handshakes_total",
        "TLS handshakes completed.",
        Kind::Counter,
        Value::Int(snapshot.tls_handshakes),
    );
    out.single(
        "tls_handshake_failures_total",
        "TLS handshakes that failed or timed out.",
        Kind::Counter,
        Value::Int(snapshot.tls_handshake_failures),
    );
    out.single(
        "upgrades_total",
        "Upgrades passed (101 Switching Protocols from an upstream: WebSockets).",
        Kind::Counter,
        Value::Int(snapshot.upgrades),
    );
    out.single(
        "upgrades_active",
        "Upgraded connections open now (WebSocket tunnels).",
        Kind::Gauge,
        Value::Int(snapshot.active_upgrades),
    );
    type Field = fn(&crate::CodingStats) -> u64;
    let per_coding: [(&str, &str, Field); 3] = [
        (
            "coding_responses_total",
            "Responses sent compressed, by coding.",
            |c| c.responses,
        ),
        (
            "coding_bytes_in_total",
            "Bytes taken by the encoders, by coding.",
            |c| c.bytes_in,
        ),
        (
            "coding_bytes_out_total",
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
            "cache_hits_total",
            "Requests answered from the cache without the origin.",
            Kind::Counter,
            Value::Int(cache.hits),
        ),
        (
            "cache_misses_total",
            "Requests the cache had nothing usable for.",
            Kind::Counter,
            Value::Int(cache.misses),
        ),
        (
            "cache_revalidations_total",
            "Stored responses the origin confirmed with a 304.",
            Kind::Counter,
            Value::Int(cache.revalidations),
        ),
        (
            "cache_stores_total",
            "Responses stored.",
            Kind::Counter,
            Value::Int(cache.stores),
        ),
        (
            "cache_evictions_total",
            "Keys the eviction policy dropped.",
            Kind::Counter,
            Value::Int(cache.evictions),
        ),
        (
            "cache_invalidations_total",
            "Keys dropped by purges and unsafe methods.",
            Kind::Counter,
            Value::Int(cache.invalidations),
        ),
        (
            "cache_coalesced_total",
            "Misses that waited for another request filling the same key.",
            Kind::Counter,
            Value::Int(cache.coalesced),
        ),
        (
            "cache_bytes",
            "Bytes the cache holds: bodies, headers and index.",
            Kind::Gauge,
            Value::Int(cache.bytes_held),
        ),
        (
            "cache_recompressions_total",
            "Stored variants recompressed at the best level.",
            Kind::Counter,
            Value::Int(cache.recompressions),
        ),
        (
            "cache_encoder_seconds_saved_total",
            "Encoder seconds not spent thanks to stored variants.",
            Kind::Counter,
            Value::Float(cache.encoder_seconds_saved),
        ),
    ];
    for (name, help, kind, value) in cached {
        out.single(name, help, kind, value);
    }
    let d = &snapshot.dictionaries;
    out.family(
        "dictionary_responses_total",
        "Responses sent as a delta against a dictionary the client holds, by coding.",
        Kind::Counter,
    );
    for (coding, count) in [("dcz", d.dcz), ("dcb", d.dcb)] {
        out.sample(
            "dictionary_responses_total",
            &[("coding", coding)],
            Value::Int(count),
        );
    }
    let dictionaries: [(&str, &str, Kind, u64); 13] = [
        (
            "dictionary_offers_total",
            "Requests that named a dictionary and listed dcz or dcb.",
            Kind::Counter,
            d.offered,
        ),
        (
            "dictionary_unknown_total",
            "Requests naming a dictionary the proxy does not hold.",
            Kind::Counter,
            d.unknown,
        ),
        (
            "dictionary_refused_total",
            "Requests the cross-origin check kept from a dictionary coding.",
            Kind::Counter,
            d.refused,
        ),
        (
            "dictionary_marked_total",
            "Responses the proxy marked with Use-As-Dictionary.",
            Kind::Counter,
            d.marked,
        ),
        (
            "dictionary_stored_total",
            "Dictionaries stored.",
            Kind::Counter,
            d.stored,
        ),
        (
            "dictionary_evicted_total",
            "Dictionaries dropped to stay within the caps, or expired.",
            Kind::Counter,
            d.evicted,
        ),
        ("dictionaries", "Dictionaries held.", Kind::Gauge, d.held),
        (
            "dictionary_bytes",
            "Bytes the dictionary store holds.",
            Kind::Gauge,
            d.bytes_held,
        ),
        (
            "dictionary_bytes_in_total",
            "Identity bytes of the bodies sent as deltas.",
            Kind::Counter,
            d.bytes_in,
        ),
        (
            "dictionary_bytes_out_total",
            "Bytes the deltas took on the wire.",
            Kind::Counter,
            d.bytes_out,
        ),
        (
            "dictionary_bytes_saved_total",
            "Bytes deltas saved against the ordinary coding (estimated).",
            Kind::Counter,
            d.bytes_saved,
        ),
        (
            "dictionary_site_built_total",
            "Site dictionaries built and published.",
            Kind::Counter,
            d.site_built,
        ),
        (
            "dictionary_site_fetches_total",
            "Site dictionaries served to clients.",
            Kind::Counter,
            d.site_fetches,
        ),
    ];
    for (name, help, kind, value) in dictionaries {
        out.single(name, help, kind, Value::Int(value));
    }
    out.family(
        "errors_total",
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
            "errors_total",
            &[("side", side), ("status", status)],
            Value::Int(count),
        );
    }
    out.finish()
}

/// The prefix of every proxy metric's name.
pub const PROXY_PREFIX: &str = "zipwire_proxy_";

/// The prefix of every tunnel metric's name.
pub const TUNNEL_PREFIX: &str = "zipwire_tunnel_";

#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Counter,
    Gauge,
}

#[derive(Clone, Copy)]
pub(crate) enum Value {
    Int(u64),
    Float(f64),
}

/// Text being written, every metric's name prefixed with the component's prefix.
pub(crate) struct Exposition {
    prefix: &'static str,
    text: String,
}

impl Exposition {
    pub(crate) fn new(prefix: &'static str) -> Exposition {
        Exposition {
            prefix,
            text: String::new(),
        }
    }

    pub(crate) fn finish(self) -> String {
        self.text
    }

    /// A metric with one unlabelled sample.
    pub(crate) fn single(&mut self, name: &str, help: &str, kind: Kind, value: Value) {
        self.family(name, help, kind);
        self.sample(name, &[], value);
    }

    pub(crate) fn family(&mut self, name: &str, help: &str, kind: Kind) {
        let prefix = self.prefix;
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        // Writing to a String cannot fail.
        let _ = writeln!(self.text, "# HELP {prefix}{name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {prefix}{name} {kind}");
    }

    /// A sample with `labels` (names as they are, values escaped).
    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: Value) {
        self.text.push_str(self.prefix);
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
mod tests;
