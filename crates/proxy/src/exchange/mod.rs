//! One request's exchange with an origin, from the request head to the last byte of the
//! response: the phases in [`service`] (pingora's `ProxyHttp` is the model), the request
//! head's checks in [`checks`], the forwarding
//! filters in [`forward`], the request body in [`request_body`] and [`replay`], the origins
//! in [`upstream`] and [`read_timeout`] (reached through [`connector`]: TCP, or TLS for
//! `https://`), the body in flight to the client in [`outgoing`], and which requests open a
//! tunnel in [`upgrade`].
//!
//! What to do with a response is asked of [`crate::decide`]; how its body is encoded, of
//! [`crate::encode`].

pub(crate) mod checks;
pub(crate) mod connector;
pub(crate) mod outgoing;
pub(crate) mod read_timeout;
pub(crate) mod replay;
pub(crate) mod request_body;
pub(crate) mod service;
pub(crate) mod upgrade;
pub(crate) mod upstream;
pub(crate) mod versions;
