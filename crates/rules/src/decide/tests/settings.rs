//! What the rules' settings change (`min_length`, `types`, `offered`), what no setting changes
//! (gRPC), and how bypasses are reported.

use super::*;

#[test]
fn min_length_is_configurable() {
    let req = RequestFacts::from_parts(&Method::GET, &map(ACCEPT_GZIP));
    let resp = ResponseFacts::from_parts(StatusCode::OK, &map(HTML));
    let cfg = Rules {
        min_length: 1001,
        ..Rules::default()
    };
    assert_eq!(decide(&req, &resp, &cfg), pass(Bypass::TooSmall));
}

#[test]
fn types_are_configurable() {
    let req = RequestFacts::from_parts(&Method::GET, &map(ACCEPT_GZIP));
    let resp = ResponseFacts::from_parts(StatusCode::OK, &map(&[("content-type", "text/csv")]));
    assert_eq!(decide(&req, &resp, &Rules::default()), pass(Bypass::Type));
    let cfg = Rules {
        types: vec!["text/*".parse().expect("valid pattern")],
        ..Rules::default()
    };
    assert_eq!(decide(&req, &resp, &cfg), GZIP);
}

#[test]
fn offered_codings_are_configurable() {
    let req = RequestFacts::from_parts(&Method::GET, &map(ACCEPT_GZIP));
    let resp = ResponseFacts::from_parts(StatusCode::OK, &map(HTML));
    let deflate_first = Rules {
        offered: vec![Coding::Deflate, Coding::Gzip],
        ..Rules::default()
    };
    assert_eq!(
        decide(&req, &resp, &deflate_first),
        Decision::Compress {
            coding: Coding::Deflate,
            payload: Payload::Transform
        }
    );
    let none = Rules {
        offered: Vec::new(),
        ..Rules::default()
    };
    assert_eq!(decide(&req, &resp, &none), pass_vary(Bypass::NotAccepted));
}

#[test]
fn grpc_is_never_compressed_whatever_the_types() {
    let req = RequestFacts::from_parts(&Method::GET, &map(ACCEPT_GZIP));
    let every_type = Rules {
        types: vec!["*/*".parse().expect("valid pattern")],
        ..Rules::default()
    };
    for content_type in [
        "application/grpc",
        "application/grpc+proto",
        "Application/GRPC+json; charset=utf-8",
    ] {
        let typed = HeaderMap::from_iter([(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(content_type),
        )]);
        let resp = ResponseFacts::from_parts(StatusCode::OK, &typed);
        assert_eq!(
            decide(&req, &resp, &every_type),
            pass(Bypass::Grpc),
            "{content_type}"
        );
    }
    // Only gRPC itself: a type that merely starts with the letters is compressed.
    for content_type in ["application/grpcx", "application/grpc-web-text"] {
        let typed = HeaderMap::from_iter([(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(content_type),
        )]);
        let resp = ResponseFacts::from_parts(StatusCode::OK, &typed);
        assert_eq!(decide(&req, &resp, &every_type), GZIP, "{content_type}");
    }
}

#[test]
fn bypass_reports() {
    assert_eq!(GZIP.bypass(), None);
    assert_eq!(
        Decision::Decompress {
            payload: Payload::Transform
        }
        .bypass(),
        None
    );
    assert_eq!(
        Decision::Compress {
            coding: Coding::Gzip,
            payload: Payload::Absent
        }
        .bypass(),
        Some(Bypass::Head)
    );
    assert_eq!(
        Decision::Decompress {
            payload: Payload::Absent
        }
        .bypass(),
        Some(Bypass::Head)
    );
    assert_eq!(pass(Bypass::Budget).bypass(), Some(Bypass::Budget));
    assert_eq!(Bypass::TooSmall.to_string(), "too_small");
    assert_eq!(Bypass::NotAccepted.as_str(), "not_accepted");
}
