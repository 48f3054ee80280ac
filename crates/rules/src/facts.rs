//! What [`decide`] needs to know about a request and its response, read from their headers.
//!
//! The facts are read once, when headers arrive, so the rules stay a pure function of plain
//! values and the table tests can state each case as headers.
//!
//! [`decide`]: crate::decide

use http::header::{
    HeaderMap, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, IF_NONE_MATCH,
};
use http::{Method, StatusCode};

use crate::list;
use crate::media::MediaType;
use crate::negotiate::AcceptEncoding;
use crate::negotiate::Coding;

/// The request side of the decision.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestFacts {
    /// Whether the method is HEAD: the response gets the headers a GET would, but no body.
    pub is_head: bool,
    /// Every `Accept-Encoding` line, combined.
    pub accept_encoding: AcceptEncoding,
    /// `Cache-Control: no-transform` on the request (RFC 9111 §5.2.1.6).
    pub no_transform: bool,
    /// An HTTP/1.0 (or 0.9) client: a transformed body has no length it could be checked
    /// against, only the connection's close (see [`crate::Bypass::Http10`]). Set by the
    /// caller, which knows the version; `false` from [`RequestFacts::from_parts`].
    pub close_delimited: bool,
    /// `If-None-Match` names entity-tags, all strong: the client holds a response that was
    /// not recoded (the proxy weakens the tag of every body it recodes), so a 304 keeps the
    /// tag strong for it (see `decide/rules.rs`).
    pub holds_strong_tags: bool,
}

impl RequestFacts {
    /// Reads the facts from the request's method and headers.
    pub fn from_parts(method: &Method, headers: &HeaderMap) -> RequestFacts {
        RequestFacts {
            is_head: *method == Method::HEAD,
            accept_encoding: AcceptEncoding::from_headers(headers),
            no_transform: has_no_transform(headers),
            close_delimited: false,
            holds_strong_tags: holds_strong_tags(headers),
        }
    }
}

/// Whether `If-None-Match` lists at least one entity-tag and only strong ones (not `*`, not
/// `W/`).
fn holds_strong_tags(headers: &HeaderMap) -> bool {
    let mut tags = list::elements(headers.get_all(IF_NONE_MATCH)).peekable();
    tags.peek().is_some() && tags.all(|tag| tag.starts_with(b"\""))
}

/// The response side of the decision.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponseFacts {
    /// The status code.
    pub status: StatusCode,
    /// The media type; `None` when `Content-Type` is missing or unusable (see
    /// [`MediaType::from_headers`]).
    pub content_type: Option<MediaType>,
    /// The declared length; `None` when unknown (chunked, close-delimited) or unusable.
    pub content_length: Option<u64>,
    /// The codings already applied.
    pub content_encoding: ContentEncoding,
    /// Whether a `Content-Range` header is present (a partial representation).
    pub content_range: bool,
    /// `Cache-Control: no-transform` on the response (RFC 9111 §5.2.2.6).
    pub no_transform: bool,
    /// What the CPU and rate budget allows; the caller sets it, [`Budget::Available`] by
    /// default.
    pub budget: Budget,
}

impl ResponseFacts {
    /// Reads the facts from the response's status and headers, with the budget
    /// [`Budget::Available`]; set [`ResponseFacts::budget`] afterwards if it is not.
    pub fn from_parts(status: StatusCode, headers: &HeaderMap) -> ResponseFacts {
        ResponseFacts {
            status,
            content_type: MediaType::from_headers(headers),
            content_length: content_length(headers),
            content_encoding: ContentEncoding::from_headers(headers),
            content_range: headers.contains_key(CONTENT_RANGE),
            no_transform: has_no_transform(headers),
            budget: Budget::Available,
        }
    }
}

