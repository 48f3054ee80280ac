//! The tunnel's admin listener (`--admin`): `/stats` as JSON, `/metrics` in the Prometheus
//! text format (names `zipwire_tunnel_*`) and the live dashboard, all from the endpoint's
//! [`Stats`]. Loopback unless an address says otherwise, as it answers anyone
//! who connects; served by the loop every admin listener shares
//! ([`zipwire_dashboard::serve_with`]: at most 32 connections, a head timeout, and a local
//! `Host` on loopback).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use zipwire_dashboard::{Body, Dashboard, Kind};
use zipwire_tunnel::stats::Stats;

/// `--admin`'s value: `PORT` (on 127.0.0.1) or `ADDR:PORT`.
pub(super) fn parse_admin(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse()
        .map_err(|_| format!("{text:?} is neither a port nor an address with a port"))
}

/// Binds `addr` and serves the admin pages on `runtime` for as long as it runs.
pub(super) fn start(
    runtime: &tokio::runtime::Runtime,
    addr: SocketAddr,
    stats: Arc<Stats>,
) -> anyhow::Result<()> {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .with_context(|| format!("admin listener on {addr}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    if !bound.ip().is_loopback() {
        tracing::warn!(%bound, "the tunnel's admin listener answers anyone who reaches it");
    }
    tracing::info!(addr = %bound, "tunnel admin listening");
    let started = Instant::now();
    let events = stats.clone();
    let dashboard = Dashboard::new(Kind::Tunnel, move || events.to_json(started.elapsed()));
    runtime.spawn(zipwire_dashboard::serve_with(listener, move |request| {
        respond(&stats, started, &dashboard, request)
    }));
    Ok(())
}

/// Answers one admin request: `/stats`, `/metrics`, else the dashboard's pages.
fn respond<B>(
    stats: &Stats,
    started: Instant,
    dashboard: &Dashboard,
    request: &Request<B>,
) -> Response<Body> {
    let page = |status: StatusCode, content_type: &'static str, body: String| {
        let mut response = Response::new(Body::full(body));
        *response.status_mut() = status;
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    };
    if request.method() != Method::GET && request.method() != Method::HEAD {
        // RFC 9110 §15.5.6: a 405 says which methods the resource takes.
        let mut response = page(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "405 Method Not Allowed\n".to_owned(),
        );
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let snapshot = || stats.snapshot(started.elapsed());
    match request.uri().path() {
        "/stats" => page(StatusCode::OK, "application/json", snapshot().to_json()),
        "/metrics" => page(
            StatusCode::OK,
            zipwire_stats::prometheus::CONTENT_TYPE,
            snapshot().to_prometheus(),
        ),
        _ => dashboard.respond(request).unwrap_or_else(|| {
            page(
                StatusCode::NOT_FOUND,
                "text/plain",
                "404 Not Found: try /stats, /metrics or /dashboard\n".to_owned(),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_is_loopback() {
        assert_eq!(parse_admin("9902"), Ok("127.0.0.1:9902".parse().unwrap()));
        assert_eq!(parse_admin("[::1]:9"), Ok("[::1]:9".parse().unwrap()));
        assert!(parse_admin("nowhere").is_err());
    }
}
