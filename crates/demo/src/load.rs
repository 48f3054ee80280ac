//! A bounded load generator that checks every response against the demo site.
//!
//! `connections` keep-alive HTTP/1.1 connections (one hyper client connection each) send GETs
//! over the site's pages in turn until the duration or the request budget runs out. Every body
//! is decoded when it arrives compressed and compared with the origin's bytes, so the numbers
//! it reports are for responses known to be right.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};
use zipwire_codec::{Format, Limits};

use super::site::{Resource, Site};

/// The longest a run may last, whatever [`LoadOptions::duration`] says.
pub const MAX_DURATION: Duration = Duration::from_secs(60);
/// The most connections a run may open, whatever [`LoadOptions::connections`] says.
pub const MAX_CONNECTIONS: usize = 1024;
/// The most requests a run may send, whatever [`LoadOptions::max_requests`] says.
pub const MAX_REQUESTS: u64 = 10_000_000;
/// How long a request still in flight at the end of the run may take before it is abandoned.
const GRACE: Duration = Duration::from_secs(2);
/// Largest decoded body accepted: every page of the demo site is far below it.
const MAX_DECODED: u64 = 16 << 20;

/// What [`run_load`] does.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Concurrent keep-alive connections, capped at [`MAX_CONNECTIONS`]. Default 16.
    pub connections: usize,
    /// How long requests are sent, capped at [`MAX_DURATION`]. Default 3 s.
    pub duration: Duration,
    /// Most requests sent in all, capped at [`MAX_REQUESTS`]. Default 1,000,000.
    pub max_requests: u64,
    /// The `Accept-Encoding` sent with every request; `None` sends none. Default `gzip`.
    pub accept_encoding: Option<HeaderValue>,
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions {
            connections: 16,
            duration: Duration::from_secs(3),
            max_requests: 1_000_000,
            accept_encoding: Some(HeaderValue::from_static("gzip")),
        }
    }
}

/// What a load run measured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Responses received in full.
    pub requests: u64,
    /// Of those, responses that came with `Content-Encoding: gzip` or `deflate`.
    pub compressed: u64,
    /// Responses whose status, coding or decoded body differed from the origin's; the demo
    /// fails when this is not zero.
    pub mismatches: u64,
    /// Requests that failed at the HTTP level (connection refused or reset, malformed
    /// response, timeout at the end of the run).
    pub errors: u64,
    /// Body bytes received, as sent on the wire (compressed where the response was).
    pub wire_bytes: u64,
    /// Body bytes after decoding: the origin's size of every response received.
    pub decoded_bytes: u64,
    /// From the first request to the last response.
    pub elapsed: Duration,
    /// The process's resident memory before the run (`VmRSS`), when the platform tells it.
    pub rss_before: Option<u64>,
    /// The process's resident memory at the end of the run.
    pub rss_after: Option<u64>,
    /// What the first mismatch was, for the error message.
    pub first_mismatch: Option<String>,
    /// What the first error was.
    pub first_error: Option<String>,
}

impl LoadReport {
    /// Responses per second.
    pub fn hits_per_sec(&self) -> f64 {
        per_second(self.requests, self.elapsed)
    }

    /// Body bytes received per second, as sent on the wire.
    pub fn wire_bytes_per_sec(&self) -> f64 {
        per_second(self.wire_bytes, self.elapsed)
    }

    /// Decoded size over wire size: 1.0 when nothing was compressed.
    pub fn ratio(&self) -> f64 {
        if self.wire_bytes == 0 {
            1.0
        } else {
            self.decoded_bytes as f64 / self.wire_bytes as f64
        }
    }

    fn merge(&mut self, tally: Tally) {
        self.requests += tally.requests;
        self.compressed += tally.compressed;
        self.mismatches += tally.mismatches;
        self.errors += tally.errors;
        self.wire_bytes += tally.wire_bytes;
        self.decoded_bytes += tally.decoded_bytes;
        if self.first_mismatch.is_none() {
            self.first_mismatch = tally.first_mismatch;
        }
        if self.first_error.is_none() {
            self.first_error = tally.first_error;
        }
    }
}

