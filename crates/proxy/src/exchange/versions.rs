//! Between HTTP versions: a response goes to the client in the proxy's own version (or as
//! HTTP/2 to an HTTP/2 client, without HTTP/1's connection fields), and an HTTP/2 request
//! reaches an HTTP/1.1 upstream with the fields that version needs.

use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, COOKIE, HOST, TE,
    TRANSFER_ENCODING, UPGRADE,
};
use http::{Response, Version};
use http_body::Body as _;

use crate::exchange::outgoing::ResponseBody;

/// Sends the response in the proxy's own version, HTTP/1.1 (RFC 9112 §2.3), whatever the
/// upstream spoke: an HTTP/1.0 origin must not cost an HTTP/1.1 client its keep-alive or
/// chunked framing. hyper writes HTTP/1.0 to an HTTP/1.0 client and, for a 1.1 response, adds
/// `Connection: keep-alive` when the client asked for it; a body such a client can only read
/// to the end of the connection (no length: compressed), or a response that closes the
/// connection, goes out as HTTP/1.0 instead, so hyper offers no keep-alive it cannot keep.
///
/// To an HTTP/2 client the response goes as HTTP/2, without the fields that only describe an
/// HTTP/1 connection ([`strip_for_http2`]).
pub(crate) fn set_version(response: &mut Response<ResponseBody>, client: Version) {
    if client == Version::HTTP_2 {
        strip_for_http2(response.headers_mut());
        *response.version_mut() = Version::HTTP_2;
        return;
    }
    let closes = response
        .headers()
        .get(CONNECTION)
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"close"));
    let body = response.body();
    let delimited = response.headers().contains_key(CONTENT_LENGTH)
        || body.is_end_stream()
        || body.size_hint().exact().is_some();
    let old_client = client == Version::HTTP_10 || client == Version::HTTP_09;
    *response.version_mut() = if old_client && (closes || !delimited) {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
}

/// RFC 9113 §8.2.2: an HTTP/2 message carries no connection-specific field (`Connection`,
/// `Keep-Alive`, `Proxy-Connection`, `Transfer-Encoding`, `Upgrade`; `TE` only as `trailers`,
/// which a response never needs): hyper would drop them too, with a warning each time.
fn strip_for_http2(headers: &mut HeaderMap) {
    for name in [CONNECTION, TRANSFER_ENCODING, UPGRADE, TE] {
        headers.remove(name);
    }
    for name in ["keep-alive", "proxy-connection"] {
        headers.remove(HeaderName::from_static(name));
    }
}

/// An HTTP/2 request's fields as an HTTP/1.1 upstream reads them. `Host` comes from
/// `:authority` (RFC 9113 §8.3.1; see `upstream_request_filter`), or is sent empty when the
/// request had neither (RFC 9112 §3.2). Cookies, which HTTP/2 may split into one field per
/// pair for compression, are joined into one line with "; " (RFC 9113 §8.2.3).
pub(crate) fn for_http11_upstream(headers: &mut HeaderMap) {
    if !headers.contains_key(HOST) {
        headers.insert(HOST, HeaderValue::from_static(""));
    }
    let mut cookies = headers.get_all(COOKIE).iter();
    if let (Some(first), Some(_)) = (cookies.next(), cookies.next()) {
        let mut joined = first.as_bytes().to_vec();
        for cookie in headers.get_all(COOKIE).iter().skip(1) {
            joined.extend_from_slice(b"; ");
            joined.extend_from_slice(cookie.as_bytes());
        }
        // Each piece was a valid value, and "; " joins them into one.
        if let Ok(value) = HeaderValue::from_bytes(&joined) {
            headers.insert(COOKIE, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http2_response_carries_no_connection_specific_field() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "close"),
            ("keep-alive", "timeout=5"),
            ("proxy-connection", "keep-alive"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("te", "trailers"),
            ("content-type", "text/html"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_for_http2(&mut headers);
        let left: Vec<_> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["content-type"]);
    }

    #[test]
    fn an_http2_request_gets_a_host_and_one_cookie_line() {
        let mut headers = HeaderMap::new();
        headers.append(COOKIE, HeaderValue::from_static("a=1"));
        headers.append(COOKIE, HeaderValue::from_static("b=2"));
        headers.append(COOKIE, HeaderValue::from_static("c=3"));
        for_http11_upstream(&mut headers);
        assert_eq!(
            headers.get_all(COOKIE).iter().collect::<Vec<_>>(),
            ["a=1; b=2; c=3"]
        );
        assert_eq!(headers[HOST], "");
        let mut one = HeaderMap::new();
        one.insert(HOST, HeaderValue::from_static("example.com"));
        one.insert(COOKIE, HeaderValue::from_static("a=1"));
        for_http11_upstream(&mut one);
        assert_eq!(one[HOST], "example.com");
        assert_eq!(one[COOKIE], "a=1");
    }
}
