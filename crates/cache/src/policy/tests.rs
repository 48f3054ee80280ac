//! Unit tests of `policy.rs`.

use super::*;
use http::header::HeaderValue;

fn heads(lines: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for &(name, value) in lines {
        map.append(name, HeaderValue::from_static(value));
    }
    map
}

fn check(
    request: &[(&'static str, &'static str)],
    status: u16,
    response: &[(&'static str, &'static str)],
) -> Result<(), NotStored> {
    storable(
        &Method::GET,
        &heads(request),
        StatusCode::from_u16(status).expect("valid"),
        &heads(response),
        Length::Known(100),
        1000,
        false,
    )
}

#[test]
fn admission_follows_rfc_9111_section_3() {
    use NotStored::*;
    type Heads = &'static [(&'static str, &'static str)];
    let rows: &[(Heads, u16, Heads, Result<(), NotStored>)] = &[
        (&[], 200, &[("cache-control", "max-age=60")], Ok(())),
        (&[], 200, &[("etag", "\"a\"")], Ok(())),
        (
            &[],
            200,
            &[("last-modified", "Tue, 15 Nov 1994 08:12:31 GMT")],
            Ok(()),
        ),
        (
            &[],
            200,
            &[("expires", "Tue, 15 Nov 1994 08:12:31 GMT")],
            Ok(()),
        ),
        (&[], 200, &[], Err(NoFreshnessNorValidator)),
        (
            &[],
            200,
            &[("cache-control", "max-age=0")],
            Err(NoFreshnessNorValidator),
        ),
        (&[], 404, &[("cache-control", "max-age=60")], Ok(())),
        (&[], 500, &[("cache-control", "max-age=60")], Err(Status)),
        (&[], 206, &[("cache-control", "max-age=60")], Err(Status)),
        (
            &[],
            200,
            &[("cache-control", "max-age=60, no-store")],
            Err(NoStore),
        ),
        (
            &[("cache-control", "no-store")],
            200,
            &[("etag", "\"a\"")],
            Err(NoStore),
        ),
        (
            &[],
            200,
            &[("cache-control", "private, max-age=60")],
            Err(Private),
        ),
        (&[], 200, &[("cache-control", "Private")], Err(Private)),
        // A qualified private is stored without the fields it names.
        (
            &[],
            200,
            &[("cache-control", "private=\"x-user, set-cookie\", max-age=9")],
            Ok(()),
        ),
        // no-cache allows storing; every use revalidates.
        (
            &[],
            200,
            &[("cache-control", "no-cache"), ("etag", "\"a\"")],
            Ok(()),
        ),
        (
            &[("authorization", "Basic x")],
            200,
            &[("cache-control", "max-age=60")],
            Err(Authorization),
        ),
        (
            &[("authorization", "Basic x")],
            200,
            &[("cache-control", "public, max-age=60")],
            Ok(()),
        ),
        (
            &[("authorization", "Basic x")],
            200,
            &[("cache-control", "s-maxage=60")],
            Ok(()),
        ),
        (
            &[("authorization", "Basic x")],
            200,
            &[("cache-control", "must-revalidate"), ("etag", "\"a\"")],
            Ok(()),
        ),
        // §3.5 names must-revalidate, public and s-maxage; not proxy-revalidate.
        (
            &[("authorization", "Basic x")],
            200,
            &[("cache-control", "max-age=60, proxy-revalidate")],
            Err(Authorization),
        ),
        (
            &[],
            200,
            &[("cache-control", "max-age=60"), ("set-cookie", "a=b")],
            Err(SetCookie),
        ),
        (
            &[],
            200,
            &[
                ("cache-control", "max-age=60"),
                ("vary", "accept-language, *"),
            ],
            Err(VaryStar),
        ),
        (
            &[],
            200,
            &[("cache-control", "max-age=60"), ("vary", "\"Cookie\"")],
            Err(VaryStar),
        ),
        (
            &[],
            200,
            &[("cache-control", "max-age=60"), ("vary", "Cookie/1")],
            Err(VaryStar),
        ),
        // RFC 9213: CDN-Cache-Control overrides Cache-Control for this cache.
        (
            &[],
            200,
            &[
                ("cache-control", "no-store"),
                ("cdn-cache-control", "max-age=60"),
            ],
            Ok(()),
        ),
        (
            &[],
            200,
            &[
                ("cache-control", "max-age=60"),
                ("cdn-cache-control", "no-store"),
            ],
            Err(NoStore),
        ),
        (
            &[],
            200,
            &[
                ("cdn-cache-control", "private"),
                ("cache-control", "max-age=60"),
            ],
            Err(Private),
        ),
    ];
    for (request, status, response, expected) in rows {
        assert_eq!(
            check(request, *status, response),
            *expected,
            "{request:?} {status} {response:?}"
        );
    }
    let post = storable(
        &http::Method::POST,
        &HeaderMap::new(),
        StatusCode::OK,
        &heads(&[("cache-control", "max-age=60")]),
        Length::Known(1),
        10,
        false,
    );
    assert_eq!(post, Err(NotStored::Method));
    let cookie = heads(&[("cache-control", "max-age=60"), ("set-cookie", "a=b")]);
    let opted_in = storable(
        &http::Method::GET,
        &HeaderMap::new(),
        StatusCode::OK,
        &cookie,
        Length::Known(1),
        10,
        true,
    );
    assert_eq!(opted_in, Ok(()));
    let ok = heads(&[("cache-control", "max-age=60")]);
    let cases = [
        (Length::Known(11), Err(NotStored::Size)),
        (Length::Known(10), Ok(())),
        (Length::Framed, Ok(())),
        (Length::UntilClose, Err(NotStored::Unframed)),
    ];
    for (length, expected) in cases {
        let sized = storable(
            &http::Method::GET,
            &HeaderMap::new(),
            StatusCode::OK,
            &ok,
            length,
            10,
            false,
        );
        assert_eq!(sized, expected, "{length:?}");
    }
    let ambiguous = heads(&[
        ("cache-control", "max-age=60"),
        ("content-length", "7"),
        ("transfer-encoding", "chunked"),
    ]);
    let stored = storable(
        &http::Method::GET,
        &HeaderMap::new(),
        StatusCode::OK,
        &ambiguous,
        Length::Framed,
        10,
        false,
    );
    assert_eq!(stored, Err(NotStored::AmbiguousFraming));
}