pub(crate) fn per_second(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

/// Why a load run could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// The first connection to the target failed.
    Connect {
        /// The address tried.
        addr: SocketAddr,
        /// What connect said.
        source: io::Error,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Connect { addr, source } => write!(f, "cannot connect to {addr}: {source}"),
        }
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoadError::Connect { source, .. } => Some(source),
        }
    }
}

/// Sends the load described by `options` to `addr`, which serves `site` (directly or through a
/// proxy), and checks every response against it.
///
/// # Errors
///
/// [`LoadError::Connect`] when `addr` does not accept a first connection. Failures after
/// that are counted in [`LoadReport::errors`], not returned.
pub async fn run_load(
    addr: SocketAddr,
    site: &Site,
    options: &LoadOptions,
) -> Result<LoadReport, LoadError> {
    drop(
        TcpStream::connect(addr)
            .await
            .map_err(|source| LoadError::Connect { addr, source })?,
    );
    let pages: Arc<[Resource]> = site.pages().cloned().collect();
    let budget = Arc::new(AtomicU64::new(options.max_requests.min(MAX_REQUESTS)));
    let connections = options.connections.clamp(1, MAX_CONNECTIONS);
    let mut report = LoadReport {
        rss_before: rss_bytes(),
        ..LoadReport::default()
    };

    let start = Instant::now();
    let deadline = start + options.duration.min(MAX_DURATION);
    let mut tasks = JoinSet::new();
    for index in 0..connections {
        let client = Client {
            addr,
            pages: Arc::clone(&pages),
            accept_encoding: options.accept_encoding.clone(),
            budget: Arc::clone(&budget),
            deadline,
            hard_deadline: deadline + GRACE,
        };
        tasks.spawn(client.run(index));
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(tally) => report.merge(tally),
            Err(error) => report.merge(Tally::failed(format!("load task ended: {error}"))),
        }
    }
    report.elapsed = start.elapsed();
    report.rss_after = rss_bytes();
    Ok(report)
}

/// One connection's share of the load.
struct Client {
    addr: SocketAddr,
    pages: Arc<[Resource]>,
    accept_encoding: Option<HeaderValue>,
    budget: Arc<AtomicU64>,
    deadline: Instant,
    hard_deadline: Instant,
}

impl Client {
    /// Sends requests until the deadline or the budget, reconnecting when the server closes
    /// the connection. Connection `index` starts at page `index`, so that connections do not
    /// all ask for the same page at once.
    async fn run(self, index: usize) -> Tally {
        let mut tally = Tally::default();
        let mut next = index;
        'connect: while Instant::now() < self.deadline {
            let stream = match timeout_at(self.hard_deadline, TcpStream::connect(self.addr)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => return tally.error(format!("connect: {error}")),
                Err(_) => return tally.error("connect: timed out".to_owned()),
            };
            let _ = stream.set_nodelay(true);
            let (mut sender, connection) = match http1::handshake(TokioIo::new(stream)).await {
                Ok(pair) => pair,
                Err(error) => return tally.error(format!("handshake: {error}")),
            };
            let driver = tokio::spawn(connection);
            while Instant::now() < self.deadline {
                if sender.ready().await.is_err() {
                    // The server closed the connection between responses: open another.
                    driver.abort();
                    continue 'connect;
                }
                if !take_one(&self.budget) {
                    driver.abort();
                    return tally;
                }
                let page = &self.pages[next % self.pages.len()];
                next += 1;
                let mut request = Request::get(page.path());
                if let Some(value) = &self.accept_encoding {
                    request = request.header(header::ACCEPT_ENCODING, value.clone());
                }
                let request = request
                    .header(header::HOST, self.addr.to_string())
                    .body(Empty::<Bytes>::new())
                    .expect("a path from the site and fixed headers make a valid request");
                let exchange = async {
                    let response = sender.send_request(request).await?;
                    let (parts, body) = response.into_parts();
                    let body = body.collect().await?.to_bytes();
                    Ok::<_, hyper::Error>((parts, body))
                };
                match timeout_at(self.hard_deadline, exchange).await {
                    Ok(Ok((parts, body))) => tally.check(page, &parts, body),
                    Ok(Err(error)) => {
                        tally = tally.error(format!("{}: {error}", page.path()));
                        driver.abort();
                        continue 'connect;
                    }
                    Err(_) => {
                        driver.abort();
                        return tally.error(format!("{}: no response in time", page.path()));
                    }
                }
            }
            driver.abort();
            break;
        }
        tally
    }
}

