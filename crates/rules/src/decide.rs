//! The compression decision: a pure function of the request, the response headers and the
//! [`Rules`], as pingora's `decide_action`.
//!
//! # Order of the checks
//!
//! What the response itself rules out comes first, so that the reason reported is the one
//! that holds for every client: status, `Content-Range`, response `no-transform`, an existing
//! `Content-Encoding`, multipart, type, event stream, length. Then what depends on this
//! request: request `no-transform`, `Accept-Encoding`, and last the budget, so that a spent
//! budget is only reported for a response that would otherwise have been compressed.
//!
//! # Vary
//!
//! A response whose form depends on `Accept-Encoding` must say so (RFC 9110 §12.5.5), also when
//! this client gets it uncompressed, or a shared cache could serve gzip to a client that cannot
//! read it (or identity to all). [`Decision::Pass`] therefore carries a [`Vary`]: `Add` for a
//! compressible response passed because of this request (not accepted, request
//! `no-transform`, budget), for upstream gzip passed to a client that accepts it (another
//! client would get it decompressed), for a response the upstream sent in another coding
//! (it was negotiated on `Accept-Encoding`, said so or not), and for 304, which must repeat the `Vary` of the 200 it
//! stands for (§15.4.5). nginx's `gzip_vary` does the same for compressible responses.
//!
//! # 304
//!
//! A 304 must also carry the `ETag` its 200 would (§15.4.5), and a cache selects the stored
//! response to update by it (RFC 9111 §4.3.4): when the 200 would have been recoded for this
//! request, its `ETag` was weakened, so the 304's is too ([`Vary::AddWeakEtag`]). A 304 often
//! omits `Content-Type` and `Content-Encoding` (only the validator fields are required), so
//! what it omits counts as compressible, and a 304 without `Content-Encoding` to a client that
//! does not take gzip may stand for upstream gzip that was decoded (whatever its type, and for
//! an HTTP/1.0 client too). What it does say (a type not compressed, to a client that takes
//! gzip; another coding; `no-transform`) rules the weakening out. A weak `ETag` still matches the strong one
//! in the weak comparison that `If-None-Match` uses (RFC 9110 §13.1.2), so a 304 weakened for
//! a 200 that was not recoded costs the cache little; but a stored response that takes the
//! weak tag loses `If-Range` (a strong comparison). So a request whose `If-None-Match` names
//! strong tags alone, which only a response that was not recoded carries, keeps its 304's
//! `ETag` strong ([`RequestFacts::holds_strong_tags`]).
//!
//! # HEAD
//!
//! A HEAD response carries the header fields a GET would (RFC 9110 §9.3.2), so HEAD gets the
//! same decision as GET, with [`Payload::Absent`]: rewrite the headers, encode nothing (an
//! empty gzip stream would be a body).

use std::fmt;

use crate::facts::{Budget, ContentEncoding, RequestFacts, ResponseFacts};
use crate::negotiate::{Coding, Negotiated};
use crate::rules::Rules;

/// What to do with a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Encode in `coding`: rewrite the headers with
    /// [`rewrite_for_compression`](crate::headers::rewrite_for_compression), then encode the
    /// body if there is one.
    Compress {
        /// The coding to send.
        coding: Coding,
        /// Whether there is a body to encode.
        payload: Payload,
    },
    /// Decode upstream's gzip, br or zstd for a client that does not accept it (nginx
    /// `gunzip`, for the three codings the proxy also produces): rewrite
    /// the headers with
    /// [`rewrite_for_decompression`](crate::headers::rewrite_for_decompression), then decode
    /// the body if there is one.
    Decompress {
        /// Whether there is a body to decode.
        payload: Payload,
    },
    /// Pass the response on as it is, except for `Vary`.
    Pass {
        /// Why it is not transformed.
        reason: Bypass,
        /// Whether to merge `Vary: Accept-Encoding`
        /// ([`add_vary_accept_encoding`](crate::headers::add_vary_accept_encoding)).
        vary: Vary,
    },
}

