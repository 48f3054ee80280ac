//! TLS termination: the rustls server configuration, the certificates chosen by SNI, their
//! reloading, and the handshake under its timeout.
//!
//! The defaults are those a TLS scanner finds nothing to flag in (Mozilla's "intermediate"
//! profile, which is also what nginx and HAProxy ship): TLS 1.2 and 1.3 only; ECDHE key
//! exchange and AEAD ciphers only (AES-GCM, ChaCha20-Poly1305), so every session is forward
//! secret and no CBC or RSA key transport is offered (RFC 9325 §4.2); session resumption by
//! stateless tickets (keys rotated every 6 hours by rustls' ticketer) and a server-side
//! cache for TLS 1.2 clients that resume by session ID; ALPN `h2`, `http/1.1`, then `http/1.0` (RFC 7301
//! §3.2: the server picks).
//!
//! Certificates live behind one [`Resolver`] that every TLS listener shares: a reload swaps
//! the set it holds, so new handshakes see the new certificates while connections already
//! established keep theirs (their keys are not needed after the handshake). A reload that
//! fails keeps the set in use.

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http::HeaderValue;
use rustls::client::verify_server_name;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{
    ClientHello, ParsedCertificate, ResolvesServerCert, ServerSessionMemoryCache,
};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use rustls::SignatureScheme;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use crate::counters::Counters;
use crate::error::ProxyError;
use crate::settings::{CertificateFiles, Tls};

/// The ALPN protocols offered, most preferred first. `http/1.0` too, as nginx offers it: a client
/// that offers only that (`curl --http1.0`) would otherwise get the fatal `no_application_protocol`
/// alert.
const ALPN: [&[u8]; 3] = [b"h2", b"http/1.1", b"http/1.0"];

/// TLS 1.2 sessions kept for clients that resume by session ID (nginx `ssl_session_cache
/// shared:SSL:10m` holds about 40,000): a few hundred bytes each, a few MB in all.
const SESSION_CACHE: usize = 10_000;

/// The TLS side of the TLS listeners: accepts handshakes with the shared configuration.
#[derive(Clone)]
pub(crate) struct Acceptor {
    inner: TlsAcceptor,
    handshake_timeout: Duration,
    /// Set on every response over TLS (RFC 6797 §7.2).
    pub(crate) hsts: Option<HeaderValue>,
}

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acceptor")
            .field("handshake_timeout", &self.handshake_timeout)
            .field("hsts", &self.hsts)
            .finish_non_exhaustive()
    }
}

impl Acceptor {
    /// Loads every certificate of `settings` and builds the server configuration; the
    /// reloader reloads the same files.
    ///
    /// # Errors
    ///
    /// [`ProxyError::Tls`] when there is no certificate, or one cannot be loaded.
    ///
    /// ALPN offers `h2` only when `http2` is on.
    pub(crate) fn new(settings: &Tls, http2: bool) -> Result<(Acceptor, TlsReloader), ProxyError> {
        let files = Arc::new(Files::of(settings)?);
        let provider = Arc::new(provider());
        let resolver = Arc::new(Resolver(RwLock::new(Arc::new(files.load(&provider)?))));
        let config = server_config(provider.clone(), resolver.clone(), http2)?;
        let acceptor = Acceptor {
            inner: TlsAcceptor::from(Arc::new(config)),
            handshake_timeout: settings.handshake_timeout,
            hsts: settings.hsts.clone(),
        };
        let reloader = TlsReloader {
            files,
            provider,
            resolver,
        };
        Ok((acceptor, reloader))
    }

    /// Runs the server side of the handshake on `stream`, for at most the handshake timeout.
    /// `None` when it fails or times out: counted, and logged at debug only, as scanners and
    /// clients that give up are no concern of the operator's.
    pub(crate) async fn handshake<S>(&self, stream: S, counters: &Counters) -> Option<TlsStream<S>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        match tokio::time::timeout(self.handshake_timeout, self.inner.accept(stream)).await {
            Ok(Ok(stream)) => {
                Counters::bump(&counters.tls_handshakes);
                Some(stream)
            }
            Ok(Err(error)) => {
                Counters::bump(&counters.tls_handshake_failures);
                debug!(%error, "tls handshake failed");
                None
            }
            Err(_) => {
                Counters::bump(&counters.tls_handshake_failures);
                debug!(timeout = ?self.handshake_timeout, "tls handshake timed out");
                None
            }
        }
    }
}

