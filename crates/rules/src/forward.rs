//! Header filters for forwarding a message through the proxy: hop-by-hop fields removed in
//! both directions, `X-Forwarded-For` and `Via` added to requests.

use std::net::IpAddr;

use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, TE, TRAILER, TRANSFER_ENCODING,
    UPGRADE, VIA,
};
use http::Version;

use crate::list;

/// `X-Forwarded-For` (de facto standard; RFC 7239's `Forwarded` is its successor).
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Fields meant for every recipient of the message, which `Connection` may not name (RFC
/// 9110 §7.6.1: "Cache-Control is never appropriate as a connection option"), and which a
/// sender naming them must not get the proxy to drop: without its `Host` a request would
/// reach the origin's default site while a cache filed the answer under the client's `Host`;
/// without `Content-Encoding` a brotli body would be compressed again and labelled gzip;
/// without `Vary` or `Cache-Control` one user's response could be served to another. nginx and
/// HAProxy remove no field that `Connection` names, so such messages pass them whole too.
const END_TO_END: [HeaderName; 17] = [
    http::header::HOST,
    http::header::AUTHORIZATION,
    http::header::COOKIE,
    http::header::SET_COOKIE,
    http::header::CONTENT_LENGTH,
    http::header::CONTENT_TYPE,
    http::header::CONTENT_ENCODING,
    http::header::CONTENT_RANGE,
    http::header::RANGE,
    http::header::IF_RANGE,
    http::header::VARY,
    http::header::CACHE_CONTROL,
    http::header::PRAGMA,
    http::header::ETAG,
    http::header::LAST_MODIFIED,
    http::header::EXPIRES,
    TRAILER,
];

/// Removes the fields that describe one connection rather than the message (RFC 9110
/// §7.6.1): `Connection` and every field it names (but those meant for every recipient,
/// `END_TO_END`), `Keep-Alive`, `Proxy-Connection`, `TE`, `Transfer-Encoding` and
/// `Upgrade`. Each side of the proxy frames its own connection.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = list::elements(headers.get_all(CONNECTION))
        .filter_map(|name| HeaderName::from_bytes(name).ok())
        .collect();
    for name in named {
        if !END_TO_END.contains(&name) {
            headers.remove(name);
        }
    }
    for name in [CONNECTION, TE, TRANSFER_ENCODING, UPGRADE] {
        headers.remove(name);
    }
    for name in ["keep-alive", "proxy-connection"] {
        headers.remove(HeaderName::from_static(name));
    }
}

/// Writes `Content-Length` as one decimal value, as the proxy read it: where it came as a
/// list (`5, 5`), on several lines, or with leading zeros (`0005`). hyper reads such a
/// message when every value agrees (RFC 9112 §6.3 lets a recipient take the one value, RFC
/// 9110 §8.6 lets it write that value alone), but forwarded as it came, the list is no valid
/// field value, an HTTP/2 client (curl, nghttp2) refuses a stream with two `content-length`
/// fields, and a next hop that reads the digits otherwise (leading zeros as octal) would
/// frame the body differently. Values that disagree, which hyper refuses before this, are
/// left alone.
pub fn single_content_length(headers: &mut HeaderMap) {
    let values: Vec<&[u8]> = list::elements(headers.get_all(CONTENT_LENGTH)).collect();
    if values.is_empty() {
        return;
    }
    let parsed: Option<Vec<u64>> = values
        .iter()
        .map(|value| std::str::from_utf8(value).ok()?.parse().ok())
        .collect();
    if let Some([length, rest @ ..]) = parsed.as_deref() {
        let canonical = rest.is_empty() && values.first() == Some(&length.to_string().as_bytes());
        if !canonical && rest.iter().all(|value| value == length) {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(*length));
        }
    }
}

/// The largest `Content-Length` a request may go upstream with: 2^63 - 1, as nginx allows
/// (`off_t`). A next hop that reads the length into a signed 64-bit integer would read a
/// larger one as negative, and frame the body otherwise than the proxy did.
pub const MAX_CONTENT_LENGTH: u64 = i64::MAX as u64;

