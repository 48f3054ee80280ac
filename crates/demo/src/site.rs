//! The demo's built-in origin: a small generated site served over HTTP/1.1.
//!
//! It behaves like the origin behind an offloading proxy: correct `Content-Type`,
//! `Content-Length`, a strong `ETag` and `Last-Modified`, conditional GET, HEAD, and never
//! any compression of its own (it ignores `Accept-Encoding`).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use zipwire_adapt::rng::SplitMix64;

use super::content;
use super::png;

/// The seed every demo site is generated from, so every run serves the same bytes.
const SEED: u64 = 0x7a69_7077_6972_6521;

/// Sent as `Last-Modified` on every resource: the content never changes.
const LAST_MODIFIED: &str = "Tue, 03 Mar 2026 09:00:00 GMT";

/// The path the demo requests to get the 404 page.
pub const MISSING_PATH: &str = "/articles/no-such-page.html";

/// One response the site can send.
#[derive(Clone, Debug)]
pub struct Resource {
    path: &'static str,
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
    etag: HeaderValue,
}

impl Resource {
    fn new(
        path: &'static str,
        status: StatusCode,
        content_type: &'static str,
        body: impl Into<Bytes>,
    ) -> Resource {
        let body = body.into();
        let etag = format!("\"{:08x}-{:x}\"", crc32fast::hash(&body), body.len());
        Resource {
            path,
            status,
            content_type,
            body,
            etag: HeaderValue::try_from(etag).expect("hex digits and quotes are a valid header"),
        }
    }

    /// The path a client requests to get this resource.
    pub fn path(&self) -> &'static str {
        self.path
    }

    /// The response status: 200, or 404 for the not-found page.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The `Content-Type` sent with it.
    pub fn content_type(&self) -> &'static str {
        self.content_type
    }

    /// The exact body bytes the origin sends.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The strong `ETag` sent with it.
    pub fn etag(&self) -> &HeaderValue {
        &self.etag
    }

    /// Whether a compressing proxy with the default rules should compress it (everything but
    /// the PNG).
    pub fn is_compressible(&self) -> bool {
        self.content_type != "image/png"
    }
}

/// Requests and body bytes the site has served, counted as it answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// Responses sent, of every status.
    pub requests: u64,
    /// Body bytes sent (HEAD and 304 responses send none).
    pub body_bytes: u64,
}

/// The paths of the two releases of the script the returning visitor sees
/// ([`Site::versions`]).
pub const VERSION_PATHS: [&str; 2] = ["/static/app-2.4.0.js", "/static/app-2.4.1.js"];

/// The generated site: its resources and what it has served.
#[derive(Debug)]
pub struct Site {
    resources: Vec<Resource>,
    /// Two consecutive releases of a script, outside the load's mix.
    versions: [Resource; 2],
    not_found: Resource,
    requests: AtomicU64,
    body_bytes: AtomicU64,
}

impl Site {
    /// Generates the site. Deterministic: every call returns the same bytes.
    pub fn generate() -> Site {
        let mut rng = SplitMix64::new(SEED);
        let ok = StatusCode::OK;
        let resources = vec![
            Resource::new(
                "/",
                ok,
                "text/html; charset=utf-8",
                content::home_page(&mut rng, 62),
            ),
            Resource::new(
                "/static/site.css",
                ok,
                "text/css; charset=utf-8",
                content::stylesheet(&mut rng, 30 * 1024),
            ),
            Resource::new(
                "/static/app.js",
                ok,
                "application/javascript; charset=utf-8",
                content::script_bundle(&mut rng, 100 * 1024),
            ),
            Resource::new(
                "/api/articles.json",
                ok,
                "application/json",
                content::api_articles(&mut rng, 50 * 1024),
            ),
            Resource::new(
                "/static/logo.svg",
                ok,
                "image/svg+xml",
                content::logo_svg(&mut rng),
            ),
            Resource::new(
                "/static/hero.png",
                ok,
                "image/png",
                png::gradient(32, 32, &mut rng),
            ),
        ];
        let versions = versions(&mut rng);
        let not_found = Resource::new(
            MISSING_PATH,
            StatusCode::NOT_FOUND,
            "text/html; charset=utf-8",
            content::not_found_page(),
        );
        Site {
            resources,
            versions,
            not_found,
            requests: AtomicU64::new(0),
            body_bytes: AtomicU64::new(0),
        }
    }

    /// The resources served with 200, in the order above: HTML, CSS, JS, JSON, SVG, PNG.
    pub fn resources(&self) -> &[Resource] {
        &self.resources
    }

    /// Two consecutive releases of the site's script at versioned paths
    /// ([`VERSION_PATHS`]): the second changes one module of the first and its version
    /// string, as a patch release does. Served by the site, but not part of [`Site::pages`].
    pub fn versions(&self) -> &[Resource; 2] {
        &self.versions
    }

    /// What the site answers for any unknown path (a 404 HTML page).
    pub fn not_found(&self) -> &Resource {
        &self.not_found
    }

