//! The tunnel's admin listener (`--admin`): `/stats` as JSON and the live dashboard, both from
//! the endpoint's [`Stats`]. Loopback unless an address says otherwise, as it answers anyone
//! who connects; served by the loop every admin listener shares
//! ([`zipwire_dashboard::serve_with`]: at most 32 connections, a head timeout, and a local
//! `Host` on loopback).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use zipwire_dashboard::{Dashboard, Kind, Source};
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
    let source: Arc<dyn Source> = Arc::new(move || stats.to_json(started.elapsed()));
    let events = source.clone();
    let dashboard = Dashboard::new(Kind::Tunnel, move || events.sample());
    runtime.spawn(zipwire_dashboard::serve(listener, source, dashboard));
    Ok(())
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
