//! The live dashboards in a real browser: the proxy's under load, then the tunnel's, each
//! opened in headless Chromium, followed for a few updates, and checked against `/stats`
//! (exact numbers in the page's summary table) and a screenshot that must show drawn charts.
//!
//! Skips with a note where there is no `chromium`; fails where `CI=true`.

mod browser_support;
mod tunnel_support;

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use browser_support::chromium;
use browser_support::devtools::Session;
use browser_support::origin::Origin;
use browser_support::page::Site;
use browser_support::png;
use browser_support::proxy::Proxy;
use tunnel_support::{admin_addr, echo_target, pair};

/// Longest the page may take to show its first updates (Chromium's start included).
const FIRST_UPDATES: Duration = Duration::from_secs(30);
/// Longest two more updates may take (one a second, on a loaded machine).
const NEXT_UPDATES: Duration = Duration::from_secs(15);

/// Sends `GET /` with gzip accepted, over one keep-alive connection after another, until
/// `stop`; counts the responses read whole.
fn load(proxy: SocketAddr, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = TcpStream::connect(proxy) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let request = format!(
            "GET / HTTP/1.1\r\nHost: {proxy}\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
        );
        let mut response = Vec::new();
        if stream.write_all(request.as_bytes()).is_ok() && stream.read_to_end(&mut response).is_ok()
        {
            done.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Checks that a screenshot shows cards and drawn chart lines, not a blank or unstyled page:
/// many colours, a good share of pixels off the page's background, and coloured (saturated)
/// pixels where series were drawn.
fn screenshot_shows_charts(bytes: &[u8]) {
    let image = png::decode(bytes).unwrap_or_else(|e| panic!("the screenshot: {e}"));
    assert!(
        image.width >= 600 && image.height >= 400,
        "a tiny screenshot: {}x{}",
        image.width,
        image.height
    );
    let total = image.pixels.len();
    let background = image
        .pixels
        .iter()
        .filter(|&&p| p == [0xf4, 0xf5, 0xf7])
        .count();
    let saturated = image
        .pixels
        .iter()
        .filter(|p| {
            let (max, min) = (p.iter().max().unwrap_or(&0), p.iter().min().unwrap_or(&0));
            max - min > 80
        })
        .count();
    let mut colours: Vec<[u8; 3]> = image.pixels.clone();
    colours.sort_unstable();
    colours.dedup();
    let summary = format!(
        "{total} pixels, {background} background, {saturated} saturated, {} colours",
        colours.len()
    );
    assert!(background * 20 < total * 19, "mostly background: {summary}");
    assert!(colours.len() >= 64, "too few colours: {summary}");
    assert!(saturated >= 1500, "no drawn series: {summary}");
    eprintln!("screenshot: {summary}");
}

/// Writes the screenshot to `$ZIPWIRE_DASHBOARD_SHOTS/<name>.png` where that is set: how the
/// README's picture (docs/dashboard-*.png) was taken.
fn keep_screenshot(bytes: &[u8], name: &str) {
    if let Some(dir) = std::env::var_os("ZIPWIRE_DASHBOARD_SHOTS") {
        let path = std::path::Path::new(&dir).join(format!("{name}.png"));
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// `pointer` in a `/stats` document, as the page writes it.
fn number(stats: &serde_json::Value, pointer: &str) -> String {
    stats
        .pointer(pointer)
        .unwrap_or_else(|| panic!("no {pointer} in /stats: {stats:#}"))
        .to_string()
}

#[test]
fn the_proxy_dashboard_shows_what_stats_reports() {
    let Some(browser) = chromium::require() else {
        return;
    };
    let site = Site::new();
    let origin = Origin::start(&site);
    let proxy = Proxy::start(origin.addr()).unwrap_or_else(|e| panic!("{e}"));
    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let loader = {
        let (addr, stop, done) = (proxy.listen, stop.clone(), done.clone());
        std::thread::spawn(move || load(addr, stop, done))
    };
    let url = format!("http://{}/dashboard", proxy.admin);
    let mut page = Session::open(&browser, &url, 1280, 900);
    page.wait_for_updates(2, FIRST_UPDATES);

    // Under load, the page's count is at most the one /stats gives just after.
    let shown: u64 = page
        .text("s-requests")
        .and_then(|t| t.parse().ok())
        .expect("a request count on the page");
    let stats = proxy.stats();
    assert!(
        shown <= stats["requests"].as_u64().unwrap_or(0),
        "the page shows {shown} requests, more than /stats"
    );

    // Stopped, the numbers hold still: two updates later the page shows them exactly.
    stop.store(true, Ordering::Relaxed);
    loader.join().expect("the load thread");
    let now = page.updates();
    page.wait_for_updates(now + 2, NEXT_UPDATES);
    let stats = proxy.stats();
    let log = || format!("/stats: {stats:#}\nthe proxy's log:\n{}", proxy.log());
    assert!(
        done.load(Ordering::Relaxed) >= 2,
        "too little load; {}",
        log()
    );
    assert!(
        stats["responses_compressed"].as_u64().unwrap_or(0) >= 1,
        "nothing compressed; {}",
        log()
    );
    for (id, pointer) in [
        ("s-requests", "/requests"),
        ("s-responses_compressed", "/responses_compressed"),
        ("s-bytes_in", "/bytes_in"),
        ("s-bytes_out", "/bytes_out"),
        ("s-bytes_saved", "/bytes_saved"),
        ("s-active_streams", "/active_streams"),
    ] {
        assert_eq!(
            page.text(id),
            Some(number(&stats, pointer)),
            "{id} on the page against {pointer}; {}",
            log()
        );
    }
    let gzip = page.text("c-gzip").unwrap_or_default();
    let want = format!("{} responses", number(&stats, "/codings/gzip/responses"));
    assert!(gzip.starts_with(&want), "gzip row {gzip:?}, want {want:?}");
    // Dictionaries are on by default: their card shows /stats' counts.
    assert_eq!(
        page.text("d-dcz"),
        Some(number(&stats, "/dictionaries/dcz")),
        "the dictionaries' dcz row; {}",
        log()
    );
    // No `[cache]`: no cache card (its counters are all 0, and the card would stay empty).
    assert_eq!(page.text("cache"), None, "a cache card without a cache");
    let shot = page.screenshot();
    keep_screenshot(&shot, "proxy");
    screenshot_shows_charts(&shot);
}

/// A dashboard refused a seat (`503`: every viewer's seat taken) fails its `EventSource` for
/// good, which never retries on its own: the page must open a new one, and go live once a seat
/// is free, not show "reconnecting" until it is reloaded.
#[test]
fn a_page_turned_away_by_a_full_house_goes_live_once_a_seat_is_free() {
    let Some(browser) = chromium::require() else {
        return;
    };
    let site = Site::new();
    let origin = Origin::start(&site);
    let proxy = Proxy::start(origin.addr()).unwrap_or_else(|e| panic!("{e}"));
    let seats: Vec<TcpStream> = (0..zipwire_dashboard::MAX_VIEWERS)
        .map(|_| {
            let mut stream = TcpStream::connect(proxy.admin).expect("connect to the admin");
            let request = format!("GET /events HTTP/1.1\r\nHost: {}\r\n\r\n", proxy.admin);
            stream.write_all(request.as_bytes()).expect("send");
            let mut head = [0u8; 12];
            stream
                .read_exact(&mut head)
                .expect("the stream's status line");
            assert_eq!(&head, b"HTTP/1.1 200", "a seat");
            stream
        })
        .collect();
    let url = format!("http://{}/dashboard", proxy.admin);
    let mut page = Session::open(&browser, &url, 1280, 900);
    page.wait_for_text("status", |text| text == "reconnecting", FIRST_UPDATES);
    assert_eq!(page.updates(), 0);
    for seat in &seats {
        let _ = seat.shutdown(Shutdown::Both);
    }
    drop(seats);
    // The page waits 5 s before it tries again; the seats free at the next event (1 s).
    page.wait_for_updates(1, Duration::from_secs(20));
    assert_eq!(page.text("status").as_deref(), Some("live"));
}

/// `GET path` from an HTTP/1.1 server at `addr`, parsed as JSON.
fn get_json(addr: &str, path: &str) -> serde_json::Value {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of head: {response}"));
    assert!(head.starts_with("HTTP/1.1 200"), "{path} answered: {head}");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{path} is not JSON ({e}): {body}"))
}

/// Sends 256 kB through the tunnel client at `addr`, half text and half noise (so that some
/// blocks go raw), again and again until `stop`, reading the echo back each time.
fn tunnel_load(addr: String, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let data: Vec<u8> = (0..256 * 1024)
        .map(|i| {
            if i < 128 * 1024 {
                b"zipwire tunnel dashboard "[i % 25]
            } else {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            }
        })
        .collect();
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = TcpStream::connect(&addr) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
        let Ok(mut writer) = stream.try_clone() else {
            continue;
        };
        let sent = data.clone();
        let sending = std::thread::spawn(move || {
            let _ = writer.write_all(&sent);
            let _ = writer.shutdown(Shutdown::Write);
        });
        let mut back = Vec::new();
        let read = stream.read_to_end(&mut back);
        let _ = sending.join();
        if read.is_ok() && back == data {
            done.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
fn the_tunnel_dashboard_shows_what_stats_reports() {
    let Some(browser) = chromium::require() else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (_server, client, client_addr) = pair(dir.path(), &echo_target(), &[], &["--admin", "0"]);
    let admin = admin_addr(&client);

    let (stop, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let loader = {
        let (addr, stop, done) = (client_addr.clone(), stop.clone(), done.clone());
        std::thread::spawn(move || tunnel_load(addr, stop, done))
    };
    let mut page = Session::open(&browser, &format!("http://{admin}/dashboard"), 1280, 900);
    page.wait_for_updates(2, FIRST_UPDATES);
    stop.store(true, Ordering::Relaxed);
    loader.join().expect("the load thread");
    let now = page.updates();
    page.wait_for_updates(now + 2, NEXT_UPDATES);
    let stats = get_json(&admin, "/stats");
    let log = || format!("/stats: {stats:#}\nthe client's log:\n{}", client.log());
    assert!(
        done.load(Ordering::Relaxed) >= 1,
        "nothing went through; {}",
        log()
    );
    let raw_out = stats["outgoing"]["raw"].as_u64().unwrap_or(0);
    assert!(raw_out >= 256 * 1024, "too little sent; {}", log());
    for direction in ["outgoing", "incoming"] {
        for field in ["raw", "wire"] {
            let id = format!("{direction}-{field}");
            assert_eq!(
                page.text(&id),
                Some(number(&stats, &format!("/{direction}/{field}"))),
                "{id} on the page; {}",
                log()
            );
        }
    }
    let blocks: u64 = stats["outgoing"]["methods"]
        .as_object()
        .map(|m| m.values().filter_map(|c| c["blocks"].as_u64()).sum())
        .unwrap_or(0);
    assert_eq!(
        page.text("outgoing-blocks"),
        Some(blocks.to_string()),
        "{}",
        log()
    );
    let raw_blocks = stats
        .pointer("/outgoing/methods/raw/blocks")
        .map_or(0, |n| n.as_u64().unwrap_or(0));
    assert_eq!(
        page.text("outgoing-raw_blocks"),
        Some(raw_blocks.to_string()),
        "{}",
        log()
    );
    let shot = page.screenshot();
    keep_screenshot(&shot, "tunnel");
    screenshot_shows_charts(&shot);
}
