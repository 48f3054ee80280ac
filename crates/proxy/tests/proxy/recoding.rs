//! What a recoded (compressed or decoded) response carries besides its body, against an
//! origin that writes its responses byte for byte: trailers, 304s, and a gzip body that does
//! not decode.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use zipwire_codec::{Format, Level};

use crate::support::*;

/// An origin that answers every request with the same bytes, then closes the connection.
struct RawOrigin {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl RawOrigin {
    async fn start(response: Vec<u8>) -> RawOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind origin");
        let addr = listener.local_addr().expect("origin address");
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    continue;
                };
                let response = response.clone();
                tokio::spawn(async move {
                    // The request has no body: its head ends the request.
                    let mut request = Vec::new();
                    let mut buf = [0; 4096];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = stream.write_all(&response).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        RawOrigin { addr, task }
    }
}

impl Drop for RawOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A response head (status line and fields, `\r\n` each) and `body` sent chunked in chunks
/// of at most 16 KB, then `trailers` (`\r\n` each).
fn chunked_response(head: &str, body: &[u8], trailers: &str) -> Vec<u8> {
    let mut out =
        format!("{head}transfer-encoding: chunked\r\nconnection: close\r\n\r\n").into_bytes();
    for chunk in body.chunks(16 * 1024) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("0\r\n{trailers}\r\n").as_bytes());
    out
}

/// A chunked body read back: its data, its trailer section (lowercased, `\r\n` each), and
/// whether it ended with the last chunk. A body cut short gives what came before the cut.
fn dechunk(mut raw: &[u8]) -> (Vec<u8>, String, bool) {
    let mut data = Vec::new();
    loop {
        let Some(line_end) = raw.windows(2).position(|w| w == b"\r\n") else {
            return (data, String::new(), false);
        };
        let size = std::str::from_utf8(&raw[..line_end]).expect("chunk size line");
        let size = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
        raw = &raw[line_end + 2..];
        if size == 0 {
            let Some(end) = raw.windows(2).rposition(|w| w == b"\r\n") else {
                return (data, String::new(), false);
            };
            let trailers = String::from_utf8_lossy(&raw[..end]).to_lowercase();
            return (data, trailers, true);
        }
        if raw.len() < size + 2 {
            data.extend_from_slice(&raw[..raw.len().min(size)]);
            return (data, String::new(), false);
        }
        data.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

const LIMIT: Duration = Duration::from_secs(5);

/// The digest trailers an origin might send, and one that is no digest.
const TRAILERS: &str = "content-digest: sha-256=:AAAA:\r\nrepr-digest: sha-256=:BBBB:\r\n\
                        content-md5: CCCC\r\nx-checksum: 42\r\n";
const ANNOUNCED: &str = "trailer: Content-Digest, Repr-Digest, Content-MD5, X-Checksum\r\n";

#[tokio::test]
async fn digest_trailers_are_dropped_from_recoded_bodies_and_kept_on_passed_ones() {
    let page = html(40_000);
    let gz = zipwire_codec::compress(Format::Gzip, Level::DEFAULT, &page);
    let identity = chunked_response(
        &format!("HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n{ANNOUNCED}"),
        &page,
        TRAILERS,
    );
    let gzipped = chunked_response(
        &format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-encoding: gzip\r\n{ANNOUNCED}"
        ),
        &gz,
        TRAILERS,
    );
    // (origin response, request's Accept-Encoding, what the client reads, recoded)
    let cases: [(&[u8], &str, &[u8], bool); 4] = [
        (&identity, "gzip", &page, true),
        (&gzipped, "identity", &page, true),
        (&identity, "identity", &page, false),
        (&gzipped, "gzip", &gz, false),
    ];
    for (response, accept, expected, recoded) in cases {
        let origin = RawOrigin::start(response.to_vec()).await;
        let proxy = Proxy::start(vec![upstream(origin.addr)], |_| {}).await;
        let request = format!(
            "GET /t HTTP/1.1\r\nHost: x\r\nAccept-Encoding: {accept}\r\nTE: trailers\r\n\
             Connection: close\r\n\r\n"
        );
        let raw = raw_exchange(proxy.addr, request.as_bytes(), LIMIT).await;
        let (head, body) = split_head(&raw);
        let case = format!("accept {accept}, recoded {recoded}:\n{head}");
        assert!(head.starts_with("http/1.1 200"), "{case}");
        let (data, trailers, ended) = dechunk(body);
        assert!(ended, "{case}");
        let data = if head.contains("content-encoding: gzip") && recoded {
            gunzip(&data)
        } else {
            data
        };
        assert_eq!(data, expected, "{case}");
        assert!(trailers.contains("x-checksum: 42"), "{case}\n{trailers}");
        for digest in ["content-digest", "repr-digest", "content-md5"] {
            assert_eq!(trailers.contains(digest), !recoded, "{case}\n{trailers}");
            let announced = head
                .lines()
                .any(|line| line.starts_with("trailer:") && line.contains(digest));
            assert_eq!(announced, !recoded, "{case}");
        }
    }
}

/// The `ETag` and `Vary` lines of a raw response head (lowercased by [`split_head`]), sorted.
fn validators(head: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = head
        .lines()
        .filter(|line| line.starts_with("etag:") || line.starts_with("vary:"))
        .collect();
    lines.sort_unstable();
    lines
}

#[tokio::test]
async fn a_304_carries_the_etag_and_vary_of_the_200_it_stands_for() {
    let page = html(20_000);
    let mut ok = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\netag: \"v7\"\r\nvary: Cookie\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        page.len()
    )
    .into_bytes();
    ok.extend_from_slice(&page);
    // As most origins write it: the validator fields, no Content-Type.
    let not_modified = b"HTTP/1.1 304 Not Modified\r\netag: \"v7\"\r\nvary: Cookie\r\n\
                         connection: close\r\n\r\n"
        .to_vec();
    let mut heads = Vec::new();
    for (response, conditional) in [(ok, ""), (not_modified, "If-None-Match: W/\"v7\"\r\n")] {
        let origin = RawOrigin::start(response).await;
        let proxy = Proxy::start(vec![upstream(origin.addr)], |_| {}).await;
        let request = format!(
            "GET /page HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n{conditional}\
             Connection: close\r\n\r\n"
        );
        let raw = raw_exchange(proxy.addr, request.as_bytes(), LIMIT).await;
        heads.push(split_head(&raw).0);
    }
    assert!(heads[0].starts_with("http/1.1 200"), "{}", heads[0]);
    assert!(heads[0].contains("content-encoding: gzip"), "{}", heads[0]);
    assert!(heads[1].starts_with("http/1.1 304"), "{}", heads[1]);
    assert_eq!(
        validators(&heads[0]),
        ["etag: w/\"v7\"", "vary: cookie, accept-encoding"]
    );
    assert_eq!(validators(&heads[1]), validators(&heads[0]), "{}", heads[1]);
}

