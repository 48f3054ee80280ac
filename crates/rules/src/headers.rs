//! The header rewrites that go with each [`Decision`], as pure functions on
//! [`http::HeaderMap`].
//!
//! Compressing or decompressing changes the representation's bytes, so everything that
//! describes those bytes goes: `Content-Length` (the length is known only at the end),
//! `Accept-Ranges` (ranges would refer to bytes the proxy does not serve), digests
//! (`Content-MD5`, `Digest`, `Content-Digest`, `Repr-Digest`), and a strong `ETag` becomes weak
//! (RFC 9110 §8.8.1: a strong validator promises identical bytes; nginx does the same).
//!
//! Digests go whether they come as header fields or as trailer fields ([`remove_digests`],
//! which the transforming bodies apply to the trailers). `Content-Digest` covers the content
//! as sent and `Repr-Digest` the selected representation, which includes its content coding
//! (RFC 9530 §2, §3; RFC 9110 §8.1): recoding changes both. `Content-MD5` and `Digest` are
//! their older forms.

use http::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT_ENCODING, ACCEPT_RANGES, CONTENT_ENCODING,
    CONTENT_LENGTH, ETAG, IF_RANGE, RANGE, TRAILER, VARY,
};
use http::Version;

use crate::decide::{Decision, Vary};
use crate::list;
use crate::negotiate::Coding;

/// How the body of a transformed response is delimited, now that it has no `Content-Length`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// HTTP/1.1: `Transfer-Encoding: chunked`.
    Chunked,
    /// HTTP/1.0 (and 0.9): the end of the body is the end of the connection.
    CloseDelimited,
    /// HTTP/2 and later: the stream's own frames end the body.
    Frames,
}

impl Framing {
    /// The framing for a client speaking `version`.
    pub fn for_version(version: Version) -> Framing {
        if version == Version::HTTP_09 || version == Version::HTTP_10 {
            Framing::CloseDelimited
        } else if version == Version::HTTP_11 {
            Framing::Chunked
        } else {
            Framing::Frames
        }
    }
}

/// Applies the header part of `decision` to the response headers for a client speaking
/// `version`. Returns the new framing, or `None` when the body passes as it is.
pub fn apply(decision: &Decision, headers: &mut HeaderMap, version: Version) -> Option<Framing> {
    match *decision {
        Decision::Compress { coding, .. } => {
            Some(rewrite_for_compression(headers, coding, version))
        }
        Decision::Decompress { .. } => Some(rewrite_for_decompression(headers, version)),
        Decision::Pass { vary, .. } => {
            if vary != Vary::Unchanged {
                add_vary_accept_encoding(headers);
            }
            if vary == Vary::AddWeakEtag {
                weaken_etag(headers);
                headers.remove(ACCEPT_RANGES);
            }
            None
        }
    }
}

/// Rewrites response headers for a body encoded in `coding`: sets `Content-Encoding` (replacing
/// an `identity` one), removes `Content-Length`, `Accept-Ranges` and digests, weakens the
/// `ETag` ([`weaken_etag`]) and merges `Vary: Accept-Encoding` ([`add_vary_accept_encoding`]).
/// Returns the framing to use for a client speaking `version`.
pub fn rewrite_for_compression(
    headers: &mut HeaderMap,
    coding: Coding,
    version: Version,
) -> Framing {
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.as_str()));
    forget_identity_bytes(headers);
    Framing::for_version(version)
}

/// Rewrites response headers for a gzip body the proxy decodes: removes `Content-Encoding`,
/// `Content-Length`, `Accept-Ranges` and digests, weakens the `ETag` and merges
/// `Vary: Accept-Encoding`. Returns the framing to use for a client speaking `version`.
pub fn rewrite_for_decompression(headers: &mut HeaderMap, version: Version) -> Framing {
    headers.remove(CONTENT_ENCODING);
    forget_identity_bytes(headers);
    Framing::for_version(version)
}

