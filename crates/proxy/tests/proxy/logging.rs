//! The access log: one line per request, inside the connection's span, unless turned off.

use std::io;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

use crate::raw::RawClient;
use crate::support::*;

/// Collects everything the subscriber writes.
#[derive(Clone, Default)]
pub(crate) struct Captured(pub(crate) Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// Installs a global subscriber writing into a buffer, once for the test binary.
///
/// Not a scoped `set_default`: with a single scoped subscriber, tracing caches a callsite's
/// interest from whichever thread reaches it first, and other tests run in parallel.
pub(crate) fn captured() -> &'static Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
        captured
    })
}

#[tokio::test]
async fn each_request_gets_one_access_line() {
    let captured = captured();
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let (_, body) = fetch(
        &client(),
        "GET",
        &proxy.url("/logged.html?token=secret"),
        &[("accept-encoding", "gzip")],
    )
    .await;
    fetch(&client(), "GET", &proxy.url("/logged.missing"), &[]).await;
    fetch(&client(), "GET", &proxy.url("/logged.html"), &[]).await;

    let text = String::from_utf8(captured.0.lock().expect("not poisoned").clone()).expect("utf-8");
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" access ") && line.contains("path=/logged."))
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    let page = lines[0];
    for field in [
        "conn{id=",
        "method=GET",
        "path=/logged.html",
        "status=200",
        "bytes_in=50000",
        &format!("bytes_out={}", body.len()),
        "transform=Compress",
        "bypass=\"\"",
        "outcome=\"complete\"",
    ] {
        assert!(page.contains(field), "{field} missing in {page}");
    }
    assert!(page.contains("ratio="), "{page}");
    assert!(!text.contains("secret"), "the query was logged");
    assert!(lines[1].contains("status=404"), "{}", lines[1]);
    // Why a response went out as it came: this client accepts no coding.
    assert!(lines[2].contains("bypass=\"not_accepted\""), "{}", lines[2]);
}

#[tokio::test]
async fn access_log_off_writes_no_line_and_keeps_the_counters() {
    let captured = captured();
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| config.access_log = false).await;
    // A path no other test asks for; a 404 gets its line like any response.
    let (head, _) = fetch(&client(), "GET", &proxy.url("/unlogged.missing"), &[]).await;
    assert_eq!(head.status, 404);
    // A request on a proxy with the log on, after it: its line shows the subscriber works.
    let logged = Proxy::before(&origin).await;
    fetch(&client(), "GET", &logged.url("/shown.missing"), &[]).await;

    let text = String::from_utf8(captured.0.lock().expect("not poisoned").clone()).expect("utf-8");
    assert!(text.contains("path=/shown.missing"), "{text}");
    assert!(!text.contains("/unlogged.missing"), "{text}");
    assert_eq!(Proxy::count(&proxy.stats.requests), 1);
}

#[tokio::test]
async fn an_http2_response_the_send_timeout_cut_is_not_logged_complete() {
    // The whole body leaves the upstream (and the proxy's side of the stream) at once, but
    // the client's window lets out 1,000 bytes and is never opened: the line must not say
    // "complete" for a response the client never got.
    let captured = captured();
    let origin = Origin::start().await;
    let proxy = Proxy::start(vec![origin.upstream()], |config| {
        config.timeouts.send = std::time::Duration::from_millis(500);
    })
    .await;
    let tcp = tokio::net::TcpStream::connect(proxy.addr)
        .await
        .expect("connect");
    let (send, connection) = crate::http2::bounded(
        "the h2 handshake",
        h2::client::Builder::new()
            .initial_window_size(1_000)
            .handshake::<_, bytes::Bytes>(tcp),
    )
    .await
    .expect("an h2 handshake");
    let _driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut send = crate::http2::bounded("a free stream", send.ready())
        .await
        .expect("the connection takes streams");
    let request = http::Request::get(format!("http://{}/logged.html?h2", proxy.addr))
        .body(())
        .expect("valid request");
    let (response, _) = send.send_request(request, true).expect("stream opened");
    let response = crate::http2::bounded("the response head", response)
        .await
        .expect("a response");
    assert_eq!(response.status(), 200);
    let line = crate::http2::bounded("the access line", async {
        loop {
            let text =
                String::from_utf8(captured.0.lock().expect("not poisoned").clone()).expect("utf-8");
            let found = text
                .lines()
                .find(|line| {
                    line.contains(" access ")
                        && line.contains("path=/logged.html")
                        && line.contains("protocol=\"h2\"")
                })
                .map(str::to_owned);
            if let Some(line) = found {
                return line;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(!line.contains("outcome=\"complete\""), "{line}");
    assert!(line.contains("send timeout"), "{line}");
    drop(response);
}

#[tokio::test]
async fn a_client_that_leaves_before_the_response_is_logged_499() {
    // As nginx's "client closed request"; such a line must not say status=200.
    let captured = captured();
    let origin = Origin::start().await;
    let proxy = Proxy::before(&origin).await;
    let mut client = RawClient::connect(proxy.addr).await;
    client
        .send(b"GET /slow-head HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(client);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text =
            String::from_utf8(captured.0.lock().expect("not poisoned").clone()).expect("utf-8");
        let left = text.lines().any(|line| {
            line.contains(" access ")
                && line.contains("path=/slow-head")
                && line.contains("status=499")
                && line.contains("outcome=\"dropped\"")
        });
        if left {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no 499 line: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
