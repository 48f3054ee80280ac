//! Revalidation: the conditional request sent for a stored response, merged with the
//! client's own (RFC 9111 §4.3.1-§4.3.2), the 304 that updates a stored response (§4.3.3,
//! §4.3.4), and the 304 the cache gives a client whose validator matches.

use std::time::SystemTime;

use http::header::{
    HeaderMap, HeaderValue, AGE, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, DATE, ETAG,
    IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED,
};

use crate::policy;
use crate::store::{self, Entry};
use zipwire_rules::list;

/// Adds the stored validators to the request going upstream. The client's `If-None-Match`
/// tags are kept and the stored `ETag` added to them: a 304 then names, by its `ETag`, which
/// one matched (RFC 9110 §15.4.5 requires the field). The stored `Last-Modified` replaces the
/// client's `If-Modified-Since`: the cache evaluates the client's date itself afterwards.
pub fn add_conditionals(entry: &Entry, upstream: &mut HeaderMap) {
    if let Some(etag) = entry.headers.get(ETAG) {
        let client: Vec<&[u8]> = list::elements(upstream.get_all(IF_NONE_MATCH)).collect();
        if client.contains(&b"*".as_slice()) {
            // Matches any current representation already.
        } else if client.is_empty() {
            upstream.insert(IF_NONE_MATCH, etag.clone());
        } else if !client.contains(&etag.as_bytes()) {
            let mut joined = client.join(b", ".as_slice());
            joined.extend_from_slice(b", ");
            joined.extend_from_slice(etag.as_bytes());
            if let Ok(value) = HeaderValue::from_bytes(&joined) {
                upstream.insert(IF_NONE_MATCH, value);
            }
        }
    }
    if let Some(modified) = entry.headers.get(LAST_MODIFIED) {
        upstream.insert(IF_MODIFIED_SINCE, modified.clone());
    }
}

/// Whether a 304 from the origin is about `entry` (§4.3.4): its strong `ETag` equals the stored
/// one, or its weak `ETag` corresponds to the stored one (the weak comparison: many origins,
/// Express's default among them, send only weak tags, and a strong comparison would pass their bare
/// 304 on to a client that had asked for the whole response); without an `ETag`, its
/// `Last-Modified` equals the stored one, or it has neither and the stored response has no `ETag`
/// either (then the conditional sent was ours alone).
pub fn freshens(entry: &Entry, not_modified: &HeaderMap, client_tags: bool) -> bool {
    match (not_modified.get(ETAG), entry.headers.get(ETAG)) {
        // Weak either way: an origin that weakens the tag of a body it compresses (nginx
        // with `gzip on`) answers the stored `W/"v1"` with the strong `"v1"`, its 304 being
        // no body it compressed.
        (Some(theirs), Some(ours))
            if theirs.as_bytes().starts_with(b"W/") || ours.as_bytes().starts_with(b"W/") =>
        {
            weak(theirs.as_bytes()) == weak(ours.as_bytes())
        }
        (Some(theirs), Some(ours)) => theirs == ours,
        (Some(_), None) => false,
        (None, _) => match (
            not_modified.get(LAST_MODIFIED),
            entry.headers.get(LAST_MODIFIED),
        ) {
            (Some(theirs), Some(ours)) => theirs == ours,
            (Some(_), None) => false,
            (None, _) => !client_tags,
        },
    }
}

/// The stored response freshened by a 304 received at `now` (§4.3.4): each field the 304 carries
/// replaces the stored ones of that name, except `Content-Length` (§3.2: it describes the 304, not
/// the stored body). A 304 without `Date` is dated `now`, as RFC 9110 §6.6.1 asks of a recipient
/// that caches a response without one, and one without `Age` drops the stored `Age` (the answer is
/// the origin's own, of age 0): with the stored `Date` and `Age` kept, the age would count the
/// whole time since the first 200, and the entry would stay stale, every request going to the
/// origin again.
pub fn freshened(entry: &Entry, not_modified: &HeaderMap, now: SystemTime) -> Entry {
    let mut headers = entry.headers.clone();
    for name in not_modified.keys() {
        if describes_stored_body(name) {
            continue;
        }
        headers.remove(name);
        for value in not_modified.get_all(name) {
            headers.append(name.clone(), store::detached_value(value));
        }
    }
    if !not_modified.contains_key(DATE) {
        if let Ok(date) = HeaderValue::from_str(&httpdate::fmt_http_date(now)) {
            headers.insert(DATE, date);
        }
    }
    if !not_modified.contains_key(AGE) {
        headers.remove(AGE);
    }
    let mut updated = entry.with_body(entry.body.clone());
    updated.lifetime = policy::freshness_lifetime(&headers, now);
    updated.initial_age = policy::initial_age(&headers, now);
    updated.response_time = now;
    updated.headers = headers;
    updated
}

/// Fields a 304 does not update (RFC 9111 §3.2): they describe the stored body itself (its
/// length, its coding, the range it holds, its digest), which the 304 did not replace.
fn describes_stored_body(name: &http::header::HeaderName) -> bool {
    [CONTENT_LENGTH, CONTENT_ENCODING, CONTENT_RANGE].contains(name)
        || name.as_str().eq_ignore_ascii_case("content-md5")
}

