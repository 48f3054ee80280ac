//! The scenario runner: the site, then the proxy in front of it once per scenario, under load.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http::uri::Authority;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::load::{rss_bytes, run_load, LoadError, LoadOptions};
use super::report::{DemoReport, Scenario, ScenarioReport};
use super::site::{serve_site, Site};
use zipwire_proxy::ProxyError;
use zipwire_proxy::Server;
use zipwire_proxy::{ProxyConfig, Upstream};

/// What [`run_demo`] runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Client connections, kept alive (capped like [`LoadOptions::connections`]). Default 32.
    pub connections: usize,
    /// How long each scenario sends requests (capped like [`LoadOptions::duration`]).
    /// Default 3 s.
    pub duration: Duration,
    /// Most requests per scenario. Default 1,000,000.
    pub max_requests: u64,
    /// The scenarios, in order. Default [`Scenario::standard`].
    pub scenarios: Vec<Scenario>,
}

impl Default for DemoOptions {
    fn default() -> DemoOptions {
        DemoOptions {
            connections: 32,
            duration: Duration::from_secs(3),
            max_requests: 1_000_000,
            scenarios: Scenario::standard(),
        }
    }
}

/// Why the demo failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum DemoError {
    /// The built-in origin could not listen or failed while serving.
    Site(io::Error),
    /// The proxy could not start or failed.
    Proxy {
        /// The scenario being run.
        scenario: Scenario,
        /// The proxy's error.
        source: ProxyError,
    },
    /// The load generator could not reach the proxy.
    Load {
        /// The scenario being run.
        scenario: Scenario,
        /// The load generator's error.
        source: LoadError,
    },
    /// The returning visitor's page views failed or a body was not the origin's.
    Returning(super::ReturningError),
    /// Responses through the proxy failed or differed from the origin's.
    Wrong {
        /// The scenario being run.
        scenario: Scenario,
        /// Responses whose decoded body, status or coding was wrong.
        mismatches: u64,
        /// Requests that failed at the HTTP level.
        errors: u64,
        /// The first failure.
        first: String,
    },
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemoError::Site(error) => write!(f, "demo origin: {error}"),
            DemoError::Proxy { scenario, source } => write!(f, "{scenario}: proxy: {source}"),
            DemoError::Load { scenario, source } => write!(f, "{scenario}: {source}"),
            DemoError::Returning(error) => write!(f, "{error}"),
            DemoError::Wrong {
                scenario,
                mismatches,
                errors,
                first,
            } => write!(
                f,
                "{scenario}: {mismatches} responses were not the origin's (status or bytes) and {errors} \
                 requests failed; first: {first}"
            ),
        }
    }
}

impl std::error::Error for DemoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DemoError::Site(error) => Some(error),
            DemoError::Proxy { source, .. } => Some(source),
            DemoError::Load { source, .. } => Some(source),
            DemoError::Returning(error) => Some(error),
            DemoError::Wrong { .. } => None,
        }
    }
}

/// Runs `zipwire demo`: starts the generated site on a loopback port, then for each scenario
/// starts a proxy in this process in front of it, drives it with gzip-accepting clients,
/// checks every response, and stops it.
///
/// Everything runs on the current tokio runtime; a multi-thread runtime lets origin, proxy
/// and clients use several cores, as they would on separate machines.
///
/// # Errors
///
/// [`DemoError::Wrong`] as soon as a scenario saw a response that was not the origin's bytes
/// (after decoding) or a failed request; the other variants when a part cannot start.
pub async fn run_demo(options: DemoOptions) -> Result<DemoReport, DemoError> {
    // Client, proxy and origin share this process: each connection takes four descriptors
    // (the client's, the proxy's two, the origin's), and the connections of the scenarios
    // before may not all have closed when the next one opens its own; room for four
    // scenarios' worth, 16 per connection (eight times the proxy's own two). Under the usual
    // soft limit of 1,024, 200 connections would fail with 502s.
    zipwire_proxy::raise_open_files(options.connections.saturating_mul(8));
    let site = Arc::new(Site::generate());
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(DemoError::Site)?;
    let origin = listener.local_addr().map_err(DemoError::Site)?;
    let (stop_site, site_stopped) = oneshot::channel::<()>();
    let serving = tokio::spawn(serve_site(listener, Arc::clone(&site), async {
        let _ = site_stopped.await;
    }));

    let mut report = DemoReport {
        scenarios: Vec::with_capacity(options.scenarios.len()),
        connections: options.connections,
        duration: options.duration,
        returning: None,
    };
    let mut failure = None;
    for &scenario in &options.scenarios {
        match run_scenario(scenario, origin, &site, &options).await {
            Ok(result) => report.scenarios.push(result),
            Err(error) => {
                failure = Some(error);
                break;
            }
        }
    }

    if failure.is_none() {
        match super::returning::run_returning(origin, &site).await {
            Ok(returning) => report.returning = Some(returning),
            Err(error) => failure = Some(DemoError::Returning(error)),
        }
    }
    drop(stop_site);
    let served = serving.await;
    if let Some(error) = failure {
        return Err(error);
    }
    match served {
        Ok(Ok(())) => Ok(report),
        Ok(Err(error)) => Err(DemoError::Site(error)),
        Err(joined) => Err(DemoError::Site(io::Error::other(joined.to_string()))),
    }
}

async fn run_scenario(
    scenario: Scenario,
    origin: SocketAddr,
    site: &Site,
    options: &DemoOptions,
) -> Result<ScenarioReport, DemoError> {
    let proxy_error = |source| DemoError::Proxy { scenario, source };
    let authority =
        Authority::try_from(origin.to_string()).expect("a socket address is a valid authority");
    let mut config = ProxyConfig::new(
        (Ipv4Addr::LOCALHOST, 0).into(),
        vec![Upstream::http(authority)],
    );
    match scenario {
        // Same proxy, same hops, nothing compressed: the baseline.
        Scenario::Off => config.compression.rules.types.clear(),
        Scenario::Compress(level) => config.compression.level = level,
    }
    config.timeouts.shutdown_grace = Duration::from_secs(1);

    let rss_base = rss_bytes();
    let server = Server::bind(config).await.map_err(proxy_error)?;
    let addr = server.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));

    let load_options = LoadOptions {
        connections: options.connections,
        duration: options.duration,
        max_requests: options.max_requests,
        ..LoadOptions::default()
    };
    let before = site.served();
    let load = run_load(addr, site, &load_options).await;
    let after = site.served();

    drop(stop);
    match running.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(proxy_error(error)),
        Err(joined) => return Err(DemoError::Site(io::Error::other(joined.to_string()))),
    }
    let load = load.map_err(|source| DemoError::Load { scenario, source })?;
    if load.mismatches > 0 || load.errors > 0 {
        let first = load
            .first_mismatch
            .clone()
            .or_else(|| load.first_error.clone())
            .unwrap_or_default();
        return Err(DemoError::Wrong {
            scenario,
            mismatches: load.mismatches,
            errors: load.errors,
            first,
        });
    }
    Ok(ScenarioReport {
        scenario,
        load,
        origin: super::site::Served {
            requests: after.requests - before.requests,
            body_bytes: after.body_bytes - before.body_bytes,
        },
        rss_base,
    })
}
