use http::header::{HeaderMap, HeaderValue, ACCEPT_ENCODING};
use proptest::prelude::*;

use super::*;

fn with(name: &HeaderName, values: &[&str]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for value in values {
        headers.append(name, HeaderValue::from_str(value).unwrap());
    }
    headers
}

#[test]
fn use_as_dictionary_members() {
    let headers = with(
        &USE_AS_DICTIONARY,
        &[r#"match="/lib/jquery-*.min.js", match-dest=("script" "style"), id="v1""#],
    );
    let parsed = UseAsDictionary::from_headers(&headers).unwrap();
    assert_eq!(parsed.pattern, "/lib/jquery-*.min.js");
    assert_eq!(parsed.destinations, ["script", "style"]);
    assert_eq!(parsed.id.as_deref(), Some("v1"));
    // Lines combine; an explicit raw type is fine.
    let split = with(&USE_AS_DICTIONARY, &[r#"match="/a/*""#, "type=raw"]);
    assert_eq!(
        UseAsDictionary::from_headers(&split).unwrap().pattern,
        "/a/*"
    );
}

#[test]
fn unusable_use_as_dictionary_reads_as_absent() {
    for value in [
        r#"match=/a/*"#,               // a token, not a string
        r#"id="x""#,                   // no match
        r#"match="/a/(\\d+)""#,        // a regexp group
        r#"match="/a/*", type=other"#, // an unknown type
        r#"match="/a/*", type="raw""#, // a string, not a token
        r#"match="/a/*", match-dest="script""#,
        r#"match="/a/*", match-dest=(script)"#,
        r#"match="/a/*", id=1"#,
        r#"match=("/a")"#,
        "match=\"unterminated",
        "",
    ] {
        let headers = with(&USE_AS_DICTIONARY, &[value]);
        assert_eq!(UseAsDictionary::from_headers(&headers), None, "{value}");
    }
    let long = format!(r#"match="/a", id="{}""#, "x".repeat(MAX_ID + 1));
    assert_eq!(
        UseAsDictionary::from_headers(&with(&USE_AS_DICTIONARY, &[&long])),
        None
    );
}

#[test]
fn use_as_dictionary_round_trips() {
    let value = UseAsDictionary {
        pattern: "/static/app-*.js".into(),
        destinations: vec!["script".into()],
        id: Some("build \"7\"".into()),
    };
    let header = value.to_header_value().unwrap();
    assert_eq!(
        header,
        r#"match="/static/app-*.js", match-dest=("script"), id="build \"7\"""#
    );
    let parsed =
        UseAsDictionary::from_headers(&with(&USE_AS_DICTIONARY, &[header.to_str().unwrap()]));
    assert_eq!(parsed, Some(value));
    assert_eq!(UseAsDictionary::matching("/é").to_header_value(), None);
}

#[test]
fn available_dictionary_is_one_32_byte_sequence() {
    let hash = crate::Hash::of(b"v1");
    let value = serialize_hash(&hash);
    assert!(value.starts_with(':') && value.ends_with(':'));
    assert_eq!(
        available_dictionary(&with(&AVAILABLE_DICTIONARY, &[&value])),
        Some(hash)
    );
    assert_eq!(
        available_dictionary(&with(&AVAILABLE_DICTIONARY, &[&format!("{value};p=1")])),
        Some(hash)
    );
    for bad in [":AAAA:", "\"abc\"", "abc", ":not base64:", ""] {
        assert_eq!(
            available_dictionary(&with(&AVAILABLE_DICTIONARY, &[bad])),
            None,
            "{bad}"
        );
    }
    assert_eq!(
        available_dictionary(&with(&AVAILABLE_DICTIONARY, &[&value, &value])),
        None
    );
    assert_eq!(available_dictionary(&HeaderMap::new()), None);
    assert_eq!(
        dictionary_id(&with(&DICTIONARY_ID, &["\"v1\""])).as_deref(),
        Some("v1")
    );
    assert_eq!(dictionary_id(&with(&DICTIONARY_ID, &["v1"])), None);
}

#[test]
fn dictionary_codings_must_be_listed_explicitly() {
    let read = |values: &[&str]| Accepted::from_headers(&with(&ACCEPT_ENCODING, values));
    assert_eq!(
        read(&["gzip, deflate, br, zstd, dcb, dcz"]),
        Accepted {
            dcz: true,
            dcb: true
        }
    );
    assert_eq!(read(&["*"]), Accepted::default());
    assert_eq!(
        read(&["br", "DCZ;q=0.5"]),
        Accepted {
            dcz: true,
            dcb: false
        }
    );
    assert_eq!(
        read(&["dcz;q=0, dcb"]),
        Accepted {
            dcz: false,
            dcb: true
        }
    );
    assert!(!read(&["dcz, dcz;q=0"]).dcz);
    assert!(!read(&["dcz;q=abc"]).dcz);
    assert!(!read(&["dcz;level=1"]).dcz);
    assert_eq!(read(&[]), Accepted::default());
}

#[test]
fn what_names_a_dictionary_stays_off_the_upstream_request() {
    let mut headers = with(&ACCEPT_ENCODING, &["gzip, deflate, br, zstd, dcb, dcz"]);
    headers.insert(AVAILABLE_DICTIONARY, HeaderValue::from_static(":AAAA:"));
    headers.insert(DICTIONARY_ID, HeaderValue::from_static("\"v1\""));
    strip_for_upstream(&mut headers);
    assert_eq!(headers[ACCEPT_ENCODING], "gzip, deflate, br, zstd");
    assert!(!headers.contains_key(AVAILABLE_DICTIONARY));
    assert!(!headers.contains_key(DICTIONARY_ID));
    let mut only = with(&ACCEPT_ENCODING, &["dcz", "DCB;q=0.5"]);
    strip_for_upstream(&mut only);
    assert!(!only.contains_key(ACCEPT_ENCODING));
    let mut untouched = with(&ACCEPT_ENCODING, &["gzip", "br;q=0.5"]);
    strip_for_upstream(&mut untouched);
    assert_eq!(untouched.get_all(ACCEPT_ENCODING).iter().count(), 2);
}

proptest! {
    /// Whatever the bytes, reading them never panics, and whatever is read is well formed.
    #[test]
    fn any_field_value_reads_safely(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(value) = HeaderValue::from_bytes(&bytes) {
            for name in [&USE_AS_DICTIONARY, &AVAILABLE_DICTIONARY, &DICTIONARY_ID, &ACCEPT_ENCODING] {
                let mut headers = HeaderMap::new();
                headers.insert(name, value.clone());
                if let Some(parsed) = UseAsDictionary::from_headers(&headers) {
                    prop_assert!(crate::pattern::is_valid(&parsed.pattern));
                }
                let _ = available_dictionary(&headers);
                let _ = dictionary_id(&headers);
                let _ = Accepted::from_headers(&headers);
            }
        }
    }
}