/// The single `Content-Length` of `headers`, when it is one decimal value.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// Whether a message's transfer coding, if any, is `chunked` alone: the only one the proxy
/// reads. hyper reads a body whose codings end in `chunked` by its chunks and any other
/// until the connection closes, leaving the other codings on the bytes; forwarding those
/// bytes once `Transfer-Encoding` is removed would pass them off as the content.
pub fn is_chunked_or_none(headers: &HeaderMap) -> bool {
    if !headers.contains_key(TRANSFER_ENCODING) {
        return true;
    }
    let mut codings = list::elements(headers.get_all(TRANSFER_ENCODING));
    matches!(
        (codings.next(), codings.next()),
        (Some(coding), None) if coding.eq_ignore_ascii_case(b"chunked")
    )
}

/// `X-Forwarded-Proto`.
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// `X-Forwarded-Host`.
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

/// Sets `X-Forwarded-Proto` to the scheme the client used (`https` on a TLS listener), in
/// place of any the client sent: no client is trusted to say it (Caddy replaces it too).
pub fn set_forwarded_proto(headers: &mut HeaderMap, tls: bool) {
    let scheme = if tls { "https" } else { "http" };
    headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static(scheme));
}

/// Sets `X-Forwarded-Host` to the `host` the client asked for (its `Host`, or HTTP/2's
/// `:authority`), in place of any the client sent; removes it when there is none.
pub fn set_forwarded_host(headers: &mut HeaderMap, host: Option<HeaderValue>) {
    match host {
        Some(host) => {
            headers.insert(X_FORWARDED_HOST, host);
        }
        None => {
            headers.remove(X_FORWARDED_HOST);
        }
    }
}

/// Appends the client address to `X-Forwarded-For`, merging earlier lines into one so that
/// applications reading a single line see every hop.
pub fn add_forwarded_for(headers: &mut HeaderMap, client: IpAddr) {
    let mut value: Vec<u8> = Vec::new();
    for line in headers.get_all(&X_FORWARDED_FOR) {
        let line = list::trim_ows(line.as_bytes());
        if !line.is_empty() {
            value.extend_from_slice(line);
            value.extend_from_slice(b", ");
        }
    }
    value.extend_from_slice(client.to_string().as_bytes());
    match HeaderValue::from_bytes(&value) {
        Ok(value) => {
            headers.insert(X_FORWARDED_FOR, value);
        }
        // Earlier lines were valid values, so the join is one; should it not be, the address
        // still goes on its own line.
        Err(_) => {
            headers.append(X_FORWARDED_FOR, client_value(client));
        }
    }
}

/// The `Via` entries for a pseudonym: one for requests received as HTTP/1.0, one for 1.1,
/// one for HTTP/2.
#[derive(Clone, Debug)]
pub struct ViaEntries {
    http10: HeaderValue,
    http11: HeaderValue,
    http2: HeaderValue,
}

impl ViaEntries {
    /// Entries naming `pseudonym`; `None` when it cannot appear in a header value.
    pub fn new(pseudonym: &str) -> Option<ViaEntries> {
        Some(ViaEntries {
            http10: HeaderValue::try_from(format!("1.0 {pseudonym}")).ok()?,
            http11: HeaderValue::try_from(format!("1.1 {pseudonym}")).ok()?,
            http2: HeaderValue::try_from(format!("2 {pseudonym}")).ok()?,
        })
    }

    /// Appends this proxy's entry for a request received with `version` (RFC 9110 §7.6.3:
    /// the protocol version received, then the pseudonym).
    pub fn append(&self, headers: &mut HeaderMap, version: Version) {
        let entry = if version == Version::HTTP_10 || version == Version::HTTP_09 {
            &self.http10
        } else if version == Version::HTTP_2 {
            &self.http2
        } else {
            &self.http11
        };
        headers.append(VIA, entry.clone());
    }
}

