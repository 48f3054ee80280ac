//! The admin listener's connection loop, shared by every program that has one (the proxy's
//! `admin`, the tunnel's `--admin`), and a minimal admin for a program that has no pages of
//! its own: `/stats` from the program, the rest from its [`Dashboard`].
//!
//! An admin listener should listen on a loopback or management address only, as it answers
//! anyone who connects. Three guards hold wherever it listens:
//!
//! - at most [`MAX_CONNECTIONS`] are served at once (more wait in the listen queue), so that
//!   idle ones cannot take the file descriptors the program needs for its real work;
//! - a request head not read within [`HEAD_TIMEOUT`] closes the connection, so a client that
//!   sends a partial head and waits holds no task for good, and a write the client takes
//!   nothing of within [`SEND_TIMEOUT`] does too (`send_timeout.rs`: a dashboard viewer that
//!   stopped reading gives back its seat);
//! - on a connection to a loopback address (a wildcard listener takes those too) it answers
//!   only requests whose `Host` is a loopback name or an IP
//!   address: a web page the operator's browser opens on a name that its DNS then points at
//!   127.0.0.1 ("DNS rebinding") would otherwise be same-origin with it and could read the
//!   counters (and, on the proxy, purge the cache).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, warn};
use zipwire_adapt::LogThrottle;

use crate::body::Body;
use crate::routes::{Dashboard, Source};
use crate::send_timeout::{SendTimeout, SEND_BUFFER, SEND_TIMEOUT};

/// Admin connections served at once; more wait in the listen queue.
pub const MAX_CONNECTIONS: usize = 32;

/// How long an admin listener waits for a request head (and for the next one on an idle
/// keep-alive connection).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `/stats` (the `stats` source's JSON) and `dashboard`'s pages on `listener` over
/// HTTP/1.1 until the task is dropped, under [`serve_with`]'s guards.
pub async fn serve(listener: TcpListener, stats: Arc<dyn Source>, dashboard: Dashboard) {
    serve_with(listener, move |request| {
        respond(stats.as_ref(), &dashboard, request)
    })
    .await;
}

/// How often a failing accept (out of descriptors, say) is logged.
const ACCEPT_WARN_EVERY: Duration = Duration::from_secs(10);

/// Serves `answer`'s responses on `listener` over HTTP/1.1 until the task is dropped, with
/// the module's guards: a connection limit, a head and a send timeout, and a `421` to a request
/// on a loopback listener whose `Host` is not local.
pub async fn serve_with<F>(listener: TcpListener, answer: F)
where
    F: Fn(&Request<Incoming>) -> Response<Body> + Clone + Send + Sync + 'static,
{
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    // Out of descriptors, accept fails every pause: one warning per interval, with a count.
    let mut failing = LogThrottle::new(ACCEPT_WARN_EVERY);
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                if let Some(held) = failing.due(std::time::Instant::now()) {
                    warn!(%error, failed_since_last_warning = held, "admin accept failed");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let answer = answer.clone();
        // Decided per connection, by the address it reached, not by the listener's: a wildcard
        // listener (`0.0.0.0`) takes loopback connections too, which a rebound name can make.
        let loopback = stream
            .local_addr()
            .is_ok_and(|addr| addr.ip().to_canonical().is_loopback());
        tokio::spawn(async move {
            let _permit = permit;
            let service = service_fn(move |request: Request<Incoming>| {
                let response = if loopback && !local_host(&request) {
                    text(
                        StatusCode::MISDIRECTED_REQUEST,
                        "421 Misdirected Request: this listener answers Host localhost or an IP address\n",
                    )
                } else {
                    answer(&request)
                };
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = socket2::SockRef::from(&stream).set_send_buffer_size(SEND_BUFFER);
            let stream = SendTimeout::new(stream, SEND_TIMEOUT);
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(error) = served {
                debug!(%error, %peer, "admin connection ended");
            }
        });
    }
}

/// Whether the request's `Host` (none counts as local) is a loopback name or an IP address,
/// as a client of a loopback listener names it; any other name is one a browser resolved to
/// this address, possibly at a web page's bidding.
fn local_host<B>(request: &Request<B>) -> bool {
    let Some(host) = request.headers().get(header::HOST) else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        // `[::1]:9901`, `127.0.0.1:9901`, `localhost:9901`.
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    name == "localhost" || name.ends_with(".localhost") || bare.parse::<std::net::IpAddr>().is_ok()
}

/// A plain-text answer with `status`.
fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

fn respond<B>(
    stats: &dyn Source,
    dashboard: &Dashboard,
    request: &http::Request<B>,
) -> Response<Body> {
    let page = |code: StatusCode, content_type: &'static str, body: String| {
        let mut response = Response::new(Body::full(body));
        *response.status_mut() = code;
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    };
    if request.method() != Method::GET && request.method() != Method::HEAD {
        // RFC 9110 §15.5.6: a 405 says which methods the resource takes.
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "405 Method Not Allowed\n");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    if request.uri().path() == "/stats" {
        return page(StatusCode::OK, "application/json", stats.sample());
    }
    dashboard.respond(request).unwrap_or_else(|| {
        text(
            StatusCode::NOT_FOUND,
            "404 Not Found: try /stats or /dashboard\n",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_host(host: Option<&str>) -> Request<()> {
        let mut request = Request::builder().uri("/stats");
        if let Some(host) = host {
            request = request.header(header::HOST, host);
        }
        request.body(()).expect("valid")
    }

    #[test]
    fn only_loopback_names_and_addresses_are_local() {
        for local in [
            None,
            Some("localhost"),
            Some("LOCALHOST.:9901"),
            Some("app.localhost"),
            Some("127.0.0.1:9901"),
            Some("[::1]:9901"),
            Some("10.0.0.7"),
        ] {
            assert!(local_host(&with_host(local)), "{local:?}");
        }
        for foreign in [
            Some("evil.example"),
            Some("evil.example:9901"),
            Some("localhost.evil"),
        ] {
            assert!(!local_host(&with_host(foreign)), "{foreign:?}");
        }
    }
}
