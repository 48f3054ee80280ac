//! The access log: one line per request, inside the connection's span, unless turned off.

use std::io;
use std::sync::{Arc, Mutex, OnceLock};

use tracing_subscriber::fmt::MakeWriter;

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

    let text = String::from_utf8(captured.0.lock().expect("not poisoned").clone()).expect("utf-8");
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" access ") && line.contains("path=/logged."))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    let page = lines[0];
    for field in [
        "conn{id=",
        "method=GET",
        "path=/logged.html",
        "status=200",
        "bytes_in=50000",
        &format!("bytes_out={}", body.len()),
        "transform=Compress",
        "outcome=\"complete\"",
    ] {
        assert!(page.contains(field), "{field} missing in {page}");
    }
    assert!(page.contains("ratio="), "{page}");
    assert!(!text.contains("secret"), "the query was logged");
    assert!(lines[1].contains("status=404"), "{}", lines[1]);
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