/// The application protocol the client and the server agreed on (ALPN), if any: `h2`,
/// `http/1.1` or `http/1.0`. A client that offers no ALPN speaks HTTP/1.1.
pub(crate) fn alpn<S>(stream: &TlsStream<S>) -> Option<&[u8]> {
    stream.get_ref().1.alpn_protocol()
}

/// Reloads the TLS certificates from their files (the binary calls it on SIGHUP): new
/// handshakes use the new certificates, open connections are untouched.
///
/// Got from [`Server::tls_reloader`](crate::Server::tls_reloader).
#[derive(Clone, Debug)]
pub struct TlsReloader {
    files: Arc<Files>,
    provider: Arc<CryptoProvider>,
    resolver: Arc<Resolver>,
}

impl TlsReloader {
    /// Reads every certificate and key again. When one fails, the certificates in use are
    /// kept and a warning says why; when all load, they replace the ones in use at once.
    ///
    /// # Errors
    ///
    /// [`ProxyError::Tls`] naming the file that failed (already logged as a warning).
    pub fn reload(&self) -> Result<(), ProxyError> {
        match self.files.load(&self.provider) {
            Ok(certificates) => {
                let count = certificates.count();
                let mut current = self
                    .resolver
                    .0
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *current = Arc::new(certificates);
                info!(certificates = count, "tls certificates reloaded");
                Ok(())
            }
            Err(error) => {
                warn!(%error, "tls certificates not reloaded, the ones in use are kept");
                Err(error)
            }
        }
    }
}

/// Loads every certificate and key `tls` names, as the server would when it binds, and
/// returns how many there are (for `--check`, which should fail where the server would).
///
/// # Errors
///
/// [`ProxyError::Tls`] naming the file at fault: missing or unreadable, no PEM certificate
/// or key in it, a key that does not match its certificate.
pub fn check_certificates(tls: &Tls) -> Result<usize, ProxyError> {
    let files = Files::of(tls)?;
    Ok(files.load(&provider())?.count())
}

/// The ring provider with the cipher suites named here only: ECDHE key exchange (rustls has
/// no other for TLS 1.2; TLS 1.3 is always ephemeral) and AEAD ciphers. The list is spelled
/// out so that a rustls release adding a suite does not add it here unreviewed.
fn provider() -> CryptoProvider {
    use rustls::crypto::ring::cipher_suite::*;
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = vec![
        TLS13_AES_128_GCM_SHA256,
        TLS13_AES_256_GCM_SHA384,
        TLS13_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ];
    provider
}