impl Decision {
    /// Why the body is not transformed, for the bypass counters: the reason of a
    /// [`Decision::Pass`], [`Bypass::Head`] for a header-only transform, `None` when the body
    /// is encoded or decoded.
    pub fn bypass(&self) -> Option<Bypass> {
        match *self {
            Decision::Pass { reason, .. } => Some(reason),
            Decision::Compress {
                payload: Payload::Absent,
                ..
            }
            | Decision::Decompress {
                payload: Payload::Absent,
            } => Some(Bypass::Head),
            Decision::Compress { .. } | Decision::Decompress { .. } => None,
        }
    }
}

/// Whether a transformed response has a body to transform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// Transform the body.
    Transform,
    /// A response to HEAD: headers only.
    Absent,
}

/// Whether a passed response gets `Vary: Accept-Encoding` (and, for a 304, a weak `ETag`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vary {
    /// Merge `Accept-Encoding` into `Vary`.
    Add,
    /// Merge `Accept-Encoding` into `Vary` and weaken the `ETag`: a 304 standing for a 200
    /// that would have been recoded (see the module documentation).
    AddWeakEtag,
    /// Leave `Vary` as upstream sent it.
    Unchanged,
}

/// Why a response body is not compressed or decompressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bypass {
    /// The client accepts none of the offered codings (or refuses identity and gzip alike).
    NotAccepted,
    /// A response to HEAD: headers are rewritten as for GET, there is no body. Only reported by
    /// [`Decision::bypass`]; [`decide`] never passes because of it.
    Head,
    /// The status has no body or must not be transformed: 1xx, 204, 205, 206, 304, and codes
    /// outside 200-599.
    Status,
    /// A partial representation (`Content-Range`): its offsets refer to the identity bytes.
    ContentRange,
    /// Upstream already applied a coding: one the proxy does not decode, several, or gzip, br
    /// or zstd that
    /// this client accepts.
    AlreadyEncoded,
    /// `Cache-Control: no-transform` on the request or the response (RFC 9111 §5.2.1.6,
    /// §5.2.2.6).
    NoTransform,
    /// A `multipart/*` type: byte ranges refer to identity offsets, and streamed parts
    /// (`x-mixed-replace`) must reach the client one by one.
    Multipart,
    /// The media type is missing, unparsable, or not in [`Rules::types`]. A missing
    /// `Content-Type` is never compressed, as in nginx: the proxy cannot know what it is.
    Type,
    /// The known `Content-Length` is below [`Rules::min_length`], or zero.
    TooSmall,
    /// The CPU or rate budget is spent ([`Budget::Exhausted`]).
    Budget,
    /// `text/event-stream` while the body layer cannot flush each event
    /// ([`Rules::event_stream_flush`] is off).
    EventStream,
    /// `application/grpc` and its `+proto`, `+json`… forms: gRPC compresses each message
    /// itself (`grpc-encoding`) and its clients read no HTTP content coding, whatever
    /// [`Rules::types`] says.
    Grpc,
    /// An HTTP/1.0 client (nginx's `gzip_http_version 1.1`): its response ends where the
    /// connection closes, and a body cut short upstream would end with a clean close, so a
    /// compressed body, which loses upstream's `Content-Length`, would look complete.
    Http10,
}

impl Bypass {
    /// How many reasons there are.
    pub const COUNT: usize = 13;

    /// Every reason, in the order the proxy's counters report them.
    pub const ALL: [Bypass; Bypass::COUNT] = [
        Bypass::NotAccepted,
        Bypass::Head,
        Bypass::Status,
        Bypass::ContentRange,
        Bypass::AlreadyEncoded,
        Bypass::NoTransform,
        Bypass::Multipart,
        Bypass::Type,
        Bypass::TooSmall,
        Bypass::Budget,
        Bypass::EventStream,
        Bypass::Grpc,
        Bypass::Http10,
    ];

