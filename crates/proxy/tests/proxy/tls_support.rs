//! TLS for the tests: generated certificates in files, a proxy with TLS listeners, and a
//! rustls client that accepts any certificate and reports the one it was shown.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, SupportedProtocolVersion};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;
use zipwire_proxy::{
    CertificateFiles, Counters, ProxyConfig, ProxyError, Server, TlsReloader, Upstream,
};
use zipwire_testkit::tls::AnyCertificate;

/// A generated certificate and key, written to files.
pub struct Site {
    pub files: CertificateFiles,
    /// The certificate as DER, to compare with what a client was shown.
    pub der: Vec<u8>,
}

/// A fresh directory under cargo's temp dir for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tls-{name}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A self-signed certificate for `names`, written as `dir/stem.pem` and `dir/stem.key`
/// (mode 0600, as an operator should keep it).
pub fn site(dir: &Path, stem: &str, names: &[&str]) -> Site {
    let files = CertificateFiles {
        cert: dir.join(format!("{stem}.pem")),
        key: dir.join(format!("{stem}.key")),
    };
    let der = write_site(&files, names);
    Site { files, der }
}

/// Writes a new certificate for `names` over `files`; returns its DER.
pub fn write_site(files: &CertificateFiles, names: &[&str]) -> Vec<u8> {
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    let generated = rcgen::generate_simple_self_signed(names).expect("generate a certificate");
    std::fs::write(&files.cert, generated.cert.pem()).expect("write the certificate");
    write_private(
        &files.key,
        generated.signing_key.serialize_pem().as_bytes(),
        0o600,
    );
    generated.cert.der().to_vec()
}

/// An Ed25519 certificate for `names`, written as `dir/stem.pem` and `dir/stem.key` (the
/// other sites' keys are ECDSA P-256).
pub fn ed25519_site(dir: &Path, stem: &str, names: &[&str]) -> Site {
    let files = CertificateFiles {
        cert: dir.join(format!("{stem}.pem")),
        key: dir.join(format!("{stem}.key")),
    };
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("an Ed25519 key");
    let cert = rcgen::CertificateParams::new(names)
        .expect("valid names")
        .self_signed(&key)
        .expect("a certificate");
    std::fs::write(&files.cert, cert.pem()).expect("write the certificate");
    write_private(&files.key, key.serialize_pem().as_bytes(), 0o600);
    Site {
        files,
        der: cert.der().to_vec(),
    }
}

