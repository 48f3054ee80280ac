//! RFC 9842 in a real browser: headless Chromium with a profile kept between launches loads
//! pages through `zipwire proxy` in front of an origin that knows nothing of dictionaries.
//! The proxy marks a versioned script as a dictionary; the next version reaches Chromium as a
//! delta (`dcz`, and `dcb` where the proxy prefers it), which Chromium decodes and runs (the
//! DOM shows the script's own version string). A cross-site `<script src>` without
//! `crossorigin` gets no dictionary coding, while the same script loaded with CORS does.
//!
//! A site's own pages, sampled by the proxy, become a site dictionary that the proxy
//! announces with `Link`; Chromium fetches it at idle and the next page it navigates to
//! arrives as a delta.
//!
//! Chromium treats `http://localhost` and `http://127.0.0.1` as secure contexts whose
//! dictionaries are used without the known-root check, so no certificate is needed.
//!
//! Skips with a note where there is no `chromium` or corpus; fails where `CI=true`.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zipwire_testkit::child::Running;
use zipwire_testkit::{corpus_dir, is_ci, read_corpus_file};

/// Set once the proxy has served the site dictionary: `/slow` waits for it.
static DICTIONARY_FETCHED: AtomicBool = AtomicBool::new(false);

/// Longest one Chromium launch may take (a loaded 2-core machine included).
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// The flags of every launch: as `browser.rs`' runs, and `localhost` pinned to IPv4, where
/// the proxy listens.
const FLAGS: [&str; 11] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--no-proxy-server",
    "--host-resolver-rules=MAP localhost 127.0.0.1",
];

const OLD: &str = "jquery-3.7.0.min.js";
const NEW: &str = "jquery-3.7.1.min.js";
/// The new version under a second name its pattern also covers, for a load the HTTP cache
/// cannot answer.
const NEW_AGAIN: &str = "jquery-3.7.1-b.min.js";

fn chromium() -> Option<String> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|name| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
    });
    match found {
        Some(name) => Some(name.to_owned()),
        None if is_ci() => panic!("chromium is missing and CI=true: install it"),
        None => {
            eprintln!("note: skipping: no chromium on PATH");
            None
        }
    }
}

/// A page that loads `script` with a plain `<script src>` and writes the jQuery version it
/// finds into `#out`.
fn page(script: &str) -> Vec<u8> {
    format!(
        "<!doctype html><html><head><title>t</title></head><body><p id=out>waiting</p>\
         <script src=\"{script}\"></script>\
         <script>document.getElementById('out').textContent = 'jquery ' + \
         (window.jQuery ? jQuery.fn.jquery : 'missing');</script></body></html>"
    )
    .into_bytes()
}

/// The origin: pages (`no-store`) and the two jQuery versions (cacheable for an hour, CORS
/// open), one request per connection, on a thread each.
struct Origin {
    addr: SocketAddr,
}

impl Origin {
    fn start(files: HashMap<String, (&'static str, Vec<u8>)>) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the origin");
        let addr = listener.local_addr().expect("origin address");
        let files = Arc::new(files);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let files = files.clone();
                std::thread::spawn(move || answer(stream, &files));
            }
        });
        Origin { addr }
    }
}

