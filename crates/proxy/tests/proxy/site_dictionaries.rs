//! Site dictionaries through the proxy: pages an origin serves are sampled, a dictionary is
//! built from them, served at the proxy's own URL and announced with `Link`, and a page a
//! browser then loads naming it arrives as a delta that decodes; pages meant for one client
//! are never sampled.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::HeaderValue;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use zipwire_dictionary::fields::serialize_hash;
use zipwire_dictionary::{DictCoding, Hash};
use zipwire_proxy::codings::dictionary::decode;
use zipwire_testkit::origin::AcceptLoop;

use crate::dictionaries::{decode_br, field, get};
use crate::support::{client, upstream, Proxy};

/// Page `n` of a site: a shared template around text of its own, about 30 KB.
fn page(n: usize) -> Bytes {
    let mut page = String::from(
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><meta name=viewport \
         content=\"width=device-width, initial-scale=1\"><link rel=stylesheet \
         href=/static/site.css><script src=/static/site.js defer></script><title>",
    );
    page.push_str(&format!(
        "Chapter {n} | The Example Handbook</title></head><body>"
    ));
    page.push_str("<header class=site-header><nav class=top-nav><ul>");
    for (i, section) in [
        "Tutorial",
        "Library",
        "Reference",
        "How-to",
        "FAQ",
        "Glossary",
    ]
    .iter()
    .enumerate()
    {
        page.push_str(&format!(
            "<li class=nav-item><a class=nav-link href=/docs/section-{i}.html \
             title=\"Go to the {section} section\">{section}</a></li>"
        ));
    }
    page.push_str("</ul></nav></header><div class=sidebar><h3>Contents</h3><ul>");
    for chapter in 0..40 {
        page.push_str(&format!(
            "<li class=toctree-l1><a class=reference href=/docs/chapter-{chapter}.html>\
             Chapter {chapter}: working with the example library</a></li>"
        ));
    }
    page.push_str("</ul></div><main class=body role=main><section>");
    let mut state = n as u64 * 0x9e37_79b9 + 1;
    for _ in 0..1500 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        page.push_str(
            [
                "the ",
                "value ",
                "returns ",
                "function ",
                "list ",
                "object ",
            ][(state % 6) as usize],
        );
        page.push_str(&format!("{} ", state % 10_007));
    }
    page.push_str(
        "</section></main><footer class=footer>&copy; Copyright the Example Handbook authors. \
         Licensed under the example licence. Last updated on Dec 05, 2026. Found a bug? \
         <a href=/bugs.html>Report it</a>. Created using the example generator.</footer>\
         </body></html>",
    );
    Bytes::from(page)
}

/// Document `n` of an API: records with the same fields and values of their own.
fn json(n: usize) -> Bytes {
    let mut state = n as u64 * 0x2545_f491 + 3;
    let records: Vec<String> = (0..60)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            format!(
                "{{\"id\":{},\"type\":\"example-record\",\"attributes\":{{\"title\":\
                 \"Record {i}\",\"status\":\"published\",\"created_at\":\
                 \"2026-12-0{}T10:00:00Z\",\"score\":{}}},\"links\":{{\"self\":\
                 \"https://api.example.com/v1/records/{}\"}}}}",
                state % 100_000,
                1 + state % 9,
                state % 1000,
                state % 100_000
            )
        })
        .collect();
    Bytes::from(format!("{{\"data\":[{}]}}", records.join(",")))
}

/// An origin serving `page(n)` at `/docs/chapter-N.html` as HTML anyone may share, at
/// `/account/chapter-N.html` with a `Set-Cookie`, and `json(n)` at `/api/records-N.json`.
fn origin() -> AcceptLoop {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("non-blocking");
    let listener = TcpListener::from_std(listener).expect("tokio listener");
    AcceptLoop::spawn(listener, move |stream| async move {
        let service = service_fn(move |request: Request<Incoming>| async move {
            let path = request.uri().path().to_owned();
            let number = path
                .rsplit('-')
                .next()
                .and_then(|last| last.strip_suffix(".html").or(last.strip_suffix(".json")))
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            let api = path.starts_with("/api/");
            let body = if api { json(number) } else { page(number) };
            let mut response = Response::new(Full::new(body));
            let fields = response.headers_mut();
            fields.insert(
                "content-type",
                HeaderValue::from_static(match api {
                    true => "application/json",
                    false => "text/html; charset=utf-8",
                }),
            );
            if path.starts_with("/account/") {
                fields.insert("set-cookie", HeaderValue::from_static("session=1"));
            }
            Ok::<_, Infallible>(response)
        });
        let _ = http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await;
    })
}

