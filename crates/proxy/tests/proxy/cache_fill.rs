//! How the cache fills: a miss streams to its client and is stored once its body has ended
//! as framed (chunked bodies too, close-delimited ones never), and a burst of misses for one
//! key asks the origin once. The origin here writes raw HTTP/1.1, so the test chooses the
//! framing and when each part leaves.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use zipwire_proxy::{CacheMode, ProxyConfig};

use crate::streaming::Gunzipping;
use crate::support::{client, fetch, gunzip, html, purge, request, upstream, Proxy, TestClient};

const GZIP: &[(&str, &str)] = &[("accept-encoding", "gzip")];

/// How the origin frames its one representation.
#[derive(Clone, Copy)]
enum Framing {
    /// `Content-Length`.
    Length,
    /// Two chunks; the second leaves once the test adds a permit to the gate.
    Chunked,
    /// No length: the body ends when the origin closes the connection.
    UntilClose,
}

/// A raw origin: one representation of `BODY_LEN` bytes, `Cache-Control` as given, answered
/// after `delay`, counted.
struct RawOrigin {
    addr: std::net::SocketAddr,
    hits: Arc<AtomicUsize>,
    /// Lets the second chunk of a chunked answer go.
    gate: Arc<Semaphore>,
    task: JoinHandle<()>,
}

const BODY_LEN: usize = 40_000;