#[tokio::test]
async fn a_304_to_a_client_holding_a_strong_tag_keeps_it_strong() {
    // Chrome's media requests take no coding: the 200 passes with its strong tag, and the
    // client revalidates with it. A 304 that weakened it (for want of ruling out a decoded
    // gzip 200) would give the browser's stored response the weak tag, and `If-Range` on it
    // (a strong comparison) would turn every resumed download into a whole one.
    let not_modified = b"HTTP/1.1 304 Not Modified\r\netag: \"v7\"\r\nconnection: close\r\n\r\n";
    let etag_of = |conditional: &str| {
        let request = format!(
            "GET /movie.mp4 HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity;q=1, *;q=0\r\n\
             {conditional}Connection: close\r\n\r\n"
        );
        async move {
            let origin = RawOrigin::start(not_modified.to_vec()).await;
            let proxy = Proxy::start(vec![upstream(origin.addr)], |_| {}).await;
            let raw = raw_exchange(proxy.addr, request.as_bytes(), LIMIT).await;
            let head = split_head(&raw).0;
            assert!(head.starts_with("http/1.1 304"), "{head}");
            head.lines()
                .find_map(|line| line.strip_prefix("etag: "))
                .map(str::to_owned)
        }
    };
    assert_eq!(
        etag_of("If-None-Match: \"v7\"\r\n").await.as_deref(),
        Some("\"v7\"")
    );
    // A weak tag (or none) may stand for a decoded body: weak stays the safe side.
    assert_eq!(
        etag_of("If-None-Match: W/\"v7\", \"v6\"\r\n")
            .await
            .as_deref(),
        Some("w/\"v7\"")
    );
    assert_eq!(
        etag_of("If-Modified-Since: Thu, 01 Jan 2026 00:00:00 GMT\r\n")
            .await
            .as_deref(),
        Some("w/\"v7\"")
    );
}

/// A gzip response of `body` (coded as given), framed by `Content-Length`.
fn gzip_response(body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-encoding: gzip\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// A request from a client that does not accept gzip.
fn identity_request(path: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n"
    )
}

