//! Which admin paths are the dashboard's, and their responses.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};

use crate::assets::{self, Prepared};
use crate::body::Body;
use crate::events::{EventStream, Viewers};

/// The program's numbers, one JSON document per event.
pub trait Source: Send + Sync + 'static {
    /// A JSON document of the numbers now.
    fn sample(&self) -> String;
}

impl<F: Fn() -> String + Send + Sync + 'static> Source for F {
    fn sample(&self) -> String {
        self()
    }
}

/// Which page to serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `zipwire proxy`'s: bandwidth, ratio, hits, budget, codings, bypasses, upstreams.
    Proxy,
    /// `zipwire tunnel`'s: per direction bytes, factor, link rate, level, raw blocks.
    Tunnel,
}

/// The dashboard of one program. Cloning shares its viewers and counters.
#[derive(Clone)]
pub struct Dashboard {
    kind: Kind,
    source: Arc<dyn Source>,
    viewers: Arc<Viewers>,
    samples: Arc<AtomicU64>,
}

impl fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dashboard")
            .field("kind", &self.kind)
            .field("viewers", &self.viewers())
            .field("samples", &self.samples())
            .finish_non_exhaustive()
    }
}

/// `Cache-Control` of the versioned assets: a year, never revalidated (RFC 8246).
const FOREVER: &str = "public, max-age=31536000, immutable";

/// What the page may load: only this listener's own files and events, so nothing leaves the
/// machine even if a script tried (CSP Level 3; uPlot sets inline styles).
const CSP: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:";

impl Dashboard {
    /// A dashboard of `kind` whose events carry `source`'s documents.
    pub fn new(kind: Kind, source: impl Source) -> Dashboard {
        Dashboard {
            kind,
            source: Arc::new(source),
            viewers: Arc::default(),
            samples: Arc::default(),
        }
    }

    /// Event streams open now.
    pub fn viewers(&self) -> usize {
        self.viewers.open()
    }

    /// Samples taken for events so far: stays 0 while nobody watches.
    pub fn samples(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
    }

    /// The response to `request` if its path is the dashboard's (`/dashboard`, `/` asked for as
    /// HTML, `/events`, `/assets/...`), else `None` for the caller to answer. An event stream
    /// must be polled within a Tokio runtime.
    pub fn respond<B>(&self, request: &Request<B>) -> Option<Response<Body>> {
        let path = request.uri().path();
        let headers = request.headers();
        let response = match path {
            "/dashboard" | "/dashboard/" => self.file(assets::page(self.kind), headers, "no-cache"),
            "/" if accepts_html(headers) => self.file(assets::page(self.kind), headers, "no-cache"),
            "/events" => self.events(request.method()),
            _ => {
                let rest = path.strip_prefix("/assets/")?;
                let (version, name) = rest.split_once('/')?;
                match assets::file(name) {
                    Some(file) if version == assets::version() => self.file(file, headers, FOREVER),
                    // An old page asking for files of another build.
                    Some(_) => status(StatusCode::NOT_FOUND, "no such asset version\n"),
                    None => return None,
                }
            }
        };
        Some(response)
    }

    fn file(&self, file: &Prepared, headers: &HeaderMap, cache: &'static str) -> Response<Body> {
        let gzip = accepts_gzip(headers);
        let bytes = if gzip { &file.gzip } else { &file.identity };
        let mut response = Response::new(Body::full(bytes.clone()));
        let h = response.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(file.content_type),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
        h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
        if gzip {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        response
    }

    fn events(&self, method: &Method) -> Response<Body> {
        if method == Method::HEAD {
            return with_type(Response::new(Body::full("")), "text/event-stream");
        }
        let Some(seat) = self.viewers.join() else {
            return status(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many dashboard viewers\n",
            );
        };
        let stream = EventStream::new(self.source.clone(), self.samples.clone(), seat);
        let mut response = with_type(Response::new(Body::events(stream)), "text/event-stream");
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

fn with_type(mut response: Response<Body>, content_type: &'static str) -> Response<Body> {
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn status(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = with_type(Response::new(Body::full(text)), "text/plain");
    *response.status_mut() = code;
    response
}

/// Whether `Accept` names `text/html` (a browser's navigation; curl sends `*/*`).
fn accepts_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/html"))
}

/// Whether `Accept-Encoding` lists `gzip` with a non-zero weight (RFC 9110 §12.5.3). A `*`
/// is not taken: every browser names gzip.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let zero = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            coding.eq_ignore_ascii_case("gzip") && !zero
        })
}

#[cfg(test)]
mod tests;
