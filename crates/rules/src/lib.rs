//! zipwire's compression rules: whether and how a response is compressed, as pure functions
//! of headers, tested without sockets (pingora's `decide_action` is the model).
//!
//! # Brief overview
//!
//! - [`AcceptEncoding`] reads every `Accept-Encoding` line of a request, with q-values, and
//!   [`AcceptEncoding::negotiate`] picks a [`Coding`] among those offered ([`negotiate`]
//!   documents the rules, including how malformed elements are read).
//! - [`RequestFacts::from_parts`] and [`ResponseFacts::from_parts`] read what the decision
//!   needs from the method, status and headers.
//! - [`decide`] returns a [`Decision`]: compress, decompress upstream gzip for a client that
//!   cannot read it, or pass for a named [`Bypass`] reason. A response to HEAD gets the same
//!   decision as GET with [`Payload::Absent`].
//! - [`admit`] is the whole decision a server makes: [`decide`], then the compressing side's
//!   [`Gate`] (CPU and rate budget, memory) and whether it can gunzip. The streamed and the
//!   cached response paths both call it.
//! - [`headers::apply`] performs a decision's header rewrite (`Content-Encoding`,
//!   `Content-Length`, `Accept-Ranges`, digests, weak `ETag`, one merged `Vary`) and says how
//!   the body is now framed; [`forward`] holds the proxy's other pure header filters
//!   (hop-by-hop fields, `Via`, `Content-Length`).
//! - [`Rules`] is the typed configuration they follow (nginx's `gzip_min_length`,
//!   `gzip_types`); [`media`] and [`list`] parse the field values they share.
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
//! use zipwire_rules::{decide, headers, Coding, Decision, Payload, RequestFacts, ResponseFacts, Rules};
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

mod admit;
mod decide;
mod facts;
pub mod forward;
pub mod headers;
pub mod list;
pub mod media;
pub mod negotiate;
mod rules;

pub use admit::{admit, Gate, Grant, Path};
pub use decide::{decide, Bypass, Decision, Payload, Vary};
pub use facts::{Budget, ContentEncoding, RequestFacts, ResponseFacts};
pub use media::MediaType;
pub use negotiate::{AcceptEncoding, Coding, Negotiated, QValue};
pub use rules::{ConfigError, Rules, TypePattern, DEFAULT_CODINGS, DEFAULT_TYPES};
