//! Property bodies shared by the proptests (`tests/properties.rs`) and `fuzz/`: each takes
//! arbitrary bytes, must never panic on its own, and asserts the invariants of the result.
//! Not part of the API.

use http::header::{
    HeaderMap, HeaderName, HeaderValue, ACCEPT_ENCODING, ACCEPT_RANGES, CONTENT_ENCODING,
    CONTENT_LENGTH, ETAG, VARY,
};
use http::{Method, StatusCode, Version};

use crate::{decide, AcceptEncoding, Coding, Decision, Negotiated, RequestFacts, ResponseFacts};
use crate::{Budget, Rules, Vary};
use zipwire_rules::headers;
use zipwire_rules::list;

/// The offered lists every input is negotiated against.
const OFFERED: &[&[Coding]] = &[
    &[],
    &[Coding::Gzip],
    &[Coding::Gzip, Coding::Deflate],
    &[Coding::Deflate, Coding::Gzip],
    &[Coding::Zstd, Coding::Br, Coding::Gzip, Coding::Deflate],
    &[Coding::Br, Coding::Gzip, Coding::Zstd],
];

/// Splits `data` at `\n` into `Accept-Encoding` lines, negotiates, and checks the outcome
/// against the weights: a chosen coding is offered, accepted, at least as heavy as every other
/// offered coding and heavier than those preferred before it; "not acceptable" means identity
/// is refused and nothing offered is accepted. Reading the lines from a `HeaderMap` must agree
/// with reading the raw bytes. The lines then go through [`decide`] as a request's
/// `Accept-Encoding`, with the checks of [`rules`].
///
/// # Panics
///
/// When an invariant does not hold.
pub fn accept_encoding(data: &[u8]) {
    let raw: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let accept = AcceptEncoding::parse(raw.iter().copied());
    for offered in OFFERED {
        check_negotiation(&accept, offered);
    }

    let mut request = HeaderMap::new();
    let mut valid = Vec::new();
    for line in &raw {
        if let Ok(value) = HeaderValue::from_bytes(line) {
            request.append(ACCEPT_ENCODING, value);
            valid.push(*line);
        }
    }
    let from_map = AcceptEncoding::from_headers(&request);
    assert_eq!(from_map, AcceptEncoding::parse(valid.iter().copied()));

    let mut response = HeaderMap::new();
    response.insert("content-type", HeaderValue::from_static("text/html"));
    response.insert(ETAG, HeaderValue::from_static("\"v1\""));
    check_decision(
        &Method::GET,
        &request,
        StatusCode::OK,
        response,
        Budget::Available,
    );
}

/// Builds a request and a response from `data` and checks that [`decide`] and
/// [`headers::apply`] keep their promises.
///
/// The first byte picks the method, budget and client version, the next two the status; the
/// rest is `\n`-separated lines whose first byte picks a header (request or response) and
/// whose remaining bytes are its value, if they make a valid header value.
///
/// # Panics
///
/// When an invariant does not hold.
pub fn rules(data: &[u8]) {
    const NAMES: &[(bool, &str)] = &[
        (true, "accept-encoding"),
        (true, "cache-control"),
        (false, "content-type"),
        (false, "content-length"),
        (false, "content-encoding"),
        (false, "content-range"),
        (false, "cache-control"),
        (false, "vary"),
        (false, "etag"),
        (false, "accept-ranges"),
        (false, "cdn-cache-control"),
        (false, "surrogate-control"),
        (false, "age"),
        (false, "expires"),
        (false, "date"),
        (false, "set-cookie"),
        (true, "authorization"),
        (true, "pragma"),
    ];
    let (head, rest) = data.split_at(data.len().min(3));
    let flags = head.first().copied().unwrap_or(0);
    let method = if flags & 1 == 1 {
        Method::HEAD
    } else {
        Method::GET
    };
    let budget = if flags & 2 == 2 {
        Budget::Exhausted
    } else {
        Budget::Available
    };
    let code = match head {
        [_, hi, lo] => 100 + u16::from_be_bytes([*hi, *lo]) % 900,
        _ => 200,
    };
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);

    let mut request = HeaderMap::new();
    let mut response = HeaderMap::new();
    for line in rest.split(|&b| b == b'\n') {
        let Some((selector, value)) = line.split_first() else {
            continue;
        };
        let (to_request, name) = NAMES[usize::from(*selector) % NAMES.len()];
        let Ok(value) = HeaderValue::from_bytes(value) else {
            continue;
        };
        let map = if to_request {
            &mut request
        } else {
            &mut response
        };
        map.append(HeaderName::from_static(name), value);
    }
    check_cache_policy(&method, &request, status, &response);
    check_decision(&method, &request, status, response, budget);
}

