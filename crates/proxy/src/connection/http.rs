//! One client connection: the HTTP protocol spoken on a client's byte stream, whatever
//! listener accepted it, and the requests it reads handed to the exchange.
//!
//! The connection is counted (open and total) while it lives, and the time it may spend
//! between requests and on a request head is bounded by its [`Phases`].

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use http::header::{HeaderValue, STRICT_TRANSPORT_SECURITY};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::Watcher;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, debug_span, Instrument};

use crate::connection::cork::MoreToCome;
use crate::connection::keepalive::{Phases, ServedBody, TimedStream};
use crate::counters::Counters;
use crate::exchange::service::Proxy;

/// One client connection's share of the server.
pub(crate) struct Connection {
    pub(crate) proxy: Arc<Proxy>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) phases: Phases,
    pub(crate) peer: SocketAddr,
    /// The `Strict-Transport-Security` value set on every response: only on TLS listeners
    /// (RFC 6797 §7.2), when configured.
    pub(crate) hsts: Option<HeaderValue>,
    /// Held while the connection is open: the connection limit.
    pub(crate) _permit: OwnedSemaphorePermit,
}

impl Connection {
    /// The task serving the connection until the client closes it, it fails, or shutdown
    /// closes it.
    ///
    /// `stream` is the client's byte stream (a TCP socket, or TLS over one); `more` is the
    /// flag its [`CorkedStream`](crate::connection::cork::CorkedStream) reads, which the
    /// response body raises while more of it follows; `graceful` closes the connection
    /// when the server shuts down.
    pub(crate) fn serve<S>(
        self,
        http: &http1::Builder,
        graceful: Watcher,
        stream: S,
        more: MoreToCome,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let proxy = self.proxy.clone();
        let peer = self.peer;
        let phases = self.phases.clone();
        let hsts = self.hsts.clone();
        let stream = TimedStream::new(stream, phases.clone());
        let service = service_fn(move |request: Request<Incoming>| {
            let proxy = proxy.clone();
            let more = more.clone();
            let served = phases.serve();
            let hsts = hsts.clone();
            let span =
                debug_span!("request", method = %request.method(), path = %request.uri().path());
            async move {
                let mut response = proxy.handle(request, peer, more).await;
                if let Some(value) = hsts {
                    response
                        .headers_mut()
                        .insert(STRICT_TRANSPORT_SECURITY, value);
                }
                Ok::<_, Infallible>(response.map(|body| ServedBody::new(body, served)))
            }
            .instrument(span)
        });
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        Counters::bump(&self.counters.connections);
        Counters::bump(&self.counters.active_connections);
        async move {
            debug!("accepted");
            match connection.await {
                Ok(()) => debug!("closed"),
                // Parse errors, timeouts and aborted bodies end here; hyper has already
                // answered what could be answered (400, 431).
                Err(error) => {
                    self.counters.errors.add_connection_error(&error);
                    debug!(%error, "connection ended with an error");
                }
            }
            // `self` is dropped here, or where the task is aborted at the end of shutdown.
            drop(self);
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        Counters::drop_one(&self.counters.active_connections);
    }
}
