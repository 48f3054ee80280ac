//! The connection side: listeners and the client protocols spoken on them.
//!
//! Everything here is about sockets and framing, never about what a response's body
//! becomes (the server only starts the helpers that decide it: the budget policy and the
//! cache's recompression worker): [`server`] accepts clients (the connection limit, graceful shutdown) from every
//! [`listener`]; [`tls`] terminates TLS on the TLS listeners (certificates by SNI, reloads,
//! the handshake timeout); [`http`] speaks HTTP/1.1 or HTTP/2 on one client's stream
//! (hyper's servers); [`keepalive`] bounds the gaps between requests, the reading of one
//! head and the client's taking of a response; [`stall`] resets HTTP/2 streams whose window
//! a client keeps shut; the interim heads (`103 Early Hints`) of `exchange::interim` are written beside
//! hyper on the connection's stream; [`graceful`] closes connections at shutdown; [`cork`] lets
//! the kernel know more of a response follows; [`admin`]
//! is the operators' listener (`/stats`, `/metrics`). Each request that a connection reads
//! is handed to [`crate::exchange`].

pub(crate) mod admin;
pub(crate) mod cork;
pub(crate) mod graceful;
pub(crate) mod http;
pub(crate) mod keepalive;
pub(crate) mod listener;
pub(crate) mod server;
pub(crate) mod stall;
pub(crate) mod tls;
