//! Graceful shutdown of client connections: when the server stops, each connection finishes
//! what it is serving and closes (HTTP/1: after the response in flight; HTTP/2: GOAWAY, then
//! the open streams finish, RFC 9113 §6.8). An idle HTTP/2 connection closes the same way.
//!
//! hyper_util's `GracefulShutdown` watches only connections without upgrades, and the HTTP/1
//! connection here has them (the WebSocket pass-through), so the same few lines are kept here
//! for any connection that can start its own graceful shutdown ([`Graceful`]).

use std::future::Future;
use std::pin::Pin;

use hyper::rt::{Read, Write};
use hyper::server::conn::{http1, http2};
use hyper::service::HttpService;
use tokio::sync::watch;

/// How a connection told to close ([`Watcher::watch`]'s `idle`) closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Close {
    /// HTTP/2's GOAWAY, then the open streams finish (RFC 9113 §6.8).
    Gracefully,
    /// At once, dropping whatever it serves: a client that abuses the connection (the rapid reset
    /// of CVE-2023-44487). hyper's graceful GOAWAY waits for the client to answer a PING, and
    /// meanwhile takes new streams: a client that never answered would keep resetting requests on
    /// it for as long as it liked.
    Now,
}

/// The server's side: signals every watched connection and waits for them to end.
#[derive(Debug)]
pub(crate) struct Shutdown {
    tx: watch::Sender<()>,
}

/// A connection's side, taken when it is accepted.
#[derive(Debug)]
pub(crate) struct Watcher {
    rx: watch::Receiver<()>,
}

impl Shutdown {
    /// Nothing signalled yet.
    pub(crate) fn new() -> Shutdown {
        Shutdown {
            tx: watch::channel(()).0,
        }
    }

    /// A watcher for a new connection; it counts as open until dropped.
    pub(crate) fn watcher(&self) -> Watcher {
        Watcher {
            rx: self.tx.subscribe(),
        }
    }

    /// Connections watched now.
    pub(crate) fn count(&self) -> usize {
        self.tx.receiver_count()
    }

    /// Signals every watched connection, then waits until all of them have ended.
    pub(crate) async fn shutdown(self) {
        self.tx.send_replace(());
        self.tx.closed().await;
    }
}

impl Watcher {
    /// Completes once the server has signalled shutdown (at once if it did before).
    pub(crate) async fn signalled(&mut self) {
        // An error: the server is gone, which is a shutdown too.
        let _ = self.rx.changed().await;
    }

    /// Runs `connection` to its end, starting its graceful shutdown when the server signals
    /// (also when it did so before this call) or when `idle` completes (an HTTP/2
    /// connection idle too long closes with GOAWAY); when `idle` says [`Close::Now`], the
    /// connection is dropped instead, which closes it.
    ///
    /// The connection comes boxed: an `async fn` keeps an argument it pins in two places of
    /// its state, so with hyper's HTTP/1 connection (880 bytes) passed by value this future
    /// would be 2,120 bytes for the life of every client connection; boxed, the connection is
    /// held once.
    pub(crate) async fn watch<C, E>(
        mut self,
        mut connection: Pin<Box<C>>,
        idle: impl Future<Output = Close>,
    ) -> Result<(), E>
    where
        C: Graceful + Future<Output = Result<(), E>>,
    {
        let close = tokio::select! {
            result = connection.as_mut() => return result,
            // An error: the server is gone, which is a shutdown too.
            _ = self.rx.changed() => Close::Gracefully,
            close = idle => close,
        };
        if close == Close::Now {
            return Ok(());
        }
        connection.as_mut().start_shutdown();
        connection.await
    }
}

/// A connection that can close gracefully.
pub(crate) trait Graceful {
    /// Stops taking requests; what is being served finishes.
    fn start_shutdown(self: Pin<&mut Self>);
}

impl<I, S, B> Graceful for http1::UpgradeableConnection<I, S>
where
    S: HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: Read + Write + Unpin + Send + 'static,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn start_shutdown(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B, E> Graceful for http2::Connection<I, S, E>
where
    S: HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: Read + Write + Unpin + 'static,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    fn start_shutdown(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}