#[test]
fn privacy_reads_cache_control_beside_surrogate_control_but_not_beside_cdn_cache_control() {
    let of = |lines| Privacy::of(&heads(lines));
    let names = |privacy: &Privacy| -> Vec<String> {
        privacy
            .fields
            .iter()
            .map(|n| n.as_str().to_owned())
            .collect()
    };
    let plain = of(&[("cache-control", "private=\"x-a\", max-age=60")]);
    assert_eq!(
        (plain.private, names(&plain)),
        (false, vec!["x-a".to_owned()])
    );
    let beside = of(&[
        ("surrogate-control", "max-age=60"),
        ("cache-control", "private=\"x-a, x-b\""),
    ]);
    assert_eq!(names(&beside), ["x-a", "x-b"]);
    let private = of(&[
        ("surrogate-control", "max-age=60"),
        ("cache-control", "private"),
    ]);
    assert!(private.private);
    // CDN-Cache-Control replaces Cache-Control whole (RFC 9213 §2.1).
    let cdn = of(&[
        ("cdn-cache-control", "max-age=60"),
        ("cache-control", "private, private=\"x-a\""),
    ]);
    assert_eq!(cdn, Privacy::default());
}

#[test]
fn surrogate_control_overrides_cache_control_where_it_speaks_to_this_cache() {
    let read = |lines| response_directives(&heads(lines));
    let (no_store, expires) = read(&[
        ("cache-control", "max-age=600"),
        ("surrogate-control", "no-store"),
    ]);
    assert!(no_store.no_store && !expires);
    let (targeted, _) = read(&[
        ("cache-control", "no-store"),
        ("surrogate-control", "max-age=60;zipwire, no-store;other"),
    ]);
    assert_eq!((targeted.max_age, targeted.no_store), (Some(60), false));
    let (stale_part, _) = read(&[("surrogate-control", "max-age=30+600")]);
    assert_eq!(stale_part.max_age, Some(30));
    // Nothing for this cache: Cache-Control and Expires apply.
    let (other, expires) = read(&[
        ("cache-control", "max-age=5"),
        ("surrogate-control", "max-age=60;other"),
    ]);
    assert_eq!((other.max_age, expires), (Some(5), true));
    // CDN-Cache-Control comes first.
    let (cdn, _) = read(&[
        ("cdn-cache-control", "max-age=7"),
        ("surrogate-control", "max-age=60"),
    ]);
    assert_eq!(cdn.max_age, Some(7));
}

#[test]
fn directives_parse_quotes_cases_and_conflicts() {
    let parsed = Directives::parse(
        &heads(&[
            ("cache-control", "Max-Age=5, private=\"a, b\", x=\"y,z\""),
            ("cache-control", "s-maxage=7"),
        ]),
        &CACHE_CONTROL,
    );
    assert_eq!(parsed.max_age, Some(5));
    assert_eq!(parsed.s_maxage, Some(7));
    assert!(!parsed.private);
    assert_eq!(parsed.private_fields, ["a", "b"]);
    let twice = Directives::parse(
        &heads(&[("cache-control", "max-age=5, max-age=9")]),
        &CACHE_CONTROL,
    );
    assert_eq!(twice.max_age, Some(0));
    let bad = Directives::parse(&heads(&[("cache-control", "max-age=5s")]), &CACHE_CONTROL);
    assert_eq!(bad.max_age, Some(0));
    let huge = Directives::parse(
        &heads(&[("cache-control", "max-age=99999999999999999999")]),
        &CACHE_CONTROL,
    );
    assert_eq!(huge.max_age, Some(1 << 31));
}

