//! The admin listener: `/stats` (JSON) and `/metrics` (Prometheus text) for operators, and
//! the live dashboard (zipwire-dashboard: `/dashboard`, `/events`, `/assets/...`), whose
//! events are [`AdminState::event`] documents.
//!
//! Off unless configured; it should listen on a loopback or management address only, as it
//! answers anyone who connects. It is served by the loop every admin listener shares
//! ([`zipwire_dashboard::serve_with`]): at most 32 connections at once, a head timeout, and
//! on a loopback address only requests whose `Host` is local (DNS rebinding would otherwise
//! let a web page read the counters and purge the cache).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use zipwire_adapt::{BudgetSpec, MemoryGate};
use zipwire_dashboard::{Body, Dashboard, Kind};
use zipwire_stats::{CacheStats, CodingStats, DictionaryStats, Errors, Snapshot};

use crate::counters::Counters;
use zipwire_adapt::Throttle;
use zipwire_cache::Cache;

/// What the admin pages read.
#[derive(Clone, Debug)]
pub(crate) struct AdminState {
    pub(crate) counters: Arc<Counters>,
    pub(crate) throttle: Throttle,
    pub(crate) memory: MemoryGate,
    pub(crate) started: Instant,
    /// The budget's limits, drawn against the encoder's usage on the dashboard.
    pub(crate) budget: Option<BudgetSpec>,
    /// The cache `DELETE /cache` purges, when it is on.
    pub(crate) cache: Option<Arc<Cache>>,
}

impl AdminState {
    /// The server's numbers now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let c = &self.counters;
        let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        Snapshot {
            uptime: self.started.elapsed(),
            requests: load(&c.requests),
            requests_by_protocol: c
                .requests_by_protocol
                .iter()
                .map(|(protocol, n)| (protocol.to_owned(), n))
                .collect(),
            responses_compressed: load(&c.compressed),
            responses_decompressed: load(&c.decompressed),
            bypassed: c
                .bypassed
                .iter()
                .map(|(reason, n)| (reason.as_str().to_owned(), n))
                .collect(),
            bytes_in: load(&c.bytes_in),
            bytes_out: load(&c.bytes_out),
            bytes_saved: load(&c.compression.saved),
            compress_seconds: (load(&c.compression.busy_nanos) as f64
                + load(&c.decompression.busy_nanos) as f64)
                / 1e9,
            encode_seconds: load(&c.compression.busy_nanos) as f64 / 1e9,
            compressed_input_bytes: load(&c.compression.worked_in),
            active_streams: load(&c.active_streams),
            stream_memory_bytes: self.memory.in_use(),
            throttled: self
                .throttle
                .reason()
                .map(|reason| reason.as_str().to_owned()),
            connections: load(&c.connections),
            active_connections: load(&c.active_connections),
            tls_handshakes: load(&c.tls_handshakes),
            tls_handshake_failures: load(&c.tls_handshake_failures),
            upgrades: load(&c.upgrades),
            active_upgrades: load(&c.active_upgrades),
            errors: Errors {
                client: load(&c.errors.client),
                upstream: load(&c.errors.upstream),
                upstream_timeout: load(&c.errors.upstream_timeout),
                internal: load(&c.errors.internal),
            },
            codings: c
                .codings
                .iter()
                .map(|(coding, counter)| {
                    let stats = CodingStats {
                        responses: load(&counter.responses),
                        bytes_in: load(&counter.meter.bytes_in),
                        bytes_out: load(&counter.meter.bytes_out),
                    };
                    (coding.as_str().to_owned(), stats)
                })
                .collect(),
            cache: CacheStats {
                enabled: self.cache.is_some(),
                hits: load(&c.cache.hits),
                misses: load(&c.cache.misses),
                revalidations: load(&c.cache.revalidations),
                stores: load(&c.cache.stores),
                evictions: load(&c.cache.evictions),
                invalidations: load(&c.cache.invalidations),
                coalesced: load(&c.cache.coalesced),
                bytes_held: load(&c.cache.bytes_held),
                recompressions: load(&c.cache.recompressions),
                encoder_seconds_saved: load(&c.cache.encoder_micros_saved) as f64 / 1e6,
            },
            dictionaries: {
                let d = &c.dictionaries;
                DictionaryStats {
                    enabled: d.enabled.load(Ordering::Relaxed),
                    offered: load(&d.offered),
                    dcz: load(&d.dcz),
                    dcb: load(&d.dcb),
                    unknown: load(&d.unknown),
                    refused: load(&d.refused),
                    marked: load(&d.marked),
                    stored: load(&d.stored),
                    evicted: load(&d.evicted),
                    held: load(&d.held),
                    bytes_held: load(&d.held_bytes),
                    bytes_in: load(&d.bytes_in),
                    bytes_out: load(&d.bytes_out),
                    bytes_saved: load(&d.bytes_saved),
                    site_built: load(&d.site_built),
                    site_fetches: load(&d.site_fetches),
                }
            },
        }
    }
}