    /// The reason's place in [`Bypass::ALL`].
    pub fn index(self) -> usize {
        match self {
            Bypass::NotAccepted => 0,
            Bypass::Head => 1,
            Bypass::Status => 2,
            Bypass::ContentRange => 3,
            Bypass::AlreadyEncoded => 4,
            Bypass::NoTransform => 5,
            Bypass::Multipart => 6,
            Bypass::Type => 7,
            Bypass::TooSmall => 8,
            Bypass::Budget => 9,
            Bypass::EventStream => 10,
            Bypass::Grpc => 11,
            Bypass::Http10 => 12,
        }
    }
}

impl Bypass {
    /// A short snake_case name, for metric labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Bypass::NotAccepted => "not_accepted",
            Bypass::Head => "head",
            Bypass::Status => "status",
            Bypass::ContentRange => "content_range",
            Bypass::AlreadyEncoded => "already_encoded",
            Bypass::NoTransform => "no_transform",
            Bypass::Multipart => "multipart",
            Bypass::Type => "type",
            Bypass::TooSmall => "too_small",
            Bypass::Budget => "budget",
            Bypass::EventStream => "event_stream",
            Bypass::Grpc => "grpc",
            Bypass::Http10 => "http_1_0",
        }
    }
}

impl fmt::Display for Bypass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Decides what to do with a response; see the module documentation for the order of the
/// checks, `Vary` and HEAD.
///
/// Decompression is not subject to the type, length or budget checks: a client that cannot
/// read gzip cannot read it whatever its type, and decoding is cheap next to encoding.
pub fn decide(req: &RequestFacts, resp: &ResponseFacts, cfg: &Rules) -> Decision {
    let pass = |reason| Decision::Pass {
        reason,
        vary: Vary::Unchanged,
    };
    let pass_vary = |reason| Decision::Pass {
        reason,
        vary: Vary::Add,
    };
    let payload = if req.is_head {
        Payload::Absent
    } else {
        Payload::Transform
    };

    if !has_transformable_status(resp.status.as_u16()) {
        let vary = match resp.status.as_u16() {
            304 => not_modified_vary(req, resp, cfg),
            206 => partial_vary(req, resp, cfg),
            _ => Vary::Unchanged,
        };
        return Decision::Pass {
            reason: Bypass::Status,
            vary,
        };
    }
    if resp.content_range {
        return pass(Bypass::ContentRange);
    }
    if resp.no_transform {
        return pass(Bypass::NoTransform);
    }
    match resp.content_encoding {
        ContentEncoding::Identity => {}
        // Passed as it is, but a response in a content coding was negotiated on
        // `Accept-Encoding` whether or not the upstream said so (as for gzip below).
        ContentEncoding::Other => return pass_vary(Bypass::AlreadyEncoded),
        ContentEncoding::Gzip | ContentEncoding::Br | ContentEncoding::Zstd => {
            if let Some(coding) = resp.content_encoding.decodable() {
                let accepted = req.accept_encoding.accepts(coding);
                return decide_encoded(req, payload, accepted);
            }
        }
        ContentEncoding::Dcb | ContentEncoding::Dcz => {
            if !cfg.decode_dictionary_codings {
                return pass_vary(Bypass::AlreadyEncoded);
            }
            return decide_encoded(req, payload, false);
        }
    }
    let Some(media) = &resp.content_type else {
        return pass(Bypass::Type);
    };
    if media.is_multipart() {
        return pass(Bypass::Multipart);
    }
    if media.is_grpc() {
        return pass(Bypass::Grpc);
    }
    if !cfg.is_compressible(media) {
        return pass(Bypass::Type);
    }
    if media.is_event_stream() && !cfg.event_stream_flush {
        return pass(Bypass::EventStream);
    }
    if resp
        .content_length
        .is_some_and(|length| length == 0 || length < cfg.min_length)
    {
        return pass(Bypass::TooSmall);
    }
    if req.no_transform {
        return pass_vary(Bypass::NoTransform);
    }
    if req.close_delimited {
        return pass_vary(Bypass::Http10);
    }
    let Negotiated::Coding(coding) = req.accept_encoding.negotiate(&cfg.offered) else {
        return pass_vary(Bypass::NotAccepted);
    };
    if resp.budget == Budget::Exhausted {
        return pass_vary(Bypass::Budget);
    }
    Decision::Compress { coding, payload }
}

