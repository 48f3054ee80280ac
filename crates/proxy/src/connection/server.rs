//! The server runtime: the accept loop over every listener (cleartext and TLS), one hyper
//! HTTP/1.1 or HTTP/2 connection per client (after its TLS handshake on a TLS listener), the
//! connection limit and graceful shutdown (HTTP/2 connections get GOAWAY and finish their
//! open streams).
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

use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, info_span, warn, Instrument};

use crate::budget;
use crate::connection::admin::{self, AdminState};
use crate::connection::cork::CorkedStream;
use crate::connection::graceful::{Shutdown, Watcher};
use crate::connection::http::{Connection, Protocol, Protocols};
use crate::connection::keepalive::Phases;
use crate::connection::listener::{self, Listener, Listeners};
use crate::connection::tls::{self, Acceptor, TlsReloader};
use crate::counters::Counters;
use crate::error::ProxyError;
use crate::exchange::more::{Abandoned, MoreToCome};
use crate::exchange::service::Proxy;
use crate::settings::{ProxyConfig, Timeouts};
use zipwire_adapt::Throttle;
use zipwire_adapt::{BudgetSpec, LogThrottle, MemoryGate};

/// Pause after a failed accept (out of file descriptors, say), so that the loop does not spin
/// while the condition lasts.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How often a failing accept is logged.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

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
    listeners: Listeners,
    tls_reloader: Option<TlsReloader>,
    proxy: Arc<Proxy>,
    protocols: Protocols,
    /// What a cleartext connection may speak.
    cleartext: Protocol,
    /// The client timeouts, for each connection's [`Phases`].
    timeouts: Timeouts,
    max_connections: usize,
    shutdown_grace: Duration,
    counters: Arc<Counters>,
    throttle: Throttle,
    budget: Option<BudgetSpec>,
    admin: Option<(TcpListener, SocketAddr)>,
    memory: MemoryGate,
    hurry: Arc<Notify>,
}

/// Ends a server's shutdown grace early ([`Server::hurry`]).
#[derive(Clone, Debug)]
pub struct Hurry(Arc<Notify>);

impl Hurry {
    /// Resets the connections still open at once, once the shutdown has begun (or as soon
    /// as it begins, if it has not yet).
    pub fn now(&self) {
        self.0.notify_one();
    }
}