#[tokio::test]
async fn a_gzip_body_that_does_not_decode_before_the_head_gets_502() {
    let origin = RawOrigin::start(gzip_response(b"this is not gzip at all")).await;
    let proxy = Proxy::start(vec![upstream(origin.addr)], |_| {}).await;
    let raw = raw_exchange(proxy.addr, identity_request("/").as_bytes(), LIMIT).await;
    assert!(
        raw.starts_with(b"HTTP/1.1 502 "),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    assert_eq!(Proxy::count(&proxy.stats.errors.upstream), 1);
}

#[tokio::test]
async fn an_empty_body_labelled_gzip_is_empty_decoded_not_a_502() {
    let origin = RawOrigin::start(gzip_response(b"")).await;
    let proxy = Proxy::start(vec![upstream(origin.addr)], |_| {}).await;
    let raw = raw_exchange(proxy.addr, identity_request("/").as_bytes(), LIMIT).await;
    let (head, body) = split_head(&raw);
    assert!(head.starts_with("http/1.1 200 "), "{head}");
    assert!(!head.contains("content-encoding"), "{head}");
    // Nothing in it: an empty chunked body, or none at all.
    assert!(body.is_empty() || body == b"0\r\n\r\n", "{body:?}");
    assert_eq!(Proxy::count(&proxy.stats.errors.upstream), 0);
}

#[tokio::test]
async fn hitting_the_gunzip_cap_before_the_head_gets_502_logged_as_the_cap() {
    let captured = crate::logging::captured();
    let gz = zipwire_codec::compress(Format::Gzip, Level::DEFAULT, &html(200_000));
    let origin = RawOrigin::start(gzip_response(&gz)).await;
    let proxy = Proxy::start(vec![upstream(origin.addr)], |config| {
        config.compression.gunzip_max_output = 10_000;
    })
    .await;
    let path = "/gunzip-capped";
    let raw = raw_exchange(proxy.addr, identity_request(path).as_bytes(), LIMIT).await;
    assert!(
        raw.starts_with(b"HTTP/1.1 502 "),
        "{}",
        String::from_utf8_lossy(&raw)
    );
    let log = String::from_utf8(captured.0.lock().expect("not poisoned").clone()).expect("utf-8");
    // The warning names no path, but its connection span names the client's peer, as the
    // access line does.
    let access = log
        .lines()
        .find(|line| line.contains(&format!("path={path} ")))
        .unwrap_or_else(|| panic!("no access line for {path}:\n{log}"));
    let peer = access
        .split_whitespace()
        .find(|word| word.starts_with("peer="))
        .expect("a connection span");
    let line = log
        .lines()
        .find(|line| line.contains(peer) && line.contains("upstream failed"))
        .unwrap_or_else(|| panic!("no warning for {path}:\n{log}"));
    assert!(
        line.contains("decodes past compression.gunzip_max_output (10000 bytes)"),
        "{line}"
    );
    assert!(!line.contains("does not decode"), "{line}");
}

#[tokio::test]
async fn a_gzip_body_failing_mid_stream_never_looks_complete() {
    let page = html(300_000);
    let mut gz = zipwire_codec::compress(Format::Gzip, Level::DEFAULT, &page);
    // The CRC in the gzip trailer: every byte decodes, and the check fails at the very end.
    let crc = gz.len() - 8;
    gz[crc] ^= 0xff;
    let origin = RawOrigin::start(gzip_response(&gz)).await;
    let proxy = Proxy::start(vec![upstream(origin.addr)], |_| {}).await;
    let raw = raw_exchange(proxy.addr, identity_request("/").as_bytes(), LIMIT).await;
    let (head, body) = split_head(&raw);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let (data, _, ended) = dechunk(body);
    assert!(
        !ended,
        "a chunked body ended cleanly after a decode failure"
    );
    assert!(
        page.starts_with(&data),
        "what was sent is a prefix of the page"
    );
}

/// A gzip bomb from the origin (50 MB of zeros in about 50 KB) for a client without gzip: the
/// decoded body goes out until `gunzip_max_output`, then the connection is cut, and the client
/// never receives a complete-looking body or more than the cap.
#[tokio::test]
async fn a_gunzip_bomb_is_cut_at_the_cap_and_never_looks_complete() {
    const CAP: u64 = 4 << 20;
    let bomb = zipwire_codec::compress(Format::Gzip, Level::DEFAULT, &vec![0; 50 << 20]);
    assert!(bomb.len() < 100_000, "{} bytes", bomb.len());
    let origin = RawOrigin::start(gzip_response(&bomb)).await;
    let proxy = Proxy::start(vec![upstream(origin.addr)], |config| {
        config.compression.gunzip_max_output = CAP;
    })
    .await;
    let raw = raw_exchange(proxy.addr, identity_request("/bomb").as_bytes(), LIMIT).await;
    let (head, body) = split_head(&raw);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let (data, _, ended) = dechunk(body);
    assert!(!ended, "the capped body ended cleanly");
    assert!(
        data.len() as u64 <= CAP,
        "{} bytes past the cap",
        data.len()
    );
    assert!(data.iter().all(|&b| b == 0));
    assert!(
        data.len() > 64 * 1024,
        "the head went out with the first part"
    );
}
