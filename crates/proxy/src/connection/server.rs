//! The server runtime: the accept loop, one hyper HTTP/1 connection per client, the
//! connection limit and graceful shutdown.
//!
//! Each connection runs in its own task inside a `conn{id, peer}` span; each request inside a
//! `request{method, path}` span under it. Limits on clients: the request head must arrive
//! within [`Timeouts::header_read`] (slowloris) and a kept-alive connection may wait
//! [`Timeouts::idle`] for its next request (see [`crate::connection::keepalive`]); the head may not exceed
//! [`ClientLimits::max_header_bytes`] (431, or 414 for the target alone). A malformed request
//! gets 400 and the connection is closed.
//!
//! [`Timeouts::header_read`]: crate::Timeouts::header_read
//! [`Timeouts::idle`]: crate::Timeouts::idle
//! [`ClientLimits::max_header_bytes`]: crate::ClientLimits::max_header_bytes

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::{debug, info, info_span, warn, Instrument};

use crate::connection::admin::{self, AdminState};
use crate::connection::cork::{CorkedStream, MoreToCome};
use crate::connection::http::Connection;
use crate::connection::keepalive::Phases;
use crate::counters::Counters;
use crate::encode::budget;
use crate::encode::throttle::Throttle;
use crate::error::ProxyError;
use crate::exchange::service::Proxy;
use crate::settings::ProxyConfig;
use zipwire_adapt::{BudgetSpec, MemoryGate};

/// Smallest per-connection buffer limit hyper accepts is 8 KiB; keep some room above it.
const MIN_BUF_SIZE: usize = 16 * 1024;

/// Room in the read buffer past the head limit: hyper's longest URI (65,534 bytes) and a
/// little more, so that a request line hyper refuses with 414 is read whole.
const URI_ROOM: usize = 64 * 1024 + 512;

/// Pause after a failed accept (out of file descriptors, say), so that the loop does not spin
/// while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A bound, not yet running, compressing reverse proxy.
///
/// ```no_run
/// # async fn example() -> Result<(), zipwire_proxy::ProxyError> {
/// use zipwire_proxy::{ProxyConfig, Server, Upstream};
///
/// let upstream = Upstream::http(http::uri::Authority::from_static("127.0.0.1:9000"));
/// let config = ProxyConfig::new("127.0.0.1:0".parse().expect("valid"), vec![upstream]);
/// let server = Server::bind(config).await?;
/// println!("listening on {}", server.local_addr());
/// server.run(async { let _ = tokio::signal::ctrl_c().await; }).await
/// # }
/// ```
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    local_addr: SocketAddr,
    proxy: Arc<Proxy>,
    http: auto::Builder<TokioExecutor>,
    /// `header_read` and `idle`, for each connection's [`Phases`].
    phases: (Duration, Duration),
    max_connections: usize,
    shutdown_grace: Duration,
    counters: Arc<Counters>,
    throttle: Throttle,
    budget: Option<BudgetSpec>,
    admin: Option<(TcpListener, SocketAddr)>,
    memory: MemoryGate,
}

impl Server {
    /// Binds [`ProxyConfig::listen`] (port 0 picks a free port; see
    /// [`Server::local_addr`]) and prepares the upstream pool.
    ///
    /// # Errors
    ///
    /// [`ProxyError::NoUpstreams`] when `config.upstreams` is empty, [`ProxyError::Bind`] when
    /// the address cannot be bound.
    pub async fn bind(config: ProxyConfig) -> Result<Server, ProxyError> {
        if config.upstreams.is_empty() {
            return Err(ProxyError::NoUpstreams);
        }
        let bind_error = |source| ProxyError::Bind {
            addr: config.listen,
            source,
        };
        let listener = TcpListener::bind(config.listen).await.map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        let admin = match config.admin {
            Some(addr) => {
                let admin_error = |source| ProxyError::Bind { addr, source };
                let listener = TcpListener::bind(addr).await.map_err(admin_error)?;
                let local = listener.local_addr().map_err(admin_error)?;
                Some((listener, local))
            }
            None => None,
        };
        let counters = Arc::new(Counters::default());
        let throttle = Throttle::default();
        let memory = MemoryGate::new(config.budget.max_memory);
        // hyper-util's builder, HTTP/1 only: its connections can be upgraded (WebSocket) and
        // still be watched for graceful shutdown, which hyper's own upgradeable HTTP/1
        // connection cannot.
        let mut http = auto::Builder::new(TokioExecutor::new()).http1_only();
        http.http1()
            .timer(TokioTimer::new())
            // Off: `keepalive` times the head and the gap between requests apart.
            .header_read_timeout(None::<Duration>)
            // Read and write buffers per connection: a request head must fit, and a request
            // line up to hyper's URI limit past it, so that hyper answers 414 rather than 431
            // (the head limit itself is checked with the request, see `service`); responses
            // are streamed in frames of at most `coalesce`, so larger buffers only hold memory.
            .max_buf_size(config.limits.max_header_bytes.max(MIN_BUF_SIZE) + URI_ROOM)
            .keep_alive(true);
        Ok(Server {
            listener,
            local_addr,
            phases: (config.timeouts.header_read, config.timeouts.idle),
            proxy: Arc::new(Proxy::new(
                &config,
                counters.clone(),
                throttle.clone(),
                memory.clone(),
            )),
            http,
            max_connections: config.limits.max_connections.max(1),
            shutdown_grace: config.timeouts.shutdown_grace,
            counters,
            throttle,
            budget: budget::spec(&config.budget),
            admin,
            memory,
        })
    }

