//! How long a client keeps a dictionary (RFC 9842 §2.1: as long as the response is fresh, or
//! within its `stale-while-revalidate`), read as Chromium reads it: the freshness lifetime
//! (`max-age`, else `Expires` minus `Date`) plus `stale-while-revalidate`, less the `Age`; a
//! response with `no-store`, `no-cache` or `must-revalidate` is never stored. `s-maxage` is
//! for shared caches and is not read. The store keeps a dictionary as long, and no longer.

use std::time::{Duration, SystemTime};

use http::header::{HeaderMap, AGE, CACHE_CONTROL, DATE, EXPIRES};
use zipwire_rules::list;

/// How long from now a client may use this response as a dictionary; `None` when not at all.
pub fn lifetime(headers: &HeaderMap) -> Option<Duration> {
    let mut max_age = None;
    let mut stale = 0u64;
    for directive in list::elements(headers.get_all(CACHE_CONTROL)) {
        let (name, value) = match directive.iter().position(|&b| b == b'=') {
            Some(at) => (
                list::trim_ows(&directive[..at]),
                Some(list::trim_ows(&directive[at + 1..])),
            ),
            None => (directive, None),
        };
        let seconds = || value.and_then(delta_seconds);
        if name.eq_ignore_ascii_case(b"no-store")
            || name.eq_ignore_ascii_case(b"no-cache")
            || name.eq_ignore_ascii_case(b"must-revalidate")
        {
            return None;
        } else if name.eq_ignore_ascii_case(b"max-age") {
            // A malformed max-age makes the response stale (RFC 9111 §4.2.1).
            max_age = Some(max_age.unwrap_or(u64::MAX).min(seconds().unwrap_or(0)));
        } else if name.eq_ignore_ascii_case(b"stale-while-revalidate") {
            stale = stale.max(seconds().unwrap_or(0));
        }
    }
    let fresh = match max_age {
        Some(seconds) => seconds,
        None => {
            let date = |name| {
                let value = headers.get(name)?.to_str().ok()?;
                httpdate::parse_http_date(value).ok()
            };
            let expires: SystemTime = date(EXPIRES)?;
            let date = date(DATE).unwrap_or_else(SystemTime::now);
            expires.duration_since(date).ok()?.as_secs()
        }
    };
    let age = headers
        .get(AGE)
        .and_then(|value| delta_seconds(value.as_bytes()))
        .unwrap_or(0);
    let left = fresh.saturating_add(stale).saturating_sub(age);
    (left > 0).then(|| Duration::from_secs(left))
}

/// A `delta-seconds` value (RFC 9111 §1.2.2), quoted or not; past 2^31 reads as 2^31.
fn delta_seconds(value: &[u8]) -> Option<u64> {
    let value = value
        .strip_prefix(b"\"")
        .and_then(|v| v.strip_suffix(b"\""))
        .unwrap_or(value);
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits = std::str::from_utf8(value).ok()?;
    Some(digits.parse::<u64>().unwrap_or(u64::MAX).min(1 << 31))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn cc(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CACHE_CONTROL, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn fresh_plus_stale_less_age() {
        assert_eq!(
            lifetime(&cc("max-age=3600")),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(
            lifetime(&cc("public, max-age=0, stale-while-revalidate=600")),
            Some(Duration::from_secs(600))
        );
        let mut aged = cc("max-age=100");
        aged.insert(AGE, HeaderValue::from_static("40"));
        assert_eq!(lifetime(&aged), Some(Duration::from_secs(60)));
        aged.insert(AGE, HeaderValue::from_static("400"));
        assert_eq!(lifetime(&aged), None);
    }

    #[test]
    fn never_for_revalidated_or_unstored_responses() {
        for value in [
            "no-cache",
            "max-age=60, must-revalidate",
            "no-store",
            "max-age=0",
            "s-maxage=60",
        ] {
            assert_eq!(lifetime(&cc(value)), None, "{value}");
        }
        assert_eq!(lifetime(&HeaderMap::new()), None);
        assert_eq!(lifetime(&cc("max-age=abc")), None);
    }

    #[test]
    fn expires_counts_from_date() {
        let mut headers = HeaderMap::new();
        headers.insert(
            DATE,
            HeaderValue::from_static("Sat, 05 Dec 2026 10:00:00 GMT"),
        );
        headers.insert(
            EXPIRES,
            HeaderValue::from_static("Sat, 05 Dec 2026 11:00:00 GMT"),
        );
        assert_eq!(lifetime(&headers), Some(Duration::from_secs(3600)));
    }
}