/// The cache's admission and freshness rules on the same heads: they never panic, a shared
/// cache never stores what RFC 9111 §3 forbids whatever else the heads say, and a response
/// whose `Age` is not one integer is never fresh.
fn check_cache_policy(
    method: &Method,
    request: &HeaderMap,
    status: StatusCode,
    response: &HeaderMap,
) {
    use std::time::{Duration, SystemTime};
    use zipwire_cache::policy::{self, Length, RequestRules};

    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let lifetime = policy::freshness_lifetime(response, now);
    let age = policy::initial_age(response, now);
    let rules = RequestRules::from_headers(request);
    let fresh = policy::is_fresh(lifetime, age, &rules);
    let (directives, _) = policy::response_directives(response);
    let mut ages = response.get_all(http::header::AGE).iter();
    if let (Some(first), second) = (ages.next(), ages.next()) {
        let one_integer = second.is_none()
            && !first.as_bytes().is_empty()
            && list::trim_ows(first.as_bytes())
                .iter()
                .all(u8::is_ascii_digit)
            && !list::trim_ows(first.as_bytes()).is_empty();
        assert!(
            one_integer || !fresh,
            "an unreadable Age was taken as fresh"
        );
    }
    for length in [Length::Known(10), Length::Framed, Length::UntilClose] {
        let stored = policy::storable(method, request, status, response, length, 100, false);
        if stored.is_err() {
            continue;
        }
        assert_eq!(*method, Method::GET);
        assert_ne!(length, Length::UntilClose);
        assert!(!directives.no_store && !policy::Privacy::of(response).private);
        assert!(!response.contains_key(http::header::SET_COOKIE));
        assert!(!list::elements(response.get_all(VARY)).any(|member| member == b"*"));
        if request.contains_key(http::header::AUTHORIZATION) {
            assert!(
                directives.public || directives.must_revalidate || directives.s_maxage.is_some()
            );
        }
    }
}

fn check_negotiation(accept: &AcceptEncoding, offered: &[Coding]) {
    match accept.negotiate(offered) {
        Negotiated::Coding(chosen) => {
            assert!(accept.is_present());
            assert!(accept.accepts(chosen));
            let position = offered.iter().position(|&c| c == chosen);
            let Some(position) = position else {
                panic!("{chosen} chosen but not offered");
            };
            let q = accept.quality(chosen);
            for (i, &other) in offered.iter().enumerate() {
                let other_q = accept.quality(other);
                assert!(other_q <= q, "{other} outweighs {chosen}");
                assert!(i >= position || other_q < q, "{other} preferred on a tie");
            }
        }
        Negotiated::NotAcceptable => {
            assert!(accept.refuses_identity());
            assert!(offered.iter().all(|&c| !accept.accepts(c)));
        }
        Negotiated::Identity => assert!(!accept.refuses_identity()),
    }
}