    /// The address of the admin listener, when one is configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|(_, addr)| *addr)
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The server's counters, live: they keep counting while the server runs.
    pub fn stats(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// The switches a budget policy sets to throttle compression.
    pub fn throttle(&self) -> Throttle {
        self.throttle.clone()
    }

    /// Serves clients until `shutdown` completes; then stops accepting, lets in-flight
    /// requests finish within [`Timeouts::shutdown_grace`](crate::Timeouts::shutdown_grace),
    /// and closes the connections still open.
    ///
    /// At most [`ClientLimits::max_connections`](crate::ClientLimits::max_connections) are
    /// served at once; further clients wait in the listen queue.
    ///
    /// # Errors
    ///
    /// None for now: accept failures are logged and retried. The `Result` leaves room for
    /// fatal listener errors.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ProxyError> {
        let Server {
            listener,
            local_addr,
            proxy,
            http,
            phases,
            max_connections,
            shutdown_grace,
            counters,
            throttle,
            budget,
            admin,
            memory,
        } = self;
        info!(%local_addr, "proxy listening");
        // Helpers that live as long as the accept loop: aborted when it ends.
        let mut helpers = JoinSet::new();
        if let Some(spec) = budget {
            let budget = budget::start(spec, &counters, &throttle);
            helpers.spawn(budget::govern(budget, counters.clone(), throttle.clone()));
        }
        if let Some((listener, addr)) = admin {
            info!(%addr, "admin listening");
            let state = AdminState {
                counters: counters.clone(),
                throttle: throttle.clone(),
                memory,
                started: std::time::Instant::now(),
            };
            helpers.spawn(admin::serve(listener, state));
        }
        let permits = Arc::new(Semaphore::new(max_connections));
        let graceful = GracefulShutdown::new();
        let mut tasks = JoinSet::new();
        let next_id = AtomicU64::new(0);
        tokio::pin!(shutdown);
        loop {
            while tasks.try_join_next().is_some() {}
            let permit = tokio::select! {
                () = &mut shutdown => break,
                permit = permits.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    // The semaphore is never closed.
                    Err(_) => break,
                },
            };
            let (stream, peer) = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        warn!(%error, "accept failed");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
            };
            let id = next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Err(error) = stream.set_nodelay(true) {
                debug!(%error, "cannot set TCP_NODELAY");
            }
            let more = MoreToCome::default();
            let stream = CorkedStream::new(stream, more.clone());
            let connection = Connection {
                proxy: proxy.clone(),
                counters: counters.clone(),
                phases: Phases::new(phases.0, phases.1),
                peer,
                _permit: permit,
            };
            let served = connection.serve(&http, &graceful, stream, more);
            tasks.spawn(served.instrument(info_span!("conn", id, %peer)));
        }
        drop(listener);
        let open = graceful.count();
        info!(open, "shutting down");
        if tokio::time::timeout(shutdown_grace, graceful.shutdown())
            .await
            .is_err()
        {
            warn!(
                open = tasks.len(),
                "shutdown grace expired, closing connections"
            );
        }
        tasks.shutdown().await;
        helpers.shutdown().await;
        info!("proxy stopped");
        Ok(())
    }
}

/// Builds a runtime with [`ProxyConfig::threads`] threads (a current-thread runtime for
/// one), binds and runs the server until `shutdown` completes. For binaries; inside a runtime, use [`Server::bind`]
/// and [`Server::run`].
///
/// # Errors
///
/// [`ProxyError::Runtime`] when the runtime cannot be built, and those of [`Server::bind`]
/// and [`Server::run`].
pub fn run_blocking(
    config: ProxyConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ProxyError> {
    // One thread: a current-thread runtime, so that the accept loop and every connection share
    // the thread and no task wake-up crosses threads (the multi-thread scheduler's atomics and
    // futex wake-ups cost ~10% of a core under load).
    let mut builder = if config.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(config.threads);
        builder
    };
    let runtime = builder
        .thread_name("zipwire-proxy")
        .enable_all()
        .build()
        .map_err(ProxyError::Runtime)?;
    runtime.block_on(async move { Server::bind(config).await?.run(shutdown).await })
}
