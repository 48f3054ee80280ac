//! Budgets and the admin listener: the memory cap, the rate budget end to end, `/stats` and
//! `/metrics`.

use std::time::Duration;

use zipwire_proxy::Bypass;

use crate::support::*;

const GZIP: &[(&str, &str)] = &[("accept-encoding", "gzip")];

#[tokio::test]
async fn over_the_memory_cap_responses_pass_as_budget_bypasses() {
    let origin = Origin::start().await;
    // Room for no compressing stream at all: every compressible response passes.
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.budget.max_memory = Some(1_000);
    })
    .await;
    let (head, body) = fetch(&client(), "GET", &proxy.url("/page.html"), GZIP).await;
    assert!(!head.headers.contains_key("content-encoding"));
    assert!(head.headers["vary"]
        .to_str()
        .unwrap_or("")
        .contains("Accept-Encoding"));
    assert_eq!(body, html(50_000));
    assert_eq!(proxy.stats.bypassed.get(Bypass::Budget), 1);
}

#[tokio::test]
async fn under_the_memory_cap_responses_compress_and_release_their_memory() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.budget.max_memory = Some(1 << 20);
    })
    .await;
    for _ in 0..3 {
        let (head, body) = fetch(&client(), "GET", &proxy.url("/page.html"), GZIP).await;
        assert_eq!(head.headers["content-encoding"], "gzip");
        assert_eq!(gunzip(&body), html(50_000));
    }
    // Sequential responses: each released its permit, so none was refused.
    assert_eq!(proxy.stats.bypassed.get(Bypass::Budget), 0);
}

/// A gzip body decoded for a client that does not accept gzip counts against the memory
/// cap while it is held, so a compressing response that would overrun the cap beside it
/// passes instead.
#[tokio::test]
async fn a_decoding_stream_counts_against_the_memory_cap() {
    use tokio::io::AsyncWriteExt;
    let go_on = std::sync::Arc::new(tokio::sync::Notify::new());
    let told = go_on.clone();
    let page = html(200_000);
    let gz = zipwire_codec::compress(
        zipwire_codec::Format::Gzip,
        zipwire_codec::Level::DEFAULT,
        &page,
    );
    let origin = crate::raw::RawOrigin::start(move |mut conn| {
        let (told, gz) = (told.clone(), gz.clone());
        async move {
            while let Some(head) = conn.read_head().await {
                let (encoding, body) = if head.starts_with("GET /slow.gz ") {
                    ("Content-Encoding: gzip\r\n", gz.clone())
                } else {
                    ("", html(50_000))
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n{encoding}\
                     Content-Length: {}\r\n\r\n",
                    body.len()
                );
                let half = body.len() / 2;
                if conn.stream.write_all(head.as_bytes()).await.is_err()
                    || conn.stream.write_all(&body[..half]).await.is_err()
                {
                    return;
                }
                if !encoding.is_empty() {
                    told.notified().await;
                }
                if conn.stream.write_all(&body[half..]).await.is_err() {
                    return;
                }
            }
        }
    })
    .await;
    // Room for one compressing stream (two 64 KiB buffers), not for one beside a decoder.
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.budget.max_memory = Some(200_000);
    })
    .await;
    let client = client();
    let response = client
        .request(request("GET", &proxy.url("/slow.gz"), &[]))
        .await
        .expect("the decoded response's head");
    assert!(!response.headers().contains_key("content-encoding"));
    let (head, body) = fetch(&client, "GET", &proxy.url("/page.html"), GZIP).await;
    assert!(!head.headers.contains_key("content-encoding"), "{head:?}");
    assert_eq!(body, html(50_000));
    assert_eq!(proxy.stats.bypassed.get(Bypass::Budget), 1);
    go_on.notify_one();
    let decoded = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("the whole decoded body")
        .to_bytes();
    assert_eq!(decoded, page);
    // Its memory given back, the next response compresses.
    let (head, _) = fetch(&client, "GET", &proxy.url("/page.html"), GZIP).await;
    assert_eq!(head.headers["content-encoding"], "gzip");
}

