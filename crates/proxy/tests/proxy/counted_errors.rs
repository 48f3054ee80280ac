//! Error and connection counters as an operator scrapes them: provoked through a real proxy,
//! read back from `/stats` and `/metrics`.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::support::*;

/// `/stats` as JSON and `/metrics` as text.
async fn scrape(admin: SocketAddr) -> (serde_json::Value, String) {
    let client = client();
    let (head, body) = fetch(&client, "GET", &format!("http://{admin}/stats"), &[]).await;
    assert_eq!(head.status, 200);
    let stats = serde_json::from_slice(&body).expect("JSON");
    let (head, body) = fetch(&client, "GET", &format!("http://{admin}/metrics"), &[]).await;
    assert_eq!(head.status, 200);
    (stats, String::from_utf8(body.to_vec()).expect("text"))
}

/// Scrapes every 20 ms for up to 5 s until `done` holds; returns the last scrape.
async fn scrape_until(
    admin: SocketAddr,
    done: impl Fn(&serde_json::Value) -> bool,
) -> (serde_json::Value, String) {
    for _ in 0..250 {
        let scraped = scrape(admin).await;
        if done(&scraped.0) {
            return scraped;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    scrape(admin).await
}

/// The value of one sample line of `metric` (with its labels, as written).
fn sample(text: &str, metric: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(metric)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn upstream_and_client_errors_and_connections_reach_stats_and_metrics() {
    let dead = dead_addr().await;
    let proxy = Proxy::start(vec![upstream(dead.addr)], |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
        // The idle connection below must stay open while it is counted.
        config.timeouts.header_read = Duration::from_secs(30);
    })
    .await;
    let admin = proxy.admin.expect("admin configured");
    let limit = Duration::from_secs(5);
    // Two upstream failures: the connect is refused, then the upstream is marked down.
    for _ in 0..2 {
        let raw = raw_exchange(
            proxy.addr,
            b"GET /page.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            limit,
        )
        .await;
        assert!(raw.starts_with(b"HTTP/1.1 502 "), "{raw:?}");
    }
    // A request hyper cannot parse: answered 400 before the proxy's service sees it.
    let raw = raw_exchange(proxy.addr, b"NOT HTTP AT ALL\r\n\r\n", limit).await;
    assert!(raw.starts_with(b"HTTP/1.1 400 "), "{raw:?}");

    let idle = TcpStream::connect(proxy.addr).await.expect("connect");
    let (stats, metrics) = scrape_until(admin, |stats| {
        stats["connections"] == 4 && stats["active_connections"] == 1
    })
    .await;
    assert_eq!(
        stats["errors"],
        serde_json::json!({"client": 1, "upstream": 2, "upstream_timeout": 0, "internal": 0}),
        "{stats}"
    );
    assert_eq!(stats["connections"], 4, "{stats}");
    assert_eq!(stats["active_connections"], 1, "{stats}");
    for (metric, expected) in [
        (
            r#"zipwire_proxy_errors_total{side="client",status="4xx"}"#,
            1,
        ),
        (
            r#"zipwire_proxy_errors_total{side="upstream",status="502"}"#,
            2,
        ),
        (
            r#"zipwire_proxy_errors_total{side="upstream",status="504"}"#,
            0,
        ),
        (
            r#"zipwire_proxy_errors_total{side="internal",status="500"}"#,
            0,
        ),
        ("zipwire_proxy_connections_total", 4),
        ("zipwire_proxy_connections_active", 1),
    ] {
        assert_eq!(
            sample(&metrics, metric),
            Some(expected),
            "{metric}\n{metrics}"
        );
    }

    drop(idle);
    let (stats, metrics) = scrape_until(admin, |stats| stats["active_connections"] == 0).await;
    assert_eq!(stats["active_connections"], 0, "{stats}");
    assert_eq!(
        sample(&metrics, "zipwire_proxy_connections_active"),
        Some(0)
    );
}

#[tokio::test]
async fn an_upstream_timeout_counts_as_504() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
        config.timeouts.upstream_response = Duration::from_millis(300);
    })
    .await;
    let (head, _) = fetch(&client(), "GET", &proxy.url("/slow-head"), &[]).await;
    assert_eq!(head.status, 504);
    let (stats, metrics) = scrape(proxy.admin.expect("admin configured")).await;
    assert_eq!(
        stats["errors"],
        serde_json::json!({"client": 0, "upstream": 0, "upstream_timeout": 1, "internal": 0}),
        "{stats}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"zipwire_proxy_errors_total{side="upstream",status="504"}"#
        ),
        Some(1)
    );
}

#[tokio::test]
async fn a_body_that_fails_before_the_head_counts_as_an_error_only() {
    // The decision to compress is taken from the head; the body then fails before anything
    // went out, and the client gets a 502. That response was never compressed.
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
    })
    .await;
    let gzip = [("accept-encoding", "gzip")];
    let (head, _) = fetch(&client(), "GET", &proxy.url("/dies-at-once"), &gzip).await;
    assert_eq!(head.status, 502);
    let (stats, metrics) = scrape(proxy.admin.expect("admin configured")).await;
    assert_eq!(stats["errors"]["upstream"], 1, "{stats}");
    for metric in [
        "zipwire_proxy_responses_compressed_total",
        r#"zipwire_proxy_coding_responses_total{coding="gzip"}"#,
    ] {
        assert_eq!(sample(&metrics, metric), Some(0), "{metric}\n{metrics}");
    }
    // The same page as it should be: counted as compressed.
    let (head, _) = fetch(&client(), "GET", &proxy.url("/page.html"), &gzip).await;
    assert_eq!(head.status, 200);
    let (_, metrics) = scrape(proxy.admin.expect("admin configured")).await;
    assert_eq!(
        sample(&metrics, "zipwire_proxy_responses_compressed_total"),
        Some(1),
        "{metrics}"
    );
}
