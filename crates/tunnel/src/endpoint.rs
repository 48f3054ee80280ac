//! The two ends: a server that accepts tunnel connections and forwards them to its one
//! configured target (never anywhere a client names: it is no open proxy), and a client that
//! accepts local connections and carries each over its own tunnel connection.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::{ClientConfig, ServerConfig};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tracing::{debug, info, warn};

use crate::drain::Drain;
use crate::handshake::{self, Hello, Status, CODEC_ZSTD};
use crate::relay::{relay, Shared};
use crate::stats::Stats;
use crate::tcp_info::LinkProbe;
use crate::tls;

/// Time allowed for connecting, TLS and the hello.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Unsent bytes a tunnel socket may hold before writes wait (`TCP_NOTSENT_LOWAT`): small
/// enough that the writer's queue sees the link's back-pressure, large enough to keep a
/// fast link busy between two wake-ups.
pub const NOTSENT_LOWAT: u32 = 32 * 1024;

/// The codecs this build decodes.
const OUR_CODECS: u8 = CODEC_ZSTD;

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

/// The server's side: where it forwards and its TLS acceptor.
pub struct ServerSide {
    forward: String,
    tls: TlsAcceptor,
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
        Endpoint::listen(listen, token, shared, ServerSide { forward, tls }).await
    }

    /// Accepts connections until the task is dropped.
    ///
    /// # Errors
    ///
    /// Only when accepting fails for a reason other than a transient one.
    pub async fn run(self) -> io::Result<()> {
        accept_loop(&self.listener, |tcp, peer| {
            let tls = self.role.tls.clone();
            let token = self.token.clone();
            let forward = self.role.forward.clone();
            let shared = self.shared.clone();
            tokio::spawn(async move {
                serve(tcp, peer, tls, &token, &forward, shared).await;
            });
        })
        .await
    }
}

/// Accepts connections and hands each to `handle`, riding out transient accept errors (a
/// client that reset before accept, or running out of file descriptors for a moment).
async fn accept_loop<F>(listener: &TcpListener, mut handle: F) -> io::Result<()>
where
    F: FnMut(TcpStream, SocketAddr),
{
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => handle(stream, peer),
            Err(e) if is_transient(&e) => {
                warn!(error = %e, "accept failed; retrying");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    ) || e
        .raw_os_error()
        .is_some_and(|code| code == 24 || code == 23) // EMFILE, ENFILE
}

fn tune(tcp: &TcpStream) {
    let _ = tcp.set_nodelay(true);
    let _ = socket2::SockRef::from(tcp).set_tcp_notsent_lowat(NOTSENT_LOWAT);
}

async fn serve(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: TlsAcceptor,
    token: &[u8],
    forward: &str,
    shared: Arc<Shared>,
) {
    tune(&tcp);
    let mut stream = match timeout(HANDSHAKE_TIMEOUT, tls.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            warn!(%peer, error = %e, "TLS handshake failed; closing");
            return;
        }
        Err(_) => {
            warn!(%peer, "TLS handshake timed out; closing");
            return;
        }
    };
    let hello = match timeout(HANDSHAKE_TIMEOUT, Hello::read(&mut stream)).await {
        Ok(Ok(hello)) => hello,
        Ok(Err(e)) => {
            warn!(%peer, error = %e, "authentication failed: bad hello; closing");
            return;
        }
        Err(_) => {
            warn!(%peer, "authentication failed: no hello in time; closing");
            return;
        }
    };
    if !handshake::token_matches(&hello.token, token) {
        warn!(%peer, "authentication failed: wrong token; closing");
        let _ = stream.write_all(&handshake::reply(Status::Denied, 0)).await;
        let _ = stream.shutdown().await;
        return;
    }
    let target = match timeout(HANDSHAKE_TIMEOUT, TcpStream::connect(forward)).await {
        Ok(Ok(target)) => target,
        Ok(Err(e)) => {
            warn!(%peer, forward, error = %e, "forward target unreachable");
            let _ = stream
                .write_all(&handshake::reply(Status::Unreachable, 0))
                .await;
            let _ = stream.shutdown().await;
            return;
        }
        Err(_) => {
            warn!(%peer, forward, "forward target timed out");
            let _ = stream
                .write_all(&handshake::reply(Status::Unreachable, 0))
                .await;
            let _ = stream.shutdown().await;
            return;
        }
    };
    let _ = target.set_nodelay(true);
    let codecs = hello.codecs & OUR_CODECS;
    if let Err(e) = stream
        .write_all(&handshake::reply(Status::Ok, codecs))
        .await
    {
        warn!(%peer, error = %e, "connection lost after authentication");
        return;
    }
    info!(%peer, forward, "tunnel connection authenticated");
    let probe = LinkProbe::new(stream.get_ref().0);
    match relay(target, stream, probe, codecs & CODEC_ZSTD != 0, shared).await {
        Ok(()) => debug!(%peer, "tunnel connection closed"),
        Err(e) => warn!(%peer, error = %e, "tunnel connection failed"),
    }
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
    /// # Errors
    ///
    /// Only when accepting fails for a reason other than a transient one.
    pub async fn run(self) -> io::Result<()> {
        accept_loop(&self.listener, |local, peer| {
            let tls = self.role.tls.clone();
            let token = self.token.clone();
            let server = self.role.server.clone();
            let shared = self.shared.clone();
            tokio::spawn(async move {
                let _ = local.set_nodelay(true);
                // Until the relay has it, a close must not look like a clean, empty stream.
                let _ = socket2::SockRef::from(&local).set_linger(Some(Duration::ZERO));
                match connect(&server, &tls, &token).await {
                    Ok((stream, zstd)) => {
                        let probe = LinkProbe::new(stream.get_ref().0);
                        match relay(local, stream, probe, zstd, shared).await {
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

/// Connects, checks the pin (in the TLS config) and authenticates; returns the stream and
/// whether the server decodes zstd.
async fn connect(
    server: &str,
    tls: &TlsConnector,
    token: &[u8],
) -> io::Result<(tokio_rustls::client::TlsStream<TcpStream>, bool)> {
    let attempt = async {
        let tcp = TcpStream::connect(server).await?;
        tune(&tcp);
        let mut stream = tls.connect(tls::server_name(), tcp).await?;
        let hello = Hello {
            codecs: OUR_CODECS,
            token: token.to_vec(),
        };
        stream
            .write_all(&hello.to_bytes().map_err(io::Error::other)?)
            .await?;
        stream.flush().await?;
        let codecs = handshake::read_reply(&mut stream)
            .await
            .map_err(io::Error::other)?;
        Ok((stream, codecs & CODEC_ZSTD != 0))
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
