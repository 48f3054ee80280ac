//! Compression dictionaries (RFC 9842) through the proxy, against an origin that knows
//! nothing of them: the proxy marks a versioned script, stores it, and sends the next
//! version as a delta that decodes (with the proxy's own decoder and with the `zstd`
//! command); every way a request can fail to qualify gets an ordinary coding instead.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http::header::HeaderValue;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use zipwire_dictionary::fields::serialize_hash;
use zipwire_dictionary::{DictCoding, Hash};
use zipwire_proxy::codings::dictionary::decode;
use zipwire_proxy::{CacheMode, DictionaryMode};
use zipwire_testkit::origin::AcceptLoop;
use zipwire_testkit::{corpus_dir, read_corpus_file, require_tool};

use crate::support::{client, upstream, Proxy, TestClient};

const OLD: &str = "jquery-3.7.0.min.js";
const NEW: &str = "jquery-3.7.1.min.js";

/// An origin serving the corpus' jQuery versions under `/lib/`, cacheable for an hour, with
/// `extra` fields on every answer.
fn origin(
    extra: &'static [(&'static str, &'static str)],
) -> (AcceptLoop, Arc<HashMap<String, Bytes>>, Seen) {
    let mut files = HashMap::new();
    for name in [OLD, NEW] {
        let path = corpus_dir().join("versions").join(name);
        files.insert(
            format!("/lib/{name}"),
            Bytes::from(read_corpus_file(&path, 1 << 24)),
        );
    }
    // Text the dictionaries share nothing with.
    let unrelated = corpus_dir().join("canterbury").join("alice29.txt");
    files.insert(
        "/lib/alice29.js".to_owned(),
        Bytes::from(read_corpus_file(&unrelated, 1 << 24)),
    );
    // The new version as an origin's own dcz and dcb against the old, sent to every request
    // (unasked).
    let old = files[&format!("/lib/{OLD}")].clone();
    for coding in [DictCoding::Dcz, DictCoding::Dcb] {
        let delta = zipwire_proxy::codings::dictionary::encode_best(
            coding,
            &old,
            &Hash::of(&old),
            &files[&format!("/lib/{NEW}")],
        )
        .expect("a delta");
        files.insert(format!("/lib/unasked.{coding}.js"), delta);
    }
    let files = Arc::new(files);
    let served = files.clone();
    let seen = Seen::default();
    let recorded = seen.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("non-blocking");
    let listener = TcpListener::from_std(listener).expect("tokio listener");
    let accept = AcceptLoop::spawn(listener, move |stream| {
        let files = served.clone();
        let recorded = recorded.clone();
        async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let path = request.uri().path().to_owned();
                let body = files.get(&path).cloned();
                *recorded.lock().expect("not poisoned") = Some(request.headers().clone());
                async move {
                    let mut response = match body {
                        Some(body) => Response::new(Full::new(body)),
                        None => {
                            let mut missing = Response::new(Full::new(Bytes::from_static(b"no")));
                            *missing.status_mut() = http::StatusCode::NOT_FOUND;
                            missing
                        }
                    };
                    let fields = response.headers_mut();
                    fields.insert(
                        "content-type",
                        HeaderValue::from_static("application/javascript"),
                    );
                    fields.insert(
                        "cache-control",
                        HeaderValue::from_static("public, max-age=3600"),
                    );
                    for (name, value) in extra {
                        fields.insert(*name, HeaderValue::from_static(value));
                    }
                    for coding in ["dcz", "dcb"] {
                        if path.contains(&format!(".{coding}.")) {
                            fields.insert("content-encoding", HeaderValue::from_static(coding));
                        }
                    }
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    });
    (accept, files, seen)
}

/// The fields of the last request the origin got.
type Seen = Arc<std::sync::Mutex<Option<http::HeaderMap>>>;

/// A GET of `path` with `fields`.
pub(crate) async fn get(
    client: &TestClient,
    proxy: &Proxy,
    path: &str,
    fields: &[(&str, String)],
) -> (http::response::Parts, Bytes) {
    let mut request = Request::builder().uri(proxy.url(path));
    for (name, value) in fields {
        request = request.header(*name, value.as_str());
    }
    let response = client
        .request(request.body(Empty::new()).expect("request"))
        .await
        .expect("a response");
    let (parts, body) = response.into_parts();
    (parts, body.collect().await.expect("a body").to_bytes())
}

/// What Chromium sends for `<script src>` when it holds `dictionary`.
fn browser_fields(dictionary: &[u8], site: &str, mode: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "accept-encoding",
            "gzip, deflate, br, zstd, dcb, dcz".to_owned(),
        ),
        (
            "available-dictionary",
            serialize_hash(&Hash::of(dictionary)),
        ),
        ("sec-fetch-site", site.to_owned()),
        ("sec-fetch-mode", mode.to_owned()),
        ("sec-fetch-dest", "script".to_owned()),
    ]
}

