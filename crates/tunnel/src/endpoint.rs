//! The two ends: a server that accepts tunnel connections and forwards them to its one
//! configured target (never anywhere a client names: it is no open proxy), and a client that
//! accepts local connections and carries each over its own tunnel connection.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustls::{ClientConfig, ServerConfig};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::timeout;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tracing::{debug, info, warn};
use zipwire_adapt::LogThrottle;

use crate::drain::Drain;
use crate::handshake::{self, HandshakeError, Hello, Status};
use crate::keepalive;
use crate::relay::{relay, Shared};
use crate::startups::{Limits, Startup, Startups};
use crate::stats::Stats;
use crate::tcp_info::LinkProbe;
use crate::tls;

/// Time a client allows for connecting, TLS and the hello (the server's own deadline for TLS
/// and the hello is [`Limits::login_grace`]).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Time the server allows for connecting to its target: less than [`HANDSHAKE_TIMEOUT`], so
/// that a client whose server cannot reach the target is told so, rather than timing out
/// itself first.
pub const TARGET_TIMEOUT: Duration = Duration::from_secs(7);

/// Handshakes a client runs at once; more connections wait their turn here. Below the
/// server's [`crate::startups::DEFAULT_MAX_STARTUPS`]: a burst of local connections would
/// otherwise evict its own handshakes from the server's queue.
pub const CLIENT_HANDSHAKES: usize = 16;

/// Unsent bytes a tunnel socket may hold before writes wait (`TCP_NOTSENT_LOWAT`): small
/// enough that the writer's queue sees the link's back-pressure, large enough to keep a
/// fast link busy between two wake-ups.
pub const NOTSENT_LOWAT: u32 = 32 * 1024;

/// What both ends share: a bound listener, the token and the endpoint's shared state; `R`
/// is what one side adds ([`ServerSide`] or [`ClientSide`]).
pub struct Endpoint<R> {
    listener: TcpListener,
    token: Arc<Vec<u8>>,
    shared: Arc<Shared>,
    role: R,
}

/// A tunnel server, bound and ready to run.
pub type Server = Endpoint<ServerSide>;

/// A tunnel client, bound and ready to run.
pub type Client = Endpoint<ClientSide>;

/// The server's side: where it forwards, its TLS acceptor and its limits on unauthenticated
/// connections.
pub struct ServerSide {
    forward: String,
    tls: TlsAcceptor,
    limits: Limits,
}

/// The client's side: the server it connects to and its TLS connector.
pub struct ClientSide {
    server: String,
    tls: TlsConnector,
}

impl<R> Endpoint<R> {
    async fn listen(
        listen: SocketAddr,
        token: Vec<u8>,
        shared: Shared,
        role: R,
    ) -> io::Result<Endpoint<R>> {
        Ok(Endpoint {
            listener: TcpListener::bind(listen).await?,
            token: Arc::new(token),
            shared: Arc::new(shared),
            role,
        })
    }

    /// The address it listens on.
    ///
    /// # Errors
    ///
    /// As [`TcpListener::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The counters of all its connections.
    pub fn stats(&self) -> Arc<Stats> {
        self.shared.stats.clone()
    }

    /// Its live forwarded connections, for a shutdown that does not fake a clean end:
    /// stop [`Endpoint::run`], then [`Drain::shutdown`].
    pub fn drain(&self) -> Arc<Drain> {
        self.shared.drain.clone()
    }
}

impl Server {
    /// Binds `listen`; connections will be forwarded to `forward` (`host:port`).
    ///
    /// # Errors
    ///
    /// When the address cannot be bound.
    pub async fn bind(
        listen: SocketAddr,
        forward: String,
        tls: Arc<ServerConfig>,
        token: Vec<u8>,
        shared: Shared,
    ) -> io::Result<Server> {
        let tls = TlsAcceptor::from(tls);
        let role = ServerSide {
            forward,
            tls,
            limits: Limits::default(),
        };
        Endpoint::listen(listen, token, shared, role).await
    }

    /// Sets the limits on unauthenticated connections (by default [`Limits::default`]).
    pub fn set_limits(&mut self, limits: Limits) {
        self.role.limits = limits;
    }

