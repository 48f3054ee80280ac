//! One row per HTTP rule: request and response headers in, the [`Decision`] and the response
//! headers after [`headers::apply`] out.

use http::header::{HeaderMap, HeaderValue};
use http::{Method, StatusCode, Version};

use super::*;
use crate::headers::{self, Framing};

type Pairs = &'static [(&'static str, &'static str)];

struct Row {
    name: &'static str,
    method: Method,
    request: Pairs,
    status: u16,
    response: Pairs,
    budget: Budget,
    event_stream_flush: bool,
    expected: Decision,
    /// The response headers after the rewrite; `None`: unchanged.
    after: Option<Pairs>,
}

const HTML: Pairs = &[
    ("content-type", "text/html"),
    ("content-length", "1000"),
    ("etag", "\"v1\""),
];
const HTML_GZIP: Pairs = &[
    ("content-type", "text/html"),
    ("content-encoding", "gzip"),
    ("etag", "W/\"v1\""),
    ("vary", "Accept-Encoding"),
];
const HTML_VARY: Pairs = &[
    ("content-type", "text/html"),
    ("content-length", "1000"),
    ("etag", "\"v1\""),
    ("vary", "Accept-Encoding"),
];
const UPSTREAM_GZIP: Pairs = &[
    ("content-type", "text/html"),
    ("content-encoding", "gzip"),
    ("content-length", "300"),
    ("etag", "\"v1\""),
];
const ACCEPT_GZIP: Pairs = &[("accept-encoding", "gzip, deflate")];

const GZIP: Decision = Decision::Compress {
    coding: Coding::Gzip,
    payload: Payload::Transform,
};

const fn pass(reason: Bypass) -> Decision {
    Decision::Pass {
        reason,
        vary: Vary::Unchanged,
    }
}

const fn pass_vary(reason: Bypass) -> Decision {
    Decision::Pass {
        reason,
        vary: Vary::Add,
    }
}

/// A 304 standing for a 200 the proxy would have recoded.
const NOT_MODIFIED_RECODED: Decision = Decision::Pass {
    reason: Bypass::Status,
    vary: Vary::AddWeakEtag,
};

const BASE: Row = Row {
    name: "",
    method: Method::GET,
    request: ACCEPT_GZIP,
    status: 200,
    response: HTML,
    budget: Budget::Available,
    event_stream_flush: false,
    expected: GZIP,
    after: Some(HTML_GZIP),
};