/// Upstream sent gzip, br or zstd: pass it to a client that accepts it (`accepted`), decode
/// it for one that does not (a coding the client did not ask for never reaches it). An
/// unasked `dcb` or `dcz` is never accepted.
fn decide_encoded(req: &RequestFacts, payload: Payload, accepted: bool) -> Decision {
    let reason = if accepted {
        Bypass::AlreadyEncoded
    } else if req.no_transform {
        Bypass::NoTransform
    } else if req.accept_encoding.refuses_identity() {
        Bypass::NotAccepted
    } else {
        return Decision::Decompress { payload };
    };
    Decision::Pass {
        reason,
        vary: Vary::Add,
    }
}

/// What a 206 repeats of its 200 (RFC 9110 §15.3.7: `Vary` where a 200 to the same request would
/// carry it): `Vary` where this request's 200 would get it, as far as the 206 tells (its length is
/// the range's, so the whole one is taken as unknown). Never a weakened `ETag`: the 206 is part of
/// the representation its tag names.
fn partial_vary(req: &RequestFacts, resp: &ResponseFacts, cfg: &Rules) -> Vary {
    let whole = ResponseFacts {
        status: http::StatusCode::OK,
        content_length: None,
        content_range: false,
        ..resp.clone()
    };
    match decide(req, &whole, cfg) {
        Decision::Pass {
            vary: Vary::Unchanged,
            ..
        } => Vary::Unchanged,
        _ => Vary::Add,
    }
}

/// What a 304 repeats of its 200: `Vary` always, the weakened `ETag` when that 200 would have
/// been recoded for this request as far as the 304 tells (see the module documentation).
fn not_modified_vary(req: &RequestFacts, resp: &ResponseFacts, cfg: &Rules) -> Vary {
    if req.no_transform || resp.no_transform || resp.content_range {
        return Vary::Add;
    }
    let recoded = match resp.content_encoding {
        ContentEncoding::Other => false,
        ContentEncoding::Dcb | ContentEncoding::Dcz => cfg.decode_dictionary_codings,
        ContentEncoding::Gzip | ContentEncoding::Br | ContentEncoding::Zstd => resp
            .content_encoding
            .decodable()
            .is_some_and(|coding| !req.accept_encoding.accepts(coding)),
        // A 304 usually leaves `Content-Encoding` out, so its 200 may have been gzip from the
        // upstream, decoded for a client that does not take gzip (of any type, and for an
        // HTTP/1.0 client too); weak is the safe side when that cannot be ruled out.
        ContentEncoding::Identity => {
            let compressible = resp
                .content_type
                .as_ref()
                .is_none_or(|media| !media.is_multipart() && cfg.is_compressible(media));
            let compressed = compressible
                && !req.close_delimited
                && matches!(
                    req.accept_encoding.negotiate(&cfg.offered),
                    Negotiated::Coding(_)
                );
            compressed || !req.accept_encoding.accepts(Coding::Gzip)
        }
    };
    // A client whose `If-None-Match` names strong tags alone holds a response that was not
    // recoded: weakened, its stored strong tag would be lost (and `If-Range` with it, so a
    // resumed download came back whole).
    if recoded && !req.holds_strong_tags {
        Vary::AddWeakEtag
    } else {
        Vary::Add
    }
}

/// Statuses whose body may be transformed: 200-599 except those that have no body (204, 205,
/// 304) or carry a partial representation (206).
fn has_transformable_status(code: u16) -> bool {
    (200..600).contains(&code) && !matches!(code, 204 | 205 | 206 | 304)
}

#[cfg(test)]
mod tests;