    /// Accepts connections until the task is dropped.
    ///
    /// Runs until dropped. Accept errors are logged and ridden out, never returned (see
    /// `accept_loop`): the `Result` is kept for callers that may one day get one.
    ///
    /// # Errors
    ///
    /// None today.
    pub async fn run(self) -> io::Result<()> {
        let limits = self.role.limits;
        let startups = Arc::new(Startups::new(limits.max_startups));
        let mut evictions = LogThrottle::new(LOG_EVERY);
        let failures = Arc::new(LoginWarnings::default());
        let shed = startups.clone();
        accept_loop(
            &self.listener,
            || shed.evict_one(),
            |tcp, peer| {
                let (startup, pushed_out) = startups.admit(peer.ip().into());
                if pushed_out {
                    if let Some(held) = evictions.due(std::time::Instant::now()) {
                        warn!(
                            max_startups = limits.max_startups,
                            since_last_warning = held,
                            "too many unauthenticated connections: evicting the oldest of the address with the most"
                        );
                    }
                }
                let conn = Conn {
                    failures: failures.clone(),
                    tls: self.role.tls.clone(),
                    token: self.token.clone(),
                    forward: self.role.forward.clone(),
                    shared: self.shared.clone(),
                    login_grace: limits.login_grace,
                };
                tokio::spawn(async move {
                    serve(tcp, peer, startup, conn).await;
                });
            },
        )
        .await
    }
}

/// How often a repeated accept-loop warning may be logged.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The shortest and longest pause after accepting failed (other than transiently).
const BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_millis(500));

/// Accepts connections and hands each to `handle`, riding out transient accept errors (a
/// client that reset before accept). Out of file descriptors, it calls `shed` (which may
/// close an unauthenticated connection to free one), pauses with an exponential back-off
/// and warns once per [`LOG_EVERY`], not once per attempt. Any other error (`ENOBUFS`,
/// `ENOMEM`, the network errors Linux reports through `accept`) gets the same pause and
/// warning rather than ending the endpoint, which would cut every forwarded connection; nginx
/// too logs and goes on accepting.
async fn accept_loop<F, S>(listener: &TcpListener, mut shed: S, mut handle: F) -> io::Result<()>
where
    F: FnMut(TcpStream, SocketAddr),
    S: FnMut() -> bool,
{
    let mut backoff = BACKOFF.0;
    let mut failing = LogThrottle::new(LOG_EVERY);
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                backoff = BACKOFF.0;
                handle(stream, peer);
            }
            Err(e) if is_transient(&e) => debug!(error = %e, "accept failed; retrying"),
            Err(e) => {
                let descriptors = out_of_descriptors(&e);
                let shed_one = descriptors && shed();
                if let Some(held) = failing.due(std::time::Instant::now()) {
                    if descriptors {
                        warn!(
                            error = %e,
                            failed_since_last_warning = held,
                            shed_unauthenticated = shed_one,
                            "out of file descriptors: accepting paused (raise ulimit -n, or lower --max-startups)"
                        );
                    } else {
                        warn!(
                            error = %e,
                            failed_since_last_warning = held,
                            "accept failed: accepting paused"
                        );
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF.1);
            }
        }
    }
}