#[tokio::test]
async fn over_the_rate_budget_new_responses_pass_until_it_recovers() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        // 10 kB/s over a one-second window: one 50 kB page keeps the budget over its limit
        // for as long as the page is inside the window.
        config.budget.max_rate = Some(10_000);
        config.budget.window = Duration::from_secs(1);
    })
    .await;
    // A new client (so a new connection) for each request: the waits below outlast the test
    // proxy's 1 s keep-alive timeout, and a request racing that close would fail for reasons
    // this test is not about.
    let (head, _) = fetch(&client(), "GET", &proxy.url("/page.html"), GZIP).await;
    assert_eq!(head.headers["content-encoding"], "gzip");
    // The governor samples every 100 ms: wait for it to see the burst.
    assert!(
        eventually(|| proxy.throttle.is_bypassing_new()).await,
        "throttled after the burst"
    );
    let (head, body) = fetch(&client(), "GET", &proxy.url("/page.html"), GZIP).await;
    assert!(!head.headers.contains_key("content-encoding"));
    assert_eq!(body, html(50_000));
    assert_eq!(proxy.stats.bypassed.get(Bypass::Budget), 1);
    // Once the burst has left the window, compression resumes.
    assert!(
        eventually(|| !proxy.throttle.is_bypassing_new()).await,
        "open again"
    );
    let (head, body) = fetch(&client(), "GET", &proxy.url("/page.html"), GZIP).await;
    assert_eq!(head.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&body), html(50_000));
}

/// CPU accounting end to end: compressing real traffic records busy time, `/stats` and
/// `/metrics` report it, and a CPU budget that the compression exceeds makes new responses pass,
/// counted as budget bypasses with the CPU as the reason. If compression stopped recording its
/// time, `budget.max_cpu` would never trigger: this test is what notices.
#[tokio::test]
async fn real_compression_spends_cpu_that_the_cpu_budget_sees() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
        // 0.01% of one core: 200 µs over the two-second window, far less than 4 MB of HTML
        // takes to compress at any level.
        config.budget.max_cpu = Some(0.01);
        config.budget.window = Duration::from_secs(2);
    })
    .await;
    let admin = proxy.admin.expect("admin configured");
    let client = client();
    let compress_seconds = |stats: &serde_json::Value| stats["compress_seconds"].as_f64();
    let (_, body) = fetch(&client, "GET", &format!("http://{admin}/stats"), &[]).await;
    let before: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(compress_seconds(&before), Some(0.0), "{before}");

    let (head, body) = fetch(&client, "GET", &proxy.url("/big"), GZIP).await;
    assert_eq!(head.headers["content-encoding"], "gzip");
    assert_eq!(gunzip(&body), big());
    let busy = Proxy::count(&proxy.stats.compression.busy_nanos);
    assert!(busy > 0, "the body meter recorded no busy time");

    let (_, body) = fetch(&client, "GET", &format!("http://{admin}/stats"), &[]).await;
    let after: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    let seconds = compress_seconds(&after).unwrap_or(0.0);
    assert!(seconds > 0.0, "{after}");
    let (_, body) = fetch(&client, "GET", &format!("http://{admin}/metrics"), &[]).await;
    let text = String::from_utf8(body.to_vec()).expect("text");
    let metric = text
        .lines()
        .find_map(|line| line.strip_prefix("zipwire_proxy_compress_seconds_total "))
        .and_then(|value| value.parse::<f64>().ok());
    assert!(metric.is_some_and(|value| value > 0.0), "{text}");

    assert!(
        eventually(|| proxy.throttle.is_bypassing_new()).await,
        "the CPU budget never saw the compression"
    );
    assert_eq!(
        proxy.throttle.reason(),
        Some(zipwire_adapt::ThrottleReason::Cpu)
    );
    let (head, body) = fetch(&client, "GET", &proxy.url("/page.html"), GZIP).await;
    assert!(!head.headers.contains_key("content-encoding"));
    assert_eq!(body, html(50_000));
    assert_eq!(proxy.stats.bypassed.get(Bypass::Budget), 1);
}