fn check_decision(
    method: &Method,
    request: &HeaderMap,
    status: StatusCode,
    response: HeaderMap,
    budget: Budget,
) {
    let cfg = Rules::default();
    let req = RequestFacts::from_parts(method, request);
    let mut resp = ResponseFacts::from_parts(status, &response);
    resp.budget = budget;
    let decision = decide(&req, &resp, &cfg);
    let vary_star = list::elements(response.get_all(VARY)).any(|member| member == b"*");

    for version in [Version::HTTP_10, Version::HTTP_11, Version::HTTP_2] {
        let mut after = response.clone();
        let framing = headers::apply(&decision, &mut after, version);
        assert_eq!(
            framing.is_some(),
            !matches!(decision, Decision::Pass { .. })
        );
        match decision {
            Decision::Compress { coding, .. } => {
                assert!(cfg.offered.contains(&coding) && req.accept_encoding.accepts(coding));
                assert_eq!(budget, Budget::Available);
                let encodings: Vec<&[u8]> = after
                    .get_all(CONTENT_ENCODING)
                    .iter()
                    .map(HeaderValue::as_bytes)
                    .collect();
                assert_eq!(encodings, [coding.as_str().as_bytes()]);
                check_transformed(&response, &after, vary_star);
            }
            Decision::Decompress { .. } => {
                // The one coding the response had, which this client does not take.
                let had = crate::ContentEncoding::from_headers(&response).decodable();
                assert!(had.is_some_and(|coding| !req.accept_encoding.accepts(coding)));
                assert!(!after.contains_key(CONTENT_ENCODING));
                check_transformed(&response, &after, vary_star);
            }
            Decision::Pass { vary, .. } => {
                let mut without_vary = after.clone();
                without_vary.remove(VARY);
                let mut expected = response.clone();
                expected.remove(VARY);
                if vary == Vary::AddWeakEtag {
                    // A 304 standing for a recoded 200: its ETag is weakened as the 200's is.
                    assert_eq!(status, StatusCode::NOT_MODIFIED);
                    let etags: Vec<&HeaderValue> = without_vary.get_all(ETAG).iter().collect();
                    assert!(etags.len() <= 1);
                    assert!(etags
                        .iter()
                        .all(|etag| etag.as_bytes().starts_with(b"W/\"")));
                    without_vary.remove(ETAG);
                    expected.remove(ETAG);
                    // Its 200 had no ranges of these bytes either.
                    assert!(!without_vary.contains_key(ACCEPT_RANGES));
                    expected.remove(ACCEPT_RANGES);
                }
                assert_eq!(
                    without_vary, expected,
                    "a pass changed more than Vary, ETag and a 304's Accept-Ranges"
                );
            }
        }
    }
}

fn check_transformed(before: &HeaderMap, after: &HeaderMap, vary_star: bool) {
    assert!(!after.contains_key(CONTENT_LENGTH));
    assert!(!after.contains_key(ACCEPT_RANGES));
    let etags: Vec<&HeaderValue> = after.get_all(ETAG).iter().collect();
    assert!(etags.len() <= 1);
    assert!(etags
        .iter()
        .all(|etag| etag.as_bytes().starts_with(b"W/\"")));
    let vary: Vec<&HeaderValue> = after.get_all(VARY).iter().collect();
    if vary_star {
        let original: Vec<&HeaderValue> = before.get_all(VARY).iter().collect();
        assert_eq!(vary, original, "Vary: * was touched");
    } else {
        assert_eq!(vary.len(), 1, "not one Vary line");
        let members: Vec<&[u8]> = list::split(vary[0].as_bytes()).collect();
        assert!(members.iter().all(|m| list::is_token(m)));
        assert!(members
            .iter()
            .any(|m| m.eq_ignore_ascii_case(b"accept-encoding")));
        for (i, member) in members.iter().enumerate() {
            assert!(
                !members[..i]
                    .iter()
                    .any(|seen| seen.eq_ignore_ascii_case(member)),
                "duplicate Vary member"
            );
        }
    }
}