fn out_of_descriptors(e: &io::Error) -> bool {
    e.raw_os_error()
        .is_some_and(|code| code == libc::EMFILE || code == libc::ENFILE)
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

fn tune(tcp: &TcpStream) {
    let _ = tcp.set_nodelay(true);
    keepalive::tcp_keepalive(tcp);
    let _ = socket2::SockRef::from(tcp).set_tcp_notsent_lowat(NOTSENT_LOWAT);
}

/// What the server's task for one connection needs.
struct Conn {
    /// Warnings of failed logins: anyone can cause them.
    failures: Arc<LoginWarnings>,
    tls: TlsAcceptor,
    token: Arc<Vec<u8>>,
    forward: String,
    shared: Arc<Shared>,
    login_grace: Duration,
}

/// Why an unauthenticated connection did not deliver a hello.
enum Login {
    Tls(io::Error),
    Hello(HandshakeError),
}

async fn serve(tcp: TcpStream, peer: SocketAddr, mut startup: Startup, conn: Conn) {
    tune(&tcp);
    // One deadline for TLS and the hello together (ssh's LoginGraceTime), and the place
    // among the unauthenticated connections held until the hello is in.
    let login = async {
        let mut stream = conn.tls.accept(tcp).await.map_err(Login::Tls)?;
        match Hello::read(&mut stream).await {
            Ok(hello) => Ok((stream, hello)),
            Err(HandshakeError::UnknownVersion(v)) => {
                let _ = stream
                    .write_all(&handshake::reply(Status::Version, handshake::VERSIONS))
                    .await;
                let _ = stream.shutdown().await;
                Err(Login::Hello(HandshakeError::UnknownVersion(v)))
            }
            Err(e) => Err(Login::Hello(e)),
        }
    };
    let outcome = tokio::select! {
        outcome = timeout(conn.login_grace, login) => outcome,
        _ = &mut startup.evicted => {
            debug!(%peer, "evicted by newer unauthenticated connections; closing");
            return;
        }
    };
    drop(startup);
    let (mut stream, hello) = match outcome {
        Ok(Ok(done)) => done,
        Ok(Err(failure)) => return log_login_failure(peer, failure, &conn.failures),
        Err(_) => {
            if let Some(held) = conn.failures.due(Failed::Grace) {
                warn!(%peer, grace_s = conn.login_grace.as_secs_f64(), failed_logins_since_last_warning = held, "no TLS handshake and hello within the login grace time; closing");
            }
            return;
        }
    };
    if !handshake::token_matches(&hello.token, &conn.token) {
        if let Some(held) = conn.failures.due(Failed::Token) {
            warn!(%peer, failed_logins_since_last_warning = held, "authentication failed: wrong token; closing");
        }
        let _ = stream.write_all(&handshake::reply(Status::Denied, 0)).await;
        let _ = stream.shutdown().await;
        return;
    }
    let forward = conn.forward.as_str();
    let target = match timeout(TARGET_TIMEOUT, TcpStream::connect(forward)).await {
        Ok(Ok(target)) => target,
        failed => {
            let error = match failed {
                Ok(Err(e)) => e.to_string(),
                _ => "timed out".to_owned(),
            };
            warn!(%peer, forward, error, "forward target unreachable");
            let _ = stream
                .write_all(&handshake::reply(Status::Unreachable, 0))
                .await;
            let _ = stream.shutdown().await;
            return;
        }
    };
    let _ = target.set_nodelay(true);
    keepalive::tcp_keepalive(&target);
    let shared = conn.shared;
    let reply = handshake::reply(Status::Ok, shared.accepts());
    if let Err(e) = stream.write_all(&reply).await {
        warn!(%peer, error = %e, "connection lost after authentication");
        return;
    }
    info!(%peer, forward, "tunnel connection authenticated");
    let probe = LinkProbe::new(stream.get_ref().0);
    // Each client's pace is its own: the server's clients come by different paths.
    let path = Some(peer.ip().to_canonical());
    match relay(target, stream, probe, hello.accepts, shared, path).await {
        Ok(()) => debug!(%peer, "tunnel connection closed"),
        Err(e) => warn!(%peer, error = %e, "tunnel connection failed"),
    }
}

/// Why a login failed, for [`LoginWarnings`].
#[derive(Clone, Copy)]
enum Failed {
    Tls,
    Hello,
    Token,
    Grace,
}

/// Warnings of failed logins, each kind at most once per [`LOG_EVERY`] with a count of those
/// held back: a scanner making 2,000 connections a second must not write 2,000 lines (a line
/// per connection came to 336 KB, measured 2026-11-27), and the first of each kind still
/// shows.
#[derive(Debug, Default)]
struct LoginWarnings([Mutex<Option<LogThrottle>>; 4]);

impl LoginWarnings {
    /// Whether a warning of `kind` may be logged now, and how many were held back before it.
    fn due(&self, kind: Failed) -> Option<u64> {
        let mut throttle = self.0[kind as usize]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        throttle
            .get_or_insert_with(|| LogThrottle::new(LOG_EVERY))
            .due(std::time::Instant::now())
    }
}

/// Logs why a connection ended before authenticating: a client that merely connected and
/// left is no failed authentication.
fn log_login_failure(peer: SocketAddr, failure: Login, failures: &LoginWarnings) {
    match failure {
        Login::Tls(e) if closed_early(&e) => {
            debug!(%peer, "connection closed before the TLS handshake");
        }
        Login::Hello(HandshakeError::Io(e)) if closed_early(&e) => {
            // Debug, as before TLS: a scanner that completes TLS and leaves, 700 times a
            // second, would otherwise write as many info lines.
            debug!(%peer, "connection closed before the hello");
        }
        failure => {
            let kind = match failure {
                Login::Tls(_) => Failed::Tls,
                Login::Hello(_) => Failed::Hello,
            };
            let Some(held) = failures.due(kind) else {
                return debug!(%peer, "login failed (warning held back)");
            };
            match failure {
                Login::Hello(e @ HandshakeError::UnknownVersion(_)) => {
                    warn!(%peer, error = %e, failed_logins_since_last_warning = held, "hello of another protocol version; told it ours");
                }
                Login::Tls(e) => {
                    warn!(%peer, error = %e, failed_logins_since_last_warning = held, "TLS handshake failed; closing");
                }
                Login::Hello(e) => {
                    warn!(%peer, error = %e, failed_logins_since_last_warning = held, "authentication failed: bad hello; closing");
                }
            }
        }
    }
}

/// Whether the peer closed (or reset) before sending anything more.
fn closed_early(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}

impl Client {
    /// Binds `listen`; each connection accepted there is carried to `server` (`host:port`).
    ///
    /// # Errors
    ///
    /// When the address cannot be bound.
    pub async fn bind(
        listen: SocketAddr,
        server: String,
        tls: Arc<ClientConfig>,
        token: Vec<u8>,
        shared: Shared,
    ) -> io::Result<Client> {
        let tls = TlsConnector::from(tls);
        Endpoint::listen(listen, token, shared, ClientSide { server, tls }).await
    }

    /// Accepts local connections until the task is dropped.
    ///
    /// Runs until dropped. Accept errors are logged and ridden out, never returned (see
    /// `accept_loop`): the `Result` is kept for callers that may one day get one.
    ///
    /// # Errors
    ///
    /// None today.
    pub async fn run(self) -> io::Result<()> {
        let handshakes = Arc::new(Semaphore::new(CLIENT_HANDSHAKES));
        accept_loop(&self.listener, || false, |local, peer| {
            let handshakes = handshakes.clone();
            let tls = self.role.tls.clone();
            let token = self.token.clone();
            let server = self.role.server.clone();
            let shared = self.shared.clone();
            tokio::spawn(async move {
                let _ = local.set_nodelay(true);
                keepalive::tcp_keepalive(&local);
                // Until the relay has it, a close must not look like a clean, empty stream.
                let _ = socket2::SockRef::from(&local).set_linger(Some(Duration::ZERO));
                let turn = handshakes.acquire_owned().await;
                let connected = connect(&server, &tls, &token, shared.accepts()).await;
                drop(turn);
                match connected {
                    Ok((stream, peer_accepts)) => {
                        let probe = LinkProbe::new(stream.get_ref().0);
                        match relay(local, stream, probe, peer_accepts, shared, None).await {
                            Ok(()) => debug!(%peer, "forwarded connection closed"),
                            Err(e) => warn!(%peer, error = %e, "forwarded connection failed"),
                        }
                    }
                    Err(e) => {
                        warn!(%peer, server, error = %e, "could not open a tunnel; closing the connection");
                    }
                }
            });
        })
        .await
    }
}

/// Connects, checks the pin (in the TLS config) and authenticates, saying what this end
/// `accepts`; returns the stream and what the server accepts.
async fn connect(
    server: &str,
    tls: &TlsConnector,
    token: &[u8],
    accepts: u8,
) -> io::Result<(tokio_rustls::client::TlsStream<TcpStream>, u8)> {
    let attempt = async {
        let tcp = TcpStream::connect(server).await?;
        tune(&tcp);
        let mut stream = tls.connect(tls::server_name(), tcp).await?;
        let hello = Hello {
            accepts,
            token: token.to_vec(),
        };
        stream
            .write_all(&hello.to_bytes().map_err(io::Error::other)?)
            .await?;
        stream.flush().await?;
        let peer_accepts = handshake::read_reply(&mut stream)
            .await
            .map_err(io::Error::other)?;
        Ok((stream, peer_accepts))
    };
    timeout(HANDSHAKE_TIMEOUT, attempt)
        .await
        .unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "tunnel handshake timed out",
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_accept_error_that_is_not_transient_pauses_the_loop_and_never_ends_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        // A listening socket shut for reading fails every accept with EINVAL, the kind of
        // error that must not end the endpoint (and every forwarded connection).
        socket2::SockRef::from(&listener)
            .shutdown(std::net::Shutdown::Read)
            .unwrap();
        let err = listener.accept().await.expect_err("accept fails");
        assert!(!is_transient(&err) && !out_of_descriptors(&err), "{err}");
        let mut handled = 0;
        let ran = tokio::time::timeout(
            Duration::from_millis(1500),
            accept_loop(&listener, || false, |_, _| handled += 1),
        )
        .await;
        assert!(ran.is_err(), "the loop ended: {ran:?}");
        assert_eq!(handled, 0);
    }
}