const ROWS: &[Row] = &[
    Row {
        name: "compressible html",
        ..BASE
    },
    Row {
        name: "HEAD: same headers as GET, no body",
        method: Method::HEAD,
        expected: Decision::Compress {
            coding: Coding::Gzip,
            payload: Payload::Absent,
        },
        ..BASE
    },
    Row {
        name: "204",
        status: 204,
        response: &[("content-type", "text/html")],
        expected: pass(Bypass::Status),
        after: None,
        ..BASE
    },
    Row {
        name: "205",
        status: 205,
        expected: pass(Bypass::Status),
        after: None,
        ..BASE
    },
    Row {
        name: "206 passes with the Vary its 200 would carry, its strong ETag kept",
        status: 206,
        response: &[
            ("content-type", "text/html"),
            ("content-range", "bytes 0-999/5000"),
            ("content-length", "1000"),
            ("etag", "\"v1\""),
        ],
        expected: pass_vary(Bypass::Status),
        after: Some(&[
            ("content-type", "text/html"),
            ("content-range", "bytes 0-999/5000"),
            ("content-length", "1000"),
            ("etag", "\"v1\""),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "206 of a type never compressed gets no Vary",
        status: 206,
        response: &[
            ("content-type", "image/png"),
            ("content-range", "bytes 0-999/5000"),
        ],
        expected: pass(Bypass::Status),
        after: None,
        ..BASE
    },
    Row {
        name: "304 gets the Vary and weak ETag of the compressed 200",
        status: 304,
        response: &[("etag", "\"v1\"")],
        expected: NOT_MODIFIED_RECODED,
        after: Some(&[("etag", "W/\"v1\""), ("vary", "Accept-Encoding")]),
        ..BASE
    },
    Row {
        name: "304 with a compressible type: weak ETag",
        status: 304,
        response: &[
            ("etag", "\"v1\""),
            ("content-type", "text/html"),
            ("vary", "Cookie"),
        ],
        expected: NOT_MODIFIED_RECODED,
        after: Some(&[
            ("etag", "W/\"v1\""),
            ("content-type", "text/html"),
            ("vary", "Cookie, Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "304 keeps Vary: *",
        status: 304,
        response: &[("etag", "W/\"v1\""), ("vary", "*")],
        expected: NOT_MODIFIED_RECODED,
        after: None,
        ..BASE
    },
    Row {
        name: "304 to a client without gzip: weak, its 200 may have been upstream gzip decoded",
        status: 304,
        request: &[],
        response: &[("etag", "\"v1\"")],
        expected: NOT_MODIFIED_RECODED,
        after: Some(&[("etag", "W/\"v1\""), ("vary", "Accept-Encoding")]),
        ..BASE
    },
    Row {
        name:
            "304 of a type not compressed to a client without gzip: weak, as decoding has no types",
        status: 304,
        request: &[("accept-encoding", "br")],
        response: &[("etag", "\"v1\""), ("content-type", "image/png")],
        expected: NOT_MODIFIED_RECODED,
        after: Some(&[
            ("etag", "W/\"v1\""),
            ("content-type", "image/png"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "304 to a client with gzip but no offered coding: ETag as the identity 200's",
        status: 304,
        request: &[("accept-encoding", "gzip;q=1, identity;q=0.5")],
        response: &[("etag", "\"v1\""), ("content-type", "text/csv")],
        expected: pass_vary(Bypass::Status),
        after: Some(&[
            ("etag", "\"v1\""),
            ("content-type", "text/csv"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "304 of a type not compressed: strong ETag",
        status: 304,
        response: &[("etag", "\"v1\""), ("content-type", "image/png")],
        expected: pass_vary(Bypass::Status),
        after: Some(&[
            ("etag", "\"v1\""),
            ("content-type", "image/png"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "304 with no-transform: strong ETag",
        status: 304,
        response: &[("etag", "\"v1\""), ("cache-control", "no-transform")],
        expected: pass_vary(Bypass::Status),
        after: Some(&[
            ("etag", "\"v1\""),
            ("cache-control", "no-transform"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "304 of upstream gzip to a client without gzip: weak ETag as the decoded 200's",
        status: 304,
        request: &[("accept-encoding", "identity")],
        response: &[("etag", "\"gz\""), ("content-encoding", "gzip")],
        expected: NOT_MODIFIED_RECODED,
        after: Some(&[
            ("etag", "W/\"gz\""),
            ("content-encoding", "gzip"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "304 of upstream gzip to a client with gzip: strong ETag",
        status: 304,
        response: &[("etag", "\"gz\""), ("content-encoding", "gzip")],
        expected: pass_vary(Bypass::Status),
        after: Some(&[
            ("etag", "\"gz\""),
            ("content-encoding", "gzip"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "1xx",
        status: 103,
        response: &[("link", "</a.css>; rel=preload")],
        expected: pass(Bypass::Status),
        after: None,
        ..BASE
    },
    Row {
        name: "status 404 compresses",
        status: 404,
        ..BASE
    },
    Row {
        name: "status 503 compresses",
        status: 503,
        ..BASE
    },
    Row {
        name: "status 600 passes",
        status: 600,
        expected: pass(Bypass::Status),
        after: None,
        ..BASE
    },
    Row {
        name: "Content-Range on a 200",
        response: &[
            ("content-type", "text/html"),
            ("content-range", "bytes 0-999/1000"),
        ],
        expected: pass(Bypass::ContentRange),
        after: None,
        ..BASE
    },
    Row {
        name: "upstream br to a client without br is decoded, as gzip is",
        response: &[("content-type", "text/html"), ("content-encoding", "br")],
        expected: Decision::Decompress {
            payload: Payload::Transform,
        },
        after: Some(&[("content-type", "text/html"), ("vary", "Accept-Encoding")]),
        ..BASE
    },
    Row {
        name: "upstream zstd to a client without zstd is decoded",
        request: &[("accept-encoding", "gzip, br")],
        response: &[("content-type", "text/html"), ("content-encoding", "zstd")],
        expected: Decision::Decompress {
            payload: Payload::Transform,
        },
        after: Some(&[("content-type", "text/html"), ("vary", "Accept-Encoding")]),
        ..BASE
    },
    Row {
        name: "Content-Encoding: br to a client with br gets Vary, as upstream gzip does",
        request: &[("accept-encoding", "gzip, br")],
        response: &[("content-type", "text/html"), ("content-encoding", "br")],
        expected: pass_vary(Bypass::AlreadyEncoded),
        after: Some(&[
            ("content-type", "text/html"),
            ("content-encoding", "br"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "Content-Encoding: gzip, br",
        response: &[
            ("content-type", "text/html"),
            ("content-encoding", "gzip, br"),
        ],
        request: &[("accept-encoding", "identity")],
        expected: pass_vary(Bypass::AlreadyEncoded),
        after: Some(&[
            ("content-type", "text/html"),
            ("content-encoding", "gzip, br"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "Content-Encoding: identity is not encoded",
        response: &[
            ("content-type", "text/html"),
            ("content-encoding", "identity"),
            ("etag", "\"v1\""),
        ],
        ..BASE
    },
    Row {
        name: "no-transform on the request",
        request: &[
            ("accept-encoding", "gzip"),
            ("cache-control", "no-transform"),
        ],
        expected: pass_vary(Bypass::NoTransform),
        after: Some(HTML_VARY),
        ..BASE
    },
    Row {
        name: "no-transform on the response",
        response: &[
            ("content-type", "text/html"),
            ("cache-control", "public, no-transform"),
        ],
        expected: pass(Bypass::NoTransform),
        after: None,
        ..BASE
    },
    Row {
        name: "multipart/byteranges",
        response: &[(
            "content-type",
            "multipart/byteranges; boundary=3d6b6a416f9b5",
        )],
        expected: pass(Bypass::Multipart),
        after: None,
        ..BASE
    },
    Row {
        name: "multipart/form-data",
        response: &[("content-type", "multipart/form-data; boundary=x")],
        expected: pass(Bypass::Multipart),
        after: None,
        ..BASE
    },
    Row {
        name: "text/event-stream without per-event flush",
        response: &[("content-type", "text/event-stream")],
        expected: pass(Bypass::EventStream),
        after: None,
        ..BASE
    },
    Row {
        name: "text/event-stream with per-event flush",
        response: &[("content-type", "text/event-stream")],
        event_stream_flush: true,
        after: Some(&[
            ("content-type", "text/event-stream"),
            ("content-encoding", "gzip"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "type with parameters",
        response: &[
            ("content-type", "text/html; charset=utf-8"),
            ("content-length", "1000"),
        ],
        after: Some(&[
            ("content-type", "text/html; charset=utf-8"),
            ("content-encoding", "gzip"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "upper-case type",
        response: &[("content-type", "APPLICATION/JSON")],
        after: Some(&[
            ("content-type", "APPLICATION/JSON"),
            ("content-encoding", "gzip"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "type not listed",
        response: &[("content-type", "image/png"), ("content-length", "5000")],
        expected: pass(Bypass::Type),
        after: None,
        ..BASE
    },
    Row {
        name: "missing Content-Type",
        response: &[("content-length", "5000")],
        expected: pass(Bypass::Type),
        after: None,
        ..BASE
    },
    Row {
        name: "malformed Content-Type",
        response: &[("content-type", "text")],
        expected: pass(Bypass::Type),
        after: None,
        ..BASE
    },
    Row {
        name: "too small with known length",
        response: &[("content-type", "text/html"), ("content-length", "255")],
        expected: pass(Bypass::TooSmall),
        after: None,
        ..BASE
    },
    Row {
        name: "exactly min_length compresses",
        response: &[("content-type", "text/html"), ("content-length", "256")],
        after: Some(&[
            ("content-type", "text/html"),
            ("content-encoding", "gzip"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "empty body",
        response: &[("content-type", "text/html"), ("content-length", "0")],
        expected: pass(Bypass::TooSmall),
        after: None,
        ..BASE
    },
    Row {
        name: "unknown length (chunked) compresses",
        response: &[
            ("content-type", "text/html"),
            ("transfer-encoding", "chunked"),
        ],
        after: Some(&[
            ("content-type", "text/html"),
            ("transfer-encoding", "chunked"),
            ("content-encoding", "gzip"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "budget exhausted",
        budget: Budget::Exhausted,
        expected: pass_vary(Bypass::Budget),
        after: Some(HTML_VARY),
        ..BASE
    },
    Row {
        name: "budget does not hide a type bypass",
        budget: Budget::Exhausted,
        response: &[("content-type", "image/png")],
        expected: pass(Bypass::Type),
        after: None,
        ..BASE
    },
    Row {
        name: "no Accept-Encoding",
        request: &[],
        expected: pass_vary(Bypass::NotAccepted),
        after: Some(HTML_VARY),
        ..BASE
    },
    Row {
        name: "gzip;q=0",
        request: &[("accept-encoding", "gzip;q=0")],
        expected: pass_vary(Bypass::NotAccepted),
        after: Some(HTML_VARY),
        ..BASE
    },
    Row {
        name: "gzip;q=0 with deflate",
        request: &[("accept-encoding", "gzip;q=0, deflate")],
        expected: Decision::Compress {
            coding: Coding::Deflate,
            payload: Payload::Transform,
        },
        after: Some(&[
            ("content-type", "text/html"),
            ("content-encoding", "deflate"),
            ("etag", "W/\"v1\""),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "*",
        request: &[("accept-encoding", "*")],
        ..BASE
    },
    Row {
        name: "identity;q=0 alone",
        request: &[("accept-encoding", "identity;q=0")],
        expected: pass_vary(Bypass::NotAccepted),
        after: Some(HTML_VARY),
        ..BASE
    },
    Row {
        name: "identity;q=0 with gzip",
        request: &[("accept-encoding", "identity;q=0, gzip")],
        ..BASE
    },
    Row {
        name: "several Accept-Encoding lines",
        request: &[("accept-encoding", "br"), ("accept-encoding", "gzip;q=0.5")],
        ..BASE
    },
    Row {
        name: "x-gzip",
        request: &[("accept-encoding", "x-gzip")],
        ..BASE
    },
    Row {
        name: "Vary merged into an existing one",
        response: &[
            ("content-type", "text/html"),
            ("vary", "Cookie"),
            ("vary", "accept-encoding"),
        ],
        after: Some(&[
            ("content-type", "text/html"),
            ("content-encoding", "gzip"),
            ("vary", "Cookie, accept-encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "Vary: * left alone",
        response: &[("content-type", "text/html"), ("vary", "*")],
        after: Some(&[
            ("content-type", "text/html"),
            ("content-encoding", "gzip"),
            ("vary", "*"),
        ]),
        ..BASE
    },
    Row {
        name: "weak ETag kept",
        response: &[("content-type", "text/html"), ("etag", "W/\"v1\"")],
        ..BASE
    },
    Row {
        name: "malformed ETag dropped",
        response: &[("content-type", "text/html"), ("etag", "v1")],
        after: Some(&[
            ("content-type", "text/html"),
            ("content-encoding", "gzip"),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "upstream gzip, client without gzip: decompress",
        request: &[("accept-encoding", "br")],
        response: UPSTREAM_GZIP,
        expected: Decision::Decompress {
            payload: Payload::Transform,
        },
        after: Some(&[
            ("content-type", "text/html"),
            ("etag", "W/\"v1\""),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "upstream gzip, no Accept-Encoding: decompress",
        request: &[],
        response: UPSTREAM_GZIP,
        expected: Decision::Decompress {
            payload: Payload::Transform,
        },
        after: Some(&[
            ("content-type", "text/html"),
            ("etag", "W/\"v1\""),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "upstream gzip, HEAD: decompress headers only",
        method: Method::HEAD,
        request: &[("accept-encoding", "deflate")],
        response: UPSTREAM_GZIP,
        expected: Decision::Decompress {
            payload: Payload::Absent,
        },
        after: Some(&[
            ("content-type", "text/html"),
            ("etag", "W/\"v1\""),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "upstream gzip of any type is decompressed",
        request: &[],
        response: &[("content-type", "image/png"), ("content-encoding", "gzip")],
        expected: Decision::Decompress {
            payload: Payload::Transform,
        },
        after: Some(&[("content-type", "image/png"), ("vary", "Accept-Encoding")]),
        ..BASE
    },
    Row {
        name: "upstream gzip, client with gzip: pass",
        response: UPSTREAM_GZIP,
        expected: pass_vary(Bypass::AlreadyEncoded),
        after: Some(&[
            ("content-type", "text/html"),
            ("content-encoding", "gzip"),
            ("content-length", "300"),
            ("etag", "\"v1\""),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "upstream gzip, client refuses identity and gzip",
        request: &[("accept-encoding", "br, identity;q=0")],
        response: UPSTREAM_GZIP,
        expected: pass_vary(Bypass::NotAccepted),
        after: Some(&[
            ("content-type", "text/html"),
            ("content-encoding", "gzip"),
            ("content-length", "300"),
            ("etag", "\"v1\""),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
    Row {
        name: "upstream gzip, request no-transform",
        request: &[("cache-control", "no-transform")],
        response: UPSTREAM_GZIP,
        expected: pass_vary(Bypass::NoTransform),
        after: Some(&[
            ("content-type", "text/html"),
            ("content-encoding", "gzip"),
            ("content-length", "300"),
            ("etag", "\"v1\""),
            ("vary", "Accept-Encoding"),
        ]),
        ..BASE
    },
];

fn map(pairs: Pairs) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, HeaderValue::from_static(value));
    }
    headers
}

#[test]
fn table() {
    for row in ROWS {
        let cfg = Rules {
            event_stream_flush: row.event_stream_flush,
            // The rows are about the HTTP rules; which coding wins is negotiate's table.
            offered: vec![Coding::Gzip, Coding::Deflate],
            ..Rules::default()
        };
        let req = RequestFacts::from_parts(&row.method, &map(row.request));
        let status = StatusCode::from_u16(row.status).expect("valid test status");
        let mut resp = ResponseFacts::from_parts(status, &map(row.response));
        resp.budget = row.budget;

        let decision = decide(&req, &resp, &cfg);
        assert_eq!(decision, row.expected, "{}: decision", row.name);

        let mut headers = map(row.response);
        let framing = headers::apply(&decision, &mut headers, Version::HTTP_11);
        let expected_framing = match decision {
            Decision::Pass { .. } => None,
            _ => Some(Framing::Chunked),
        };
        assert_eq!(framing, expected_framing, "{}: framing", row.name);
        let after = map(row.after.unwrap_or(row.response));
        assert_eq!(headers, after, "{}: headers", row.name);
    }
}

#[test]
fn http10_304_is_weak_only_where_upstream_gzip_could_have_been_decoded() {
    // An HTTP/1.0 client's 200 is never compressed, but upstream gzip is decoded for it.
    let not_modified = ResponseFacts::from_parts(
        StatusCode::NOT_MODIFIED,
        &map(&[("etag", "\"v1\""), ("content-type", "text/html")]),
    );
    for (request, expected) in [
        (ACCEPT_GZIP, pass_vary(Bypass::Status)),
        (&[][..], NOT_MODIFIED_RECODED),
    ] {
        let mut req = RequestFacts::from_parts(&Method::GET, &map(request));
        req.close_delimited = true;
        assert_eq!(
            decide(&req, &not_modified, &Rules::default()),
            expected,
            "{request:?}"
        );
    }
}

/// An upstream's `dcb` or `dcz` passes as any coding it chose, unless the server never asks
/// for one (it forwards no dictionary fields): then it was sent unasked and is decoded, even
/// for a client that lists it, since that client's dictionary was not the one asked with.
#[test]
fn dictionary_codings_pass_unless_the_server_decodes_them() {
    const LISTS: Pairs = &[("accept-encoding", "gzip, br, dcb, dcz")];
    const DCB: Pairs = &[("content-type", "text/html"), ("content-encoding", "dcb")];
    const DCZ: Pairs = &[("content-type", "text/html"), ("content-encoding", "dcz")];
    for coding in [DCB, DCZ] {
        let resp = ResponseFacts::from_parts(StatusCode::OK, &map(coding));
        for request in [ACCEPT_GZIP, LISTS] {
            let req = RequestFacts::from_parts(&Method::GET, &map(request));
            assert_eq!(
                decide(&req, &resp, &Rules::default()),
                pass_vary(Bypass::AlreadyEncoded),
                "{coding:?} {request:?}"
            );
            let decoding = Rules {
                decode_dictionary_codings: true,
                ..Rules::default()
            };
            assert_eq!(
                decide(&req, &resp, &decoding),
                Decision::Decompress {
                    payload: Payload::Transform
                },
                "{coding:?} {request:?}"
            );
        }
    }
}

mod settings;
