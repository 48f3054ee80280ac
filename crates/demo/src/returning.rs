//! The returning visitor: what a page view costs once the site's script went from one release
//! to the next, for a browser that has no dictionary and for one that kept the old release
//! as one (RFC 9842). The proxy runs with its defaults, so it marks the versioned script
//! itself; the origin knows nothing of dictionaries.
//!
//! Each body is checked: the ordinary ones decode (zstd) to the origin's bytes, and the delta
//! decodes against the old release to the new one.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::uri::Authority;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use zipwire_dictionary::fields::serialize_hash;
use zipwire_dictionary::{DictCoding, Hash};
use zipwire_proxy::codings::dictionary::decode;
use zipwire_proxy::{ProxyConfig, Server, Upstream};

use super::site::Site;

/// What a browser sends: the codings of Chromium 156.
const BROWSER: &str = "gzip, deflate, br, zstd";

/// Body bytes on the wire for one page view (the home page and the script), three ways.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReturningReport {
    /// The home page, as every visit gets it.
    pub html: u64,
    /// The old release of the script, on the first visit.
    pub first: u64,
    /// The new release, for a browser without a dictionary.
    pub without: u64,
    /// The new release, for a browser holding the old one: the delta.
    pub with: u64,
    /// The delta's coding (`dcz` unless the proxy prefers `dcb`).
    pub coding: String,
    /// The new release's own size.
    pub identity: u64,
}

impl fmt::Display for ReturningReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Returning visitor: the site's script went from 2.4.0 to 2.4.1 ({} bytes); body bytes \
             per page view (home page + script), through the proxy with its defaults:",
            self.identity
        )?;
        let rows = [
            ("first visit (2.4.0, zstd)", self.first, String::new()),
            (
                "next visit, no dictionary (zstd)",
                self.without,
                String::new(),
            ),
            (
                "next visit, 2.4.0 kept as a dictionary",
                self.with,
                format!(
                    "  {} delta, {:.3}× the page view without",
                    self.coding,
                    (self.html + self.with) as f64 / (self.html + self.without).max(1) as f64
                ),
            ),
        ];
        for (label, script, note) in rows {
            writeln!(
                f,
                "  {label:<40} | HTML {:>6} | script {:>6} | total {:>6}{note}",
                self.html,
                script,
                self.html + script
            )?;
        }
        Ok(())
    }
}

/// Why the returning-visitor run failed.
#[derive(Debug)]
pub struct ReturningError(pub String);

impl fmt::Display for ReturningError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "returning visitor: {}", self.0)
    }
}

impl std::error::Error for ReturningError {}

/// Runs a proxy with its defaults in front of the site at `origin` and makes the three page
/// views of [`ReturningReport`], checking every body.
///
/// # Errors
///
/// When the proxy or a request fails, or a body is not the origin's.
pub async fn run_returning(
    origin: SocketAddr,
    site: &Site,
) -> Result<ReturningReport, ReturningError> {
    let fail = |what: String| ReturningError(what);
    let authority = Authority::try_from(origin.to_string()).map_err(|e| fail(e.to_string()))?;
    let mut config = ProxyConfig::new(
        (Ipv4Addr::LOCALHOST, 0).into(),
        vec![Upstream::http(authority)],
    );
    config.timeouts.shutdown_grace = Duration::from_secs(1);
    config.access_log = false;
    let server = Server::bind(config)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let addr = server.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    let measured = page_views(addr, site).await;
    drop(stop);
    let _ = running.await;
    measured
}

async fn page_views(addr: SocketAddr, site: &Site) -> Result<ReturningReport, ReturningError> {
    let [old, new] = site.versions();
    let home = site.lookup("/");
    let plain = [(header::ACCEPT_ENCODING, BROWSER.to_owned())];
    let (_, html) = fetch(addr, "/", &plain).await?;
    check_zstd(&html, home.body(), "the home page")?;
    let (_, first) = fetch(addr, old.path(), &plain).await?;
    check_zstd(&first, old.body(), old.path())?;
    let (_, without) = fetch(addr, new.path(), &plain).await?;
    check_zstd(&without, new.body(), new.path())?;
    let holding = [
        (header::ACCEPT_ENCODING, format!("{BROWSER}, dcb, dcz")),
        (
            http::HeaderName::from_static("available-dictionary"),
            serialize_hash(&Hash::of(old.body())),
        ),
    ];
    let (fields, with) = fetch(addr, new.path(), &holding).await?;
    let coding = match fields
        .get(header::CONTENT_ENCODING)
        .map(HeaderValue::as_bytes)
    {
        Some(b"dcz") => DictCoding::Dcz,
        Some(b"dcb") => DictCoding::Dcb,
        other => {
            return Err(ReturningError(format!(
                "{} came back as {other:?}, not a delta",
                new.path()
            )))
        }
    };
    let decoded = decode(coding, old.body(), &with, new.body().len() as u64).map_err(|e| {
        ReturningError(format!("the delta of {} did not decode: {e:?}", new.path()))
    })?;
    if decoded != new.body()[..] {
        return Err(ReturningError(format!(
            "the delta of {} decoded to other bytes",
            new.path()
        )));
    }
    Ok(ReturningReport {
        html: html.len() as u64,
        first: first.len() as u64,
        without: without.len() as u64,
        with: with.len() as u64,
        coding: coding.to_string(),
        identity: new.body().len() as u64,
    })
}

/// Checks a zstd body decodes to `expected`.
fn check_zstd(body: &[u8], expected: &[u8], what: &str) -> Result<(), ReturningError> {
    match zstd::stream::decode_all(body) {
        Ok(decoded) if decoded == expected => Ok(()),
        _ => Err(ReturningError(format!(
            "{what} did not decode to the origin's bytes"
        ))),
    }
}

/// One GET on a connection of its own.
async fn fetch(
    addr: SocketAddr,
    path: &str,
    fields: &[(http::HeaderName, String)],
) -> Result<(HeaderMap, Bytes), ReturningError> {
    let fail =
        |what: &str, error: &dyn fmt::Display| ReturningError(format!("{path}: {what}: {error}"));
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| fail("connect", &e))?;
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| fail("handshake", &e))?;
    tokio::spawn(connection);
    let mut request = Request::builder()
        .uri(path)
        .header(header::HOST, addr.to_string());
    for (name, value) in fields {
        request = request.header(name, value);
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|e| fail("request", &e))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| fail("send", &e))?;
    let (parts, body) = response.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| fail("body", &e))?
        .to_bytes();
    Ok((parts.headers, body))
}