/// Takes out of a 304 the fields that describe the bytes of the representation it stands
/// for: `Content-Encoding`, `Content-Length` and the digests. A cache replaces its stored fields with the
/// 304's (RFC 9111 §3.2, §4.3.4), and the 304 came from the origin's view of the bytes, not
/// the recoded ones the client stored: an origin's `Content-Encoding: gzip` would relabel the
/// decoded body a cache holds, its `identity` a gzip one. RFC 9110 §15.4.5 has a 304 send no
/// such metadata anyway, so a cache that stored the origin's own bytes loses nothing: it keeps
/// the stored fields the 304 does not carry. A `Content-Length` is allowed only if it equals
/// the 200's (RFC 9110 §8.6), and the 200 this proxy would send may be recoded, with no length
/// at all; hyper drops it from an HTTP/1.1 304 anyway, and HTTP/2 sent it on as it came.
pub fn trim_not_modified(headers: &mut HeaderMap) {
    headers.remove(CONTENT_ENCODING);
    headers.remove(CONTENT_LENGTH);
    remove_digests(headers);
}

/// Merges `Accept-Encoding` into `Vary`, leaving one `Vary` line with each member once
/// (compared case-insensitively, first spelling and order kept). Members that are not field
/// names (not tokens, RFC 9110 §12.5.5) name no request header and are dropped. A `Vary`
/// containing `*` already varies on everything and is left exactly as it is.
///
/// For compressible responses sent uncompressed, and for 304s.
pub fn add_vary_accept_encoding(headers: &mut HeaderMap) {
    add_vary(headers, &["Accept-Encoding"]);
}

/// Merges `names` into `Vary` as [`add_vary_accept_encoding`] merges `Accept-Encoding`: one
/// line, each member once, `*` left alone.
pub fn add_vary(headers: &mut HeaderMap, names: &[&str]) {
    let mut members: Vec<&[u8]> = Vec::new();
    for member in list::elements(headers.get_all(VARY)) {
        if member == b"*" {
            return;
        }
        if list::is_token(member) && !members.iter().any(|seen| seen.eq_ignore_ascii_case(member)) {
            members.push(member);
        }
    }
    for name in names {
        if !members
            .iter()
            .any(|member| member.eq_ignore_ascii_case(name.as_bytes()))
        {
            members.push(name.as_bytes());
        }
    }
    let joined = members.join(&b", "[..]);
    // Members come from valid header values, so the join is one too; should that ever fail,
    // extra lines still tell caches the truth.
    match HeaderValue::from_bytes(&joined) {
        Ok(value) => {
            headers.insert(VARY, value);
        }
        Err(_) => {
            for name in names {
                if let Ok(value) = HeaderValue::from_str(name) {
                    headers.append(VARY, value);
                }
            }
        }
    }
}

/// Makes the `ETag` weak: `"x"` becomes `W/"x"`, `W/"x"` stays. An `ETag` that is not an
/// entity-tag (RFC 9110 §8.8.3: optional `W/`, case-sensitive, then a quoted string of
/// `etagc`, surrounding whitespace allowed) is removed, and so are several `ETag` lines: the
/// field is a singleton, and a validator the proxy cannot vouch for is worse than none.
pub fn weaken_etag(headers: &mut HeaderMap) {
    let mut lines = headers.get_all(ETAG).iter();
    let weakened = match (lines.next(), lines.next()) {
        (Some(only), None) => weak_entity_tag(only.as_bytes()),
        _ => None,
    };
    headers.remove(ETAG);
    if let Some(value) = weakened {
        headers.insert(ETAG, value);
    }
}

/// Removes `Accept-Encoding` from a request before it goes upstream, so that upstream sends
/// identity and the proxy does the compressing (offload mode, as HAProxy's
/// `compression offload` and nginx's `proxy_set_header Accept-Encoding ""`).
pub fn strip_accept_encoding(request_headers: &mut HeaderMap) {
    request_headers.remove(ACCEPT_ENCODING);
}