/// The content codings a response already has (RFC 9110 §8.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentEncoding {
    /// None: no `Content-Encoding`, an empty one, or only `identity`. `identity` is not a
    /// content coding (§8.4.1 reserves it for `Accept-Encoding`), but some servers send it;
    /// it changes nothing about the bytes, so such a response may be compressed and its
    /// `Content-Encoding` is replaced.
    Identity,
    /// Exactly one coding, `gzip` (or `x-gzip`): the proxy can decode it for a client that does
    /// not accept gzip.
    Gzip,
    /// Exactly one coding, `br`: decoded, as gzip is, for a client that does not accept it.
    Br,
    /// Exactly one coding, `zstd`: decoded, as gzip is, for a client that does not accept it.
    Zstd,
    /// Exactly one coding, `dcb` (RFC 9842): passed as it is, or, where the proxy asks
    /// upstream for no dictionary coding ([`crate::Rules::decode_dictionary_codings`]),
    /// decoded against the dictionary it names.
    Dcb,
    /// Exactly one coding, `dcz`: as [`ContentEncoding::Dcb`].
    Dcz,
    /// Anything else: another coding, several codings, or a value that does not parse. Left
    /// alone.
    Other,
}

impl ContentEncoding {
    /// Reads every `Content-Encoding` line.
    pub fn from_headers(headers: &HeaderMap) -> ContentEncoding {
        let mut codings = list::elements(headers.get_all(CONTENT_ENCODING))
            .filter(|coding| !coding.eq_ignore_ascii_case(b"identity"));
        match (codings.next(), codings.next()) {
            (None, _) => ContentEncoding::Identity,
            (Some(coding), None)
                if coding.eq_ignore_ascii_case(b"gzip")
                    || coding.eq_ignore_ascii_case(b"x-gzip") =>
            {
                ContentEncoding::Gzip
            }
            (Some(coding), None) if coding.eq_ignore_ascii_case(b"br") => ContentEncoding::Br,
            (Some(coding), None) if coding.eq_ignore_ascii_case(b"zstd") => ContentEncoding::Zstd,
            (Some(coding), None) if coding.eq_ignore_ascii_case(b"dcb") => ContentEncoding::Dcb,
            (Some(coding), None) if coding.eq_ignore_ascii_case(b"dcz") => ContentEncoding::Dcz,
            _ => ContentEncoding::Other,
        }
    }

    /// The one coding the proxy can decode, if that is what the response has.
    pub fn decodable(self) -> Option<Coding> {
        match self {
            ContentEncoding::Gzip => Some(Coding::Gzip),
            ContentEncoding::Br => Some(Coding::Br),
            ContentEncoding::Zstd => Some(Coding::Zstd),
            ContentEncoding::Identity
            | ContentEncoding::Other
            | ContentEncoding::Dcb
            | ContentEncoding::Dcz => None,
        }
    }
}

/// Whether the CPU and rate budget (zipwire-adapt's policy) allows compressing one more
/// response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Budget {
    /// Compression may start.
    #[default]
    Available,
    /// The budget is spent: pass the response uncompressed.
    Exhausted,
}

/// Whether any `Cache-Control` line has the `no-transform` directive (names are
/// case-insensitive, RFC 9111 §5.2; one with an argument still counts).
fn has_no_transform(headers: &HeaderMap) -> bool {
    list::elements(headers.get_all(CACHE_CONTROL)).any(|directive| {
        let name = directive.split(|&b| b == b'=').next().unwrap_or_default();
        list::trim_ows(name).eq_ignore_ascii_case(b"no-transform")
    })
}

/// The `Content-Length`: every line and list element must be the same decimal number (RFC 9110
/// §8.6 lets a recipient accept `42, 42`); anything else is unknown.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut length = None;
    for element in list::elements(headers.get_all(CONTENT_LENGTH)) {
        if !element.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let value = std::str::from_utf8(element).ok()?.parse::<u64>().ok()?;
        if length.is_some_and(|seen| seen != value) {
            return None;
        }
        length = Some(value);
    }
    length
}

