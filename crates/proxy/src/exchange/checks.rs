//! What a request head must be before anything goes upstream: its size, its `Host`, its
//! transfer coding (RFC 9112 §3.2, §6.1). Each check answers with the error the client gets.

use http::header::HOST;
use http::request::Parts as RequestParts;
use http::uri::Authority;
use http::{Method, StatusCode, Version};

use crate::error::ProxyError;
use zipwire_rules::forward;

/// 414 when the request target alone is over the head limit, 431 when the whole head is
/// (nginx answers 414 for an over-long request line too). hyper's read buffer leaves room past
/// the limit for a long request line to be parsed, so that it can be told apart.
pub(super) fn head_size(request: &RequestParts, limit: usize) -> Result<(), ProxyError> {
    let target = request.uri.authority().map_or(0, |a| a.as_str().len() + 7)
        + request.uri.path_and_query().map_or(1, |p| p.as_str().len());
    if target > limit {
        return Err(ProxyError::Refused {
            status: StatusCode::URI_TOO_LONG,
            reason: "request target over the head limit",
        });
    }
    // The request line and every field line as sent, give or take optional whitespace.
    let fields: usize = request
        .headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if request.method.as_str().len() + target + 12 + fields + 2 > limit {
        return Err(ProxyError::Refused {
            status: StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            reason: "request head over the limit",
        });
    }
    Ok(())
}

/// RFC 9112 §3.2: 400 for an HTTP/1.1 request without `Host`, for more than one `Host`
/// line, and for a `Host` that is not `host[:port]` (empty is allowed: a target without
/// authority).
pub(super) fn host(request: &RequestParts) -> Result<(), ProxyError> {
    let mut hosts = request.headers.get_all(HOST).iter();
    let authority = request.uri.authority().map(Authority::as_str);
    let reason = match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => "more than one Host",
        // RFC 9113 §8.3.1: a Host that names another entity than `:authority` is malformed.
        (Some(host), None)
            if request.version == Version::HTTP_2
                && authority
                    .is_some_and(|a| !a.as_bytes().eq_ignore_ascii_case(host.as_bytes())) =>
        {
            "Host differs from :authority"
        }
        (None, _) if request.version == Version::HTTP_11 => "no Host in an HTTP/1.1 request",
        (Some(host), None)
            if !host.is_empty()
                && (host.as_bytes().contains(&b'@')
                    || Authority::try_from(host.as_bytes()).is_err()) =>
        {
            "Host is not host[:port]"
        }
        _ => return Ok(()),
    };
    Err(ProxyError::BadRequest { reason })
}

/// RFC 9112 §3.2.4, RFC 9113 §8.3.1: the asterisk-form target (`*`) is for `OPTIONS` alone;
/// `GET *` gets 400 rather than going upstream as a request for a path named `*`.
pub(super) fn asterisk_form(request: &RequestParts) -> Result<(), ProxyError> {
    if request.uri.authority().is_none()
        && request.uri.path() == "*"
        && request.method != Method::OPTIONS
    {
        return Err(ProxyError::BadRequest {
            reason: "asterisk-form target in a request other than OPTIONS",
        });
    }
    Ok(())
}

/// RFC 9113 §8.2.1: an HTTP/2 field value that begins or ends with a space or a tab makes the
/// request malformed. HTTP/1.1 parsers strip that whitespace, so passed on as it came it would be
/// read otherwise by the upstream than by the proxy.
pub(super) fn http2_field_values(request: &RequestParts) -> Result<(), ProxyError> {
    if request.version != http::Version::HTTP_2 {
        return Ok(());
    }
    let padded = |value: &http::HeaderValue| {
        let bytes = value.as_bytes();
        let blank = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
        blank(bytes.first()) || blank(bytes.last())
    };
    if request.headers.values().any(padded) {
        return Err(ProxyError::BadRequest {
            reason: "HTTP/2 field value with leading or trailing whitespace",
        });
    }
    Ok(())
}

/// 501 for a request whose transfer coding is anything but `chunked` alone (RFC 9112 §6.1; as
/// nginx), see [`forward::is_chunked_or_none`].
pub(super) fn transfer_coding(request: &RequestParts) -> Result<(), ProxyError> {
    if forward::is_chunked_or_none(&request.headers) {
        return Ok(());
    }
    Err(ProxyError::Refused {
        status: StatusCode::NOT_IMPLEMENTED,
        reason: "transfer coding other than chunked",
    })
}

/// 413 for a request whose `Content-Length` is over `max_body` (nginx's
/// `client_max_body_size`), before anything goes upstream. A body without a length is
/// counted as it streams (see [`super::request_body`]).
pub(super) fn body_size(request: &RequestParts, max_body: Option<u64>) -> Result<(), ProxyError> {
    let declared = forward::content_length(&request.headers);
    match (declared, max_body) {
        (Some(declared), Some(max)) if declared > max => Err(super::request_body::too_large()),
        _ => Ok(()),
    }
}