/// Waits up to 60 s for `built` site dictionaries.
async fn built(proxy: &Proxy, built: u64) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if proxy.stats.dictionaries.site_built.load(Ordering::Relaxed) >= built {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The dictionary path a page's `Link` announces.
fn announced(parts: &http::response::Parts) -> Option<String> {
    let link = field(parts, "link");
    let target = link.strip_prefix('<')?.split_once('>')?;
    target
        .1
        .contains("rel=\"compression-dictionary\"")
        .then(|| target.0.to_owned())
}

#[tokio::test]
async fn pages_anyone_may_share_build_a_dictionary_that_serves_deltas() {
    let serving = origin();
    let proxy = Proxy::start(vec![upstream(serving.addr())], |config| {
        config.dictionaries.site = true;
    })
    .await;
    let client = client();
    let br = [("accept-encoding", "br".to_owned())];

    // Pages for one client are never sampled: a response with Set-Cookie, a request with
    // a cookie or credentials.
    for n in 0..40 {
        get(&client, &proxy, &format!("/account/chapter-{n}.html"), &br).await;
        let cookie = [br[0].clone(), ("cookie", "session=1".to_owned())];
        get(&client, &proxy, &format!("/docs/chapter-{n}.html"), &cookie).await;
        let authorization = [br[0].clone(), ("authorization", "Basic dTpw".to_owned())];
        get(
            &client,
            &proxy,
            &format!("/docs/chapter-{}.html", n + 100),
            &authorization,
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let counters = &proxy.stats.dictionaries;
    assert_eq!(counters.site_built.load(Ordering::Relaxed), 0);
    let (page_before, _) = get(&client, &proxy, "/docs/chapter-200.html", &br).await;
    assert_eq!(announced(&page_before), None);

    // The same pages without credentials are.
    for n in 0..40 {
        get(&client, &proxy, &format!("/docs/chapter-{n}.html"), &br).await;
    }
    assert!(built(&proxy, 1).await, "no site dictionary built");

    let (announcing, body) = get(&client, &proxy, "/docs/chapter-300.html", &br).await;
    assert_eq!(decode_br(&body), page(300));
    let url = announced(&announcing).expect("a Link to the dictionary");
    assert!(url.starts_with("/.zipwire/dictionary/html-"), "{url}");

    let (served, body) = get(&client, &proxy, &url, &br).await;
    assert_eq!(served.status, 200);
    assert_eq!(field(&served, "content-encoding"), "br");
    assert_eq!(
        field(&served, "use-as-dictionary"),
        r#"match="/docs/*", match-dest=("document" "frame" "iframe")"#
    );
    assert!(field(&served, "cache-control").contains("max-age="));
    let dictionary = decode_br(&body);
    assert!(url.ends_with(&format!("{:?}", Hash::of(&dictionary))));
    assert_eq!(counters.site_fetches.load(Ordering::Relaxed), 1);
    let (identity, raw) = get(&client, &proxy, &url, &[]).await;
    assert_eq!(field(&identity, "content-encoding"), "");
    assert_eq!(raw, dictionary);

    // A navigation naming it gets a delta, far smaller than br.
    let navigation = [
        (
            "accept-encoding",
            "gzip, deflate, br, zstd, dcb, dcz".to_owned(),
        ),
        (
            "available-dictionary",
            serialize_hash(&Hash::of(&dictionary)),
        ),
        ("sec-fetch-site", "same-origin".to_owned()),
        ("sec-fetch-mode", "navigate".to_owned()),
        ("sec-fetch-dest", "document".to_owned()),
    ];
    let (delta, body) = get(&client, &proxy, "/docs/chapter-301.html", &navigation).await;
    assert_eq!(field(&delta, "content-encoding"), "dcz");
    assert_eq!(
        decode(DictCoding::Dcz, &dictionary, &body, 1 << 24).expect("dcz decodes"),
        page(301)
    );
    let (_, plain) = get(&client, &proxy, "/docs/chapter-301.html", &br).await;
    assert!(
        body.len() * 10 < plain.len() * 9,
        "dcz {} bytes, br {}",
        body.len(),
        plain.len()
    );

    // Nothing else is served under the proxy's prefix.
    let (missing, _) = get(&client, &proxy, "/.zipwire/dictionary/html-0000", &br).await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn json_documents_get_a_dictionary_of_their_own() {
    let serving = origin();
    let proxy = Proxy::start(vec![upstream(serving.addr())], |config| {
        config.dictionaries.site = true;
    })
    .await;
    let client = client();
    let br = [("accept-encoding", "br".to_owned())];
    for n in 0..40 {
        get(&client, &proxy, &format!("/api/records-{n}.json"), &br).await;
    }
    assert!(built(&proxy, 1).await, "no JSON dictionary built");
    // The site's pages announce it.
    let (page, _) = get(&client, &proxy, "/docs/chapter-1.html", &br).await;
    let url = announced(&page).expect("a Link to the dictionary");
    assert!(url.starts_with("/.zipwire/dictionary/json-"), "{url}");
    let (served, dictionary) = get(&client, &proxy, &url, &[]).await;
    // For fetch() under the documents' directory, whatever its destination.
    assert_eq!(field(&served, "use-as-dictionary"), r#"match="/api/*""#);
    let fetch = [
        (
            "accept-encoding",
            "gzip, deflate, br, zstd, dcb, dcz".to_owned(),
        ),
        (
            "available-dictionary",
            serialize_hash(&Hash::of(&dictionary)),
        ),
        ("sec-fetch-site", "same-origin".to_owned()),
        ("sec-fetch-mode", "cors".to_owned()),
        ("sec-fetch-dest", "empty".to_owned()),
    ];
    let (delta, body) = get(&client, &proxy, "/api/records-77.json", &fetch).await;
    assert_eq!(field(&delta, "content-encoding"), "dcz");
    assert_eq!(
        decode(DictCoding::Dcz, &dictionary, &body, 1 << 24).expect("dcz decodes"),
        json(77)
    );
    let (_, plain) = get(&client, &proxy, "/api/records-77.json", &br).await;
    assert!(
        body.len() * 10 < plain.len() * 9,
        "dcz {} bytes, br {}",
        body.len(),
        plain.len()
    );

    // `site = false`: nothing sampled, built or announced.
    let proxy = Proxy::start(vec![upstream(serving.addr())], |config| {
        config.dictionaries.site = false;
    })
    .await;
    for n in 0..40 {
        get(&client, &proxy, &format!("/api/records-{n}.json"), &br).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        proxy.stats.dictionaries.site_built.load(Ordering::Relaxed),
        0
    );
    let (page, _) = get(&client, &proxy, "/docs/chapter-1.html", &br).await;
    assert_eq!(announced(&page), None);
}