/// Takes one request from the shared budget; `false` when it is spent.
fn take_one(budget: &AtomicU64) -> bool {
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            left.checked_sub(1)
        })
        .is_ok()
}

/// One connection's counts, merged into the report at the end.
#[derive(Default)]
struct Tally {
    requests: u64,
    compressed: u64,
    mismatches: u64,
    errors: u64,
    wire_bytes: u64,
    decoded_bytes: u64,
    first_mismatch: Option<String>,
    first_error: Option<String>,
}

impl Tally {
    fn failed(what: String) -> Tally {
        Tally::default().error(what)
    }

    fn error(mut self, what: String) -> Tally {
        self.errors += 1;
        self.first_error.get_or_insert(what);
        self
    }

    fn mismatch(&mut self, what: String) {
        self.mismatches += 1;
        self.first_mismatch.get_or_insert(what);
    }

    /// Counts one response and checks it against the origin's `page`.
    fn check(&mut self, page: &Resource, parts: &http::response::Parts, body: Bytes) {
        self.requests += 1;
        self.wire_bytes += body.len() as u64;
        let path = page.path();
        if parts.status != page.status() {
            return self.mismatch(format!(
                "{path}: status {} instead of {}",
                parts.status,
                page.status()
            ));
        }
        let coding = parts
            .headers
            .get(header::CONTENT_ENCODING)
            .map(|value| value.to_str().unwrap_or("?").trim().to_ascii_lowercase());
        let format = match coding.as_deref() {
            None | Some("identity") => None,
            Some("gzip" | "x-gzip") => Some(Format::Gzip),
            Some("deflate") => Some(Format::Zlib),
            Some(other) => {
                return self.mismatch(format!("{path}: unexpected Content-Encoding {other}"));
            }
        };
        let decoded = match format {
            None => body,
            Some(format) => {
                self.compressed += 1;
                if !page.is_compressible() {
                    return self
                        .mismatch(format!("{path}: {} was compressed", page.content_type()));
                }
                let limits = Limits {
                    max_output: Some(MAX_DECODED),
                    max_ratio: None,
                };
                match zipwire_codec::decompress(format, &body, limits) {
                    Ok(decoded) => Bytes::from(decoded),
                    Err(error) => {
                        return self.mismatch(format!("{path}: body does not decode: {error}"));
                    }
                }
            }
        };
        if decoded != page.body() {
            return self.mismatch(format!(
                "{path}: body differs from the origin's ({} bytes instead of {})",
                decoded.len(),
                page.body().len()
            ));
        }
        self.decoded_bytes += decoded.len() as u64;
    }
}

/// The process's resident set size in bytes (`VmRSS` in `/proc/self/status`); `None` where
/// there is no such file.
pub fn rss_bytes() -> Option<u64> {
    proc_status_kib("VmRSS:").map(|kib| kib * 1024)
}

/// The process's peak resident set size in bytes (`VmHWM`).
pub fn peak_rss_bytes() -> Option<u64> {
    proc_status_kib("VmHWM:").map(|kib| kib * 1024)
}

fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