pub(crate) fn field<'a>(parts: &'a http::response::Parts, name: &str) -> &'a str {
    parts
        .headers
        .get(name)
        .map_or("", |value| value.to_str().unwrap_or(""))
}

/// The body of a response in an ordinary coding (what a browser that lists zstd gets).
fn decode_ordinary(parts: &http::response::Parts, body: &[u8]) -> Vec<u8> {
    match field(parts, "content-encoding") {
        "zstd" => zstd::stream::decode_all(body).expect("valid zstd"),
        "br" => decode_br(body),
        other => panic!("not an ordinary coding: {other:?}"),
    }
}

pub(crate) fn decode_br(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(body, 4096)
        .read_to_end(&mut out)
        .expect("valid br");
    out
}

#[tokio::test]
async fn a_versioned_script_becomes_a_dictionary_and_the_next_version_a_delta() {
    let (serving, files, seen) = origin(&[]);
    let proxy = Proxy::start(vec![upstream(serving.addr())], |_| {}).await;
    let client = client();
    let old = files[&format!("/lib/{OLD}")].clone();
    let new = files[&format!("/lib/{NEW}")].clone();

    let (first, body) = get(
        &client,
        &proxy,
        &format!("/lib/{OLD}"),
        &[("accept-encoding", "br".into())],
    )
    .await;
    assert_eq!(
        field(&first, "use-as-dictionary"),
        r#"match="/lib/jquery-*.min.js""#
    );
    assert_eq!(decode_br(&body), old);
    let counters = &proxy.stats.dictionaries;
    assert_eq!(counters.stored.load(Ordering::Relaxed), 1);
    assert_eq!(
        counters.held_bytes.load(Ordering::Relaxed) as usize,
        old.len() + 256
    );

    let (delta, body) = get(
        &client,
        &proxy,
        &format!("/lib/{NEW}"),
        &browser_fields(&old, "same-origin", "no-cors"),
    )
    .await;
    assert_eq!(field(&delta, "content-encoding"), "dcz");
    // The origin is never asked for a delta of its own.
    let asked = seen
        .lock()
        .expect("not poisoned")
        .clone()
        .expect("a request");
    assert!(!asked.contains_key("available-dictionary"));
    let accept = asked
        .get("accept-encoding")
        .map(|value| value.as_bytes().to_vec());
    assert!(accept.is_none_or(|value| !value.windows(2).any(|w| w == b"dc")));
    let vary = field(&delta, "vary").to_ascii_lowercase();
    for member in [
        "accept-encoding",
        "available-dictionary",
        "sec-fetch-site",
        "sec-fetch-mode",
    ] {
        assert!(vary.contains(member), "vary {vary}");
    }
    assert_eq!(
        decode(DictCoding::Dcz, &old, &body, 1 << 24).expect("dcz decodes"),
        new
    );
    // A tenth of what br at the proxy's level sends, or less.
    let (plain, br) = get(
        &client,
        &proxy,
        &format!("/lib/{NEW}"),
        &[("accept-encoding", "br".into())],
    )
    .await;
    assert_eq!(field(&plain, "content-encoding"), "br");
    assert!(
        body.len() * 10 < br.len(),
        "dcz {} bytes, br {}",
        body.len(),
        br.len()
    );
    assert_eq!(counters.dcz.load(Ordering::Relaxed), 1);
    assert!(counters.bytes_saved.load(Ordering::Relaxed) > 0);

    if require_tool("zstd") {
        let dir = tempfile::tempdir().expect("temp dir");
        let dictionary = dir.path().join("dictionary");
        std::fs::write(&dictionary, &old).expect("write");
        let decoded = zipwire_testkit::run_with_stdin(
            "zstd",
            &["-d", "-q", "-c", "-D", dictionary.to_str().expect("path")],
            &body,
        )
        .expect("zstd -d -D decodes the dcz body");
        assert!(decoded == new, "zstd -d -D gave other bytes");
    }

    // A client that lists only dcb gets dcb.
    let mut fields = browser_fields(&old, "same-origin", "no-cors");
    fields[0].1 = "br, dcb".into();
    let (dcb, body) = get(&client, &proxy, &format!("/lib/{NEW}"), &fields).await;
    assert_eq!(field(&dcb, "content-encoding"), "dcb");
    assert_eq!(
        decode(DictCoding::Dcb, &old, &body, 1 << 24).expect("dcb decodes"),
        new
    );
    assert!(
        body.len() * 10 < br.len(),
        "dcb {} bytes, br {}",
        body.len(),
        br.len()
    );
}