/// Whether the client's own conditional holds for the response it would get (RFC 9110
/// §13.1.2 with the weak comparison `If-None-Match` uses, then §13.1.3 when it sent no
/// `If-None-Match`), so that it gets a 304.
pub fn client_not_modified(request: &HeaderMap, served: &HeaderMap) -> bool {
    if request.contains_key(IF_NONE_MATCH) {
        let Some(etag) = served.get(ETAG) else {
            return false;
        };
        let ours = weak(etag.as_bytes());
        return list::elements(request.get_all(IF_NONE_MATCH))
            .any(|tag| tag == b"*" || weak(tag) == ours);
    }
    let since = request
        .get(IF_MODIFIED_SINCE)
        .and_then(|value| policy::date(value.as_bytes()));
    let modified = served
        .get(LAST_MODIFIED)
        .and_then(|value| policy::date(value.as_bytes()));
    matches!((since, modified), (Some(since), Some(modified)) if modified <= since)
}

/// An entity tag without its weakness indicator.
fn weak(tag: &[u8]) -> &[u8] {
    tag.strip_prefix(b"W/").unwrap_or(tag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn heads(lines: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for &(name, value) in lines {
            map.append(name, HeaderValue::from_static(value));
        }
        map
    }

    fn entry(lines: &[(&'static str, &'static str)]) -> Entry {
        Entry::for_tests(heads(lines), bytes::Bytes::from_static(b"x"))
    }

    #[test]
    fn conditionals_merge_with_the_clients() {
        let stored = entry(&[
            ("etag", "\"s\""),
            ("last-modified", "Tue, 15 Nov 1994 08:12:31 GMT"),
        ]);
        let mut alone = HeaderMap::new();
        add_conditionals(&stored, &mut alone);
        assert_eq!(alone[IF_NONE_MATCH], "\"s\"");
        assert_eq!(alone[IF_MODIFIED_SINCE], "Tue, 15 Nov 1994 08:12:31 GMT");
        let mut client = heads(&[("if-none-match", "\"c1\""), ("if-none-match", "W/\"c2\"")]);
        add_conditionals(&stored, &mut client);
        assert_eq!(client[IF_NONE_MATCH], "\"c1\", W/\"c2\", \"s\"");
        let mut star = heads(&[("if-none-match", "*")]);
        add_conditionals(&stored, &mut star);
        assert_eq!(star[IF_NONE_MATCH], "*");
    }

    #[test]
    fn a_304_freshens_only_its_own_response_and_updates_its_fields() {
        let stored = entry(&[
            ("age", "500"),
            ("etag", "\"s\""),
            ("x-v", "1"),
            ("x-v", "2"),
            ("content-length", "1"),
            ("content-encoding", "gzip"),
            ("content-md5", "a"),
        ]);
        assert!(freshens(&stored, &heads(&[("etag", "\"s\"")]), true));
        assert!(!freshens(&stored, &heads(&[("etag", "\"c\"")]), false));
        // A weak tag corresponds to the stored one by the weak comparison.
        assert!(freshens(&stored, &heads(&[("etag", "W/\"s\"")]), false));
        assert!(!freshens(&stored, &heads(&[("etag", "W/\"c\"")]), false));
        assert!(freshens(&stored, &HeaderMap::new(), false));
        assert!(!freshens(&stored, &HeaderMap::new(), true));
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let update = heads(&[
            ("x-v", "3"),
            ("cache-control", "max-age=7"),
            ("content-length", "0"),
            ("content-encoding", "br"),
            ("content-md5", "b"),
            ("content-range", "bytes 0-0/1"),
        ]);
        let new = freshened(&stored, &update, now);
        assert_eq!(new.headers.get_all("x-v").iter().collect::<Vec<_>>(), ["3"]);
        assert_eq!(new.headers["content-length"], "1");
        assert_eq!(
            new.headers["content-encoding"], "gzip",
            "the stored body's coding"
        );
        assert_eq!(new.headers["content-md5"], "a");
        assert!(!new.headers.contains_key("content-range"));
        assert_eq!(new.headers["etag"], "\"s\"");
        assert_eq!(new.lifetime, Duration::from_secs(7));
        assert_eq!(new.response_time, now);
        // No Date on the 304: the stored response is dated when the 304 came, so it is
        // fresh again (its age starts from 0), not as old as the first 200.
        assert_eq!(new.headers["date"], httpdate::fmt_http_date(now));
        assert_eq!(new.initial_age, Duration::ZERO);
        let dated = heads(&[("date", "Thu, 01 Jan 1970 00:01:00 GMT")]);
        assert_eq!(
            freshened(&stored, &dated, now).headers["date"],
            "Thu, 01 Jan 1970 00:01:00 GMT"
        );
    }

    #[test]
    fn the_client_gets_a_304_on_a_weakly_matching_tag_or_an_old_enough_date() {
        let served = heads(&[
            ("etag", "W/\"s\""),
            ("last-modified", "Tue, 15 Nov 1994 08:12:31 GMT"),
        ]);
        assert!(client_not_modified(
            &heads(&[("if-none-match", "\"s\"")]),
            &served
        ));
        assert!(client_not_modified(
            &heads(&[("if-none-match", "\"a\", W/\"s\"")]),
            &served
        ));
        assert!(!client_not_modified(
            &heads(&[("if-none-match", "\"a\"")]),
            &served
        ));
        assert!(client_not_modified(
            &heads(&[("if-modified-since", "Tue, 15 Nov 1994 08:12:31 GMT")]),
            &served
        ));
        assert!(!client_not_modified(
            &heads(&[("if-modified-since", "Mon, 14 Nov 1994 08:12:31 GMT")]),
            &served
        ));
        // If-None-Match wins over If-Modified-Since (RFC 9110 §13.2.2).
        assert!(!client_not_modified(
            &heads(&[
                ("if-none-match", "\"a\""),
                ("if-modified-since", "Tue, 15 Nov 1994 08:12:31 GMT")
            ]),
            &served
        ));
        assert!(!client_not_modified(&HeaderMap::new(), &served));
    }
}