#[test]
fn freshness_prefers_s_maxage_then_max_age_then_expires() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_887_151);
    let lifetime = |lines| freshness_lifetime(&heads(lines), now);
    assert_eq!(
        lifetime(&[("cache-control", "max-age=60, s-maxage=90")]),
        Duration::from_secs(90)
    );
    assert_eq!(
        lifetime(&[("cache-control", "max-age=60")]),
        Duration::from_secs(60)
    );
    assert_eq!(
        lifetime(&[
            ("date", "Tue, 15 Nov 1994 08:12:31 GMT"),
            ("expires", "Tue, 15 Nov 1994 08:13:31 GMT")
        ]),
        Duration::from_secs(60)
    );
    assert_eq!(lifetime(&[("expires", "0")]), Duration::ZERO);
    assert_eq!(
        lifetime(&[("cache-control", "max-age=60, no-cache")]),
        Duration::ZERO
    );
    assert_eq!(lifetime(&[("etag", "\"a\"")]), Duration::ZERO);
    // Expires is ignored when CDN-Cache-Control speaks.
    assert_eq!(
        lifetime(&[
            ("cdn-cache-control", "public"),
            ("expires", "Tue, 15 Nov 1994 08:13:31 GMT")
        ]),
        Duration::ZERO
    );
}

#[test]
fn initial_age_is_the_larger_of_age_and_the_apparent_age() {
    let date = date(b"Tue, 15 Nov 1994 08:12:31 GMT").expect("a date");
    let received = date + Duration::from_secs(10);
    let age = |lines| initial_age(&heads(lines), received);
    assert_eq!(
        age(&[("date", "Tue, 15 Nov 1994 08:12:31 GMT")]),
        Duration::from_secs(10)
    );
    assert_eq!(
        age(&[("date", "Tue, 15 Nov 1994 08:12:31 GMT"), ("age", "30")]),
        Duration::from_secs(30)
    );
    for bad in ["bad", "-1", "7200.0", "0, 0", "1;x=y"] {
        let lines = [("age", bad)];
        assert_eq!(initial_age(&heads(&lines), received), UNKNOWN_AGE, "{bad}");
    }
    assert_eq!(age(&[("age", "0"), ("age", "0")]), UNKNOWN_AGE);
    let year_9999 = super::date(b"Fri, 31 Dec 9999 23:59:59 GMT").expect("a date");
    let lifetime = year_9999.duration_since(received).expect("later");
    assert!(!is_fresh(lifetime, UNKNOWN_AGE, &RequestRules::default()));
}

#[test]
fn request_rules_and_freshness() {
    let rules = |lines| RequestRules::from_headers(&heads(lines));
    assert!(rules(&[("cache-control", "no-cache")]).revalidate);
    assert!(rules(&[("pragma", "no-cache")]).revalidate);
    // §5.4: Pragma is ignored when Cache-Control is present.
    assert!(!rules(&[("pragma", "no-cache"), ("cache-control", "max-stale")]).revalidate);
    let minute = Duration::from_secs(60);
    let second = Duration::from_secs(1);
    assert!(is_fresh(minute, second, &RequestRules::default()));
    assert!(!is_fresh(minute, minute, &RequestRules::default()));
    assert!(!is_fresh(
        minute,
        second,
        &rules(&[("cache-control", "no-cache")])
    ));
    assert!(!is_fresh(
        minute,
        2 * second,
        &rules(&[("cache-control", "max-age=1")])
    ));
    assert!(!is_fresh(
        minute,
        second,
        &rules(&[("cache-control", "min-fresh=59")])
    ));
    assert!(is_fresh(
        minute,
        second,
        &rules(&[("cache-control", "min-fresh=58")])
    ));
}

#[test]
fn only_a_date_in_if_range_keeps_a_get_from_the_cache() {
    let headers = |pairs: &[(&'static str, &'static str)]| {
        let mut map = HeaderMap::new();
        for &(name, value) in pairs {
            map.append(name, value.parse().expect("valid"));
        }
        map
    };
    let date = "Sat, 28 Nov 2026 12:00:00 GMT";
    let get = Method::GET;
    assert!(range_may_use_cache(
        &get,
        &headers(&[("range", "bytes=0-1")])
    ));
    assert!(range_may_use_cache(
        &get,
        &headers(&[("range", "bytes=0-1"), ("if-range", "\"v1\"")])
    ));
    assert!(range_may_use_cache(
        &get,
        &headers(&[("range", "bytes=0-1"), ("if-range", "W/\"v1\"")])
    ));
    assert!(!range_may_use_cache(
        &get,
        &headers(&[("range", "bytes=0-1"), ("if-range", date)])
    ));
    assert!(range_may_use_cache(
        &Method::HEAD,
        &headers(&[("range", "bytes=0-1"), ("if-range", date)])
    ));
    assert!(range_may_use_cache(&get, &headers(&[("if-range", date)])));
}
