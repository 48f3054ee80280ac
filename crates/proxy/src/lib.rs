//! zipwire's compressing reverse proxy: an HTTP/1 server, over cleartext and TLS, in front of
//! origin servers that compresses their responses as they stream, and the socket-free rules
//! it follows.
//!
//! The rules are pure functions of headers, tested without sockets (pingora's
//! `decide_action` is the model); the server runs them in phases that
//! `docs/design/proxy.md` charts.
//!
//! # Brief overview
//!
//! - [`Server::bind`] and [`Server::run`] (or [`run_blocking`]) serve a [`ProxyConfig`]:
//!   round-robin [`Upstream`]s with down-marking and retries, keep-alive pools, limits,
//!   graceful shutdown, on cleartext and TLS listeners ([`Tls`]: certificates by SNI,
//!   reloaded through [`Server::tls_reloader`]). Errors know their [`Side`]
//!   ([`ProxyError::status`]); [`Server::stats`] gives the live [`Counters`],
//!   [`Server::throttle`] the switches a budget policy sets ([`Throttle`]).
//! - [`AcceptEncoding`] reads every `Accept-Encoding` line of a request, with q-values, and
//!   [`AcceptEncoding::negotiate`] picks a [`Coding`] among those offered ([`negotiate`]
//!   documents the rules, including how malformed elements are read).
//! - [`codings`]: each content-coding the proxy produces (gzip and deflate, zstd, brotli) is a
//!   module behind one interface, [`Encode`], that [`CompressBody`] drives: compress a call,
//!   flush when the upstream pauses, finish, step down, report its memory.
//! - [`RequestFacts::from_parts`] and [`ResponseFacts::from_parts`] read what the decision
//!   needs from the method, status and headers; the caller adds the CPU/rate [`Budget`].
//! - [`decide`] returns a [`Decision`]: compress, decompress upstream gzip for a client that
//!   cannot read it, or pass for a named [`Bypass`] reason. A response to HEAD gets the same
//!   decision as GET with [`Payload::Absent`].
//! - [`headers::apply`] performs a decision's header rewrite (`Content-Encoding`,
//!   `Content-Length`, `Accept-Ranges`, digests, weak `ETag`, one merged `Vary`) and says how
//!   the body is now framed; [`headers::strip_accept_encoding`] prepares the request for
//!   upstream in offload mode.
//! - [`Rules`] is the typed configuration they follow (nginx's `gzip_min_length`,
//!   `gzip_types`).
//!
//! # Where each phase lives
//!
//! The crate is laid out as the phases of a proxied request (pingora's phases are the
//! model), so that a new listener, protocol or coding plugs into one place:
//!
//! - `connection/`: listeners and the client protocols on them (the accept loop over every
//!   listener, TLS termination, HTTP/1, keep-alive and read timeouts, the admin listener).
//!   It knows nothing of compression.
//! - `exchange/`: one request's way to an origin and back (the request phases, forwarding
//!   filters, the request body, the upstream pool, the response body in flight and its
//!   access log line).
//! - `decide/`: the pure rules, functions of headers only ([`negotiate`], the facts,
//!   [`decide`], [`headers`]).
//! - `encode/`: what happens to a body that the rules say to recode ([`body`]) and the
//!   CPU/rate budget that bounds it ([`Throttle`]).
//!
//! [`config`] and [`settings`] are the typed configuration all of them read; [`Counters`]
//! what they count.
//!
//! # Why hand-written
//!
//! The `http` crate gives header maps but no content negotiation; the crates that negotiate
//! `Accept-Encoding` (inside tower-http, actix) are tied to their frameworks and do not
//! expose the pass reasons, the HEAD handling or the gunzip case a drop-in for nginx needs.
//!
//! # Example
//!
//! ```
//! use http::header::{HeaderMap, HeaderValue};
//! use http::{Method, StatusCode, Version};
//! use zipwire_proxy::{decide, headers, Coding, Decision, Payload, RequestFacts, ResponseFacts, Rules};
//!
//! let mut request = HeaderMap::new();
//! request.insert("accept-encoding", HeaderValue::from_static("br;q=1, gzip;q=0.8"));
//! let mut response = HeaderMap::new();
//! response.insert("content-type", HeaderValue::from_static("text/html; charset=utf-8"));
//! response.insert("etag", HeaderValue::from_static("\"v1\""));
//!
//! let req = RequestFacts::from_parts(&Method::GET, &request);
//! let resp = ResponseFacts::from_parts(StatusCode::OK, &response);
//! let decision = decide(&req, &resp, &Rules::default());
//! // The client's weights decide: br at 1 over gzip at 0.8.
//! assert_eq!(decision, Decision::Compress { coding: Coding::Br, payload: Payload::Transform });
//!
//! let framing = headers::apply(&decision, &mut response, Version::HTTP_11);
//! assert_eq!(framing, Some(headers::Framing::Chunked));
//! assert_eq!(response["content-encoding"], "br");
//! assert_eq!(response["etag"], "W/\"v1\"");
//! assert_eq!(response["vary"], "Accept-Encoding");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cache;
pub mod config;
mod connection;
mod counters;
mod decide;
mod encode;
mod error;
mod exchange;
pub mod settings;
#[cfg(test)]
mod test_bodies;

#[doc(hidden)]
pub mod fuzzing;

pub use decide::{headers, negotiate};
pub use encode::{body, codings};

pub use body::{
    BodyEncoder, BodyError, BodyMeter, CompressBody, DecompressBody, FlushPolicy, GatherGate,
};
pub use cache::{CacheCounters, CacheMode, CacheSettings, Clock};
pub use codings::{BrotliLevel, Encode, EncodeFailure, ZstdLevel};
pub use config::{ConfigError, Rules, TypePattern};
pub use connection::server::{raise_open_files, run_blocking, run_blocking_with, Hurry, Server};
pub use connection::tls::{check_certificates, TlsReloader};
pub use counters::{
    BypassCounters, CodingCounter, CodingCounters, Counters, ErrorCounters, GatherCounters,
    ProtocolCounters,
};
pub use decide::facts::{Budget, ContentEncoding, RequestFacts, ResponseFacts};
pub use decide::media::MediaType;
pub use decide::rules::{decide, Bypass, Decision, Payload, Vary};
pub use encode::throttle::Throttle;
pub use error::{ProxyError, Side};
pub use negotiate::{AcceptEncoding, Coding, Negotiated, QValue};
pub use settings::{
    BudgetLimits, CertificateFiles, ClientLimits, Compression, Forwarding, Http2Limits,
    ProxyConfig, Timeouts, Tls, Upstream, UpstreamRoots, UpstreamScheme, GATHER_MEMORY_PER_THREAD,
};
