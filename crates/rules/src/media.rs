//! Media types (RFC 9110 §8.3.1) as far as the compression rules need them: the
//! `type/subtype` essence, lower-cased, parameters dropped.

use std::fmt;

use http::header::{HeaderMap, CONTENT_TYPE};

use crate::list;

/// A media type without its parameters, in lower case: `text/html; charset=UTF-8` is
/// `text/html`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MediaType {
    /// `type/subtype`, lower case.
    essence: String,
    /// The index of the `/` in `essence`.
    slash: usize,
}

impl MediaType {
    /// Parses a `Content-Type` value: `type "/" subtype`, both tokens, then optional
    /// parameters that are ignored. `None` when the essence is not two tokens.
    pub fn parse(value: &[u8]) -> Option<MediaType> {
        let end = value.iter().position(|&b| b == b';').unwrap_or(value.len());
        let essence = list::trim_ows(&value[..end]);
        let slash = essence.iter().position(|&b| b == b'/')?;
        let (type_, subtype) = (&essence[..slash], &essence[slash + 1..]);
        if !list::is_token(type_) || !list::is_token(subtype) {
            return None;
        }
        // Tokens are ASCII, so this never fails; `from_utf8` keeps it free of panics anyway.
        let essence = std::str::from_utf8(essence).ok()?.to_ascii_lowercase();
        Some(MediaType { essence, slash })
    }

    /// The response's media type, or `None` when `Content-Type` is missing, unparsable, or
    /// given more than once with different types (RFC 9110 §8.3 allows one).
    pub fn from_headers(headers: &HeaderMap) -> Option<MediaType> {
        let mut found: Option<MediaType> = None;
        for value in headers.get_all(CONTENT_TYPE) {
            let parsed = MediaType::parse(value.as_bytes())?;
            match &found {
                Some(seen) if *seen != parsed => return None,
                _ => found = Some(parsed),
            }
        }
        found
    }

    /// `type/subtype`, lower case.
    pub fn essence(&self) -> &str {
        &self.essence
    }

    /// The top-level type: `text` in `text/html`.
    pub fn type_(&self) -> &str {
        &self.essence[..self.slash]
    }

    /// The subtype: `html` in `text/html`.
    pub fn subtype(&self) -> &str {
        &self.essence[self.slash + 1..]
    }

    /// Whether this is a `multipart/*` type (RFC 2046 §5.1).
    pub fn is_multipart(&self) -> bool {
        self.type_() == "multipart"
    }

    /// Whether this is gRPC: `application/grpc` or `application/grpc+FORMAT` (the gRPC over
    /// HTTP/2 protocol's `Content-Type`).
    pub fn is_grpc(&self) -> bool {
        self.type_() == "application"
            && self
                .subtype()
                .strip_prefix("grpc")
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('+'))
    }

    /// Whether this is `text/event-stream` (server-sent events).
    pub fn is_event_stream(&self) -> bool {
        self.essence == "text/event-stream"
    }
}

impl fmt::Display for MediaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.essence)
    }
}

#[cfg(test)]
mod tests {
    use http::header::HeaderValue;

    use super::*;

    fn essence(value: &str) -> Option<String> {
        MediaType::parse(value.as_bytes()).map(|m| m.essence().to_owned())
    }

    #[test]
    fn parses_the_essence() {
        assert_eq!(essence("text/html").as_deref(), Some("text/html"));
        assert_eq!(
            essence("Text/HTML; charset=UTF-8").as_deref(),
            Some("text/html")
        );
        assert_eq!(
            essence(" application/json ;charset=utf-8").as_deref(),
            Some("application/json")
        );
        assert_eq!(essence("image/svg+xml").as_deref(), Some("image/svg+xml"));
    }

    #[test]
    fn refuses_what_is_not_two_tokens() {
        for value in [
            "",
            "text",
            "text/",
            "/html",
            "text/ html",
            "text/html/x",
            "te xt/html",
        ] {
            assert_eq!(essence(value), None, "{value:?}");
        }
        assert_eq!(MediaType::parse(b"text/h\xe9ml"), None);
    }

    #[test]
    fn parts() {
        let media = MediaType::parse(b"Multipart/Byteranges; boundary=x").expect("valid");
        assert_eq!(media.type_(), "multipart");
        assert_eq!(media.subtype(), "byteranges");
        assert!(media.is_multipart());
        assert!(MediaType::parse(b"text/event-stream")
            .expect("valid")
            .is_event_stream());
        assert_eq!(media.to_string(), "multipart/byteranges");
    }

    #[test]
    fn several_header_lines_must_agree() {
        let mut headers = HeaderMap::new();
        assert_eq!(MediaType::from_headers(&headers), None);
        headers.append(CONTENT_TYPE, HeaderValue::from_static("text/html"));
        headers.append(
            CONTENT_TYPE,
            HeaderValue::from_static("text/HTML; charset=utf-8"),
        );
        assert_eq!(
            MediaType::from_headers(&headers).map(|m| m.essence().to_owned()),
            Some("text/html".to_owned())
        );
        headers.append(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert_eq!(MediaType::from_headers(&headers), None);
    }
}