fn server_config(
    provider: Arc<CryptoProvider>,
    resolver: Arc<Resolver>,
    http2: bool,
) -> Result<ServerConfig, ProxyError> {
    let general = |reason: String| ProxyError::Tls { path: None, reason };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| general(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    let offered = if http2 { &ALPN[..] } else { &ALPN[1..] };
    config.alpn_protocols = offered.iter().map(|protocol| protocol.to_vec()).collect();
    config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
    config.ticketer = rustls::crypto::ring::Ticketer::new()
        .map_err(|e| general(format!("cannot make a session ticket key: {e}")))?;
    Ok(config)
}

/// The certificate files, in the order they are looked up.
#[derive(Debug)]
struct Files {
    default: Option<CertificateFiles>,
    by_name: Vec<CertificateFiles>,
}

impl Files {
    fn of(tls: &Tls) -> Result<Files, ProxyError> {
        if tls.default_certificate.is_none() && tls.certificates.is_empty() {
            return Err(ProxyError::Tls {
                path: None,
                reason: "TLS listeners need a certificate and its key".to_owned(),
            });
        }
        Ok(Files {
            default: tls.default_certificate.clone(),
            by_name: tls.certificates.clone(),
        })
    }

    fn load(&self, provider: &CryptoProvider) -> Result<Certificates, ProxyError> {
        let default = match &self.default {
            Some(files) => Some(Arc::new(load(files, provider)?)),
            None => None,
        };
        let by_name = self
            .by_name
            .iter()
            .map(|files| load(files, provider).map(Arc::new))
            .collect::<Result<_, _>>()?;
        Ok(Certificates { default, by_name })
    }
}

/// One loaded set of certificates.
#[derive(Debug)]
struct Certificates {
    /// For clients without SNI or whose SNI no other certificate names.
    default: Option<Arc<CertifiedKey>>,
    /// Looked up by SNI, in order.
    by_name: Vec<Arc<CertifiedKey>>,
}

impl Certificates {
    fn count(&self) -> usize {
        usize::from(self.default.is_some()) + self.by_name.len()
    }

    /// The certificate for `name` (webpki's name rules: subject alternative names, one-label
    /// wildcards) whose key can sign with one of the client's `schemes`: one naming `name`
    /// exactly before one that covers it by a wildcard (as nginx prefers an exact
    /// `server_name`, and HAProxy looks in its exact-name tree first), each in the order
    /// configured; an ECDSA and an RSA certificate for one name thus serve clients of
    /// either. Without a certificate for the name, the default, else the first certificate
    /// (HAProxy also falls back to its first `crt`).
    fn choose(&self, name: Option<&str>, schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        let wanted = name.and_then(|name| ServerName::try_from(name).ok());
        if let Some(wanted) = wanted {
            let valid: Vec<&Arc<CertifiedKey>> = self
                .by_name
                .iter()
                .filter(|key| is_valid_for(key, &wanted))
                .collect();
            let probe = wildcard_probe(&wanted);
            let exact = |key: &&&Arc<CertifiedKey>| {
                probe.as_ref().is_none_or(|probe| !is_valid_for(key, probe))
            };
            let signs = |key: &&&Arc<CertifiedKey>| key.key.choose_scheme(schemes).is_some();
            let found = (valid.iter().filter(exact).find(signs))
                .or_else(|| valid.iter().find(signs))
                .or_else(|| valid.iter().find(exact))
                .or_else(|| valid.first());
            if let Some(key) = found {
                return Some(Arc::clone(key));
            }
        }
        self.default
            .clone()
            .or_else(|| self.by_name.first().cloned())
    }
}

/// A name that a wildcard covering `name` covers too, and that no certificate names: a
/// certificate valid for both covers `name` by a wildcard, one valid for `name` alone names
/// it. (webpki tells whether a certificate is valid for a name, not how.) `None` for IP
/// addresses and single-label names, which no wildcard covers.
fn wildcard_probe(name: &ServerName<'_>) -> Option<ServerName<'static>> {
    let ServerName::DnsName(dns) = name else {
        return None;
    };
    let (_, parent) = dns.as_ref().split_once('.')?;
    ServerName::try_from(format!("zipwire-wildcard-probe.{parent}")).ok()
}

/// Whether `key`'s certificate names `name`.
fn is_valid_for(key: &CertifiedKey, name: &ServerName<'_>) -> bool {
    key.end_entity_cert()
        .and_then(ParsedCertificate::try_from)
        .and_then(|cert| verify_server_name(&cert, name))
        .is_ok()
}

/// Picks the certificate for each handshake from the set in use.
#[derive(Debug)]
struct Resolver(RwLock<Arc<Certificates>>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let certificates = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        certificates.choose(hello.server_name(), hello.signature_schemes())
    }
}

/// Loads one certificate chain and its key, checking that they belong together.
fn load(files: &CertificateFiles, provider: &CryptoProvider) -> Result<CertifiedKey, ProxyError> {
    let at = |path: &Path, reason: String| ProxyError::Tls {
        path: Some(path.to_owned()),
        reason,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|items| items.collect::<Result<_, _>>())
        .map_err(|e| at(&files.cert, format!("cannot read a PEM certificate: {e}")))?;
    if chain.is_empty() {
        return Err(at(&files.cert, "no PEM certificate in the file".to_owned()));
    }
    ParsedCertificate::try_from(&chain[0])
        .map_err(|e| at(&files.cert, format!("not an X.509 certificate: {e}")))?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        // An encrypted key (`BEGIN ENCRYPTED PRIVATE KEY`) is no item rustls reads: say so
        // rather than "no items found".
        let encrypted = std::fs::read_to_string(&files.key)
            .is_ok_and(|text| text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----"));
        let reason = if encrypted {
            "the private key is encrypted, which is not supported: decrypt it (openssl pkey -in KEY -out KEY.plain)".to_owned()
        } else {
            format!("cannot read a PEM private key: {e}")
        };
        at(&files.key, reason)
    })?;
    warn_if_exposed(&files.key);
    CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        let reason = match e {
            rustls::Error::InconsistentKeys(_) => {
                format!("not the private key of {}", files.cert.display())
            }
            e => format!("not a usable key for {}: {e}", files.cert.display()),
        };
        at(&files.key, reason)
    })
}

/// Warns when a private key file may be read or written by its group or others, as ssh
/// does for its keys and the tunnel for `key.pem` (the proxy and the tunnel share no code,
/// so the check is repeated: four lines).
fn warn_if_exposed(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                warn!(path = %path.display(), "private key file is readable by others than its owner; chmod 600 it");
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}