impl Server {
    /// Binds [`ProxyConfig::listen`] and the TLS listeners of [`ProxyConfig::tls`] (port 0
    /// picks a free port; see [`Server::local_addr`]), loads the TLS certificates and
    /// prepares the upstream pool.
    ///
    /// # Errors
    ///
    /// [`ProxyError::NoUpstreams`] when `config.upstreams` is empty,
    /// [`ProxyError::NoListeners`] when no address is given, [`ProxyError::Tls`] when a
    /// certificate cannot be loaded, [`ProxyError::Bind`] when an address cannot be bound.
    pub async fn bind(config: ProxyConfig) -> Result<Server, ProxyError> {
        if config.upstreams.is_empty() {
            return Err(ProxyError::NoUpstreams);
        }
        if config.listen.is_empty() && config.tls.listen.is_empty() {
            return Err(ProxyError::NoListeners);
        }
        let (acceptor, tls_reloader) = if config.tls.listen.is_empty() {
            (None, None)
        } else {
            let (acceptor, reloader) = Acceptor::new(&config.tls, config.http2.enabled)?;
            (Some(acceptor), Some(reloader))
        };
        let mut listeners = Vec::new();
        for &addr in &config.listen {
            listeners.push(Listener::bind(addr, None).await?);
        }
        for &addr in &config.tls.listen {
            listeners.push(Listener::bind(addr, acceptor.clone()).await?);
        }
        let admin = match config.admin {
            Some(addr) => {
                let admin_error = |source| ProxyError::Bind { addr, source };
                let listener = listener::bind_tcp(addr).map_err(admin_error)?;
                let local = listener.local_addr().map_err(admin_error)?;
                Some((listener, local))
            }
            None => None,
        };
        let counters = Arc::new(Counters::default());
        let throttle = Throttle::default();
        let memory = MemoryGate::new(config.budget.max_memory);
        let protocols = Protocols::new(&config);
        Ok(Server {
            listeners: Listeners::new(listeners),
            tls_reloader,
            timeouts: config.timeouts,
            proxy: Arc::new(Proxy::new(
                &config,
                counters.clone(),
                throttle.clone(),
                memory.clone(),
            )),
            protocols,
            cleartext: if config.http2.enabled {
                Protocol::Detect
            } else {
                Protocol::Http1
            },
            max_connections: config.limits.max_connections.max(1),
            shutdown_grace: config.timeouts.shutdown_grace,
            hurry: Arc::default(),
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

    /// The address the server listens on: the first cleartext listener's, or the first TLS
    /// listener's when there is no cleartext one.
    pub fn local_addr(&self) -> SocketAddr {
        let mut all = self.listeners.iter();
        let first = self.listeners.iter().next().map(Listener::addr);
        all.find(|listener| listener.tls().is_none())
            .map(Listener::addr)
            .or(first)
            .expect("bind refuses a server without listeners")
    }

    /// The addresses of the TLS listeners, in the order of [`Tls::listen`](crate::Tls::listen).
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter(|listener| listener.tls().is_some())
            .map(Listener::addr)
            .collect()
    }

    /// The handle that reloads the TLS certificates from their files (on SIGHUP, say);
    /// `None` without TLS listeners.
    pub fn tls_reloader(&self) -> Option<TlsReloader> {
        self.tls_reloader.clone()
    }

    /// The handle that cuts the shutdown grace short: the binary calls it on a second SIGTERM or
    /// SIGINT, as nginx and HAProxy stop at once on a signal that follows a graceful stop. Without
    /// it an operator in a hurry would have only SIGKILL, whose plain close lets an HTTP/1.0 client
    /// take a cut body for a whole one.
    pub fn hurry(&self) -> Hurry {
        Hurry(self.hurry.clone())
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
            mut listeners,
            tls_reloader: _,
            proxy,
            protocols,
            cleartext,
            timeouts,
            max_connections,
            shutdown_grace,
            counters,
            throttle,
            budget,
            admin,
            memory,
            hurry,
        } = self;
        for listener in listeners.iter() {
            let tls = listener.tls().is_some();
            info!(local_addr = %listener.addr(), tls, "proxy listening");
        }
        // Helpers that live as long as the accept loop: aborted when it ends.
        let mut helpers = JoinSet::new();
        if let Some(spec) = budget {
            let budget = budget::start(spec, &counters, &throttle);
            helpers.spawn(budget::govern(budget, counters.clone(), throttle.clone()));
        }
        if let Some(cache) = proxy.cache().filter(|cache| cache.settings.recompress) {
            helpers.spawn(zipwire_cache::recompress::run(cache, throttle.clone()));
        }
        if let Some((listener, addr)) = admin {
            info!(%addr, "admin listening");
            let state = AdminState {
                counters: counters.clone(),
                throttle: throttle.clone(),
                memory,
                started: std::time::Instant::now(),
                budget,
                cache: proxy.cache(),
            };
            helpers.spawn(admin::serve(listener, state));
        }
        let permits = Arc::new(Semaphore::new(max_connections));
        let graceful = Shutdown::new();
        // Raised when shutdown begins: connections still in their TLS handshake give up.
        let (stopping, _) = watch::channel(());
        let mut tasks = JoinSet::new();
        let abandoned = Abandoned::default();
        let next_id = AtomicU64::new(0);
        let mut failing = LogThrottle::new(ACCEPT_WARN_EVERY);
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
            let (listener, (stream, peer)) = tokio::select! {
                () = &mut shutdown => break,
                (listener, accepted) = listeners.accept() => match accepted {
                    Ok(accepted) => (listener, accepted),
                    Err(error) => {
                        // Out of descriptors this fails every pause: one warning per interval, with
                        // a count, rather than 20 lines a second.
                        if let Some(held) = failing.due(std::time::Instant::now()) {
                            warn!(%error, failed_since_last_warning = held, "accept failed");
                        }
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
            };
            let id = next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Err(error) = stream.set_nodelay(true) {
                debug!(%error, "cannot set TCP_NODELAY");
            }
            let more = MoreToCome::under(&abandoned);
            // The cork sits under TLS: the records a response's writes become carry its flag.
            let stream = CorkedStream::new(stream, more.clone());
            let span = info_span!("conn", id, %peer);
            let phases = Phases::new(&timeouts);
            let Some(acceptor) = listener.tls() else {
                let connection = Connection {
                    proxy: proxy.clone(),
                    counters: counters.clone(),
                    phases,
                    peer,
                    hsts: None,
                    secure: false,
                    _permit: permit,
                };
                // Cleartext: HTTP/2 by prior knowledge or HTTP/1.1, told by the first bytes.
                let watcher = graceful.watcher();
                let served = connection.serve(&protocols, watcher, stream, cleartext, more);
                tasks.spawn(served.instrument(span));
                continue;
            };
            let handshake = Handshake {
                acceptor: acceptor.clone(),
                proxy: proxy.clone(),
                counters: counters.clone(),
                phases,
                peer,
                permit,
                protocols: protocols.clone(),
                graceful: graceful.watcher(),
                stopping: stopping.subscribe(),
            };
            tasks.spawn(handshake.serve(stream, more).instrument(span));
        }
        drop(listeners);
        // Wakes the handshakes, so that they let go of their watchers.
        let _ = stopping.send(());
        let open = graceful.count();
        info!(open, "shutting down");
        let cut = tokio::select! {
            drained = tokio::time::timeout(shutdown_grace, graceful.shutdown()) => {
                drained.is_err().then_some("shutdown grace expired, resetting connections")
            }
            () = hurry.notified() => Some("shutdown hurried, resetting connections"),
        };
        if let Some(why) = cut {
            warn!(open = tasks.len(), "{why}");
            abandoned.raise();
        }
        tasks.shutdown().await;
        helpers.shutdown().await;
        info!("proxy stopped");
        Ok(())
    }
}

/// A TLS client's connection until its handshake is done.
///
/// It holds its permit meanwhile (a stalled handshake counts against `max_connections`), and
/// becomes a [`Connection`], counted open, once the handshake is done.
struct Handshake {
    acceptor: Acceptor,
    proxy: Arc<Proxy>,
    counters: Arc<Counters>,
    phases: Phases,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    protocols: Protocols,
    graceful: Watcher,
    /// Changes when the server shuts down: the handshake is then abandoned.
    stopping: watch::Receiver<()>,
}

impl Handshake {
    /// Runs the handshake, then serves HTTP on the TLS stream.
    async fn serve(mut self, stream: CorkedStream, more: MoreToCome) {
        let handshake = self.acceptor.handshake(stream, &self.counters);
        let stream = tokio::select! {
            stream = handshake => stream,
            _ = self.stopping.changed() => None,
        };
        // A failed handshake drops the stream and the permit here.
        let Some(stream) = stream else { return };
        self.phases.handshake_done();
        let alpn = tls::alpn(&stream);
        debug!(alpn = ?alpn.map(String::from_utf8_lossy), "tls established");
        let protocol = Protocol::from_alpn(alpn);
        let connection = Connection {
            proxy: self.proxy,
            counters: self.counters,
            phases: self.phases,
            peer: self.peer,
            hsts: self.acceptor.hsts.clone(),
            secure: true,
            _permit: self.permit,
        };
        connection
            .serve(&self.protocols, self.graceful, stream, protocol, more)
            .await;
    }
}

/// Builds a runtime with [`ProxyConfig::threads`] threads (a current-thread runtime for
/// one), binds and runs the server until `shutdown` completes, after raising the process's
/// limit on open files to what [`ClientLimits::max_connections`](crate::ClientLimits) needs
/// (within the hard limit). For binaries; inside a runtime, use [`Server::bind`] and
/// [`Server::run`].
///
/// # Errors
///
/// [`ProxyError::Runtime`] when the runtime cannot be built, and those of [`Server::bind`]
/// and [`Server::run`].
pub fn run_blocking(
    config: ProxyConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ProxyError> {
    raise_open_files(config.limits.max_connections);
    let runtime = runtime(&config)?;
    runtime.block_on(async move { Server::bind(config).await?.run(shutdown).await })
}

/// [`run_blocking`] with a shutdown future made from the bound server: the binary takes the
/// [`Server::tls_reloader`] there, to reload certificates on SIGHUP until shutdown.
///
/// `shutdown` is called inside the runtime, after the listeners are bound and before the
/// first client is accepted, so that signal handlers it installs are in place by then.
///
/// # Errors
///
/// Those of [`run_blocking`].
pub fn run_blocking_with<F, S>(config: ProxyConfig, shutdown: S) -> Result<(), ProxyError>
where
    S: FnOnce(&Server) -> F,
    F: Future<Output = ()>,
{
    raise_open_files(config.limits.max_connections);
    runtime(&config)?.block_on(async move {
        let server = Server::bind(config).await?;
        let shutdown = shutdown(&server);
        server.run(shutdown).await
    })
}

/// Raises the soft limit on open files toward two per connection (the client's socket and an
/// upstream one) and some room (listeners, logs, certificate files), within the hard limit,
/// as HAProxy sizes its own from `maxconn`: the usual soft limit of 1,024 refused connections
/// (`EMFILE`, "Too many open files") long before the default `max_connections` of 10,000.
/// [`run_blocking`] calls it; a program that runs a [`Server`] on a runtime of its own calls
/// it first.
pub fn raise_open_files(max_connections: usize) {
    #[cfg(unix)]
    {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let wanted = u64::try_from(max_connections)
            .unwrap_or(u64::MAX)
            .saturating_mul(2)
            .saturating_add(256);
        let limit = getrlimit(Resource::Nofile);
        if limit.current.is_none_or(|current| current >= wanted) {
            return;
        }
        let target = limit.maximum.map_or(wanted, |maximum| maximum.min(wanted));
        let raised = Rlimit {
            current: Some(target),
            maximum: limit.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) if target < wanted => warn!(
                open_files = target,
                max_connections, "the hard limit on open files is below two per connection"
            ),
            Ok(()) => debug!(open_files = target, "open files limit raised"),
            Err(error) => warn!(%error, "cannot raise the open files limit"),
        }
    }
    #[cfg(not(unix))]
    let _ = max_connections;
}

/// The runtime [`run_blocking`] describes.
fn runtime(config: &ProxyConfig) -> Result<tokio::runtime::Runtime, ProxyError> {
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
    builder
        .thread_name("zipwire-proxy")
        .enable_all()
        .build()
        .map_err(ProxyError::Runtime)
}