#[cfg(test)]
mod tests {
    use http::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn content_encodings() {
        let rows: &[(&[(&str, &str)], ContentEncoding)] = &[
            (&[], ContentEncoding::Identity),
            (&[("content-encoding", "")], ContentEncoding::Identity),
            (
                &[("content-encoding", "identity")],
                ContentEncoding::Identity,
            ),
            (
                &[("content-encoding", "Identity, identity")],
                ContentEncoding::Identity,
            ),
            (&[("content-encoding", "gzip")], ContentEncoding::Gzip),
            (&[("content-encoding", "X-GZIP")], ContentEncoding::Gzip),
            (
                &[("content-encoding", "identity, gzip")],
                ContentEncoding::Gzip,
            ),
            (&[("content-encoding", "br")], ContentEncoding::Br),
            (&[("content-encoding", "ZSTD")], ContentEncoding::Zstd),
            (&[("content-encoding", "dcz")], ContentEncoding::Dcz),
            (&[("content-encoding", "DCB")], ContentEncoding::Dcb),
            (&[("content-encoding", "dcb, gzip")], ContentEncoding::Other),
            (&[("content-encoding", "xdcz")], ContentEncoding::Other),
            (&[("content-encoding", "br, zstd")], ContentEncoding::Other),
            (
                &[("content-encoding", "gzip, gzip")],
                ContentEncoding::Other,
            ),
            (
                &[("content-encoding", "gzip"), ("content-encoding", "br")],
                ContentEncoding::Other,
            ),
            (&[("content-encoding", "\"gzip\"")], ContentEncoding::Other),
        ];
        for (pairs, expected) in rows {
            let pairs: Vec<(&'static str, &'static str)> = pairs.to_vec();
            assert_eq!(
                ContentEncoding::from_headers(&headers(&pairs)),
                *expected,
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn content_lengths() {
        let rows: &[(&[&str], Option<u64>)] = &[
            (&[], None),
            (&["0"], Some(0)),
            (&["1234"], Some(1234)),
            (&["42, 42"], Some(42)),
            (&["42", "42"], Some(42)),
            (&["42", "43"], None),
            (&["+42"], None),
            (&["-1"], None),
            (&["4 2"], None),
            (&["99999999999999999999999"], None),
        ];
        for (lines, expected) in rows {
            let mut map = HeaderMap::new();
            for line in *lines {
                map.append(CONTENT_LENGTH, HeaderValue::from_static(line));
            }
            assert_eq!(content_length(&map), *expected, "{lines:?}");
        }
    }

    #[test]
    fn no_transform_directive() {
        let rows: &[(&str, bool)] = &[
            ("no-transform", true),
            ("max-age=60, No-Transform", true),
            ("no-transform=1", true),
            ("no-store", false),
            ("private=\"no-transform\"", false),
            ("private=\"x, no-transform\"", false),
        ];
        for (value, expected) in rows {
            let map = headers(&[("cache-control", value)]);
            assert_eq!(has_no_transform(&map), *expected, "{value:?}");
        }
    }

    #[test]
    fn request_facts() {
        let map = headers(&[
            ("accept-encoding", "gzip"),
            ("cache-control", "no-transform"),
        ]);
        let facts = RequestFacts::from_parts(&Method::HEAD, &map);
        assert!(facts.is_head);
        assert!(facts.no_transform);
        assert!(facts.accept_encoding.is_present());
        assert!(!RequestFacts::from_parts(&Method::GET, &HeaderMap::new()).is_head);
    }

    #[test]
    fn response_facts() {
        let map = headers(&[
            ("content-type", "text/html; charset=utf-8"),
            ("content-length", "300"),
            ("content-range", "bytes 0-299/1000"),
        ]);
        let facts = ResponseFacts::from_parts(StatusCode::OK, &map);
        assert_eq!(
            facts.content_type.as_ref().map(MediaType::essence),
            Some("text/html")
        );
        assert_eq!(facts.content_length, Some(300));
        assert!(facts.content_range);
        assert!(!facts.no_transform);
        assert_eq!(facts.content_encoding, ContentEncoding::Identity);
        assert_eq!(facts.budget, Budget::Available);
    }
}
