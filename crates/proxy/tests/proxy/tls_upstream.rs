//! `https://` upstreams: TLS to an origin on loopback whose certificate an rcgen-made CA
//! signed, trusted through the configuration; a certificate for another name, or from a CA
//! not trusted, is refused with 502 and a log line that says why.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use zipwire_proxy::{Upstream, UpstreamRoots};

use crate::logging::captured;
use crate::support::*;

/// A certificate authority made for one test.
struct Ca {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let pem = params.self_signed(&key).expect("self-signed").pem();
        Ca { params, key, pem }
    }

    /// A server certificate for `names`, and its key.
    fn issue(&self, names: &[&str]) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().expect("a key");
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let params = CertificateParams::new(names).expect("params");
        let issuer = Issuer::from_params(&self.params, &self.key);
        let certificate = params.signed_by(&key, &issuer).expect("signed");
        let der = PrivatePkcs8KeyDer::from(key.serialize_der());
        (vec![certificate.der().clone()], der.into())
    }

    /// The proxy's roots: this CA only, as if read from `upstream_ca_file`.
    fn roots(&self) -> UpstreamRoots {
        UpstreamRoots::from_pem("ca.pem", self.pem.as_bytes()).expect("a PEM certificate")
    }
}

/// An HTTPS origin on 127.0.0.1:0 serving an HTML page.
struct HttpsOrigin {
    addr: SocketAddr,
    /// The SNI name of every handshake that completed.
    names: Arc<Mutex<Vec<Option<String>>>>,
    task: JoinHandle<()>,
}

impl HttpsOrigin {
    async fn start(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> HttpsOrigin {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("a certificate");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind origin");
        let addr = listener.local_addr().expect("address");
        let names = Arc::new(Mutex::new(Vec::new()));
        let seen = names.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let name = tls.get_ref().1.server_name().map(str::to_owned);
                    seen.lock().expect("not poisoned").push(name);
                    let service = service_fn(|_: Request<Incoming>| async {
                        let mut response = Response::new(Full::new(Bytes::from(html(50_000))));
                        response
                            .headers_mut()
                            .insert("content-type", "text/html".parse().expect("valid"));
                        Ok::<_, Infallible>(response)
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        HttpsOrigin { addr, names, task }
    }

    /// The upstream as `https://localhost:PORT`: the name the certificate must carry.
    fn upstream(&self) -> Upstream {
        let authority = format!("localhost:{}", self.addr.port());
        Upstream::https(authority.parse().expect("valid authority"))
    }
}

impl Drop for HttpsOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn an_https_upstream_is_verified_and_its_responses_compressed() {
    let ca = Ca::new("zipwire test CA");
    let (chain, key) = ca.issue(&["localhost"]);
    let origin = HttpsOrigin::start(chain, key).await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.upstream_roots = ca.roots();
    })
    .await;
    let client = client();
    let (head, body) = fetch(
        &client,
        "GET",
        &proxy.url("/page"),
        &[("accept-encoding", "gzip")],
    )
    .await;
    assert_eq!(head.status, 200);
    assert_eq!(head.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&body), html(50_000));
    let (head, body) = fetch(&client, "GET", &proxy.url("/page"), &[]).await;
    assert_eq!(head.status, 200);
    assert_eq!(body, html(50_000));
    // SNI carried the URL's host; the second request reused the pooled TLS connection.
    let names = origin.names.lock().expect("not poisoned").clone();
    assert_eq!(names, [Some("localhost".to_owned())]);
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() {
    let log = captured();
    let ca = Ca::new("zipwire test CA");
    let (chain, key) = ca.issue(&["other.example"]);
    let origin = HttpsOrigin::start(chain, key).await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.upstream_roots = ca.roots();
    })
    .await;
    let (head, _) = fetch(&client(), "GET", &proxy.url("/page"), &[]).await;
    assert_eq!(head.status, 502);
    assert!(origin.names.lock().expect("not poisoned").is_empty());
    let upstream = format!("localhost:{}", origin.addr.port());
    assert!(
        logged(
            log,
            &upstream,
            "certificate not valid for name \"localhost\""
        ),
        "no log line says why {upstream} was refused"
    );
}

#[tokio::test]
async fn a_certificate_from_an_untrusted_ca_is_refused() {
    let log = captured();
    let trusted = Ca::new("trusted CA");
    let other = Ca::new("some other CA");
    let (chain, key) = other.issue(&["localhost"]);
    let origin = HttpsOrigin::start(chain, key).await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.upstream_roots = trusted.roots();
    })
    .await;
    let (head, _) = fetch(&client(), "GET", &proxy.url("/page"), &[]).await;
    assert_eq!(head.status, 502);
    let upstream = format!("localhost:{}", origin.addr.port());
    assert!(
        logged(log, &upstream, "UnknownIssuer"),
        "no log line says why {upstream} was refused"
    );
}

/// Whether a captured line names `upstream` and contains `reason`.
fn logged(log: &crate::logging::Captured, upstream: &str, reason: &str) -> bool {
    let text = String::from_utf8_lossy(&log.0.lock().expect("not poisoned")).into_owned();
    text.lines()
        .any(|line| line.contains(upstream) && line.contains(reason))
}