#[tokio::test]
async fn requests_that_do_not_qualify_get_an_ordinary_coding() {
    let (serving, files, _seen) = origin(&[]);
    let proxy = Proxy::start(vec![upstream(serving.addr())], |_| {}).await;
    let client = client();
    let old = files[&format!("/lib/{OLD}")].clone();
    let new = files[&format!("/lib/{NEW}")].clone();
    get(&client, &proxy, &format!("/lib/{OLD}"), &[]).await;
    let path = format!("/lib/{NEW}");
    let counters = &proxy.stats.dictionaries;

    // An unknown hash.
    let (parts, body) = get(
        &client,
        &proxy,
        &path,
        &browser_fields(b"never seen", "same-origin", "no-cors"),
    )
    .await;
    assert!(field(&parts, "vary").contains("Available-Dictionary"));
    assert_eq!(decode_ordinary(&parts, &body), new);
    assert_eq!(counters.unknown.load(Ordering::Relaxed), 1);

    // A cross-site no-cors load (a `<script src>` on another site, without `crossorigin`).
    let (parts, body) = get(
        &client,
        &proxy,
        &path,
        &browser_fields(&old, "cross-site", "no-cors"),
    )
    .await;
    assert_eq!(decode_ordinary(&parts, &body), new);
    assert_eq!(counters.refused.load(Ordering::Relaxed), 1);

    // Malformed fields, `*` instead of the names, a range, `no-transform`.
    let mut cases = Vec::new();
    let mut malformed = browser_fields(&old, "same-origin", "no-cors");
    malformed[1].1 = ":not base64!:".into();
    cases.push(malformed);
    let mut short = browser_fields(&old, "same-origin", "no-cors");
    short[1].1 = ":AAAA:".into();
    cases.push(short);
    let mut star = browser_fields(&old, "same-origin", "no-cors");
    star[0].1 = "br, *".into();
    cases.push(star);
    let mut range = browser_fields(&old, "same-origin", "no-cors");
    range.push(("range", "bytes=0-99".into()));
    cases.push(range);
    let mut no_transform = browser_fields(&old, "same-origin", "no-cors");
    no_transform.push(("cache-control", "no-transform".into()));
    cases.push(no_transform);
    for fields in cases {
        let (parts, _) = get(&client, &proxy, &path, &fields).await;
        let coding = field(&parts, "content-encoding");
        assert!(parts.status.is_success(), "{fields:?}: {}", parts.status);
        assert!(coding != "dcz" && coding != "dcb", "{fields:?}: {coding}");
    }
    assert_eq!(counters.dcz.load(Ordering::Relaxed), 0);
    assert_eq!(counters.dcb.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn origin_mode_stores_only_what_the_origin_marks() {
    let (serving, files, _seen) = origin(&[]);
    let proxy = Proxy::start(vec![upstream(serving.addr())], |config| {
        config.dictionaries.mode = DictionaryMode::Origin;
    })
    .await;
    let client = client();
    let (first, _) = get(&client, &proxy, &format!("/lib/{OLD}"), &[]).await;
    assert_eq!(field(&first, "use-as-dictionary"), "");
    assert_eq!(proxy.stats.dictionaries.stored.load(Ordering::Relaxed), 0);
    let old = files[&format!("/lib/{OLD}")].clone();
    let (parts, body) = get(
        &client,
        &proxy,
        &format!("/lib/{NEW}"),
        &browser_fields(&old, "same-origin", "no-cors"),
    )
    .await;
    assert_eq!(
        decode_ordinary(&parts, &body),
        files[&format!("/lib/{NEW}")]
    );

    // The origin's own mark, with an id, is honoured and passed on as it came.
    let (marked, files, _) = origin(&[("use-as-dictionary", r#"match="/lib/*.js", id="v1""#)]);
    let proxy = Proxy::start(vec![upstream(marked.addr())], |config| {
        config.dictionaries.mode = DictionaryMode::Origin;
    })
    .await;
    let (first, _) = get(&client, &proxy, &format!("/lib/{OLD}"), &[]).await;
    assert_eq!(
        field(&first, "use-as-dictionary"),
        r#"match="/lib/*.js", id="v1""#
    );
    let old = files[&format!("/lib/{OLD}")].clone();
    let (parts, body) = get(
        &client,
        &proxy,
        &format!("/lib/{NEW}"),
        &browser_fields(&old, "same-origin", "no-cors"),
    )
    .await;
    assert_eq!(field(&parts, "content-encoding"), "dcz");
    assert_eq!(
        decode(DictCoding::Dcz, &old, &body, 1 << 24).unwrap(),
        files[&format!("/lib/{NEW}")]
    );

    // Off: nothing marked, nothing stored, no Vary member added.
    let proxy = Proxy::start(vec![upstream(marked.addr())], |config| {
        config.dictionaries.mode = DictionaryMode::Off;
    })
    .await;
    get(&client, &proxy, &format!("/lib/{OLD}"), &[]).await;
    let (parts, body) = get(
        &client,
        &proxy,
        &format!("/lib/{NEW}"),
        &browser_fields(&old, "same-origin", "no-cors"),
    )
    .await;
    assert_eq!(
        decode_ordinary(&parts, &body),
        files[&format!("/lib/{NEW}")]
    );
    assert!(!field(&parts, "vary").contains("Available-Dictionary"));
}

#[tokio::test]
async fn the_cache_keeps_the_delta_and_serves_it_from_memory() {
    let (serving, files, _seen) = origin(&[]);
    let proxy = Proxy::start(vec![upstream(serving.addr())], |config| {
        config.cache.mode = CacheMode::Fresh;
        config.cache.recompress = false;
    })
    .await;
    let client = client();
    let old = files[&format!("/lib/{OLD}")].clone();
    let new = files[&format!("/lib/{NEW}")].clone();
    let path = format!("/lib/{NEW}");
    get(&client, &proxy, &format!("/lib/{OLD}"), &[]).await;
    // The miss stores the new version; its client gets a delta made as it streams.
    let (miss, streamed) = get(
        &client,
        &proxy,
        &path,
        &browser_fields(&old, "same-origin", "no-cors"),
    )
    .await;
    assert_eq!(field(&miss, "content-encoding"), "dcz");
    assert_eq!(
        decode(DictCoding::Dcz, &old, &streamed, 1 << 24).unwrap(),
        new
    );
    let hits = proxy.stats.cache.hits.load(Ordering::Relaxed);
    let (hit, first) = get(
        &client,
        &proxy,
        &path,
        &browser_fields(&old, "same-origin", "no-cors"),
    )
    .await;
    let (again, second) = get(
        &client,
        &proxy,
        &path,
        &browser_fields(&old, "same-origin", "no-cors"),
    )
    .await;
    assert_eq!(proxy.stats.cache.hits.load(Ordering::Relaxed), hits + 2);
    // The streamed miss got dcz (the faster encoder); from the cache, dcb (the smaller).
    for (parts, body) in [(&hit, &first), (&again, &second)] {
        assert_eq!(field(parts, "content-encoding"), "dcb");
        assert_eq!(field(parts, "content-length"), body.len().to_string());
        assert_eq!(decode(DictCoding::Dcb, &old, body, 1 << 24).unwrap(), new);
    }
    assert_eq!(first, second, "the second hit is the stored delta");
    let counters = &proxy.stats.dictionaries;
    assert_eq!(counters.dcz.load(Ordering::Relaxed), 1);
    assert_eq!(counters.dcb.load(Ordering::Relaxed), 2);
    // Hits count the representation they stand for, as the streamed delta does.
    assert_eq!(
        counters.bytes_in.load(Ordering::Relaxed),
        3 * new.len() as u64
    );
    let sent = (streamed.len() + first.len() + second.len()) as u64;
    assert_eq!(counters.bytes_out.load(Ordering::Relaxed), sent);
    // A client without the dictionary still gets the ordinary variant.
    let (plain, body) = get(&client, &proxy, &path, &[("accept-encoding", "br".into())]).await;
    assert_eq!(field(&plain, "content-encoding"), "br");
    assert_eq!(decode_br(&body), new);
}

#[tokio::test]
async fn a_hit_never_gets_a_delta_larger_than_the_stored_variant() {
    let (serving, files, _seen) = origin(&[]);
    let proxy = Proxy::start(vec![upstream(serving.addr())], |config| {
        config.cache.mode = CacheMode::Fresh;
    })
    .await;
    let client = client();
    let old = files[&format!("/lib/{OLD}")].clone();
    get(&client, &proxy, &format!("/lib/{OLD}"), &[]).await;
    // A body the dictionary does not help: its delta on the request path (zstd 3) is larger
    // than the br variant the cache's worker makes at brotli 11.
    let path = "/lib/alice29.js";
    let br = [("accept-encoding", "br".to_owned())];
    let (_, streamed) = get(&client, &proxy, path, &br).await;
    let start = std::time::Instant::now();
    let best = loop {
        let (_, body) = get(&client, &proxy, path, &br).await;
        if body.len() < streamed.len() {
            break body;
        }
        assert!(
            start.elapsed().as_secs() < 60,
            "the worker made no br 11 variant"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let mut fields = browser_fields(&old, "same-origin", "no-cors");
    fields[0].1 = "br, dcz".into();
    for _ in 0..2 {
        let (parts, body) = get(&client, &proxy, path, &fields).await;
        assert_eq!(field(&parts, "content-encoding"), "br");
        assert_eq!(body, best);
        let vary = field(&parts, "vary").to_ascii_lowercase();
        assert!(vary.contains("available-dictionary"), "vary {vary}");
    }
    assert_eq!(proxy.stats.dictionaries.dcz.load(Ordering::Relaxed), 0);
    // The delta itself decodes, and is larger than that variant.
    let delta =
        zipwire_proxy::codings::dictionary::dcz_one_shot(&old, 3, &files[path]).expect("a delta");
    assert!(
        delta.len() > best.len(),
        "dcz {} br {}",
        delta.len(),
        best.len()
    );
}

/// An origin that sends its own dcz or dcb unasked (the proxy forwards no dictionary
/// coding): decoded with the dictionary the proxy holds, streamed and from the cache; failed,
/// never passed, when the proxy does not hold it; passed as it is with dictionaries off.
#[tokio::test]
async fn an_origins_unasked_dictionary_coding_never_reaches_the_client() {
    let (serving, files, _seen) = origin(&[]);
    let new = files[&format!("/lib/{NEW}")].clone();
    let br = [("accept-encoding", "br".to_owned())];
    let chromium = browser_fields(&files[&format!("/lib/{OLD}")], "same-origin", "no-cors");
    for coding in ["dcz", "dcb"] {
        let path = format!("/lib/unasked.{coding}.js");
        let proxy = Proxy::start(vec![upstream(serving.addr())], |config| {
            config.cache.mode = CacheMode::Fresh;
        })
        .await;
        let client = client();
        get(&client, &proxy, &format!("/lib/{OLD}"), &[]).await;
        assert_eq!(proxy.stats.dictionaries.stored.load(Ordering::Relaxed), 1);
        // Streamed (the miss), then from the cache, and to a client that lists the coding.
        for fields in [&br[..], &br[..], &chromium[..]] {
            let (parts, body) = get(&client, &proxy, &path, fields).await;
            assert_eq!(parts.status, 200, "{coding}");
            assert_eq!(field(&parts, "content-encoding"), "", "{coding}");
            assert_eq!(body, new, "{coding}");
        }
        assert_eq!(
            proxy.stats.cache.hits.load(Ordering::Relaxed),
            2,
            "{coding}"
        );

        // A proxy that does not hold the dictionary cannot decode it: an error, not the body.
        let fresh = Proxy::start(vec![upstream(serving.addr())], |_| {}).await;
        // A client of its own for each proxy: a port freed by the last one may be reused.
        let response = crate::support::client()
            .request(
                Request::builder()
                    .uri(fresh.url(&path))
                    .header("accept-encoding", "br")
                    .body(Empty::new())
                    .expect("request"),
            )
            .await
            .expect("a response");
        if response.status().is_success() {
            assert!(
                response.into_body().collect().await.is_err(),
                "{coding}: an undecodable body ended cleanly"
            );
        } else {
            assert_eq!(response.status(), http::StatusCode::BAD_GATEWAY);
        }

        // With dictionaries off the proxy forwards the client's fields, and passes the
        // origin's coding as it does any other.
        let off = Proxy::start(vec![upstream(serving.addr())], |config| {
            config.dictionaries.mode = DictionaryMode::Off;
        })
        .await;
        let (parts, body) = get(&crate::support::client(), &off, &path, &chromium).await;
        assert_eq!(field(&parts, "content-encoding"), coding);
        assert_eq!(body, files[&path]);
    }
}

/// `[[dictionaries.paths]]`: the longest prefix decides; a `match` marks what is under it,
/// versioned or not; `mark = false` marks nothing, versioned or not.
#[tokio::test]
async fn path_rules_set_or_stop_the_marking() {
    let (serving, _files, _seen) = origin(&[]);
    let proxy = Proxy::start(vec![upstream(serving.addr())], |config| {
        let mut mark = zipwire_dictionary::UseAsDictionary::matching("/lib/*.js");
        mark.destinations.push("script".to_owned());
        config.dictionaries.paths = vec![
            zipwire_proxy::DictionaryPathRule {
                prefix: "/lib/".to_owned(),
                mark: Some(mark),
            },
            zipwire_proxy::DictionaryPathRule {
                prefix: "/lib/jquery-".to_owned(),
                mark: None,
            },
        ];
    })
    .await;
    let client = client();
    let (unversioned, _) = get(&client, &proxy, "/lib/alice29.js", &[]).await;
    assert_eq!(
        field(&unversioned, "use-as-dictionary"),
        r#"match="/lib/*.js", match-dest=("script")"#
    );
    let (versioned, _) = get(&client, &proxy, &format!("/lib/{OLD}"), &[]).await;
    assert_eq!(field(&versioned, "use-as-dictionary"), "");
    assert_eq!(proxy.stats.dictionaries.stored.load(Ordering::Relaxed), 1);
}