/// RFC 9842's fields and bodies from arbitrary bytes: the first byte picks how the rest is
/// read. Each line of the rest is read as `Use-As-Dictionary`, `Available-Dictionary`,
/// `Dictionary-ID`, `Accept-Encoding` and `Cache-Control`, and as a path given a version
/// pattern; then the rest is split into a dictionary and a stream, read as a `dcz` and a `dcb`
/// body (with and without the header naming that dictionary). Nothing may
/// panic; a parsed `Use-As-Dictionary` serializes back to itself; a version pattern is valid
/// and matches its own path; a body decodes within its limit or not at all.
///
/// # Panics
///
/// When an invariant does not hold.
pub fn dictionary(data: &[u8]) {
    use zipwire_dictionary::fields::{self, USE_AS_DICTIONARY};
    use zipwire_dictionary::{pattern, version, Accepted, DictCoding, UseAsDictionary};

    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    for line in rest.split(|&b| b == b'\n') {
        let Ok(value) = HeaderValue::from_bytes(line) else {
            continue;
        };
        let mut headers = HeaderMap::new();
        for name in [
            "use-as-dictionary",
            "available-dictionary",
            "dictionary-id",
            "accept-encoding",
            "cache-control",
        ] {
            headers.insert(HeaderName::from_static(name), value.clone());
        }
        if let Some(parsed) = UseAsDictionary::from_headers(&headers) {
            assert!(pattern::is_valid(&parsed.pattern));
            if let Some(written) = parsed.to_header_value() {
                let mut again = HeaderMap::new();
                again.insert(USE_AS_DICTIONARY, written);
                assert_eq!(UseAsDictionary::from_headers(&again), Some(parsed));
            }
        }
        let _ = fields::available_dictionary(&headers);
        let _ = fields::dictionary_id(&headers);
        let _ = Accepted::from_headers(&headers);
        let _ = zipwire_dictionary::lifetime(&headers);
        if let Ok(path) = std::str::from_utf8(line) {
            if let Some(found) = version::pattern_for(path) {
                assert!(pattern::is_valid(&found), "{found}");
                assert_eq!(pattern::matches(&found, path), Some(true), "{found} {path}");
            }
        }
    }
    // The selector's top six bits give the dictionary's length in 128-byte steps, taken from
    // the front of the rest (a fixed one when the low bits are 1); the remainder is the
    // stream. An even selector leaves the output unbounded (1 MiB).
    let (dictionary, stream) = if selector & 3 == 1 {
        (&b"function(){return 'zipwire dictionary'}"[..], rest)
    } else {
        rest.split_at((usize::from(selector >> 2) * 128).min(rest.len()))
    };
    let limit = match selector % 2 {
        0 => 1 << 20,
        _ => u64::from(selector) * 64,
    };
    for coding in [DictCoding::Dcz, DictCoding::Dcb] {
        let mut body = coding.header(&zipwire_dictionary::Hash::of(dictionary));
        body.extend_from_slice(stream);
        for input in [stream, body.as_slice()] {
            if let Ok(decoded) =
                zipwire_codings::dictionary::decode(coding, dictionary, input, limit)
            {
                assert!(decoded.len() as u64 <= limit);
            }
            // The proxy's own streaming decoder of an upstream's dcb/dcz, fed in pieces.
            let held = bytes::Bytes::copy_from_slice(dictionary);
            let resolve: crate::encode::body::dictionary_decoder::Resolve =
                Box::new(move |_| Some(held));
            let limits = zipwire_codec::Limits {
                max_output: Some(limit),
                ..zipwire_codec::Limits::default()
            };
            let decoding = crate::encode::body::decoders::Decoding::Dictionary(coding, resolve);
            let mut decoder = decoding.decoder(limits);
            let (mut out, mut produced) = (vec![0; 4096], 0u64);
            for piece in input.chunks(usize::from(selector % 61) + 1) {
                let mut rest = piece;
                while let Ok(progress) = decoder.decode(rest, &mut out) {
                    produced += progress.produced as u64;
                    rest = &rest[progress.consumed..];
                    if progress.consumed == 0 && progress.produced == 0 {
                        break;
                    }
                }
            }
            if decoder.finish().is_ok() {
                assert!(produced <= limit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use zipwire_dictionary::{DictCoding, Hash};

    /// The dictionary target's body on a few inputs, a real delta among them.
    #[test]
    fn dictionary_body_runs_on_real_inputs() {
        super::dictionary(b"");
        super::dictionary(b"\x01match=\"/a/*\", id=\"x\"\n/lib/jquery-3.7.1.min.js\n:AAAA:");
        let dictionary = vec![b'a'; 4096];
        let mut body = vec![0x80];
        body.extend_from_slice(&dictionary);
        let delta =
            zipwire_codings::dictionary::dcz_one_shot(&dictionary.clone().into(), 3, b"aaaab")
                .expect("encode");
        let stream = &delta[DictCoding::Dcz.header_len()..];
        assert_eq!(&delta[8..40], &Hash::of(&dictionary).0);
        body.extend_from_slice(stream);
        super::dictionary(&body);
    }
}
