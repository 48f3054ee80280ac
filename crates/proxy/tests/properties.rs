//! Property tests: the bodies live in `zipwire_proxy::fuzzing`, shared with `fuzz/`.

use proptest::collection::vec;
use proptest::prelude::*;
use zipwire_proxy::fuzzing;

/// A plausible `Accept-Encoding` element: known and unknown codings in mixed case, with valid,
/// borderline and invalid weights.
fn element() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        Just("gzip"),
        Just("GZIP"),
        Just("x-gzip"),
        Just("deflate"),
        Just("identity"),
        Just("*"),
        Just("br"),
        Just("zstd"),
        Just("\"gzip\""),
    ];
    let weight = prop_oneof![
        Just(String::new()),
        "(;| ; )[qQ]=(0|1)(\\.[0-9]{0,4})?",
        "; q=[0-9.a-z]{0,6}",
        Just(";".to_owned()),
        Just(";level=1".to_owned()),
    ];
    (name, weight).prop_map(|(name, weight)| format!("{name}{weight}"))
}

fn accept_encoding_lines() -> impl Strategy<Value = Vec<u8>> {
    vec(
        vec(element(), 0..5).prop_map(|elements| elements.join(", ")),
        0..4,
    )
    .prop_map(|lines| lines.join("\n").into_bytes())
}

/// A header line for `fuzzing::rules`: the selector byte of a header (its index in
/// `fuzzing::rules`' table), then a value that fits it, valid or not.
fn rules_line() -> impl Strategy<Value = Vec<u8>> {
    let accept =
        accept_encoding_lines().prop_map(|b| String::from_utf8_lossy(&b).replace('\n', ","));
    let line = prop_oneof![
        4 => accept.prop_map(|v| (0u8, v)),
        1 => prop_oneof![Just("no-transform"), Just("max-age=0")].prop_map(|v| (1, v.to_owned())),
        4 => prop_oneof![
            Just("text/html; charset=utf-8"),
            Just("Application/JSON"),
            Just("text/event-stream"),
            Just("multipart/byteranges; boundary=x"),
            Just("image/png"),
            Just("text"),
        ]
        .prop_map(|v| (2, v.to_owned())),
        2 => "[0-9]{1,4}|x".prop_map(|v| (3, v)),
        1 => prop_oneof![Just("gzip"), Just("identity"), Just("br"), Just("gzip, br")]
            .prop_map(|v| (4, v.to_owned())),
        1 => Just((5, "bytes 0-1/2".to_owned())),
        1 => prop_oneof![Just("no-transform"), Just("public")].prop_map(|v| (6, v.to_owned())),
        2 => prop_oneof![Just("*"), Just("Cookie, accept-encoding"), Just("cookie"), Just("a b, \"x")]
            .prop_map(|v| (7, v.to_owned())),
        2 => prop_oneof![Just("\"v1\""), Just("W/\"v1\""), Just("v1"), Just("\"a\", \"b\"")]
            .prop_map(|v| (8, v.to_owned())),
        1 => Just((9, "bytes".to_owned())),
        4 => cache_field(),
    ];
    line.prop_map(header_line)
}

/// The bytes of one line for `fuzzing::rules`: the selector, then the value.
fn header_line((selector, value): (u8, String)) -> Vec<u8> {
    let mut line = vec![selector];
    line.extend_from_slice(value.as_bytes());
    line
}

/// A selector and value for the cache's rules in `fuzzing::rules`: freshness from each
/// field the cache reads, `Age` values readable and not, and the fields that forbid storing.
fn cache_field() -> impl Strategy<Value = (u8, String)> {
    prop_oneof![
        2 => prop_oneof![Just("max-age=60"), Just("no-store"), Just("private"), Just("public, s-maxage=9")]
            .prop_map(|v| (6, v.to_owned())),
        1 => prop_oneof![Just("max-age=60"), Just("no-store")].prop_map(|v| (10, v.to_owned())),
        1 => prop_oneof![Just("max-age=60;zipwire"), Just("no-store;other"), Just("max-age=5+9")]
            .prop_map(|v| (11, v.to_owned())),
        3 => prop_oneof![Just("0"), Just("7200"), Just("0, 7200"), Just("-1"), Just("1.5"), Just("9;x=y")]
            .prop_map(|v| (12, v.to_owned())),
        1 => Just((13, "Thu, 01 Jan 2037 00:00:00 GMT".to_owned())),
        1 => Just((14, "Tue, 14 Nov 2023 22:13:20 GMT".to_owned())),
        1 => Just((15, "a=b".to_owned())),
        1 => Just((16, "Basic eDp5".to_owned())),
        1 => Just((17, "no-cache".to_owned())),
        1 => Just((7, "*".to_owned())),
    ]
}

/// A header line for the cache's rules alone.
fn cache_line() -> impl Strategy<Value = Vec<u8>> {
    cache_field().prop_map(header_line)
}

proptest! {
    #[test]
    fn cache_policy_keeps_its_invariants(flags in any::<u8>(), lines in vec(cache_line(), 1..6)) {
        // A GET or HEAD answered 200, with the lines as its heads.
        let mut data = vec![flags, 0, 100];
        for line in lines {
            data.push(b'\n');
            data.extend_from_slice(&line);
        }
        fuzzing::rules(&data);
    }

    #[test]
    fn negotiation_never_panics_on_bytes(data in vec(any::<u8>(), 0..256)) {
        fuzzing::accept_encoding(&data);
    }

    #[test]
    fn negotiation_keeps_its_invariants(data in accept_encoding_lines()) {
        fuzzing::accept_encoding(&data);
    }

    #[test]
    fn decide_never_panics_on_bytes(data in vec(any::<u8>(), 0..512)) {
        fuzzing::rules(&data);
    }

    #[test]
    fn decide_keeps_its_invariants(
        flags in any::<u8>(),
        // 200 mostly; also 204, 206, 304 and 208.
        status in prop_oneof![6 => Just(100u16), 1 => Just(104), 1 => Just(106), 1 => Just(108), 1 => Just(204)],
        content_type in prop_oneof![Just("text/html"), Just("application/json; charset=utf-8")],
        accept in prop_oneof![Just(b"gzip, deflate".to_vec()), accept_encoding_lines()],
        lines in vec(rules_line(), 0..5),
    ) {
        // Mostly a compressible type and an Accept-Encoding, so that compression is common;
        // the extra lines may add a second one of either.
        let mut data = vec![flags];
        data.extend_from_slice(&status.to_be_bytes());
        data.push(2);
        data.extend_from_slice(content_type.as_bytes());
        data.extend_from_slice(b"\n\x00");
        data.extend(accept.into_iter().map(|b| if b == b'\n' { b',' } else { b }));
        for line in lines {
            data.push(b'\n');
            data.extend_from_slice(&line);
        }
        fuzzing::rules(&data);
    }
}