impl AdminState {
    /// One dashboard event: `{"stats": <the /stats document>, "budget": {"max_cpu",
    /// "max_rate"}, "process_rss_bytes"}`, limits and RSS `null` where unknown.
    pub(crate) fn event(&self) -> String {
        let limit = |value: Option<String>| value.unwrap_or_else(|| "null".to_owned());
        let spec = self.budget.as_ref();
        let max_cpu = spec
            .and_then(|s| s.max_cpu)
            .filter(|cpu| cpu.is_finite())
            .map(|cpu| cpu.to_string());
        let max_rate = spec.and_then(|s| s.max_rate).map(|rate| rate.to_string());
        format!(
            "{{\"stats\":{},\"budget\":{{\"max_cpu\":{},\"max_rate\":{}}},\"process_rss_bytes\":{}}}",
            self.snapshot().to_json(),
            limit(max_cpu),
            limit(max_rate),
            limit(zipwire_dashboard::process_rss_bytes().map(|n| n.to_string())),
        )
    }
}

/// Serves the admin pages on `listener` until the task is dropped, under the guards every
/// admin listener has ([`zipwire_dashboard::serve_with`]: a connection limit, a head timeout,
/// a local `Host` on loopback).
pub(crate) async fn serve(listener: TcpListener, state: AdminState) {
    let source = state.clone();
    let dashboard = Dashboard::new(Kind::Proxy, move || source.event());
    zipwire_dashboard::serve_with(listener, move |request| {
        respond(&state, &dashboard, request)
    })
    .await;
}

/// Answers one admin request.
fn respond(
    state: &AdminState,
    dashboard: &Dashboard,
    request: &Request<Incoming>,
) -> Response<Body> {
    let page = |content_type: &'static str, body: String| {
        let mut response = Response::new(Body::full(Bytes::from(body)));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(content_type),
        );
        response
    };
    if request.method() == Method::DELETE && request.uri().path() == "/cache" {
        let (status, text) = crate::cache::purge::answer(state.cache.as_deref(), request.uri());
        let mut response = page("text/plain", text.to_owned());
        *response.status_mut() = status;
        return response;
    }
    // `/cache` takes DELETE alone: a GET there is the wrong method, not a missing page.
    let wrong_method = request.uri().path() == "/cache"
        || (request.method() != Method::GET && request.method() != Method::HEAD);
    if wrong_method {
        let mut response = page("text/plain", "405 Method Not Allowed\n".to_owned());
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        // RFC 9110 §15.5.6: a 405 says which methods the resource takes.
        let allow = if request.uri().path() == "/cache" {
            "DELETE"
        } else {
            "GET, HEAD"
        };
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static(allow));
        return response;
    }
    match request.uri().path() {
        "/stats" => page("application/json", state.snapshot().to_json()),
        "/metrics" => page(
            zipwire_stats::prometheus::CONTENT_TYPE,
            state.snapshot().to_prometheus(),
        ),
        _ => dashboard.respond(request).unwrap_or_else(|| {
            let mut response = page(
                "text/plain",
                "404 Not Found: try /stats, /metrics or /dashboard\n".to_owned(),
            );
            *response.status_mut() = StatusCode::NOT_FOUND;
            response
        }),
    }
}
