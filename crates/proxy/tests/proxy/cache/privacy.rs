//! What the cache must keep to one client: fields and responses marked `private` in
//! `Cache-Control` even where `Surrogate-Control` sets the surrogate's lifetime, and the
//! client's own preconditions, which apply to 2xx answers only.

use http::StatusCode;
use zipwire_proxy::CacheMode;

use super::{client, get, proxy, proxy_for, Scripted};

#[tokio::test]
async fn private_fields_in_cache_control_are_not_stored_beside_surrogate_control() {
    // Surrogate-Control says how long this surrogate keeps the response; Cache-Control's
    // `private="x-session"` still says that field is for the user it answered.
    let origin = Scripted::start(
        &[
            ("surrogate-control", "max-age=60"),
            ("cache-control", "private=\"x-session\""),
            ("x-session", "alice-secret"),
        ],
        None,
    )
    .await;
    let proxy = proxy_for(&origin).await;
    let client = client();
    let (alice, _) = get(&client, &proxy, &[]).await;
    assert_eq!(
        alice.headers["x-session"], "alice-secret",
        "the miss keeps it"
    );
    let (bob, _) = get(&client, &proxy, &[]).await;
    assert_eq!(origin.hits(), 1, "stored: the hit is served from the cache");
    assert!(bob.headers.get("x-session").is_none(), "{:?}", bob.headers);
}

#[tokio::test]
async fn a_304_that_makes_the_response_private_beside_surrogate_control_unstores_it() {
    let origin = Scripted::start(&[("surrogate-control", "max-age=60")], Some("\"v1\"")).await;
    let clock = origin.clock.clone();
    let proxy = proxy(&origin, CacheMode::Fresh, origin.time.clone()).await;
    let client = client();
    get(&client, &proxy, &[]).await;
    clock.advance(61);
    origin.edit(|s| {
        s.not_modified = vec![
            ("cache-control", "private".to_owned()),
            ("x-user", "alice".to_owned()),
        ];
    });
    let (alice, _) = get(&client, &proxy, &[]).await;
    assert_eq!(alice.headers["x-user"], "alice");
    origin.edit(|s| s.not_modified = Vec::new());
    let (bob, _) = get(&client, &proxy, &[]).await;
    assert!(bob.headers.get("x-user").is_none(), "{:?}", bob.headers);
    assert_eq!(origin.hits(), 3, "the entry was removed, not freshened");
}

#[tokio::test]
async fn a_stored_404_answers_a_matching_conditional_with_the_404() {
    // RFC 9110 §13.2.1: preconditions apply where the answer would be 2xx. A browser holding
    // the page before it was removed must get the 404, not a 304 that keeps its old copy.
    let origin = Scripted::start(&[("cache-control", "max-age=60")], Some("\"r\"")).await;
    origin.edit(|s| s.status = StatusCode::NOT_FOUND);
    let proxy = proxy_for(&origin).await;
    let client = client();
    let (first, _) = get(&client, &proxy, &[]).await;
    assert_eq!(first.status, StatusCode::NOT_FOUND);
    for condition in [("if-none-match", "\"r\""), ("if-none-match", "*")] {
        let (parts, _) = get(&client, &proxy, &[condition]).await;
        assert_eq!(parts.status, StatusCode::NOT_FOUND, "{condition:?}");
    }
    assert_eq!(origin.hits(), 1, "served from the cache");
    // A stored 200 still answers its client's matching tag with a 304.
    let other = Scripted::start(&[("cache-control", "max-age=60")], Some("\"r\"")).await;
    let proxy = proxy_for(&other).await;
    get(&client, &proxy, &[]).await;
    let (parts, _) = get(&client, &proxy, &[("if-none-match", "\"r\"")]).await;
    assert_eq!(parts.status, StatusCode::NOT_MODIFIED);
}
