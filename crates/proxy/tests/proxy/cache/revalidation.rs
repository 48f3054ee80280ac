//! Revalidation: what a 304 from the origin does to a stored response (RFC 9111 §4.3.3-§4.3.4),
//! and that no client gets a 304 it did not ask for.

use bytes::Bytes;
use zipwire_proxy::CacheMode;

use super::{client, counter, get, proxy, Scripted};
use crate::support::gunzip;

#[tokio::test]
async fn revalidate_mode_asks_every_time_and_a_new_etag_replaces_the_entry() {
    let origin = Scripted::start(&[("cache-control", "max-age=3600")], Some("\"v1\"")).await;
    let proxy = proxy(&origin, CacheMode::Revalidate, origin.time.clone()).await;
    let client = client();
    let expected = origin.script.lock().expect("not poisoned").body.clone();
    let (_, first) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    assert_eq!(origin.last_request().1.get("if-none-match"), None);
    let (parts, second) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    assert_eq!(
        origin.hits(),
        2,
        "revalidate mode asks the origin every time"
    );
    assert_eq!(origin.last_request().1["if-none-match"], "\"v1\"");
    assert_eq!(parts.status, 200);
    assert_eq!(gunzip(&first), expected);
    assert_eq!(gunzip(&second), expected);
    assert_eq!(counter(&proxy, |c| &c.revalidations), 1);
    assert_eq!(counter(&proxy, |c| &c.stores), 1);
    // The client's own tag travels with the stored one; a match is the client's 304.
    let (parts, body) = get(
        &client,
        &proxy,
        &[
            ("accept-encoding", "gzip"),
            ("if-none-match", "\"old\", W/\"v1\""),
        ],
    )
    .await;
    assert_eq!(
        origin.last_request().1["if-none-match"],
        "\"old\", W/\"v1\", \"v1\""
    );
    assert_eq!(parts.status, 304);
    assert!(body.is_empty());
    // What guides a cache's update, and no representation metadata (RFC 9110 §15.4.5): a
    // downstream cache holding the identity copy must not take it for gzip.
    assert_eq!(parts.headers["etag"], "W/\"v1\"");
    assert!(parts.headers.contains_key("vary"), "{:?}", parts.headers);
    for name in ["content-encoding", "content-type", "content-length"] {
        assert!(
            !parts.headers.contains_key(name),
            "{name}: {:?}",
            parts.headers
        );
    }
    // The miss streamed; the first revalidated use made the gzip variant, and the next 200
    // uses it (the 304 needed no body).
    let (parts, _) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    assert_eq!(parts.status, 200);
    assert!(counter(&proxy, |c| &c.encoder_micros_saved) > 0);
    origin.edit(|s| {
        s.etag = Some("\"v2\"".to_owned());
        s.body = Bytes::from_static(b"<html>the second version, long enough to be compressed........................................................................................................................................................................................................................</html>");
    });
    let (_, third) = get(&client, &proxy, &[("accept-encoding", "gzip")]).await;
    assert!(gunzip(&third).starts_with(b"<html>the second version"));
    assert_eq!(counter(&proxy, |c| &c.stores), 2);
    let (_, plain) = get(&client, &proxy, &[]).await;
    assert!(
        plain.starts_with(b"<html>the second version"),
        "decoded for identity clients"
    );
}

/// The cache stores a 200 tagged `stored`; the origin then tags its representation
/// `answered` and answers the cache's own If-None-Match with a 304: an unconditional client
/// gets the stored body, freshened, never the 304.
async fn a_304_to_the_cache_s_validators_serves_the_stored_body(
    cache_control: &str,
    stored: &str,
    answered: &str,
) {
    let origin = Scripted::start(&[("cache-control", cache_control)], Some(stored)).await;
    let proxy = proxy(&origin, CacheMode::Revalidate, origin.time.clone()).await;
    let client = client();
    let expected = origin.script.lock().expect("not poisoned").body.clone();
    get(&client, &proxy, &[]).await;
    origin.edit(|s| s.etag = Some(answered.to_owned()));
    let (parts, body) = get(&client, &proxy, &[]).await;
    assert_eq!(origin.last_request().1["if-none-match"], stored);
    assert_eq!(parts.status, 200);
    assert_eq!(body, expected);
    assert_eq!(counter(&proxy, |c| &c.revalidations), 1);
}

#[tokio::test]
async fn a_304_naming_another_strong_tag_never_relabels_the_stored_body() {
    // An origin that answers the stored validators with a 304 carrying a new strong tag (as
    // handlers that look at If-Modified-Since alone do). Applied to the stored body, the new
    // tag would label the stale body, and every later revalidation with it get a 304 again.
    let origin = Scripted::start(&[("cache-control", "max-age=3600")], Some("\"v1\"")).await;
    let proxy = proxy(&origin, CacheMode::Revalidate, origin.time.clone()).await;
    let client = client();
    let first = origin.script.lock().expect("not poisoned").body.clone();
    get(&client, &proxy, &[]).await;
    origin.edit(|s| {
        s.not_modified = vec![("etag", "\"v2\"".to_owned())];
        s.body = Bytes::from_static(b"<html>the second version</html>");
    });
    let (parts, body) = get(&client, &proxy, &[]).await;
    assert_eq!(origin.last_request().1["if-none-match"], "\"v1\"");
    assert_eq!(parts.status, 200);
    assert_eq!(body, first, "the stored body, as it was stored");
    assert_eq!(parts.headers["etag"], "\"v1\"", "{:?}", parts.headers);
    // The entry went: the next request asks for the whole response.
    let (parts, body) = get(&client, &proxy, &[]).await;
    assert_eq!(origin.last_request().1.get("if-none-match"), None);
    assert_eq!(parts.status, 200);
    assert_eq!(body, b"<html>the second version</html>".as_slice());
}

#[tokio::test]
async fn a_304_to_a_weak_tag_freshens_the_entry_and_no_client_gets_a_304_it_did_not_ask_for() {
    // Express and many origins send only weak tags: the cache's own If-None-Match gets a 304
    // about the stored response, which an unconditional request must not see.
    a_304_to_the_cache_s_validators_serves_the_stored_body("max-age=3600", "W/\"w1\"", "W/\"w1\"")
        .await;
}

#[tokio::test]
async fn an_origin_s_strong_304_to_a_stored_weak_tag_serves_the_stored_body() {
    // nginx with `gzip on` weakens the tag of what it compresses, and sends the strong tag
    // on its 304s: the stored response is still the one, and no client that asked for the
    // whole response gets a 304.
    a_304_to_the_cache_s_validators_serves_the_stored_body("max-age=0", "W/\"v1\"", "\"v1\"").await;
}
