//! A real browser, headless Chromium, loads a page with a linked stylesheet, a script and a
//! WebSocket echo, first straight from the test's origin (so that a failure through the proxy
//! is the proxy's), then through `zipwire proxy` over TLS and HTTP/2.
//!
//! Skips with a note where there is no `chromium`; fails where `CI=true`.

mod browser_support;

use std::time::Duration;

use browser_support::chromium::{self, Chromium};
use browser_support::devtools::Session;
use browser_support::origin::Origin;
use browser_support::page::{self, Site};
use browser_support::png;
use browser_support::proxy::Proxy;

/// Longest the page may take, in real time, to show the WebSocket's echo (a loaded 2-core
/// machine included).
const ECHO_LIMIT: Duration = Duration::from_secs(30);

/// Loads `url` in Chromium and checks the DOM and what the origin saw: the page as served
/// with what its script wrote into it, the stylesheet applied, and the WebSocket's echo.
///
/// The page is driven over the DevTools protocol and the test waits, in real time, until the
/// echo is on the page. `--dump-dom --virtual-time-budget` cannot wait for it: an open
/// WebSocket does not hold virtual time back, so on a loaded machine Chromium dumped the page
/// before the echo came (CI at c27fd2d).
fn load_and_check(browser: &Chromium, url: &str, site: &Site, origin: &Origin) {
    let mut session = Session::open(browser, url, 640, 480);
    session.wait_for_text("ws", |text| text != page::WAITING, ECHO_LIMIT);
    let dom = session.dom();
    let got = page::normalize(&dom);
    let want = page::normalize(&site.expected_dom());
    if got != want {
        let (got_chars, want_chars): (Vec<char>, Vec<char>) =
            (got.chars().collect(), want.chars().collect());
        let at = got_chars
            .iter()
            .zip(&want_chars)
            .position(|(a, b)| a != b)
            .unwrap_or(got_chars.len().min(want_chars.len()));
        let around = |text: &[char]| -> String {
            text[at.saturating_sub(120)..(at + 120).min(text.len())]
                .iter()
                .collect()
        };
        panic!(
            "the DOM Chromium shows for {url} is not the expected page; first difference at \
             character {at}:\n--- got:\n…{}…\n--- want:\n…{}…\n--- the whole DOM:\n{dom}",
            around(&got_chars),
            around(&want_chars),
        );
    }
    origin.seen(|seen| {
        for path in ["/", "/style.css", "/app.js", "/ws"] {
            assert!(
                seen.hits.get(path).is_some_and(|&n| n >= 1),
                "the origin never saw {path}: {:?}",
                seen.hits
            );
        }
        assert_eq!(seen.echoed, [site.message()], "WebSocket messages");
    });
}

/// Takes a screenshot of `url` and checks that it shows the page: mostly the stylesheet's
/// background, with the text drawn over it.
fn screenshot_shows_the_page(browser: &Chromium, url: &str) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("page.png");
    let output = browser.screenshot(url, &path);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "no screenshot at {} ({e}); chromium's output:\n{}",
            path.display(),
            output.log
        )
    });
    let image = png::decode(&bytes).unwrap_or_else(|e| panic!("the screenshot: {e}"));
    assert!(
        image.width >= 100 && image.height >= 100,
        "a tiny screenshot"
    );
    let total = image.pixels.len();
    let background = image
        .pixels
        .iter()
        .filter(|&&p| p == page::BACKGROUND)
        .count();
    assert!(
        background * 2 > total && background < total,
        "the screenshot is not the page: {background} of {total} pixels have the background \
         colour {:?}",
        page::BACKGROUND
    );
    // The title's text and its underline (a border, there whatever the fonts) are drawn in
    // the title's dark colour.
    let dark = image
        .pixels
        .iter()
        .filter(|p| p.iter().all(|&c| c < 100))
        .count();
    assert!(
        dark > image.width * 12 / 2,
        "no title in the screenshot ({dark} dark pixels)"
    );
}

#[test]
fn chromium_loads_the_page_straight_from_the_origin() {
    let Some(browser) = chromium::require() else {
        return;
    };
    let site = Site::new();
    let origin = Origin::start(&site);
    let url = format!("http://{}/", origin.addr());
    load_and_check(&browser, &url, &site, &origin);
    screenshot_shows_the_page(&browser, &url);
}

#[test]
fn chromium_loads_the_page_through_the_proxy_over_tls_and_http2() {
    let Some(browser) = chromium::require() else {
        return;
    };
    let site = Site::new();
    let origin = Origin::start(&site);
    let proxy = Proxy::start(origin.addr()).unwrap_or_else(|e| panic!("{e}"));
    let url = format!("https://{}/", proxy.tls);
    load_and_check(&browser, &url, &site, &origin);
    screenshot_shows_the_page(&browser, &url);

    let stats = proxy.stats();
    let count = |path: &str| stats.pointer(path).and_then(|v| v.as_u64()).unwrap_or(0);
    let log = || format!("/stats: {stats:#}\nthe proxy's log:\n{}", proxy.log());
    assert!(
        count("/tls_handshakes") >= 1,
        "no TLS handshake counted; {}",
        log()
    );
    // The page, its stylesheet and its script, twice (the DOM, then the screenshot).
    assert!(
        count("/requests_by_protocol/h2") >= 6,
        "too few HTTP/2 requests; {}",
        log()
    );
    // Chromium asks `gzip, deflate, br, zstd` over HTTPS; the proxy prefers zstd, then br.
    // Each figure must be in /stats: a missing one is not read as 0 (which passed the size
    // check below for any coding never chosen).
    let figure = |path: &str| {
        stats
            .pointer(path)
            .and_then(|v| v.as_u64())
            .unwrap_or_else(|| panic!("no {path} in /stats; {}", log()))
    };
    let zstd = figure("/codings/zstd/responses");
    assert!(zstd >= 6, "too few zstd responses; {}", log());
    let (bytes_in, bytes_out) = (
        figure("/codings/zstd/bytes_in"),
        figure("/codings/zstd/bytes_out"),
    );
    assert!(
        bytes_out > 0 && bytes_out < bytes_in,
        "zstd did not make the bodies smaller; {}",
        log()
    );
}