    /// Every response a client can get: the resources, then the not-found page (requested at
    /// [`MISSING_PATH`]). The load generator cycles through these.
    pub fn pages(&self) -> impl Iterator<Item = &Resource> {
        self.resources
            .iter()
            .chain(std::iter::once(&self.not_found))
    }

    /// The resource served at `path` (the query is ignored), or the not-found page.
    pub fn lookup(&self, path: &str) -> &Resource {
        let path = path.split('?').next().unwrap_or(path);
        let path = if path == "/index.html" { "/" } else { path };
        self.resources
            .iter()
            .chain(&self.versions)
            .find(|resource| resource.path == path)
            .unwrap_or(&self.not_found)
    }

    /// What has been served so far.
    pub fn served(&self) -> Served {
        Served {
            requests: self.requests.load(Ordering::Relaxed),
            body_bytes: self.body_bytes.load(Ordering::Relaxed),
        }
    }

    /// The response to `request`, counted in [`Site::served`].
    pub fn respond<B>(&self, request: &Request<B>) -> Response<Full<Bytes>> {
        let response = self.answer(request);
        self.requests.fetch_add(1, Ordering::Relaxed);
        let sent = http_body::Body::size_hint(response.body())
            .exact()
            .unwrap_or(0);
        self.body_bytes.fetch_add(sent, Ordering::Relaxed);
        response
    }

    fn answer<B>(&self, request: &Request<B>) -> Response<Full<Bytes>> {
        let method = request.method();
        if method != Method::GET && method != Method::HEAD {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return response;
        }
        let resource = self.lookup(request.uri().path());
        let not_modified = resource.status == StatusCode::OK
            && request
                .headers()
                .get_all(header::IF_NONE_MATCH)
                .iter()
                .any(|value| etag_list_matches(value, &resource.etag));

        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = if not_modified {
            StatusCode::NOT_MODIFIED
        } else {
            resource.status
        };
        let headers = response.headers_mut();
        headers.insert(header::ETAG, resource.etag.clone());
        headers.insert(
            header::LAST_MODIFIED,
            HeaderValue::from_static(LAST_MODIFIED),
        );
        if not_modified {
            return response;
        }
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(resource.content_type),
        );
        headers.insert(
            header::CONTENT_LENGTH,
            HeaderValue::from(resource.body.len()),
        );
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static(if resource.status == StatusCode::OK {
                "public, max-age=300"
            } else {
                "no-cache"
            }),
        );
        if method == Method::GET {
            *response.body_mut() = Full::new(resource.body.clone());
        }
        response
    }
}

/// The two releases of the script (see [`Site::versions`]).
fn versions(rng: &mut SplitMix64) -> [Resource; 2] {
    let bundle = content::script_bundle(rng, 100 * 1024);
    let old = bundle.replace("v2026.03.1", "v2.4.0");
    // The patch release: its version, and one module rewritten in the middle.
    let mut new = bundle.replace("v2026.03.1", "v2.4.1");
    if let Some(at) = new
        .get(new.len() / 2..)
        .and_then(|rest| rest.find("__modules["))
    {
        let at = new.len() / 2 + at;
        new.insert_str(
            at,
            "__modules[9001]=function(t,e,n){\"use strict\";e.patched=function(a){return a&&a.trim()}};\n",
        );
    }
    let kind = "application/javascript; charset=utf-8";
    [
        Resource::new(VERSION_PATHS[0], StatusCode::OK, kind, old),
        Resource::new(VERSION_PATHS[1], StatusCode::OK, kind, new),
    ]
}

/// Weak comparison of an `If-None-Match` value against our strong tag (RFC 9110 §13.1.2).
fn etag_list_matches(value: &HeaderValue, etag: &HeaderValue) -> bool {
    let Ok(value) = value.to_str() else {
        return false;
    };
    let Ok(etag) = etag.to_str() else {
        return false;
    };
    value.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == etag
    })
}

/// Serves `site` on `listener` until `shutdown` completes, then closes every connection.
///
/// HTTP/1.1 with keep-alive; one task per connection.
///
/// # Errors
///
/// An error from `accept` other than a connection that was reset before it was accepted.
pub async fn serve_site<F>(listener: TcpListener, site: Arc<Site>, shutdown: F) -> io::Result<()>
where
    F: Future<Output = ()>,
{
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) if is_transient(&error) => continue,
                    Err(error) if out_of_descriptors(&error) => {
                        // The connection waits in the queue; closing the listener would
                        // reset every one there (and end the demo's origin).
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                    Err(error) => return Err(error),
                };
                // Latency matters more than packet count for small responses.
                let _ = stream.set_nodelay(true);
                let site = Arc::clone(&site);
                connections.spawn(async move {
                    let service = service_fn(move |request| {
                        std::future::ready(Ok::<_, Infallible>(site.respond(&request)))
                    });
                    // A client that goes away mid-request is not the site's problem.
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
    Ok(())
}

/// `EMFILE` or `ENFILE` (23 and 24 on Linux and the BSDs): no descriptor for the accepted
/// connection until one is closed.
fn out_of_descriptors(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(23 | 24))
}

fn is_transient(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}
