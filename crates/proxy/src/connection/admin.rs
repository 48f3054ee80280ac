//! The admin listener: `/stats` (JSON) and `/metrics` (Prometheus text) for operators.
//!
//! Off unless configured; it should listen on a loopback or management address only, as it
//! answers anyone who connects.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::{debug, warn};
use zipwire_adapt::MemoryGate;
use zipwire_stats::{CacheStats, CodingStats, Errors, Snapshot};

use crate::cache::Cache;
use crate::counters::Counters;
use crate::encode::throttle::Throttle;

/// What the admin pages read.
#[derive(Clone, Debug)]
pub(crate) struct AdminState {
    pub(crate) counters: Arc<Counters>,
    pub(crate) throttle: Throttle,
    pub(crate) memory: MemoryGate,
    pub(crate) started: Instant,
    /// The cache `DELETE /cache` purges, when it is on.
    pub(crate) cache: Option<Arc<Cache>>,
}

impl AdminState {
    /// The server's numbers now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let c = &self.counters;
        let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
        let compress_in = load(&c.compression.bytes_in);
        let compress_out = load(&c.compression.bytes_out);
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
            bytes_saved: compress_in.saturating_sub(compress_out),
            compress_seconds: load(&c.compression.busy_nanos) as f64 / 1e9,
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
                hits: load(&c.cache.hits),
                misses: load(&c.cache.misses),
                revalidations: load(&c.cache.revalidations),
                stores: load(&c.cache.stores),
                evictions: load(&c.cache.evictions),
                invalidations: load(&c.cache.invalidations),
                bytes_held: load(&c.cache.bytes_held),
                recompressions: load(&c.cache.recompressions),
                encoder_seconds_saved: load(&c.cache.encoder_micros_saved) as f64 / 1e6,
            },
        }
    }
}

/// Serves the admin pages on `listener` until the task is dropped.
pub(crate) async fn serve(listener: TcpListener, state: AdminState) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(%error, "admin accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let response = respond(&state, &request);
                async move { Ok::<_, Infallible>(response) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(error) = served {
                debug!(%error, %peer, "admin connection ended");
            }
        });
    }
}

/// Answers one admin request.
fn respond(state: &AdminState, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let page = |content_type: &'static str, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
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
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = page("text/plain", "405 Method Not Allowed\n".to_owned());
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        return response;
    }
    match request.uri().path() {
        "/stats" => page("application/json", state.snapshot().to_json()),
        "/metrics" => page(
            zipwire_stats::prometheus::CONTENT_TYPE,
            state.snapshot().to_prometheus(),
        ),
        _ => {
            let mut response = page(
                "text/plain",
                "404 Not Found: try /stats or /metrics\n".to_owned(),
            );
            *response.status_mut() = StatusCode::NOT_FOUND;
            response
        }
    }
}