fn answer(mut stream: TcpStream, files: &HashMap<String, (&'static str, Vec<u8>)>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
    if path == "/slow" {
        // Held until the proxy has served the site dictionary (at most 30 s), and half a
        // second more for Chromium to store it: virtual time stops while a fetch is pending.
        let start = std::time::Instant::now();
        while !DICTIONARY_FETCHED.load(Ordering::SeqCst) && start.elapsed().as_secs() < 30 {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let (status, kind, body, cache) = match files.get(&path) {
        // Documentation pages anyone may share (revalidated), other pages no-store.
        Some((kind, body)) if path.starts_with("/docs/") => {
            ("200 OK", *kind, body.clone(), "no-cache")
        }
        Some((kind, body)) if kind.starts_with("text/html") => {
            ("200 OK", *kind, body.clone(), "no-store")
        }
        Some((kind, body)) => ("200 OK", *kind, body.clone(), "public, max-age=3600"),
        None => (
            "404 Not Found",
            "text/plain",
            b"not found".to_vec(),
            "no-store",
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Cache-Control: {cache}\r\nAccess-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.write_all(&body);
}

/// `zipwire proxy` on a cleartext loopback listener, with `config` as its file.
struct Proxy {
    child: Running,
    listen: SocketAddr,
    admin: SocketAddr,
}

impl Proxy {
    fn start(origin: SocketAddr, dir: &Path, config: &str) -> Proxy {
        let file = dir.join("zipwire.toml");
        std::fs::write(&file, config).expect("write the config");
        let any = "127.0.0.1:0";
        let child = Running::start(
            Command::new(env!("CARGO_BIN_EXE_zipwire"))
                .arg("proxy")
                .arg("--config")
                .arg(&file)
                .args(["--listen", any])
                .args(["--upstream", &format!("http://{origin}")])
                .args(["--admin", any])
                .args(["--encodings", "zstd,br,gzip"])
                .args(["--threads", "2"]),
            &dir.join("proxy.log"),
        );
        Proxy {
            listen: child.addr("tls=false", "local_addr="),
            admin: child.addr("admin listening", "addr="),
            child,
        }
    }

    fn stats(&self) -> serde_json::Value {
        stats_of(self.admin)
    }

    fn count(&self, name: &str) -> u64 {
        let stats = self.stats();
        stats["dictionaries"][name]
            .as_u64()
            .unwrap_or_else(|| panic!("no dictionaries.{name} in /stats: {stats:#}"))
    }
}

/// The proxy's `/stats` from its admin listener at `admin`.
fn stats_of(admin: SocketAddr) -> serde_json::Value {
    let mut stream = TcpStream::connect(admin).expect("connect to the admin listener");
    let request = format!("GET /stats HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read /stats");
    let (_, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    serde_json::from_str(body).expect("/stats is JSON")
}

/// The site dictionaries the proxy at `admin` has served.
fn site_fetches(admin: SocketAddr) -> u64 {
    stats_of(admin)["dictionaries"]["site_fetches"]
        .as_u64()
        .unwrap_or(0)
}

/// Loads `url` in Chromium with the profile in `profile`, giving the page virtual time, and
/// returns what `#out` says in the dumped DOM.
fn load(browser: &str, profile: &Path, url: &str, dir: &Path) -> String {
    load_for(browser, profile, url, dir, 5000)
}

/// [`load`] with `budget` milliseconds of virtual time.
fn load_for(browser: &str, profile: &Path, url: &str, dir: &Path, budget: u32) -> String {
    let log = dir.join("chromium.log");
    let child = Running::start(
        Command::new(browser)
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--virtual-time-budget={budget}"))
            .args(["--dump-dom", url]),
        &log,
    );
    let status = child.exits_within(RUN_LIMIT);
    let output = child.log();
    assert!(
        status.success(),
        "chromium failed on {url} ({status}):\n{output}"
    );
    let out = output
        .split("<p id=\"out\">")
        .nth(1)
        .and_then(|rest| rest.split("</p>").next())
        .unwrap_or_else(|| panic!("no #out in the DOM of {url}:\n{output}"));
    out.to_owned()
}

/// The site: the two versions under `/lib/`, and pages loading them from `script_host`.
fn site(script_host: &str) -> Option<HashMap<String, (&'static str, Vec<u8>)>> {
    let versions = corpus_dir().join("versions");
    if !versions.join(OLD).is_file() {
        assert!(
            !is_ci(),
            "the corpus is missing and CI=true: {}",
            versions.display()
        );
        eprintln!("note: skipping: no corpus at {}", versions.display());
        return None;
    }
    let old = read_corpus_file(&versions.join(OLD), 1 << 24);
    let new = read_corpus_file(&versions.join(NEW), 1 << 24);
    let js = "application/javascript";
    let html = "text/html; charset=utf-8";
    let mut files = HashMap::new();
    files.insert(format!("/lib/{OLD}"), (js, old));
    files.insert(format!("/lib/{NEW}"), (js, new.clone()));
    files.insert(format!("/lib/{NEW_AGAIN}"), (js, new));
    files.insert("/v1.html".to_owned(), (html, page(&format!("/lib/{OLD}"))));
    files.insert("/v2.html".to_owned(), (html, page(&format!("/lib/{NEW}"))));
    let remote = |name: &str| format!("http://{script_host}/lib/{name}");
    files.insert("/cross-v2.html".to_owned(), (html, page(&remote(NEW))));
    files.insert(
        "/v2-again.html".to_owned(),
        (html, page(&format!("/lib/{NEW_AGAIN}"))),
    );
    Some(files)
}

/// v1 then v2 of the script, same origin, through a proxy that prefers `coding`.
fn delta_reaches_chromium(coding: &str) {
    let Some(browser) = chromium() else { return };
    let Some(files) = site("unused") else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let origin = Origin::start(files);
    let config = format!("[dictionaries]\nmode = \"auto\"\ncodings = [\"{coding}\"]\n");
    let proxy = Proxy::start(origin.addr, dir.path(), &config);
    let profile = dir.path().join("profile");
    let base = format!("http://localhost:{}", proxy.listen.port());

    assert_eq!(
        load(&browser, &profile, &format!("{base}/v1.html"), dir.path()),
        "jquery 3.7.0"
    );
    assert_eq!(
        proxy.count("stored"),
        1,
        "v1 stored as a dictionary; log:\n{}",
        proxy.child.log()
    );
    assert_eq!(
        load(&browser, &profile, &format!("{base}/v2.html"), dir.path()),
        "jquery 3.7.1"
    );
    let log = proxy.child.log();
    assert_eq!(
        proxy.count(coding),
        1,
        "v2 sent as {coding}; /stats: {:#}\nlog:\n{log}",
        proxy.stats()
    );
    let line = log
        .lines()
        .find(|line| line.contains("access") && line.contains(&format!("/lib/{NEW}")))
        .unwrap_or_else(|| panic!("no access line for v2:\n{log}"));
    assert!(line.contains(&format!("dictionary=\"{coding}:")), "{line}");
    let bytes_out = proxy.count("bytes_out");
    assert!(
        bytes_out > 0 && bytes_out < 5_000,
        "v2 took {bytes_out} bytes on the wire"
    );
}

#[test]
fn chromium_gets_the_next_version_as_a_dcz_delta() {
    delta_reaches_chromium("dcz");
}

#[test]
fn chromium_gets_the_next_version_as_a_dcb_delta() {
    delta_reaches_chromium("dcb");
}

/// The dictionary registers on `127.0.0.1`; a page on `localhost` (another site) then loads
/// the next version from `127.0.0.1` with a plain `<script src>` (no-cors) and gets no
/// dictionary coding, while a page on `127.0.0.1` loading it gets the delta: the proxy held
/// the dictionary all along. (Chromium keeps dictionaries per top-level site as well, and
/// offers none on cross-site no-cors loads; the proxy's own refusal of such a request that
/// does name one is the `requests_that_do_not_qualify` test of the proxy crate.)
#[test]
fn a_cross_site_no_cors_script_gets_no_dictionary_coding() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    // The pages name the script's host by the proxy's port, so the port is chosen first.
    let probe = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = probe.local_addr().expect("port").port();
    drop(probe);
    let Some(files) = site(&format!("127.0.0.1:{port}")) else {
        return;
    };
    let origin = Origin::start(files);
    let child = Running::start(
        Command::new(env!("CARGO_BIN_EXE_zipwire"))
            .arg("proxy")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--upstream", &format!("http://{}", origin.addr)])
            .args(["--admin", "127.0.0.1:0"])
            .args(["--encodings", "zstd,br,gzip"])
            .args(["--threads", "2"]),
        &dir.path().join("proxy.log"),
    );
    let proxy = Proxy {
        listen: child.addr("tls=false", "local_addr="),
        admin: child.addr("admin listening", "addr="),
        child,
    };
    let profile = dir.path().join("profile");
    let same_site = |name: &str| format!("http://127.0.0.1:{port}/{name}");
    let other_site = |name: &str| format!("http://localhost:{port}/{name}");

    assert_eq!(
        load(&browser, &profile, &same_site("v1.html"), dir.path()),
        "jquery 3.7.0"
    );
    assert_eq!(proxy.count("stored"), 1, "log:\n{}", proxy.child.log());
    assert_eq!(
        load(&browser, &profile, &other_site("cross-v2.html"), dir.path()),
        "jquery 3.7.1"
    );
    assert_eq!(
        proxy.count("dcz") + proxy.count("dcb"),
        0,
        "a no-cors cross-site load got a delta"
    );
    assert_eq!(
        load(&browser, &profile, &same_site("v2-again.html"), dir.path()),
        "jquery 3.7.1"
    );
    assert_eq!(
        proxy.count("dcz"),
        1,
        "the same-site load of the next version got no delta; log:\n{}",
        proxy.child.log()
    );
}

/// Documentation page `n`: a shared template around text of its own, with `#out` naming it;
/// with `next`, a script that loads that page in a frame once a fetch of `/slow` returns
/// (after the browser's idle work), and copies the frame's `#out` into its own.
fn doc_page(n: usize, next: Option<usize>) -> Vec<u8> {
    let mut page = format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>Chapter {n} | The \
         Example Handbook</title><style>body{{font-family:sans-serif}} .nav-link{{color:navy}} \
         .sidebar{{float:left;width:20%}}</style></head><body><header class=site-header>\
         <nav class=top-nav><ul>"
    );
    for section in [
        "Tutorial",
        "Library",
        "Reference",
        "How-to",
        "FAQ",
        "Glossary",
    ] {
        page.push_str(&format!(
            "<li class=nav-item><a class=nav-link href=/docs/{section}.html \
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
    page.push_str(&format!(
        "</ul></div><main><p id=out>chapter {n}</p><section>"
    ));
    if let Some(next) = next {
        page.push_str(&format!(
            "<script>fetch('/slow').then(() => {{ \
             const frame = document.createElement('iframe'); \
             frame.onload = () => document.getElementById('out').textContent = \
             frame.contentDocument.getElementById('out').textContent; \
             frame.src = '/docs/chapter-{next}.html'; document.body.append(frame); }})\
             </script>"
        ));
    }
    let mut state = n as u64 * 0x9e37_79b9 + 1;
    for _ in 0..1500 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let word = [
            "the ",
            "value ",
            "returns ",
            "function ",
            "list ",
            "object ",
        ];
        page.push_str(word[(state % 6) as usize]);
        page.push_str(&format!("{} ", state % 10_007));
    }
    page.push_str(
        "</section></main><footer class=footer>&copy; Copyright the Example Handbook authors. \
         Last updated on Dec 05, 2026. <a href=/bugs.html>Report a bug</a>.</footer>\
         </body></html>",
    );
    page.into_bytes()
}

/// A GET of `path` from `addr` by another visitor (no browser), its body discarded.
fn visit(addr: SocketAddr, path: &str) {
    let mut stream = TcpStream::connect(addr).expect("connect to the proxy");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost:{}\r\nAccept-Encoding: br\r\n\
         Connection: close\r\n\r\n",
        addr.port()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read");
    assert!(response.starts_with(b"HTTP/1.1 200"), "{path} failed");
}

/// Other visitors' pages build a site dictionary; Chromium, on a page that announces it,
/// fetches it at idle, and its next navigation on the site arrives as a delta it renders.
#[test]
fn chromium_navigates_to_a_page_sent_against_the_site_dictionary() {
    navigation_gets_a_site_delta("dcz");
}

/// The same as `dcb`, whose stream also refers to brotli's built-in words (a page of
/// English words): Chromium's Shared Brotli decoder counts their distances past the
/// dictionary as the proxy's encoder does.
#[test]
fn chromium_navigates_to_a_page_sent_as_dcb_against_the_site_dictionary() {
    navigation_gets_a_site_delta("dcb");
}

fn navigation_gets_a_site_delta(coding: &str) {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let html = "text/html; charset=utf-8";
    let files = (0..50)
        .map(|n| {
            let next = (n == 40).then_some(41);
            (format!("/docs/chapter-{n}.html"), (html, doc_page(n, next)))
        })
        .collect();
    let origin = Origin::start(files);
    let proxy = Proxy::start(
        origin.addr,
        dir.path(),
        &format!("[dictionaries]\nmode = \"auto\"\nsite = true\ncodings = [\"{coding}\"]\n"),
    );
    for n in 0..40 {
        visit(proxy.listen, &format!("/docs/chapter-{n}.html"));
    }
    let start = std::time::Instant::now();
    while proxy.count("site_built") == 0 {
        assert!(
            start.elapsed() < RUN_LIMIT,
            "no site dictionary built; log:\n{}",
            proxy.child.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let profile = dir.path().join("profile");
    let base = format!("http://localhost:{}", proxy.listen.port());

    // Chapter 40 announces the dictionary, which Chromium fetches while the page lives
    // (virtual time), then loads chapter 41 in a frame.
    let url = format!("{base}/docs/chapter-40.html");
    let admin = proxy.admin;
    let watch = std::thread::spawn(move || {
        let start = std::time::Instant::now();
        while start.elapsed() < RUN_LIMIT {
            if site_fetches(admin) > 0 {
                DICTIONARY_FETCHED.store(true, Ordering::SeqCst);
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    assert_eq!(
        load_for(&browser, &profile, &url, dir.path(), 30_000),
        "chapter 41"
    );
    let _ = watch.join();
    assert_eq!(
        proxy.count("site_fetches"),
        1,
        "Chromium did not fetch the announced dictionary; log:\n{}",
        proxy.child.log()
    );
    let log = proxy.child.log();
    assert_eq!(
        proxy.count(coding),
        1,
        "the navigation got no delta; /stats: {:#}\nlog:\n{log}",
        proxy.stats()["dictionaries"]
    );
    // The access line is written once the body has gone, which may be after Chromium exits.
    let start = std::time::Instant::now();
    let line = loop {
        let log = proxy.child.log();
        let found = log
            .lines()
            .find(|line| line.contains("access") && line.contains("/docs/chapter-41.html"))
            .map(str::to_owned);
        match found {
            Some(line) => break line,
            None if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            None => panic!("no access line for the page:\n{log}"),
        }
    };
    assert!(line.contains(&format!("dictionary=\"{coding}:")), "{line}");
    let (sent, page) = (proxy.count("bytes_out"), doc_page(41, None).len() as u64);
    assert!(sent * 4 < page, "the page took {sent} bytes of {page}");
}