/// Polls `condition` every 20 ms for up to 5 s.
async fn eventually(condition: impl Fn() -> bool) -> bool {
    for _ in 0..250 {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn admin_serves_stats_and_metrics() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
    })
    .await;
    let admin = proxy.admin.expect("admin configured");
    let client = client();
    fetch(&client, "GET", &proxy.url("/page.html"), GZIP).await;
    fetch(&client, "GET", &proxy.url("/image.png"), GZIP).await;

    let (head, body) = fetch(&client, "GET", &format!("http://{admin}/stats"), &[]).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.headers["content-type"], "application/json");
    let stats: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(stats["requests"], 2);
    assert_eq!(stats["responses_compressed"], 1);
    assert_eq!(stats["bypassed"]["type"], 1);
    assert!(
        stats["bytes_saved"].as_u64().unwrap_or(0) > 40_000,
        "{stats}"
    );
    // What the budget limits: the bytes the encoders compressed (the page alone), and the
    // encoder's time, part of the encoder and decoder time.
    assert_eq!(
        stats["compressed_input_bytes"], stats["codings"]["gzip"]["bytes_in"],
        "{stats}"
    );
    assert!(
        stats["compressed_input_bytes"].as_u64() > Some(40_000),
        "{stats}"
    );
    let seconds = |key: &str| stats[key].as_f64().unwrap_or(-1.0);
    assert!(seconds("encode_seconds") > 0.0, "{stats}");
    assert!(
        seconds("encode_seconds") <= seconds("compress_seconds"),
        "{stats}"
    );
    assert_eq!(stats["cache"]["enabled"], false, "{stats}");

    let (head, body) = fetch(&client, "GET", &format!("http://{admin}/metrics"), &[]).await;
    assert_eq!(head.status, 200);
    let text = String::from_utf8(body.to_vec()).expect("text");
    assert!(text.contains("zipwire_proxy_requests_total 2\n"), "{text}");
    assert!(
        text.contains("zipwire_proxy_responses_bypassed_total{reason=\"type\"} 1\n"),
        "{text}"
    );

    let (head, _) = fetch(&client, "GET", &format!("http://{admin}/nope"), &[]).await;
    assert_eq!(head.status, 404);
    // RFC 9110 §15.5.6: a 405 names the methods that would do.
    let wrong = [
        ("POST", "/stats", "GET, HEAD"),
        ("POST", "/cache", "DELETE"),
        ("GET", "/cache", "DELETE"),
    ];
    for (method, target, allow) in wrong {
        let (head, _) = fetch(&client, method, &format!("http://{admin}{target}"), &[]).await;
        assert_eq!(head.status, 405);
        assert_eq!(head.headers["allow"], allow, "{target}");
    }
}

/// A client that sends half a request head to the admin listener and waits is cut off
/// once the head timeout (10 s) has passed, rather than holding a task for good.
#[tokio::test]
async fn the_admin_listener_drops_a_head_that_never_ends() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
    })
    .await;
    let admin = proxy.admin.expect("admin configured");
    let mut stream = tokio::net::TcpStream::connect(admin)
        .await
        .expect("connect");
    stream
        .write_all(b"GET /stats HTTP/1.1\r\nHo")
        .await
        .expect("write");
    let started = std::time::Instant::now();
    let mut buf = [0u8; 256];
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf)).await;
    let read = read.expect("still open after 20 s");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
}

/// A gather budget smaller than one call (zstd and brotli take calls of up to twice
/// `coalesce`): calls are cut to the budget, and every body still comes out whole. Such a
/// budget once left the body waiting for a share it could never get, spinning its thread.
#[tokio::test]
async fn a_gather_budget_smaller_than_a_call_still_serves() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.budget.gather_memory = Some(64 * 1024);
    })
    .await;
    let client = client();
    for coding in ["zstd", "br", "gzip"] {
        for (path, want) in [("/stall.html", html(150_000)), ("/big", big())] {
            let url = proxy.url(path);
            let fetched = tokio::time::timeout(
                Duration::from_secs(20),
                fetch(&client, "GET", &url, &[("accept-encoding", coding)]),
            )
            .await;
            let (head, body) = fetched.unwrap_or_else(|_| panic!("{coding} {path}: no answer"));
            assert_eq!(head.headers["content-encoding"], coding, "{path}");
            let plain = crate::codings::decode(Some(coding), &body);
            assert!(plain == want, "{coding} {path}: {} bytes", plain.len());
        }
    }
    // The gate held the calls' input, never more than the budget.
    let held = Proxy::count(&proxy.stats.gather.peak_held);
    assert!(
        (1..=64 * 1024).contains(&held),
        "the gate held {held} bytes"
    );
}

