//! One client connection: the HTTP protocol spoken on a client's byte stream, whatever
//! listener accepted it, and the requests it reads handed to the exchange.
//!
//! The connection is counted (open and total) while it lives, and the time it may spend
//! between requests and on a request head is bounded by its [`Phases`].

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, debug_span, Instrument};

use crate::connection::cork::MoreToCome;
use crate::connection::keepalive::{Phases, ServedBody, TimedStream};
use crate::connection::tunnel::{ClientLink, TunnelSlot};
use crate::counters::Counters;
use crate::exchange::service::Proxy;

/// One client connection's share of the server.
pub(crate) struct Connection {
    pub(crate) proxy: Arc<Proxy>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) phases: Phases,
    pub(crate) peer: SocketAddr,
    /// Held while the connection is open: the connection limit.
    pub(crate) _permit: OwnedSemaphorePermit,
}

impl Connection {
    /// The task serving the connection until the client closes it, it fails, or shutdown
    /// closes it.
    ///
    /// `stream` is the client's byte stream (a TCP socket, or TLS over one); `more` is the
    /// flag its [`CorkedStream`](crate::connection::cork::CorkedStream) reads, which the
    /// response body raises while more of it follows.
    pub(crate) fn serve<S>(
        self,
        http: &auto::Builder<TokioExecutor>,
        graceful: &GracefulShutdown,
        stream: S,
        more: MoreToCome,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let proxy = self.proxy.clone();
        let peer = self.peer;
        let phases = self.phases.clone();
        let stream = TimedStream::new(stream, phases.clone());
        // Where a request that upgrades the connection leaves its tunnel, run below once
        // hyper hands the connection over.
        let tunnel = TunnelSlot::default();
        let link = tunnel.clone();
        let service = service_fn(move |request: Request<Incoming>| {
            let proxy = proxy.clone();
            let more = more.clone();
            let client = ClientLink::new(&phases, &link);
            let served = phases.serve();
            let span =
                debug_span!("request", method = %request.method(), path = %request.uri().path());
            async move {
                let response = proxy.handle(request, peer, more, client).await;
                Ok::<_, Infallible>(response.map(|body| ServedBody::new(body, served)))
            }
            .instrument(span)
        });
        let connection = graceful.watch(
            http.serve_connection_with_upgrades(TokioIo::new(stream), service)
                .into_owned(),
        );
        Counters::bump(&self.counters.connections);
        Counters::bump(&self.counters.active_connections);
        async move {
            debug!("accepted");
            match connection.await {
                Ok(()) => debug!("closed"),
                // Parse errors, timeouts and aborted bodies end here; hyper has already
                // answered what could be answered (400, 431).
                Err(error) => {
                    self.counters.errors.add_connection_error(error.as_ref());
                    debug!(%error, "connection ended with an error");
                }
            }
            // An upgraded connection lives on as a tunnel, still holding its permit.
            tunnel.run().await;
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
