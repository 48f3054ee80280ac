//! One request's exchange with an origin, from the request head to the last byte of the
//! response: the phases in [`service`] (pingora's `ProxyHttp` is the model), the request
//! head's checks in [`checks`], the request body in [`request_body`] and [`replay`], the
//! origins in [`upstream`] and [`read_timeout`] (reached through [`connector`]: TCP, or TLS
//! for `https://`), the body in flight to the client in [`outgoing`], the interim heads that
//! go before it in [`interim`], which requests open a tunnel in [`upgrade`] and the tunnel
//! itself in [`tunnel`].
//!
//! What the exchange leaves to its client connection it says through [`more`] (the flags a
//! response body raises) and [`tunnel::ClientLink`]; the connection side imports this
//! module, never the other way round. What to do with a response is asked of
//! `zipwire_rules::admit`; how its body is encoded, of [`crate::encode`].

pub(crate) mod checks;
pub(crate) mod connector;
pub(crate) mod interim;
pub(crate) mod more;
pub(crate) mod outgoing;
pub(crate) mod read_timeout;
pub(crate) mod replay;
pub(crate) mod request_body;
pub(crate) mod service;
pub(crate) mod tunnel;
pub(crate) mod upgrade;
pub(crate) mod upstream;
pub(crate) mod versions;