/// Removes `Range` and `If-Range` from a request whose `If-Range` holds a date rather than
/// an entity tag; the caller does so where this client's 200 may be recoded. Such a client
/// resumes a body it got whole, and the origin's 206 holds identity bytes: if that body was
/// recoded, the date still matched (a recoded 200 keeps `Last-Modified`, as nginx's does),
/// and the client joined gzip bytes to identity ones. An entity tag needs no care: every
/// recoded 200's is weak, which `If-Range` never matches (RFC 9110 §13.1.5), so the origin
/// sends the whole body. Without the range the origin does too, and the client's download
/// starts over instead of ending corrupt (Varnish, which ranges over what it sends, does
/// not have the problem; nginx does). Returns whether it removed them.
pub fn drop_range_validated_by_date(request_headers: &mut HeaderMap) -> bool {
    let by_date = request_headers.get(IF_RANGE).is_some_and(|value| {
        let value = value.as_bytes().trim_ascii_start();
        !(value.starts_with(b"\"") || value.starts_with(b"W/"))
    });
    let drop = by_date && request_headers.contains_key(RANGE);
    if drop {
        request_headers.remove(RANGE);
        request_headers.remove(IF_RANGE);
    }
    drop
}

/// The fields that hold a digest of the bytes a transform changes.
const DIGESTS: [&str; 4] = ["content-md5", "digest", "content-digest", "repr-digest"];

/// Removes the digest fields (`Content-MD5`, `Digest`, `Content-Digest`, `Repr-Digest`) from a
/// header or trailer section of a transformed body: they describe bytes the client does not
/// get (see the module documentation).
pub fn remove_digests(fields: &mut HeaderMap) {
    for digest in DIGESTS {
        fields.remove(HeaderName::from_static(digest));
    }
}

/// What every transform does besides `Content-Encoding`.
fn forget_identity_bytes(headers: &mut HeaderMap) {
    headers.remove(CONTENT_LENGTH);
    headers.remove(ACCEPT_RANGES);
    remove_digests(headers);
    forget_announced_digests(headers);
    weaken_etag(headers);
    add_vary_accept_encoding(headers);
}

/// Takes the digests out of `Trailer` (RFC 9110 §6.6.2), which announces the trailer fields
/// to come: the body drops them. A `Trailer` left with no member is removed.
fn forget_announced_digests(headers: &mut HeaderMap) {
    if !headers.contains_key(TRAILER) {
        return;
    }
    let members: Vec<&[u8]> = list::elements(headers.get_all(TRAILER))
        .filter(|member| {
            !DIGESTS
                .iter()
                .any(|d| member.eq_ignore_ascii_case(d.as_bytes()))
        })
        .collect();
    let value = if members.is_empty() {
        None
    } else {
        HeaderValue::from_bytes(&members.join(&b", "[..])).ok()
    };
    headers.remove(TRAILER);
    if let Some(value) = value {
        headers.insert(TRAILER, value);
    }
}

