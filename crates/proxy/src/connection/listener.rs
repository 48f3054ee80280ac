//! The client listeners, cleartext and TLS, accepted from by one loop.
//!
//! Every listener feeds the same accept loop, so that all of them share one connection limit,
//! one set of counters and one graceful shutdown (nginx and HAProxy count `worker_connections`
//! and `maxconn` over all their listeners alike).

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::task::Poll;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpListener, TcpStream};

use crate::connection::tls::Acceptor;
use crate::error::ProxyError;

/// One bound listener.
#[derive(Debug)]
pub(crate) struct Listener {
    tcp: TcpListener,
    addr: SocketAddr,
    /// `Some` on a TLS listener.
    tls: Option<Acceptor>,
}

impl Listener {
    /// Binds `addr`; clients on it speak TLS when `tls` is given.
    ///
    /// # Errors
    ///
    /// [`ProxyError::Bind`] when the address cannot be bound.
    pub(crate) async fn bind(addr: SocketAddr, tls: Option<Acceptor>) -> Result<Self, ProxyError> {
        let bind_error = |source| ProxyError::Bind { addr, source };
        let tcp = bind_tcp(addr).map_err(bind_error)?;
        let addr = tcp.local_addr().map_err(bind_error)?;
        Ok(Listener { tcp, addr, tls })
    }

    /// The address bound (with the port the system picked for port 0).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The TLS side, on a TLS listener.
    pub(crate) fn tls(&self) -> Option<&Acceptor> {
        self.tls.as_ref()
    }
}

/// Binds a listening socket at `addr` as tokio's `TcpListener::bind` does (address reuse, a
/// backlog of 1024), except that an IPv6 address is bound IPv6-only: `[::]:80` then takes
/// IPv6 clients and leaves port 80 on IPv4 to a `0.0.0.0:80` listener beside it, as nginx
/// binds them. Otherwise, on Linux's default `bindv6only = 0`, `[::]:80` takes both families
/// and the pair (docs/config.md's dual-stack example) cannot start.
pub(crate) fn bind_tcp(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

/// Every listener of a server.
#[derive(Debug)]
pub(crate) struct Listeners {
    all: Vec<Listener>,
    /// Where the next [`Listeners::accept`] starts looking, so that a busy listener does not
    /// starve the others.
    next: usize,
}

impl Listeners {
    /// The listeners, in the order given.
    pub(crate) fn new(all: Vec<Listener>) -> Listeners {
        Listeners { all, next: 0 }
    }

    /// Every listener.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Listener> {
        self.all.iter()
    }

    /// The next client of any listener, with the listener that accepted it. Cancel-safe, as
    /// each listener's `poll_accept` is.
    pub(crate) async fn accept(&mut self) -> (&Listener, io::Result<(TcpStream, SocketAddr)>) {
        let count = self.all.len();
        let start = self.next;
        let (index, accepted) = poll_fn(|cx| {
            for offset in 0..count {
                let index = (start + offset) % count;
                if let Poll::Ready(accepted) = self.all[index].tcp.poll_accept(cx) {
                    return Poll::Ready((index, accepted));
                }
            }
            Poll::Pending
        })
        .await;
        self.next = (index + 1) % count.max(1);
        (&self.all[index], accepted)
    }
}
