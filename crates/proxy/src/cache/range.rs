//! Byte ranges served from a stored response (RFC 9110 §14), as Varnish and nginx's cache
//! do: a GET with `Range` on a stored 200 that the origin sent in no content coding gets a
//! 206 of the stored bytes, without asking the origin.
//!
//! One range per request, as Varnish serves them: a request for several gets the whole
//! 200 (§14.2 lets a server ignore `Range`), which spares `multipart/byteranges` for the
//! rare client that asks. A range is always of the identity bytes, whatever coding the
//! client's 200 would have: a cached 206 is what the origin's would have been, so a resumed
//! download joins bytes of one representation (see `decide::rules`, which passes an
//! origin's 206 unchanged). `If-Range` with an entity tag is compared here (strong
//! comparison, §13.1.5); one with a date goes to the origin as without a cache, where a
//! client that may hold a recoded 200 has the range dropped (`drop_range_validated_by_date`).

use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderValue, CONTENT_LENGTH, CONTENT_RANGE, ETAG, IF_RANGE, RANGE, TRANSFER_ENCODING,
};
use http::request::Parts;
use http::{Method, StatusCode, Version};

use crate::cache::serve::Served;
use crate::error::ProxyError;
use zipwire_cache::{variant, Entry};
use zipwire_rules::headers;
use zipwire_rules::Rules;
use zipwire_rules::{decide, Bypass, Decision, Vary};
use zipwire_rules::{RequestFacts, ResponseFacts};

/// What the cache makes of a request's `Range`, for a stored representation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ranged {
    /// No range to serve: the whole response (no `Range`, one the cache ignores, or an
    /// `If-Range` that does not match).
    Whole,
    /// Bytes `first..=last` of the representation.
    Part { first: u64, last: u64 },
    /// No byte of the range is in the representation: 416.
    Unsatisfiable,
}

/// The 206 or 416 that `request` gets from `entry`, or `None` when it gets the whole
/// response. `age` is the entry's `Age`.
pub(crate) fn respond(
    entry: &Entry,
    request: &Parts,
    facts: &RequestFacts,
    rules: &Rules,
    age: HeaderValue,
) -> Result<Option<Served>, ProxyError> {
    if request.method != Method::GET || !zipwire_cache::policy::serves_ranges(entry) {
        return Ok(None);
    }
    let length = entry.body.length;
    let (first, last) = match select(&request.headers, entry, length) {
        Ranged::Whole => return Ok(None),
        Ranged::Unsatisfiable => return Ok(Some(unsatisfiable(length))),
        Ranged::Part { first, last } => (first, last),
    };
    let identity = variant::identity(&entry.body).map_err(ProxyError::Gunzip)?;
    let part = usize::try_from(first)
        .ok()
        .zip(usize::try_from(last).ok())
        .filter(|&(_, last)| last < identity.len())
        .map(|(first, last)| identity.slice(first..=last));
    let Some(part) = part else {
        // The stored bytes are not the length recorded with them: never a wrong 206.
        return Ok(None);
    };
    // The 206 repeats what its 200 would carry of `Vary` (`partial_vary`), and never a
    // recoded 200's weakened tag: it is part of the identity representation.
    let decision = decide(
        facts,
        &ResponseFacts::from_parts(StatusCode::PARTIAL_CONTENT, &entry.headers),
        rules,
    );
    let mut fields = entry.headers.clone();
    headers::apply(&decision, &mut fields, Version::HTTP_11);
    fields.remove(TRANSFER_ENCODING);
    // A digest of the content would name the whole body's bytes, not the part's.
    headers::remove_digests(&mut fields);
    fields.insert(
        CONTENT_RANGE,
        content_range(&format!("{first}-{last}"), length),
    );
    fields.insert(CONTENT_LENGTH, HeaderValue::from(part.len()));
    fields.insert(http::header::AGE, age);
    Ok(Some(Served {
        status: StatusCode::PARTIAL_CONTENT,
        headers: fields,
        body: part,
        decision,
        delta: None,
        used: None,
    }))
}

/// §15.5.17: a 416 names the representation's length.
fn unsatisfiable(length: u64) -> Served {
    let mut fields = HeaderMap::new();
    fields.insert(CONTENT_RANGE, content_range("*", length));
    fields.insert(CONTENT_LENGTH, HeaderValue::from(0));
    Served {
        status: StatusCode::RANGE_NOT_SATISFIABLE,
        headers: fields,
        body: Bytes::new(),
        decision: Decision::Pass {
            reason: Bypass::Status,
            vary: Vary::Unchanged,
        },
        delta: None,
        used: None,
    }
}

/// `Content-Range: bytes RANGE/LENGTH`.
fn content_range(range: &str, length: u64) -> HeaderValue {
    HeaderValue::try_from(format!("bytes {range}/{length}"))
        .unwrap_or(HeaderValue::from_static("bytes */0"))
}