impl Drop for RawOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RawOrigin {
    async fn start(framing: Framing, cache_control: &'static str, delay: Duration) -> RawOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let hits = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Semaphore::new(0));
        let (counted, opened) = (hits.clone(), gate.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (counted, opened) = (counted.clone(), opened.clone());
                tokio::spawn(async move {
                    answer(stream, framing, cache_control, delay, &counted, &opened).await;
                });
            }
        });
        RawOrigin {
            addr,
            hits,
            gate,
            task,
        }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Waits until the origin has been asked `count` times, failing with `what` after 5 s.
    async fn wait_for_hits(&self, count: usize, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.hits() < count {
            assert!(Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Answers every request on one connection until the client closes it.
async fn answer(
    mut stream: TcpStream,
    framing: Framing,
    cache_control: &str,
    delay: Duration,
    hits: &AtomicUsize,
    gate: &Semaphore,
) {
    let body = html(BODY_LEN);
    let (first, second) = body.split_at(BODY_LEN / 2);
    loop {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            match stream.read(&mut byte).await {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        hits.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(delay).await;
        let common = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncache-control: {cache_control}\r\n\
             etag: \"v1\"\r\n"
        );
        let request = String::from_utf8_lossy(&head).to_ascii_lowercase();
        if request.contains("if-none-match: \"v1\"") {
            let head = format!(
                "HTTP/1.1 304 Not Modified\r\ncache-control: {cache_control}\r\n\
                 etag: \"v1\"\r\n\r\n"
            );
            if !write_all(&mut stream, &[head.as_bytes()]).await {
                return;
            }
            continue;
        }
        let sent = match framing {
            Framing::Length => {
                let head = format!("{common}content-length: {}\r\n\r\n", body.len());
                write_all(&mut stream, &[head.as_bytes(), &body]).await
            }
            Framing::Chunked => {
                let head = format!("{common}transfer-encoding: chunked\r\n\r\n");
                let chunk = format!("{:x}\r\n", first.len());
                let parts = [head.as_bytes(), chunk.as_bytes(), first];
                if !write_all(&mut stream, &parts).await {
                    return;
                }
                let Ok(permit) = gate.acquire().await else {
                    return;
                };
                permit.forget();
                let chunk = format!("\r\n{:x}\r\n", second.len());
                write_all(&mut stream, &[chunk.as_bytes(), second, b"\r\n0\r\n\r\n"]).await
            }
            Framing::UntilClose => {
                let head = format!("{common}connection: close\r\n\r\n");
                write_all(&mut stream, &[head.as_bytes(), &body]).await;
                return;
            }
        };
        if !sent {
            return;
        }
    }
}

async fn write_all(stream: &mut TcpStream, parts: &[&[u8]]) -> bool {
    for part in parts {
        if stream.write_all(part).await.is_err() {
            return false;
        }
    }
    stream.flush().await.is_ok()
}

async fn proxy(origin: &RawOrigin, adjust: impl FnOnce(&mut ProxyConfig)) -> Proxy {
    Proxy::start(vec![upstream(origin.addr)], |config| {
        config.cache.mode = CacheMode::Fresh;
        adjust(config);
    })
    .await
}

fn stores(proxy: &Proxy) -> u64 {
    proxy.stats.cache.stores.load(Ordering::SeqCst)
}

/// A gzip GET of the chunked page, read until the first chunk has arrived whole while the
/// origin holds the second: the body, to read on or drop.
async fn first_half(client: &TestClient, proxy: &Proxy) -> Gunzipping {
    let response = client
        .request(request("GET", &proxy.url("/page"), GZIP))
        .await
        .expect("a response");
    assert_eq!(response.headers()["content-encoding"], "gzip");
    let mut body = Gunzipping::new(response.into_body());
    let first = tokio::time::timeout(Duration::from_secs(5), body.at_least(BODY_LEN / 2))
        .await
        .expect("the first half streams before the origin sends the rest")
        .to_vec();
    assert_eq!(first, html(BODY_LEN)[..BODY_LEN / 2]);
    body
}

#[tokio::test]
async fn a_miss_streams_to_its_client_and_is_stored_once_its_body_ends() {
    let origin = RawOrigin::start(Framing::Chunked, "max-age=60", Duration::ZERO).await;
    let proxy = proxy(&origin, |_| {}).await;
    let client = client();
    let body = first_half(&client, &proxy).await;
    assert_eq!(stores(&proxy), 0, "nothing is stored before the body ends");
    origin.gate.add_permits(1);
    assert_eq!(body.finish().await, html(BODY_LEN));
    assert_eq!(stores(&proxy), 1, "a chunked body is stored once it ended");
    // The background worker makes the gzip variant the miss was streamed in, at the best
    // level, so the first gzip hit is served from memory, not compressed again.
    let cache = &proxy.stats.cache;
    let deadline = Instant::now() + Duration::from_secs(20);
    while cache.recompressions.load(Ordering::SeqCst) < 1 {
        assert!(Instant::now() < deadline, "no best variant within 20 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(cache.encoder_micros_saved.load(Ordering::SeqCst), 0);
    // The stored body answers the next clients, gzip and identity, without the origin.
    let (parts, gzipped) = fetch(&client, "GET", &proxy.url("/page"), GZIP).await;
    assert_eq!(parts.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&gzipped), html(BODY_LEN));
    assert!(
        cache.encoder_micros_saved.load(Ordering::SeqCst) > 0,
        "the first hit used the stored variant"
    );
    let (_, plain) = fetch(&client, "GET", &proxy.url("/page"), &[]).await;
    assert_eq!(plain, html(BODY_LEN));
    assert_eq!(origin.hits(), 1);
    assert_eq!(proxy.stats.cache.hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_body_that_ends_only_when_the_connection_closes_is_not_stored() {
    let origin = RawOrigin::start(Framing::UntilClose, "max-age=60", Duration::ZERO).await;
    let proxy = proxy(&origin, |_| {}).await;
    let client = client();
    for round in 1..=2 {
        let (_, gzipped) = fetch(&client, "GET", &proxy.url("/page"), GZIP).await;
        assert_eq!(
            gunzip(&gzipped),
            html(BODY_LEN),
            "it reaches its client whole"
        );
        assert_eq!(origin.hits(), round);
    }
    assert_eq!(stores(&proxy), 0);
}

#[tokio::test]
async fn a_chunked_body_past_max_object_streams_whole_and_is_not_stored() {
    let origin = RawOrigin::start(Framing::Chunked, "max-age=60", Duration::ZERO).await;
    let proxy = proxy(&origin, |config| config.cache.max_object = 30_000).await;
    origin.gate.add_permits(2);
    let client = client();
    for round in 1..=2 {
        let (_, gzipped) = fetch(&client, "GET", &proxy.url("/page"), GZIP).await;
        assert_eq!(gunzip(&gzipped), html(BODY_LEN), "round {round}");
        assert_eq!(origin.hits(), round);
    }
    assert_eq!(stores(&proxy), 0);
}

#[tokio::test]
async fn a_fill_that_gives_up_lets_the_waiting_requests_go_at_once() {
    // The first chunk is already past max_object, the second waits on the gate: the fill
    // gives up while its client still streams, and a request for the key then goes to the
    // origin at once instead of waiting out lock_timeout (5 s) for a fill that stores nothing.
    let origin = RawOrigin::start(Framing::Chunked, "max-age=60", Duration::ZERO).await;
    let proxy = proxy(&origin, |config| config.cache.max_object = 10_000).await;
    let client = client();
    let url = proxy.url("/page");
    let first = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move { fetch(&client, "GET", &url, GZIP).await }
    });
    while origin.hits() < 1 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = tokio::spawn(async move { fetch(&client, "GET", &url, GZIP).await });
    let asked = Instant::now();
    while origin.hits() < 2 && asked.elapsed() < Duration::from_secs(4) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        origin.hits(),
        2,
        "still waiting after {:?}",
        asked.elapsed()
    );
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    origin.gate.add_permits(2);
    for task in [first, second] {
        let (_, gzipped) = task.await.expect("the client task");
        assert_eq!(gunzip(&gzipped), html(BODY_LEN));
    }
    assert_eq!(stores(&proxy), 0);
}

/// `clients` GETs of one key at once, half of them accepting gzip, each body checked; how
/// long the burst took.
async fn burst(proxy: &Proxy, clients: usize) -> Duration {
    let client = client();
    let url = proxy.url("/page");
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                let coding: &[(&str, &str)] = if i % 2 == 0 { GZIP } else { &[] };
                fetch(&client, "GET", &url, coding).await
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let (parts, body) = task.await.expect("the client task");
        assert_eq!(parts.status, 200);
        let plain = match i % 2 {
            0 => gunzip(&body),
            _ => body.to_vec(),
        };
        assert_eq!(plain, html(BODY_LEN), "client {i}");
    }
    started.elapsed()
}

/// How long the origin takes to answer: the burst of 20 clients must all reach the proxy
/// within it, also on a loaded machine (at 300 ms a late one can be a hit, not a waiter).
const DELAY: Duration = Duration::from_millis(1_000);

#[tokio::test]
async fn a_burst_of_misses_asks_the_origin_once() {
    for mode in [CacheMode::Fresh, CacheMode::Revalidate] {
        let origin = RawOrigin::start(Framing::Length, "max-age=60", DELAY).await;
        let proxy = proxy(&origin, |config| config.cache.mode = mode).await;
        burst(&proxy, 20).await;
        let coalesced = proxy.stats.cache.coalesced.load(Ordering::SeqCst);
        assert_eq!(coalesced, 19, "{mode:?}: the others waited for the first");
        assert_eq!(stores(&proxy), 1, "{mode:?}");
        let full_answers = match mode {
            // The waiters are hits.
            CacheMode::Fresh => 1,
            // The waiters ask again, conditionally, and the origin's 304s are revalidations.
            _ => {
                let revalidations = proxy.stats.cache.revalidations.load(Ordering::SeqCst);
                origin.hits() - revalidations as usize
            }
        };
        assert_eq!(
            full_answers, 1,
            "{mode:?}: one full response from the origin"
        );
        if mode == CacheMode::Fresh {
            assert_eq!(origin.hits(), 1);
        }
    }

    // Without coalescing, every miss asks the origin.
    let origin = RawOrigin::start(Framing::Length, "max-age=60", DELAY).await;
    let proxy = proxy(&origin, |config| config.cache.lock_timeout = Duration::ZERO).await;
    burst(&proxy, 20).await;
    assert_eq!(origin.hits(), 20);
    assert_eq!(proxy.stats.cache.coalesced.load(Ordering::SeqCst), 0);
}

/// A GET's task: its head and body.
type Waiter = JoinHandle<(http::response::Parts, bytes::Bytes)>;

/// Starts `count` gzip GETs of the page that wait for the fill under way (within 5 s):
/// their tasks, to await once the test has let the fill end.
async fn line_up(client: &TestClient, proxy: &Proxy, count: u64) -> Vec<Waiter> {
    let url = proxy.url("/page");
    let waiters = (0..count)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { fetch(&client, "GET", &url, GZIP).await })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while proxy.stats.cache.coalesced.load(Ordering::SeqCst) < count {
        assert!(Instant::now() < deadline, "the {count} did not line up");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    waiters
}

/// Awaits the waiters of [`line_up`]: each gets the whole page.
async fn served_whole(waiters: Vec<Waiter>) {
    for waiter in waiters {
        let (parts, gzipped) = waiter.await.expect("the waiter's task");
        assert_eq!(parts.status, 200);
        assert_eq!(gunzip(&gzipped), html(BODY_LEN));
    }
}

#[tokio::test]
async fn when_the_leaders_client_leaves_one_waiter_takes_over() {
    // The origin sends half of a chunked body, then holds the rest until the gate opens. The
    // first client takes that half and leaves; five clients wait for its fill meanwhile.
    let origin = RawOrigin::start(Framing::Chunked, "max-age=60", Duration::ZERO).await;
    let proxy = proxy(&origin, |_| {}).await;
    let client = client();
    let leader = first_half(&client, &proxy).await;
    let waiters = line_up(&client, &proxy, 5).await;
    drop(leader);
    // Every request from here on gets its second half.
    origin.gate.add_permits(10);
    served_whole(waiters).await;
    // The leader's request and one more: the first waiter to line up again led the next
    // fill, and the other four were served from it (without the hand-over: six requests).
    assert_eq!(origin.hits(), 2);
    assert_eq!(stores(&proxy), 1);
    assert_eq!(proxy.stats.cache.hits.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn when_the_leaders_client_leaves_before_the_answer_one_waiter_takes_over() {
    // The leader's client goes while the origin is still working on the answer: its request
    // ends before any head came, and the five waiting must not all go to the origin.
    let delay = Duration::from_millis(2_000);
    let origin = RawOrigin::start(Framing::Length, "max-age=60", delay).await;
    let proxy = proxy(&origin, |config| {
        config.timeouts.upstream_response = Duration::from_secs(10);
    })
    .await;
    let client = client();
    let url = proxy.url("/page");
    let leader = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move { fetch(&client, "GET", &url, GZIP).await })
    };
    origin
        .wait_for_hits(1, "the leader did not reach the origin")
        .await;
    let waiters = line_up(&client, &proxy, 5).await;
    leader.abort();
    served_whole(waiters).await;
    // The leader's request and the one the first waiter led; were the lock released as if
    // the response had been refused, all five would ask the origin (six requests).
    assert_eq!(origin.hits(), 2);
    assert_eq!(stores(&proxy), 1);
}

#[tokio::test]
async fn misses_of_an_uncacheable_resource_are_not_serialised() {
    let origin = RawOrigin::start(Framing::Length, "private", DELAY).await;
    let proxy = proxy(&origin, |_| {}).await;
    let took = burst(&proxy, 10).await;
    assert_eq!(origin.hits(), 10);
    assert_eq!(stores(&proxy), 0);
    // One after the other they would take ten delays; the waiters go as soon as the first
    // response's head says it is not storable: about two delays.
    assert!(took < DELAY * 5, "the burst took {took:?}");
}

#[tokio::test]
async fn fills_in_flight_hold_at_most_a_quarter_of_max_memory() {
    // The chunked body is 40 KB: over a quarter of 100 KB, under a quarter of 200 KB.
    for (max_memory, stored) in [(100_000, 0), (200_000, 1)] {
        let origin = RawOrigin::start(Framing::Chunked, "max-age=60", Duration::ZERO).await;
        origin.gate.add_permits(1);
        let proxy = proxy(&origin, |config| config.cache.max_memory = max_memory).await;
        let (_, gzipped) = fetch(&client(), "GET", &proxy.url("/page"), GZIP).await;
        assert_eq!(gunzip(&gzipped), html(BODY_LEN), "the client gets it whole");
        assert_eq!(stores(&proxy), stored, "max_memory {max_memory}");
    }
}

#[tokio::test]
async fn a_fill_an_unsafe_request_invalidated_on_the_way_is_not_stored() {
    let origin = RawOrigin::start(Framing::Chunked, "max-age=60", Duration::ZERO).await;
    let proxy = proxy(&origin, |_| {}).await;
    let client = client();
    // A GET's body is on its way when a POST to the same target succeeds (RFC 9111 §4.4):
    // what the GET brings may predate the change and must not be stored after it.
    let get = first_half(&client, &proxy).await;
    // The proxy invalidates when the POST's head comes back, before it passes the head on:
    // the head at the client is the invalidation done. Its body's second chunk waits at the
    // gate.
    let post = tokio::time::timeout(
        Duration::from_secs(5),
        client.request(request("POST", &proxy.url("/page"), &[])),
    )
    .await
    .expect("the POST's head within 5 s")
    .expect("the POST's head");
    assert_eq!(post.status(), 200);
    origin.gate.add_permits(2);
    assert_eq!(get.finish().await, html(BODY_LEN));
    let posted = post.into_body().collect().await.expect("the POST's body");
    assert_eq!(posted.to_bytes().len(), BODY_LEN);
    assert_eq!(stores(&proxy), 0, "stored after the invalidation");
    origin.gate.add_permits(1);
    let (_, again) = fetch(&client, "GET", &proxy.url("/page"), &[]).await;
    assert_eq!(again, html(BODY_LEN));
    assert_eq!(origin.hits(), 3, "served from a stale fill");
}

#[tokio::test]
async fn a_purge_during_a_fill_passes_the_lead_to_one_waiter() {
    // Five clients wait for a fill when the key is purged: its body is not stored (it may
    // predate the purge), and one of them fetches the page again for the others: not all
    // five go to the origin, and the purge does not answer 404 as if it had found nothing.
    let origin = RawOrigin::start(Framing::Chunked, "max-age=60", Duration::ZERO).await;
    let proxy = proxy(&origin, |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
    })
    .await;
    let client = client();
    let leader = first_half(&client, &proxy).await;
    let waiters = line_up(&client, &proxy, 5).await;
    let answer = purge(&proxy, &format!("/cache?key={}%20/page", proxy.addr)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    origin.gate.add_permits(10);
    assert_eq!(leader.finish().await, html(BODY_LEN));
    served_whole(waiters).await;
    assert_eq!(origin.hits(), 2, "the leader's request and one waiter's");
    assert_eq!(stores(&proxy), 1);
}

#[tokio::test]
async fn a_request_for_another_vary_selection_does_not_wait_for_the_body() {
    // The page varies on Accept-Language. A French request that comes while the leader's
    // body is held learns from the leader's head that the response coming is not its own and
    // asks the origin at once, not after the whole body or `lock_timeout`. Another request
    // like the leader's waits and is served from the fill.
    let origin = RawOrigin::start(
        Framing::Chunked,
        "max-age=60\r\nvary: accept-language",
        Duration::ZERO,
    )
    .await;
    let proxy = proxy(&origin, |config| {
        config.cache.lock_timeout = Duration::from_secs(30);
        config.timeouts.upstream_response = Duration::from_secs(30);
    })
    .await;
    let client = client();
    let leader = first_half(&client, &proxy).await;
    let same = line_up(&client, &proxy, 1).await;
    let french = {
        let (client, url) = (client.clone(), proxy.url("/page"));
        tokio::spawn(async move { fetch(&client, "GET", &url, &[("accept-language", "fr")]).await })
    };
    origin
        .wait_for_hits(2, "the French request waited for the leader's body")
        .await;
    origin.gate.add_permits(2);
    assert_eq!(leader.finish().await, html(BODY_LEN));
    let (parts, body) = french.await.expect("the French request's task");
    assert_eq!(parts.status, 200);
    assert_eq!(body, html(BODY_LEN));
    served_whole(same).await;
    assert_eq!(
        origin.hits(),
        2,
        "the like request was served from the fill"
    );
}
