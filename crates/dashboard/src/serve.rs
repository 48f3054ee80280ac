//! A minimal admin listener, for a program that has none of its own: `/stats` from the
//! program, the rest from its [`Dashboard`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http::{header, HeaderValue, Method, Response, StatusCode};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::body::Body;
use crate::routes::{Dashboard, Source};

/// Serves `/stats` (the `stats` source's JSON) and `dashboard`'s pages on `listener` over
/// HTTP/1.1 until the task is dropped. It answers anyone who connects: bind it to loopback or
/// a management address.
pub async fn serve(listener: TcpListener, stats: Arc<dyn Source>, dashboard: Dashboard) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                warn!(%error, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (stats, dashboard) = (stats.clone(), dashboard.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
                let response = respond(stats.as_ref(), &dashboard, &request);
                async move { Ok::<_, Infallible>(response) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(error) = served {
                debug!(%error, %peer, "admin connection ended");
            }
        });
    }
}

fn respond<B>(
    stats: &dyn Source,
    dashboard: &Dashboard,
    request: &http::Request<B>,
) -> Response<Body> {
    let text = |code: StatusCode, content_type: &'static str, body: String| {
        let mut response = Response::new(Body::full(body));
        *response.status_mut() = code;
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        response
    };
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "405 Method Not Allowed\n".to_owned(),
        );
    }
    if request.uri().path() == "/stats" {
        return text(StatusCode::OK, "application/json", stats.sample());
    }
    dashboard.respond(request).unwrap_or_else(|| {
        text(
            StatusCode::NOT_FOUND,
            "text/plain",
            "404 Not Found: try /stats or /dashboard\n".to_owned(),
        )
    })
}