fn client_value(client: IpAddr) -> HeaderValue {
    HeaderValue::try_from(client.to_string()).unwrap_or(HeaderValue::from_static("unknown"))
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn headers(lines: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for &(name, value) in lines {
            map.append(name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn hop_by_hop_fields_and_those_connection_names_are_removed() {
        let mut map = headers(&[
            ("connection", "keep-alive, x-hop, Trailer"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("x-hop", "1"),
            ("trailer", "x-checksum"),
            ("cookie", "a=b"),
        ]);
        strip_hop_by_hop(&mut map);
        let left: Vec<_> = map.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["trailer", "cookie"]);
    }

    #[test]
    fn fields_meant_for_every_recipient_stay_when_connection_names_them() {
        let mut map = headers(&[
            (
                "connection",
                "Host, content-encoding, VARY, cache-control, x-hop",
            ),
            ("host", "example.test"),
            ("content-encoding", "br"),
            ("vary", "Cookie"),
            ("cache-control", "no-transform"),
            ("x-hop", "1"),
        ]);
        strip_hop_by_hop(&mut map);
        let mut left: Vec<_> = map.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["cache-control", "content-encoding", "host", "vary"]);
    }

    #[test]
    fn a_content_length_list_or_repeated_becomes_one_value() {
        let rows: &[(&[&str], &[&str])] = &[
            (&["5"], &["5"]),
            (&["5, 5"], &["5"]),
            (&["5", "5"], &["5"]),
            (&["5,5", " 5 "], &["5"]),
            (&["0005"], &["5"]),
            (&["18446744073709551615"], &["18446744073709551615"]),
            // Disagreeing or unreadable: hyper refuses these; nothing is made up here.
            (&["5, 6"], &["5, 6"]),
            (&["5", "x"], &["5", "x"]),
            (&[], &[]),
        ];
        for (lines, expected) in rows {
            let mut map = HeaderMap::new();
            for line in *lines {
                map.append(CONTENT_LENGTH, HeaderValue::from_static(line));
            }
            single_content_length(&mut map);
            let got: Vec<_> = map.get_all(CONTENT_LENGTH).iter().collect();
            assert_eq!(got, *expected, "{lines:?}");
        }
    }

    #[test]
    fn only_chunked_alone_is_a_transfer_coding_read() {
        let rows: &[(&[&str], bool)] = &[
            (&[], true),
            (&["chunked"], true),
            (&["Chunked"], true),
            (&["gzip, chunked"], false),
            (&["gzip", "chunked"], false),
            (&["chunked, chunked"], false),
            (&["gzip"], false),
        ];
        for (lines, expected) in rows {
            let mut map = HeaderMap::new();
            for line in *lines {
                map.append(TRANSFER_ENCODING, HeaderValue::from_static(line));
            }
            assert_eq!(is_chunked_or_none(&map), *expected, "{lines:?}");
        }
    }

    #[test]
    fn forwarded_for_lines_are_merged_and_the_client_appended() {
        let client = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
        let mut map = headers(&[
            ("x-forwarded-for", "203.0.113.1"),
            ("x-forwarded-for", " 198.51.100.2 "),
        ]);
        add_forwarded_for(&mut map, client);
        assert_eq!(
            map.get_all("x-forwarded-for").iter().collect::<Vec<_>>(),
            ["203.0.113.1, 198.51.100.2, 192.0.2.7"]
        );
        let mut empty = HeaderMap::new();
        add_forwarded_for(&mut empty, client);
        assert_eq!(empty["x-forwarded-for"], "192.0.2.7");
    }

    #[test]
    fn via_names_the_version_received() {
        let via = ViaEntries::new("zipwire").expect("valid pseudonym");
        let mut map = headers(&[("via", "1.1 edge")]);
        via.append(&mut map, Version::HTTP_10);
        via.append(&mut map, Version::HTTP_2);
        assert_eq!(
            map.get_all(VIA).iter().collect::<Vec<_>>(),
            ["1.1 edge", "1.0 zipwire", "2 zipwire"]
        );
        assert!(ViaEntries::new("bad\nname").is_none());
    }
}
