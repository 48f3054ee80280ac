//! How the proxy reaches an origin: TCP for `http://` upstreams, TLS over TCP for `https://`
//! ones (rustls, TLS 1.2 and 1.3, the certificate verified against the host in the URL, which
//! is also the SNI name: nginx's `proxy_ssl_server_name on` and `proxy_ssl_verify on`).
//!
//! [`UpstreamConnector`] is the connector of the pooled client (hyper-util's legacy client
//! takes any `tower_service::Service<Uri>`) and of the fresh connections that upgrades take.
//!
//! Every upstream connection, pooled, busy or upgraded, holds one of `limits.max_connections` slots
//! for as long as its socket is open, so the proxy's descriptors stay within what
//! [`raise_open_files`](crate::raise_open_files) sized them for (a client and an upstream socket
//! per connection). An HTTP/2 client opens up to 128 streams on one connection, each with an
//! upstream connection of its own: without the slots, three such clients with their windows shut
//! would hold every descriptor of a proxy allowed 50 connections, and no one else would be served,
//! not even the admin. A connect that finds no slot free within the connect timeout fails as
//! [`NoSlot`], which marks no upstream down.
//! Written here rather than taken from `hyper-rustls`: that crate's connector would add a
//! dependency and its own root-store and feature choices for about the hundred lines below.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::Scheme;
use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;
use tower_service::Service;
use tracing::{info, warn};

use crate::settings::{Timeouts, Upstream, UpstreamRoots, UpstreamScheme};

/// A boxed error, as hyper-util's client takes from a connector.
pub(crate) type BoxError = Box<dyn StdError + Send + Sync>;

/// Connects to upstreams: TCP, then TLS for `https` URIs.
#[derive(Clone)]
pub(crate) struct UpstreamConnector {
    http: HttpConnector,
    /// `None` when no upstream is `https://`: then an `https` URI is refused.
    tls: Option<TlsConnector>,
    /// The longest a TLS handshake may take, and a wait for a slot (the connect timeout).
    handshake: Duration,
    /// One permit per upstream connection that may be open at once.
    slots: Arc<Semaphore>,
}

impl fmt::Debug for UpstreamConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamConnector")
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl UpstreamConnector {
    /// The connector for `servers`, with `timeouts.upstream_connect` for the TCP connect and
    /// again for the TLS handshake; TLS trusts `roots`; at most `slots` connections open at
    /// once.
    pub(crate) fn new(
        servers: &[Upstream],
        roots: &UpstreamRoots,
        timeouts: &Timeouts,
        slots: usize,
    ) -> UpstreamConnector {
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(timeouts.upstream_connect));
        http.set_nodelay(true);
        // `https` URIs come here too; TLS is added on top below.
        http.enforce_http(false);
        let any_tls = servers
            .iter()
            .any(|server| server.scheme == UpstreamScheme::Https);
        let tls = any_tls.then(|| TlsConnector::from(Arc::new(client_config(roots))));
        UpstreamConnector {
            http,
            tls,
            handshake: timeouts.upstream_connect,
            slots: Arc::new(Semaphore::new(slots.max(1))),
        }
    }
}

/// The TLS client configuration: ring, TLS 1.2 and 1.3, ALPN `http/1.1`, verifying against
/// `roots`.
fn client_config(roots: &UpstreamRoots) -> ClientConfig {
    let mut store = RootCertStore::empty();
    match roots {
        UpstreamRoots::System => {
            let loaded = rustls_native_certs::load_native_certs();
            for error in &loaded.errors {
                warn!(%error, "reading the system's certificate store");
            }
            let (added, ignored) = store.add_parsable_certificates(loaded.certs);
            info!(
                added,
                ignored, "system certificate authorities for https upstreams"
            );
            if added == 0 {
                warn!("no system certificate authority found: every https upstream will be refused; set upstream_ca_file");
            }
        }
        UpstreamRoots::CaFile { certificates, .. } => {
            let (added, ignored) = store.add_parsable_certificates(certificates.iter().cloned());
            if ignored > 0 {
                warn!(
                    added,
                    ignored, "some configured CA certificates cannot be used"
                );
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring's provider supports TLS 1.2 and 1.3")
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

impl Service<Uri> for UpstreamConnector {
    type Response = UpstreamStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<UpstreamStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let secure = uri.scheme() == Some(&Scheme::HTTPS);
        let host = uri.host().unwrap_or_default().to_owned();
        let tls = self.tls.clone();
        let handshake = self.handshake;
        let slots = self.slots.clone();
        let mut http = self.http.clone();
        Box::pin(async move {
            let slot = tokio::time::timeout(handshake, slots.acquire_owned())
                .await
                .ok()
                .and_then(Result::ok)
                .ok_or(NoSlot)?;
            let tcp = http.call(uri).await?;
            if !secure {
                return Ok(UpstreamStream {
                    io: Io::Plain(tcp),
                    _slot: slot,
                });
            }
            let tls = tls.ok_or_else(|| TlsError::new(&host, "no TLS configured"))?;
            // An IPv6 host comes bracketed in a URI; the name is the address itself.
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            let name = ServerName::try_from(bare.to_owned())
                .map_err(|_| TlsError::new(&host, "not a valid server name"))?;
            let stream = tokio::time::timeout(handshake, tls.connect(name, tcp.into_inner()))
                .await
                .map_err(|_| TlsError::new(&host, "handshake timed out"))?
                .map_err(|error| TlsError::new(&host, &error.to_string()))?;
            Ok(UpstreamStream {
                io: Io::Tls(Box::new(TokioIo::new(stream))),
                _slot: slot,
            })
        })
    }
}

/// A failed TLS connection to an upstream, naming the host and why (for the log line that
/// explains a 502: `invalid peer certificate: NotValidForName`, `UnknownIssuer`, …).
#[derive(Debug)]
pub(crate) struct TlsError {
    host: String,
    reason: String,
}

impl TlsError {
    fn new(host: &str, reason: &str) -> TlsError {
        TlsError {
            host: host.to_owned(),
            reason: reason.to_owned(),
        }
    }
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TLS to {} failed: {}", self.host, self.reason)
    }
}

impl StdError for TlsError {}

/// No upstream connection slot came free within the connect timeout: every one of
/// `limits.max_connections` is open.
#[derive(Debug)]
pub(crate) struct NoSlot;

impl fmt::Display for NoSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("every upstream connection slot is in use (limits.max_connections)")
    }
}

impl StdError for NoSlot {}

/// A connection to an upstream, in cleartext or TLS, holding its slot until it closes.
#[derive(Debug)]
pub(crate) struct UpstreamStream {
    io: Io,
    _slot: OwnedSemaphorePermit,
}

#[derive(Debug)]
enum Io {
    /// `http://`.
    Plain(TokioIo<TcpStream>),
    /// `https://`.
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for UpstreamStream {
    fn connected(&self) -> Connected {
        match &self.io {
            Io::Plain(tcp) => tcp.connected(),
            Io::Tls(tls) => tls.inner().get_ref().0.connected(),
        }
    }
}

impl Read for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Io::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Io::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Io::Tls(tls) => Pin::new(tls.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(tcp) => tcp.is_write_vectored(),
            Io::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Io::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Io::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}