/// `W/` and the opaque tag of a valid entity-tag, or `None`.
fn weak_entity_tag(value: &[u8]) -> Option<HeaderValue> {
    let value = list::trim_ows(value);
    let opaque = value.strip_prefix(b"W/").unwrap_or(value);
    let inner = opaque.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    // etagc = %x21 / %x23-7E / obs-text: visible ASCII except DQUOTE, and 0x80-0xFF.
    if !inner
        .iter()
        .all(|&b| b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80)
    {
        return None;
    }
    HeaderValue::from_bytes(&[&b"W/"[..], opaque].concat()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn a_range_validated_by_a_date_is_dropped_one_by_a_tag_is_not() {
        let date = "Tue, 14 Nov 2023 22:13:20 GMT";
        for (if_range, dropped) in [
            (date, true),
            ("\"v1\"", false),
            (" \"v1\"", false),
            ("W/\"v1\"", false),
        ] {
            let mut headers = map(&[("range", "bytes=3000-"), ("if-range", if_range)]);
            assert_eq!(
                drop_range_validated_by_date(&mut headers),
                dropped,
                "{if_range}"
            );
            assert_eq!(headers.contains_key(RANGE), !dropped, "{if_range}");
            assert_eq!(headers.contains_key(IF_RANGE), !dropped, "{if_range}");
        }
        // A plain range, or an If-Range with no range, stays as it is.
        let mut headers = map(&[("range", "bytes=3000-")]);
        assert!(!drop_range_validated_by_date(&mut headers));
        assert!(headers.contains_key(RANGE));
        let mut headers = map(&[("if-range", date)]);
        assert!(!drop_range_validated_by_date(&mut headers));
        assert!(headers.contains_key(IF_RANGE));
    }

    fn lines(headers: &HeaderMap, name: HeaderName) -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }

    #[test]
    fn a_304_keeps_its_validators_and_loses_what_describes_the_bytes() {
        let mut headers = map(&[
            ("etag", "W/\"v7\""),
            ("vary", "Accept-Encoding"),
            ("cache-control", "max-age=60"),
            ("content-encoding", "gzip"),
            ("content-length", "9000"),
            ("content-digest", "sha-256=:AAAA:"),
        ]);
        trim_not_modified(&mut headers);
        let mut names: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["cache-control", "etag", "vary"]);
    }

    #[test]
    fn vary_merge() {
        let rows: &[(&[&str], &[&str])] = &[
            (&[], &["Accept-Encoding"]),
            (&["Cookie"], &["Cookie, Accept-Encoding"]),
            (&["cookie, accept-encoding"], &["cookie, accept-encoding"]),
            (
                &["Cookie", "User-Agent"],
                &["Cookie, User-Agent, Accept-Encoding"],
            ),
            (&["Cookie", "ACCEPT-ENCODING"], &["Cookie, ACCEPT-ENCODING"]),
            (&["Cookie, cookie", "COOKIE"], &["Cookie, Accept-Encoding"]),
            (&["Origin,, ", ""], &["Origin, Accept-Encoding"]),
            (&["Cookie, \"x, y\", a b"], &["Cookie, Accept-Encoding"]),
            (&["*"], &["*"]),
            (&["Cookie", "*"], &["Cookie", "*"]),
            (&["Cookie, *"], &["Cookie, *"]),
        ];
        for (before, after) in rows {
            let mut headers = HeaderMap::new();
            for line in *before {
                headers.append(VARY, HeaderValue::from_static(line));
            }
            add_vary_accept_encoding(&mut headers);
            assert_eq!(lines(&headers, VARY), *after, "{before:?}");
        }
    }

    #[test]
    fn etag_weakening() {
        let rows: &[(&[&str], &[&str])] = &[
            (&[], &[]),
            (&["\"abc\""], &["W/\"abc\""]),
            (&["W/\"abc\""], &["W/\"abc\""]),
            (&["\"\""], &["W/\"\""]),
            (&["  \"a!#~\"  "], &["W/\"a!#~\""]),
            // Malformed: dropped.
            (&["abc"], &[]),
            (&["\"abc"], &[]),
            (&["w/\"abc\""], &[]),
            (&["W/abc"], &[]),
            (&["\"a\"b\""], &[]),
            (&["\"a b\""], &[]),
            (&["\"a\", \"b\""], &[]),
            // Several lines: dropped.
            (&["\"a\"", "\"b\""], &[]),
            (&["\"a\"", "\"a\""], &[]),
        ];
        for (before, after) in rows {
            let mut headers = HeaderMap::new();
            for line in *before {
                headers.append(ETAG, HeaderValue::from_static(line));
            }
            weaken_etag(&mut headers);
            assert_eq!(lines(&headers, ETAG), *after, "{before:?}");
        }
    }

    #[test]
    fn etag_obs_text_is_kept() {
        let mut headers = HeaderMap::new();
        headers.insert(
            ETAG,
            HeaderValue::from_bytes(b"\"caf\xe9\"").expect("obs-text"),
        );
        weaken_etag(&mut headers);
        assert_eq!(
            headers.get(ETAG).map(HeaderValue::as_bytes),
            Some(&b"W/\"caf\xe9\""[..])
        );
    }

    #[test]
    fn compression_rewrite() {
        let mut headers = map(&[
            ("content-type", "text/html"),
            ("content-length", "1000"),
            ("content-encoding", "identity"),
            ("accept-ranges", "bytes"),
            ("etag", "\"v1\""),
            ("vary", "Cookie"),
            ("content-digest", "sha-256=:x:"),
            ("content-md5", "x"),
            ("last-modified", "Tue, 15 Nov 1994 12:45:26 GMT"),
            ("trailer", "Content-Digest, X-Checksum"),
            ("trailer", "repr-digest"),
        ]);
        let framing = rewrite_for_compression(&mut headers, Coding::Gzip, Version::HTTP_11);
        assert_eq!(framing, Framing::Chunked);
        assert_eq!(
            headers,
            map(&[
                ("content-type", "text/html"),
                ("content-encoding", "gzip"),
                ("etag", "W/\"v1\""),
                ("vary", "Cookie, Accept-Encoding"),
                ("last-modified", "Tue, 15 Nov 1994 12:45:26 GMT"),
                ("trailer", "X-Checksum"),
            ])
        );
    }

    #[test]
    fn digest_trailers_are_removed_and_no_longer_announced() {
        let mut trailers = map(&[
            ("content-digest", "sha-256=:x:"),
            ("repr-digest", "sha-256=:y:"),
            ("content-md5", "z"),
            ("digest", "md5=z"),
            ("x-checksum", "abc"),
        ]);
        remove_digests(&mut trailers);
        assert_eq!(trailers, map(&[("x-checksum", "abc")]));
        let mut headers = map(&[("trailer", "Content-MD5, Digest")]);
        rewrite_for_decompression(&mut headers, Version::HTTP_11);
        assert!(!headers.contains_key(TRAILER), "{headers:?}");
    }

    #[test]
    fn framing_by_version() {
        let rows = [
            (Version::HTTP_09, Framing::CloseDelimited),
            (Version::HTTP_10, Framing::CloseDelimited),
            (Version::HTTP_11, Framing::Chunked),
            (Version::HTTP_2, Framing::Frames),
            (Version::HTTP_3, Framing::Frames),
        ];
        for (version, framing) in rows {
            let mut headers = HeaderMap::new();
            assert_eq!(
                rewrite_for_compression(&mut headers, Coding::Deflate, version),
                framing,
                "{version:?}"
            );
            assert_eq!(lines(&headers, CONTENT_ENCODING), ["deflate"]);
        }
    }

    #[test]
    fn decompression_rewrite() {
        let mut headers = map(&[
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
            ("content-length", "120"),
            ("accept-ranges", "bytes"),
            ("etag", "\"gz-1\""),
            ("vary", "*"),
        ]);
        let framing = rewrite_for_decompression(&mut headers, Version::HTTP_10);
        assert_eq!(framing, Framing::CloseDelimited);
        assert_eq!(
            headers,
            map(&[
                ("content-type", "application/json"),
                ("etag", "W/\"gz-1\""),
                ("vary", "*"),
            ])
        );
    }

    #[test]
    fn strips_accept_encoding() {
        let mut headers = map(&[
            ("accept-encoding", "gzip"),
            ("accept-encoding", "br"),
            ("accept", "*/*"),
        ]);
        strip_accept_encoding(&mut headers);
        assert_eq!(headers, map(&[("accept", "*/*")]));
    }
}
