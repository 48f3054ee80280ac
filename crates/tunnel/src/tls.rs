//! TLS 1.3 (rustls, ring provider) for both ends, and certificate pinning: the client trusts
//! exactly one certificate, named by the SHA-256 of its DER bytes, as ssh's known_hosts
//! trusts one host key. No CA and no host name are involved, so a self-signed certificate
//! from `zipwire tunnel keygen` is all a server needs.

use std::fmt;
use std::io;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme,
};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The server name the client asks for; certificates from `keygen` carry it.
pub const SERVER_NAME: &str = "zipwire-tunnel";

/// The SHA-256 of a certificate's DER bytes, written `SHA256:<64 hex digits>`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of a DER certificate.
    pub fn of(der: &[u8]) -> Fingerprint {
        Fingerprint(Sha256::digest(der).into())
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SHA256:")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Fingerprint {
    type Err = String;

    fn from_str(s: &str) -> Result<Fingerprint, String> {
        let hex = s
            .strip_prefix("SHA256:")
            .ok_or_else(|| format!("pin {s:?} does not start with SHA256:"))?;
        let hex: String = hex.chars().filter(|c| *c != ':').collect();
        if hex.len() != 64 || !hex.is_ascii() {
            return Err(format!("pin {s:?} is not SHA256: and 64 hex digits"));
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                .map_err(|_| format!("pin {s:?} is not SHA256: and 64 hex digits"))?;
        }
        Ok(Fingerprint(out))
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server's TLS configuration from PEM files. Warns when the key file is readable by
/// others than its owner.
///
/// # Errors
///
/// When a file cannot be read or holds no certificate or key rustls accepts.
pub fn server_config(cert: &Path, key: &Path) -> io::Result<Arc<ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| io::Error::other(format!("{}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(io::Error::other(format!(
            "{}: no certificate",
            cert.display()
        )));
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| io::Error::other(format!("{}: {e}", key.display())))?;
    crate::keygen::warn_if_exposed(key, "private key file");
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(io::Error::other)?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| {
            let reason = match e {
                rustls::Error::InconsistentKeys(_) => {
                    format!("not the private key of {}", cert.display())
                }
                e => format!("not a usable key for {}: {e}", cert.display()),
            };
            io::Error::other(format!("{}: {reason}", key.display()))
        })?;
    Ok(Arc::new(config))
}

/// The fingerprint of the first certificate in a PEM file.
///
/// # Errors
///
/// When the file cannot be read or holds no certificate.
pub fn cert_fingerprint(cert: &Path) -> io::Result<Fingerprint> {
    let der = CertificateDer::from_pem_file(cert)
        .map_err(|e| io::Error::other(format!("{}: {e}", cert.display())))?;
    Ok(Fingerprint::of(&der))
}

/// The client's TLS configuration: TLS 1.3, trusting only the certificate `pin` names.
///
/// # Errors
///
/// Only if the crypto provider lacks TLS 1.3, which the ring provider does not.
pub fn client_config(pin: Fingerprint) -> io::Result<Arc<ClientConfig>> {
    let provider = provider();
    let verifier = Arc::new(PinnedCert {
        pin,
        provider: provider.clone(),
    });
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The name the client sends.
pub fn server_name() -> ServerName<'static> {
    ServerName::DnsName(
        rustls::pki_types::DnsName::try_from(SERVER_NAME).unwrap_or_else(|_| {
            // A constant, valid DNS name: this branch is never taken.
            unreachable!("{SERVER_NAME} is a valid DNS name")
        }),
    )
}

/// Accepts the one certificate whose fingerprint is pinned, and checks the handshake
/// signatures with it as usual.
#[derive(Debug)]
struct PinnedCert {
    pin: Fingerprint,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedCert {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = Fingerprint::of(end_entity);
        if bool::from(seen.0.ct_eq(&self.pin.0)) {
            Ok(ServerCertVerified::assertion())
        } else {
            tracing::warn!(pinned = %self.pin, presented = %seen, "server certificate does not match the pin");
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_of_another_certificate_is_named_with_both_files() {
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        crate::keygen::keygen(one.path(), false).unwrap();
        crate::keygen::keygen(two.path(), false).unwrap();
        let (cert, key) = (one.path().join("cert.pem"), two.path().join("key.pem"));
        assert!(server_config(&cert, &one.path().join("key.pem")).is_ok());
        let error = server_config(&cert, &key).expect_err("a key of another pair");
        assert_eq!(
            error.to_string(),
            format!(
                "{}: not the private key of {}",
                key.display(),
                cert.display()
            )
        );
    }

    #[test]
    fn fingerprints_print_and_parse_back() {
        let fp = Fingerprint::of(b"certificate");
        let text = fp.to_string();
        assert!(text.starts_with("SHA256:") && text.len() == 7 + 64);
        assert_eq!(text.parse::<Fingerprint>().unwrap(), fp);
        assert!("SHA256:abc".parse::<Fingerprint>().is_err());
        assert!(text
            .replace("SHA256:", "MD5:")
            .parse::<Fingerprint>()
            .is_err());
        assert!(format!("SHA256:{}", "é".repeat(32))
            .parse::<Fingerprint>()
            .is_err());
    }
}
