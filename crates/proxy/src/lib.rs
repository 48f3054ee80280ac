//! zipwire's compressing reverse proxy: an HTTP/1.1 and HTTP/2 server, over cleartext and
//! TLS, in front of origin servers, that compresses their responses as they stream and keeps
//! a shared cache of them compressed once at the best level.
//!
//! # The crates it is made of
//!
//! - `zipwire-rules`: the decision, pure functions of headers tested without sockets
//!   (pingora's `decide_action` is the model). [`admit`] is where it is decided whether to
//!   compress a response, for both the streamed and the cached path.
//! - `zipwire-codings` ([`codings`]): each content-coding (gzip and deflate, zstd, brotli)
//!   behind one interface, [`Encode`], with its memory measured.
//! - `zipwire-cache`: the shared HTTP cache (RFC 9111): keys, storage, policy, compressed
//!   variants, fill coalescing, and the worker that recompresses stored variants at the best
//!   level (`zipwire_cache::recompress`).
//! - `zipwire-adapt`: the CPU/rate budget and the memory gate; [`Throttle`] holds the
//!   switches the budget sets.
//!
//! This crate re-exports the rules' and codings' types at its root, so that a user of the
//! proxy names them as the proxy's own.
//!
//! # Brief overview
//!
//! - [`Server::bind`] and [`Server::run`] (or [`run_blocking`]) serve a [`ProxyConfig`]:
//!   round-robin [`Upstream`]s with down-marking and retries, keep-alive pools, limits,
//!   graceful shutdown, on cleartext and TLS listeners ([`Tls`]: certificates by SNI,
//!   reloaded through [`Server::tls_reloader`]). Errors know their [`Side`]
//!   ([`ProxyError::status`]); [`Server::stats`] gives the live [`Counters`],
//!   [`Server::throttle`] the switches a budget policy sets ([`Throttle`]).
//! - [`AcceptEncoding`], [`RequestFacts`], [`ResponseFacts`], [`decide`], [`admit`],
//!   [`headers`] and [`Rules`] are the rules (see `zipwire-rules`).
//! - [`CompressBody`] drives an [`Encode`] over a streaming body: compress a call, flush when
//!   the upstream pauses, finish, step down, report its memory; [`DecompressBody`] decodes
//!   upstream gzip for a client that cannot.
//!
//! # Where each phase lives
//!
//! The crate is laid out as the phases of a proxied request (pingora's phases are the
//! model), so that a new listener, protocol or coding plugs into one place;
//! `docs/design/proxy.md` charts them:
//!
//! 1. `connection/`: listeners and the client protocols on them (the accept loop over every
//!    listener, TLS termination, HTTP/1.1 and HTTP/2, keep-alive and read timeouts, the admin
//!    listener). It never looks at what a response's body becomes; its server starts the
//!    helpers that do (the budget policy, the recompression worker).
//! 2. `cache/`, the cache phase: a request the cache may answer gets the response made from
//!    the stored entry, with the coding [`admit`] chooses for this client; a miss goes on.
//! 3. `exchange/`: one request's way to an origin and back (the request phases, the request
//!    body, the upstream pool, the response filter that calls [`admit`], the response body
//!    in flight and its access log line).
//! 4. `encode/`: what happens to a body that the rules say to recode ([`body`]) and the
//!    budget policy that bounds it.
//!
//! [`settings`] is the whole proxy's typed configuration ([`ProxyConfig`]); the compression
//! rules within it are [`Rules`]. [`Counters`] is what the phases count.
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

mod budget;
mod cache;
mod connection;
mod counters;
mod dictionary;
mod encode;
mod error;
mod exchange;
pub mod header_rules;
pub mod settings;
#[cfg(test)]
mod test_bodies;

#[doc(hidden)]
pub mod fuzzing;

pub use encode::body;
pub use zipwire_codings as codings;
pub use zipwire_rules::{forward, headers, negotiate};

pub use body::{
    BodyEncoder, BodyError, BodyMeter, CompressBody, DecompressBody, FlushPolicy, GatherGate,
};
pub use connection::server::{raise_open_files, run_blocking, run_blocking_with, Hurry, Server};
pub use connection::tls::{check_certificates, TlsReloader};
pub use counters::{
    BypassCounters, CodingCounter, CodingCounters, Counters, ErrorCounters, GatherCounters,
    ProtocolCounters,
};
pub use dictionary::{DictionaryCounters, DictionarySettings, PathRule as DictionaryPathRule};
pub use error::{ProxyError, Side};
pub use header_rules::{HeaderRules, HeaderSettings};
pub use settings::{
    BudgetLimits, CertificateFiles, ClientLimits, Compression, Forwarding, Http2Limits,
    ProxyConfig, Timeouts, Tls, Upstream, UpstreamRoots, UpstreamScheme, GATHER_MEMORY_PER_THREAD,
};
pub use zipwire_adapt::Throttle;
pub use zipwire_cache::{CacheCounters, CacheMode, CacheSettings, Clock};
pub use zipwire_codings::{BrotliLevel, Encode, EncodeFailure, ZstdLevel};
pub use zipwire_dictionary::{DictCoding, Limits as DictionaryLimits, Mode as DictionaryMode};
pub use zipwire_rules::{
    admit, decide, AcceptEncoding, Budget, Bypass, Coding, ConfigError, ContentEncoding, Decision,
    Gate, Grant, MediaType, Negotiated, Path, Payload, QValue, RequestFacts, ResponseFacts, Rules,
    TypePattern, Vary,
};