/// A gather budget with room for one call at a time still serves every response, in turns:
/// bodies of known and unknown length, one whose upstream stalls mid-body (it gives its share
/// back after the stall time), and every body decodes to the origin's.
#[tokio::test]
async fn a_small_gather_budget_serves_every_response_in_turns() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.budget.gather_memory = Some(64 * 1024);
    })
    .await;
    let client = client();
    let paths = ["/stall.html", "/big", "/late-stream"]
        .into_iter()
        .chain(std::iter::repeat_n("/page.html", 20));
    let fetches = paths.map(|path| {
        let client = client.clone();
        let url = proxy.url(path);
        async move {
            let (head, body) = fetch(&client, "GET", &url, GZIP).await;
            assert_eq!(head.headers["content-encoding"], "gzip", "{url}");
            (url, gunzip(&body))
        }
    });
    let served = tokio::time::timeout(Duration::from_secs(30), futures_join(fetches))
        .await
        .expect("every response was served");
    for (url, plain) in served {
        let want = match url.rsplit('/').next() {
            Some("stall.html") => html(150_000),
            Some("big") => big(),
            Some("late-stream") => html(10_000),
            _ => html(50_000),
        };
        assert!(
            plain == want,
            "{url}: {} bytes, not the origin's",
            plain.len()
        );
    }
    // The gate held the calls' input, never more than the budget, and made some wait.
    let held = Proxy::count(&proxy.stats.gather.peak_held);
    assert!(
        (1..=64 * 1024).contains(&held),
        "the gate held {held} bytes"
    );
    let waits = Proxy::count(&proxy.stats.gather.waits);
    assert!(waits > 0, "no response waited for the budget");
}

/// A loopback admin listener answers only a local `Host`: a page whose name was rebound to
/// 127.0.0.1 gets neither the counters nor a purge. And idle connections past the cap wait
/// rather than take the proxy's file descriptors.
#[tokio::test]
async fn the_loopback_admin_listener_answers_local_hosts_and_caps_its_connections() {
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.admin = Some("127.0.0.1:0".parse().expect("valid"));
    })
    .await;
    let admin = proxy.admin.expect("admin configured");
    let port = admin.port();
    let ask = |method: &str, host: String| {
        format!("{method} /stats HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
    };
    let status = |raw: Vec<u8>| split_head(&raw).0.lines().next().unwrap_or("").to_owned();
    for (host, expected) in [
        (format!("attacker.example:{port}"), "421"),
        ("attacker.example".to_owned(), "421"),
        (format!("localhost:{port}"), "200"),
        (format!("127.0.0.1:{port}"), "200"),
        (format!("[::1]:{port}"), "200"),
    ] {
        let raw = raw_exchange(
            admin,
            ask("GET", host.clone()).as_bytes(),
            Duration::from_secs(3),
        )
        .await;
        let line = status(raw);
        assert!(line.contains(expected), "{host}: {line}");
    }
    let purge =
        format!("DELETE /cache HTTP/1.1\r\nHost: evil.test:{port}\r\nConnection: close\r\n\r\n");
    let line = status(raw_exchange(admin, purge.as_bytes(), Duration::from_secs(3)).await);
    assert!(line.contains("421"), "{line}");

    let mut idle = Vec::new();
    for _ in 0..32 {
        idle.push(
            tokio::net::TcpStream::connect(admin)
                .await
                .expect("connect"),
        );
    }
    let request = ask("GET", format!("127.0.0.1:{port}"));
    let mut waiting = tokio::net::TcpStream::connect(admin)
        .await
        .expect("connect");
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        waiting.write_all(request.as_bytes()).await.expect("write");
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_millis(800), waiting.read(&mut buf)).await;
        assert!(read.is_err(), "served past the cap");
    }
    drop(idle.pop());
    let line = status(raw_exchange(admin, request.as_bytes(), Duration::from_secs(3)).await);
    assert!(line.contains("200"), "{line}");
}