/// The range `request_headers` ask of `entry`'s representation, `length` bytes long.
pub(crate) fn select(request_headers: &HeaderMap, entry: &Entry, length: u64) -> Ranged {
    let mut lines = request_headers.get_all(RANGE).iter();
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return Ranged::Whole;
    };
    if let Some(if_range) = request_headers.get(IF_RANGE) {
        if !strong_match(
            if_range.as_bytes(),
            entry.headers.get(ETAG).map(|v| v.as_bytes()),
        ) {
            return Ranged::Whole;
        }
    }
    parse(line.as_bytes(), length)
}

/// §13.1.5: `If-Range` matches only a strong tag equal, octet for octet, to the stored one.
fn strong_match(if_range: &[u8], stored: Option<&[u8]>) -> bool {
    let if_range = if_range.trim_ascii();
    match stored {
        Some(stored) => {
            let stored = stored.trim_ascii();
            if_range.starts_with(b"\"") && stored.starts_with(b"\"") && if_range == stored
        }
        None => false,
    }
}

/// One `bytes` range of §14.1.2 against `length` bytes: `first-last`, `first-` or
/// `-suffix`. Anything the cache does not serve (another unit, several ranges, a syntax
/// error, an empty representation) is [`Ranged::Whole`].
fn parse(value: &[u8], length: u64) -> Ranged {
    let value = value.trim_ascii();
    let Some(equals) = value.iter().position(|&byte| byte == b'=') else {
        return Ranged::Whole;
    };
    let (unit, set) = (value[..equals].trim_ascii(), &value[equals + 1..]);
    if !unit.eq_ignore_ascii_case(b"bytes") || length == 0 {
        return Ranged::Whole;
    }
    // A list may hold empty elements (RFC 9110 §5.6.1); more than one range is refused.
    let mut specs = set
        .split(|&byte| byte == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|spec| !spec.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else {
        return Ranged::Whole;
    };
    let Some(dash) = spec.iter().position(|&byte| byte == b'-') else {
        return Ranged::Whole;
    };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if first.is_empty() {
        // A suffix: the last `suffix` bytes, or all of them when fewer.
        return match number(last) {
            Some(0) => Ranged::Unsatisfiable,
            Some(suffix) => Ranged::Part {
                first: length.saturating_sub(suffix),
                last: length - 1,
            },
            None => Ranged::Whole,
        };
    }
    let Some(first) = number(first) else {
        return Ranged::Whole;
    };
    let last = match last.is_empty() {
        true => u64::MAX,
        false => match number(last) {
            Some(last) if last >= first => last,
            // `last < first` makes the whole field invalid (§14.1.1): ignored.
            _ => return Ranged::Whole,
        },
    };
    if first >= length {
        return Ranged::Unsatisfiable;
    }
    Ranged::Part {
        first,
        last: last.min(length - 1),
    }
}

/// 1*DIGIT as a number; past `u64::MAX` it saturates (a position beyond any representation).
fn number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u64, |sum, &digit| {
        sum.saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(first: u64, last: u64) -> Ranged {
        Ranged::Part { first, last }
    }

    #[test]
    fn parses_the_three_forms_and_clamps_to_the_length() {
        let cases: &[(&str, Ranged)] = &[
            ("bytes=0-9", part(0, 9)),
            ("bytes=10-", part(10, 99)),
            ("bytes=90-200", part(90, 99)),
            ("bytes=-10", part(90, 99)),
            ("bytes=-1000", part(0, 99)),
            ("BYTES = 5-5", part(5, 5)),
            ("bytes=0-9,", part(0, 9)),
            ("bytes= , 3-4", part(3, 4)),
            ("bytes=99-", part(99, 99)),
            ("bytes=0-99999999999999999999999", part(0, 99)),
            ("bytes=100-", Ranged::Unsatisfiable),
            ("bytes=100-200", Ranged::Unsatisfiable),
            ("bytes=99999999999999999999999-", Ranged::Unsatisfiable),
            ("bytes=-0", Ranged::Unsatisfiable),
            ("bytes=0-1,5-6", Ranged::Whole),
            ("bytes=5-4", Ranged::Whole),
            ("bytes=a-4", Ranged::Whole),
            ("bytes=-", Ranged::Whole),
            ("bytes=1-2-3", Ranged::Whole),
            ("bytes=+1-2", Ranged::Whole),
            ("bytes=", Ranged::Whole),
            ("items=0-9", Ranged::Whole),
            ("0-9", Ranged::Whole),
        ];
        for (value, expected) in cases {
            assert_eq!(parse(value.as_bytes(), 100), *expected, "{value}");
        }
        assert_eq!(
            parse(b"bytes=0-9", 0),
            Ranged::Whole,
            "nothing to range over"
        );
        assert_eq!(parse(b"bytes=-5", 3), part(0, 2));
    }

    #[test]
    fn if_range_needs_the_same_strong_tag() {
        assert!(strong_match(b"\"v1\"", Some(b"\"v1\"")));
        assert!(strong_match(b" \"v1\" ", Some(b"\"v1\"")));
        assert!(!strong_match(b"\"v2\"", Some(b"\"v1\"")));
        assert!(!strong_match(b"W/\"v1\"", Some(b"W/\"v1\"")));
        assert!(!strong_match(b"\"v1\"", Some(b"W/\"v1\"")));
        assert!(!strong_match(b"\"v1\"", None));
    }
}