/// A client like [`http11_client`] whose hello offers only ECDSA P-256 signatures.
pub fn ecdsa_only_client() -> Arc<ClientConfig> {
    let mut provider = rustls::crypto::ring::default_provider();
    let algorithms = provider.signature_verification_algorithms;
    let mapping: Vec<_> = algorithms
        .mapping
        .iter()
        .filter(|(scheme, _)| *scheme == rustls::SignatureScheme::ECDSA_NISTP256_SHA256)
        .copied()
        .collect();
    provider.signature_verification_algorithms = rustls::crypto::WebPkiSupportedAlgorithms {
        all: algorithms.all,
        mapping: Vec::leak(mapping),
    };
    let provider = Arc::new(provider);
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(rustls::DEFAULT_VERSIONS)
        .expect("the ring provider has these versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(config)
}

/// Writes a file with `mode` (exactly: the umask does not apply).
pub fn write_private(path: &Path, bytes: &[u8], mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, bytes).expect("write the file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A running proxy with TLS listeners.
pub struct TlsProxy {
    /// The cleartext listeners (may be none).
    pub plain: Vec<SocketAddr>,
    /// The TLS listeners.
    pub tls: Vec<SocketAddr>,
    pub admin: Option<SocketAddr>,
    pub stats: Arc<Counters>,
    pub reloader: TlsReloader,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ProxyError>>,
}

impl TlsProxy {
    /// A proxy in front of `upstream` with one TLS listener serving `default`, no cleartext
    /// listener, after `adjust`.
    pub async fn start(
        upstream: Upstream,
        default: &Site,
        adjust: impl FnOnce(&mut ProxyConfig),
    ) -> TlsProxy {
        let local: SocketAddr = "127.0.0.1:0".parse().expect("valid");
        let mut config = ProxyConfig::new(local, vec![upstream]);
        config.listen.clear();
        config.threads = 1;
        config.tls.listen = vec![local];
        config.tls.default_certificate = Some(default.files.clone());
        config.timeouts.upstream_response = std::time::Duration::from_secs(5);
        config.timeouts.shutdown_grace = std::time::Duration::from_secs(1);
        adjust(&mut config);
        let server = Server::bind(config).await.expect("bind proxy");
        let tls = server.tls_addrs();
        let plain = if server.local_addr() == tls[0] {
            Vec::new()
        } else {
            vec![server.local_addr()]
        };
        let reloader = server.tls_reloader().expect("TLS listeners");
        let admin = server.admin_addr();
        let stats = server.stats();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = rx.await;
        }));
        TlsProxy {
            plain,
            tls,
            admin,
            stats,
            reloader,
            shutdown: Some(tx),
            task,
        }
    }

    /// The first TLS listener.
    pub fn addr(&self) -> SocketAddr {
        self.tls[0]
    }

    /// Stops the server and waits for it.
    pub async fn stop(mut self) -> Result<(), ProxyError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        (&mut self.task).await.expect("the server task ends")
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A client configuration for `versions`, offering `alpn`, that accepts any certificate
/// (the tests compare the certificate shown with the one expected) and keeps sessions for
/// resumption.
pub fn client_config(
    versions: &[&'static SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .expect("the ring provider has these versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// TLS 1.3 and 1.2, offering HTTP/1.1 only.
pub fn http11_client() -> Arc<ClientConfig> {
    client_config(rustls::DEFAULT_VERSIONS, &[b"http/1.1"])
}

/// Connects to `addr` and completes the handshake with `sni` as the server name (an IP
/// address sends no SNI).
pub async fn connect(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    sni: &str,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(sni.to_owned()).expect("a valid server name");
    TlsConnector::from(config).connect(name, tcp).await
}

/// The certificate the server showed on `stream`.
pub fn shown(stream: &TlsStream<TcpStream>) -> Vec<u8> {
    let certs = stream
        .get_ref()
        .1
        .peer_certificates()
        .expect("a certificate");
    certs[0].to_vec()
}

/// One HTTP/1.1 GET on an established TLS stream; the stream is closed after it.
pub async fn get(
    stream: TlsStream<TcpStream>,
    path: &str,
    headers: &[(&'static str, &'static str)],
) -> (http::response::Parts, Bytes) {
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP/1.1 over TLS");
    tokio::spawn(connection);
    let (parts, body) = send(&mut sender, path, headers).await;
    (parts, body)
}

/// A GET on a kept-alive HTTP/1.1 connection.
pub async fn send(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    path: &str,
    headers: &[(&'static str, &'static str)],
) -> (http::response::Parts, Bytes) {
    let mut request = http::Request::builder()
        .uri(path)
        .header("host", "proxy.test");
    for &(name, value) in headers {
        request = request.header(name, value);
    }
    let request = request.body(Empty::new()).expect("valid request");
    let response = sender.send_request(request).await.expect("a response");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("a complete body").to_bytes();
    (parts, body)
}

/// A ClientHello record written by hand, for what no rustls client sends: `version` as the
/// hello's legacy version, `suites` as its only cipher suites, and the extensions a TLS 1.2
/// server needs to consider ECDHE (supported groups, point formats, signature algorithms).
pub fn client_hello(version: u16, suites: &[u16]) -> Vec<u8> {
    let mut extensions = Vec::new();
    // supported_groups: x25519, secp256r1.
    extensions.extend_from_slice(&[0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17]);
    // ec_point_formats: uncompressed.
    extensions.extend_from_slice(&[0x00, 0x0b, 0x00, 0x02, 0x01, 0x00]);
    // signature_algorithms: ecdsa_secp256r1_sha256, rsa_pss_rsae_sha256, rsa_pkcs1_sha256.
    extensions.extend_from_slice(&[
        0x00, 0x0d, 0x00, 0x08, 0x00, 0x06, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01,
    ]);
    let mut body = Vec::new();
    body.extend_from_slice(&version.to_be_bytes());
    body.extend_from_slice(&[0x5a; 32]); // random
    body.push(0); // no session id
    body.extend_from_slice(&u16::try_from(suites.len() * 2).expect("few").to_be_bytes());
    for suite in suites {
        body.extend_from_slice(&suite.to_be_bytes());
    }
    body.extend_from_slice(&[0x01, 0x00]); // compression: null only
    body.extend_from_slice(
        &u16::try_from(extensions.len())
            .expect("short")
            .to_be_bytes(),
    );
    body.extend_from_slice(&extensions);
    let mut handshake = vec![0x01]; // client_hello
    handshake.extend_from_slice(&u32::try_from(body.len()).expect("short").to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01]; // handshake record, TLS 1.0 framing
    record.extend_from_slice(&u16::try_from(handshake.len()).expect("short").to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}
