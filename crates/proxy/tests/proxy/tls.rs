//! TLS termination: versions and suites, ALPN, SNI, resumption, both kinds of listener at
//! once, HSTS, certificate reloads and the key-permission warning.

use std::sync::Arc;
use std::time::Duration;

use rustls::{HandshakeKind, ProtocolVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::logging::captured;
use crate::support::*;
use crate::tls_support::*;

/// Reads what the server sends until it closes the connection (or 5 s pass).
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
    match read {
        Ok(Ok(_)) => out,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => out,
        Ok(Err(e)) => panic!("reading: {e}"),
        Err(_) => panic!("the proxy did not close the connection; got {out:02x?}"),
    }
}

#[tokio::test]
async fn tls13_and_tls12_serve_compressed_bodies_that_decode_to_the_origins_bytes() {
    let origin = Origin::start().await;
    let dir = temp_dir("versions");
    let site = site(&dir, "site", &["proxy.test"]);
    let proxy = TlsProxy::start(origin.upstream(), &site, |_| {}).await;
    for (version, expected) in [
        (&rustls::version::TLS13, ProtocolVersion::TLSv1_3),
        (&rustls::version::TLS12, ProtocolVersion::TLSv1_2),
    ] {
        let config = client_config(&[version], &[b"http/1.1"]);
        let stream = connect(proxy.addr(), config, "proxy.test")
            .await
            .expect("handshake");
        let session = stream.get_ref().1;
        assert_eq!(session.protocol_version(), Some(expected));
        let suite = session.negotiated_cipher_suite().expect("a suite");
        let name = format!("{:?}", suite.suite());
        // Forward-secret AEAD: TLS 1.3 suites are; TLS 1.2 ones must be ECDHE with GCM or
        // ChaCha20-Poly1305.
        assert!(
            name.starts_with("TLS13_") || name.starts_with("TLS_ECDHE_"),
            "{name}"
        );
        assert!(
            name.contains("GCM") || name.contains("CHACHA20_POLY1305"),
            "{name}"
        );
        assert_eq!(session.alpn_protocol(), Some(&b"http/1.1"[..]));
        assert_eq!(shown(&stream), site.der);

        let (head, body) = get(stream, "/page.html", &[("accept-encoding", "gzip")]).await;
        assert_eq!(head.status, 200);
        assert_eq!(head.headers["content-encoding"], "gzip");
        assert!(body.len() < 50_000 / 3, "compressed: {} bytes", body.len());
        assert_eq!(gunzip(&body), html(50_000), "{expected:?}");
    }
    assert_eq!(Proxy::count(&proxy.stats.tls_handshakes), 2);
    assert_eq!(Proxy::count(&proxy.stats.tls_handshake_failures), 0);
    assert_eq!(Proxy::count(&proxy.stats.compressed), 2);
}

#[tokio::test]
async fn alpn_offers_h2_first_then_http11() {
    let origin = Origin::start().await;
    let dir = temp_dir("alpn");
    let site = site(&dir, "site", &["proxy.test"]);
    let proxy = TlsProxy::start(origin.upstream(), &site, |_| {}).await;
    type Row<'a> = (&'a [&'a [u8]], Option<&'a [u8]>);
    let rows: &[Row] = &[
        // The server's preference wins (RFC 7301 §3.2), whatever the client's order.
        (&[b"http/1.1", b"h2"], Some(b"h2")),
        (&[b"h2"], Some(b"h2")),
        (&[b"http/1.1"], Some(b"http/1.1")),
        (&[b"http/1.0", b"http/1.1"], Some(b"http/1.1")),
        // `curl --http1.0`: taken, not refused with `no_application_protocol`.
        (&[b"http/1.0"], Some(b"http/1.0")),
        (&[], None),
    ];
    for (offered, expected) in rows {
        let config = client_config(rustls::DEFAULT_VERSIONS, offered);
        let stream = connect(proxy.addr(), config, "proxy.test")
            .await
            .expect("handshake");
        assert_eq!(stream.get_ref().1.alpn_protocol(), *expected, "{offered:?}");
    }
    // A client without ALPN speaks HTTP/1.1.
    let config = client_config(rustls::DEFAULT_VERSIONS, &[]);
    let stream = connect(proxy.addr(), config, "proxy.test")
        .await
        .expect("handshake");
    let (head, _) = get(stream, "/small.txt", &[]).await;
    assert_eq!(head.status, 200);
}

#[tokio::test]
async fn sni_picks_the_certificate_that_names_the_host() {
    let origin = Origin::start().await;
    let dir = temp_dir("sni");
    let default = site(&dir, "default", &["default.test"]);
    let a = site(&dir, "a", &["a.test", "www.a.test"]);
    let b = site(&dir, "b", &["*.b.test"]);
    let certificates = vec![a.files.clone(), b.files.clone()];
    let proxy = TlsProxy::start(origin.upstream(), &default, |config| {
        config.tls.certificates = certificates;
    })
    .await;
    let rows: &[(&str, &[u8])] = &[
        ("a.test", &a.der),
        ("www.a.test", &a.der),
        ("x.b.test", &b.der),
        ("default.test", &default.der),
        // A name no certificate has, and no SNI at all (an IP address is not sent).
        ("other.test", &default.der),
        ("127.0.0.1", &default.der),
    ];
    for (sni, expected) in rows {
        let stream = connect(proxy.addr(), http11_client(), sni)
            .await
            .expect("handshake");
        assert!(shown(&stream) == *expected, "{sni}: another certificate");
    }
    // Without a default, the first certificate is the fallback.
    let proxy = TlsProxy::start(origin.upstream(), &a, |config| {
        config.tls.default_certificate = None;
        config.tls.certificates = vec![b.files.clone(), a.files.clone()];
    })
    .await;
    let stream = connect(proxy.addr(), http11_client(), "other.test")
        .await
        .expect("handshake");
    assert!(shown(&stream) == b.der, "the first certificate");
    let stream = connect(proxy.addr(), http11_client(), "a.test")
        .await
        .expect("handshake");
    assert!(shown(&stream) == a.der, "a.test");
}

#[tokio::test]
async fn an_exact_name_wins_over_a_wildcard_and_a_key_the_client_can_use_is_chosen() {
    let origin = Origin::start().await;
    let dir = temp_dir("sni-order");
    let default = site(&dir, "default", &["default.test"]);
    let wild = site(&dir, "wild", &["*.b.test"]);
    let exact = site(&dir, "exact", &["x.b.test"]);
    // The same name twice, Ed25519 first: a client that takes only ECDSA gets the second.
    let edwards = ed25519_site(&dir, "edwards", &["a.test"]);
    let ecdsa = site(&dir, "ecdsa", &["a.test"]);
    let certificates = vec![
        wild.files.clone(),
        exact.files.clone(),
        edwards.files.clone(),
        ecdsa.files.clone(),
    ];
    let proxy = TlsProxy::start(origin.upstream(), &default, |config| {
        config.tls.certificates = certificates;
    })
    .await;
    let rows: &[(&str, Arc<rustls::ClientConfig>, &[u8])] = &[
        ("x.b.test", http11_client(), &exact.der),
        ("y.b.test", http11_client(), &wild.der),
        ("a.test", http11_client(), &edwards.der),
        ("a.test", ecdsa_only_client(), &ecdsa.der),
    ];
    for (sni, client, expected) in rows {
        let stream = connect(proxy.addr(), client.clone(), sni)
            .await
            .expect("handshake");
        assert!(shown(&stream) == *expected, "{sni}: another certificate");
    }
}

#[tokio::test]
async fn old_versions_and_weak_suites_are_refused() {
    let origin = Origin::start().await;
    let dir = temp_dir("refused");
    let site = site(&dir, "site", &["proxy.test"]);
    let proxy = TlsProxy::start(origin.upstream(), &site, |_| {}).await;
    const STRONG: &[u16] = &[0xc02b, 0xc02f, 0xcca8, 0xcca9, 0x1301];
    let rows: &[(&str, Vec<u8>, u8)] = &[
        // TLS 1.0 and 1.1 with good suites: protocol_version (RFC 8446 §6.2: alert 70).
        ("TLS 1.0", client_hello(0x0301, STRONG), 70),
        ("TLS 1.1", client_hello(0x0302, STRONG), 70),
        // TLS 1.2 offering only what has no forward secrecy or no AEAD: RSA key transport
        // (AES-GCM and CBC), ECDHE with CBC, 3DES, RC4: handshake_failure (40).
        (
            "TLS 1.2, weak suites",
            client_hello(
                0x0303,
                &[
                    0x009c, 0x002f, 0x0035, 0xc013, 0xc014, 0xc027, 0x000a, 0x0005,
                ],
            ),
            40,
        ),
    ];
    for (what, hello, alert) in rows {
        let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
        stream.write_all(hello).await.expect("send the hello");
        let answer = read_until_closed(&mut stream).await;
        // One alert record: type 21, then a fatal (2) alert with its description.
        assert!(answer.len() >= 7, "{what}: {answer:02x?}");
        assert_eq!(
            answer[0], 0x15,
            "{what}: an alert record, got {answer:02x?}"
        );
        assert_eq!(&answer[5..7], &[2, *alert], "{what}: {answer:02x?}");
    }
    assert_eq!(Proxy::count(&proxy.stats.tls_handshake_failures), 3);
    // And a good client still gets in.
    let stream = connect(proxy.addr(), http11_client(), "proxy.test")
        .await
        .expect("handshake");
    let (head, _) = get(stream, "/small.txt", &[]).await;
    assert_eq!(head.status, 200);
}

#[tokio::test]
async fn a_second_connection_resumes_the_first_ones_session() {
    let origin = Origin::start().await;
    let dir = temp_dir("resume");
    let site = site(&dir, "site", &["proxy.test"]);
    let proxy = TlsProxy::start(origin.upstream(), &site, |_| {}).await;
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        // One client configuration: its session store carries the ticket over.
        let config = client_config(&[version], &[b"http/1.1"]);
        let first = connect(proxy.addr(), config.clone(), "proxy.test")
            .await
            .expect("handshake");
        assert_eq!(
            first.get_ref().1.handshake_kind(),
            Some(HandshakeKind::Full)
        );
        // A request, so that the client reads the TLS 1.3 tickets sent after the handshake.
        let (head, _) = get(first, "/small.txt", &[]).await;
        assert_eq!(head.status, 200);
        let second = connect(proxy.addr(), config, "proxy.test")
            .await
            .expect("handshake");
        assert_eq!(
            second.get_ref().1.handshake_kind(),
            Some(HandshakeKind::Resumed),
            "{version:?}"
        );
        let (head, _) = get(second, "/small.txt", &[]).await;
        assert_eq!(head.status, 200);
    }
}

#[tokio::test]
async fn cleartext_and_tls_listeners_serve_at_once_and_hsts_is_on_tls_only() {
    let origin = Origin::start().await;
    let dir = temp_dir("both");
    let site = site(&dir, "site", &["proxy.test"]);
    const HSTS: &str = "max-age=31536000; includeSubDomains";
    let proxy = TlsProxy::start(origin.upstream(), &site, |config| {
        config.listen = vec!["127.0.0.1:0".parse().expect("valid")];
        config
            .tls
            .listen
            .push("127.0.0.1:0".parse().expect("valid"));
        config.tls.hsts = Some(http::HeaderValue::from_static(HSTS));
    })
    .await;
    assert_eq!((proxy.plain.len(), proxy.tls.len()), (1, 2));

    let plain_url = format!("http://{}/page.html", proxy.plain[0]);
    let (plain_head, plain_body) =
        fetch(&client(), "GET", &plain_url, &[("accept-encoding", "gzip")]).await;
    assert_eq!(plain_head.status, 200);
    // RFC 6797 §7.2: never over cleartext.
    assert!(plain_head
        .headers
        .get("strict-transport-security")
        .is_none());
    assert_eq!(gunzip(&plain_body), html(50_000));

    for addr in &proxy.tls {
        let stream = connect(*addr, http11_client(), "proxy.test")
            .await
            .expect("handshake");
        let (head, body) = get(stream, "/page.html", &[("accept-encoding", "gzip")]).await;
        assert_eq!(head.headers["strict-transport-security"], HSTS);
        assert_eq!(gunzip(&body), html(50_000));
        // Whatever the status.
        let stream = connect(*addr, http11_client(), "proxy.test")
            .await
            .expect("handshake");
        let (head, _) = get(stream, "/missing", &[]).await;
        assert_eq!(head.status, 404);
        assert_eq!(head.headers["strict-transport-security"], HSTS);
    }
    assert_eq!(Proxy::count(&proxy.stats.connections), 5);
    assert_eq!(Proxy::count(&proxy.stats.tls_handshakes), 4);
    assert_eq!(Proxy::count(&proxy.stats.requests), 5);
    proxy.stop().await.expect("a clean stop");
}

#[tokio::test]
async fn reload_serves_a_new_certificate_to_new_connections_and_keeps_a_broken_one_out() {
    let captured = captured();
    let origin = Origin::start().await;
    let dir = temp_dir("reload");
    let site = site(&dir, "site", &["proxy.test"]);
    let proxy = TlsProxy::start(origin.upstream(), &site, |_| {}).await;

    // A connection opened before the reload, kept alive across it.
    let before = connect(proxy.addr(), http11_client(), "proxy.test")
        .await
        .expect("handshake");
    assert!(shown(&before) == site.der);
    let (mut open, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(before))
            .await
            .expect("HTTP/1.1");
    tokio::spawn(connection);
    assert_eq!(send(&mut open, "/small.txt", &[]).await.0.status, 200);

    let renewed = write_site(&site.files, &["proxy.test"]);
    assert!(renewed != site.der);
    proxy.reloader.reload().expect("the new certificate loads");
    let after = connect(proxy.addr(), http11_client(), "proxy.test")
        .await
        .expect("handshake");
    assert!(
        shown(&after) == renewed,
        "new connections get the new certificate"
    );
    assert_eq!(
        send(&mut open, "/small.txt", &[]).await.0.status,
        200,
        "the open one goes on"
    );

    // A broken certificate: refused, the renewed one stays in use.
    std::fs::write(&site.files.cert, "-----BEGIN CERTIFICATE-----\nbroken\n").expect("write");
    let refused = proxy.reloader.reload().expect_err("a broken certificate");
    assert!(
        refused
            .to_string()
            .contains(&site.files.cert.display().to_string()),
        "{refused}"
    );
    let later = connect(proxy.addr(), http11_client(), "proxy.test")
        .await
        .expect("handshake");
    assert!(shown(&later) == renewed, "the certificate in use is kept");
    assert_eq!(send(&mut open, "/small.txt", &[]).await.0.status, 200);

    // A key of another certificate: refused as well.
    let other = crate::tls_support::site(&dir, "other", &["proxy.test"]);
    write_site(&site.files, &["proxy.test"]);
    std::fs::copy(&other.files.key, &site.files.key).expect("copy the other key");
    let mismatch = proxy
        .reloader
        .reload()
        .expect_err("a key of another certificate");
    assert!(
        mismatch.to_string().contains("not the private key of"),
        "{mismatch}"
    );

    let text = String::from_utf8(captured.0.lock().expect("not poisoned").clone()).expect("utf-8");
    let warnings: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("tls certificates not reloaded"))
        .filter(|line| line.contains(&*dir.display().to_string()))
        .collect();
    assert_eq!(warnings.len(), 2, "{text}");
    assert!(text.contains("tls certificates reloaded"), "{text}");
}

#[tokio::test]
async fn a_key_readable_by_others_gets_a_warning() {
    let captured = captured();
    let origin = Origin::start().await;
    let dir = temp_dir("key-mode");
    let exposed = site(&dir, "exposed", &["exposed.test"]);
    let kept = site(&dir, "kept", &["kept.test"]);
    let key = std::fs::read(&exposed.files.key).expect("read the key");
    write_private(&exposed.files.key, &key, 0o644);
    let _proxy = TlsProxy::start(origin.upstream(), &kept, |config| {
        config.tls.certificates = vec![exposed.files.clone()];
    })
    .await;
    let text = String::from_utf8(captured.0.lock().expect("not poisoned").clone()).expect("utf-8");
    let warned = |path: &std::path::Path| {
        text.lines().any(|line| {
            line.contains("WARN")
                && line.contains("readable by others")
                && line.contains(&*path.display().to_string())
        })
    };
    assert!(warned(&exposed.files.key), "{text}");
    assert!(!warned(&kept.files.key), "{text}");
}

/// `X-Forwarded-Proto` says how the client connected and `X-Forwarded-Host` what it asked
/// for; values a client sends in them are replaced, never passed on.
#[tokio::test]
async fn forwarded_proto_and_host_name_the_clients_scheme_and_host() {
    let origin = Origin::start().await;
    let spoofed = [
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "evil.test"),
    ];
    let plain = Proxy::before(&origin).await;
    let (parts, _) = fetch(&client(), "GET", &plain.url("/small.txt"), &spoofed).await;
    assert_eq!(parts.status, 200);
    let seen = origin.last_headers();
    assert_eq!(seen["x-forwarded-proto"], "http");
    assert_eq!(seen["x-forwarded-host"], seen["host"]);
    assert_eq!(seen.get_all("x-forwarded-host").iter().count(), 1);

    let dir = temp_dir("forwarded");
    let site = site(&dir, "site", &["proxy.test"]);
    let proxy = TlsProxy::start(origin.upstream(), &site, |_| {}).await;
    let stream = connect(proxy.addr(), http11_client(), "proxy.test")
        .await
        .expect("handshake");
    let (head, _) = get(stream, "/small.txt", &spoofed[1..]).await;
    assert_eq!(head.status, 200);
    let seen = origin.last_headers();
    assert_eq!(seen["x-forwarded-proto"], "https");
    assert_eq!(seen["x-forwarded-host"], "proxy.test");

    // Both off: nothing added, and what the client sent passes as any field does.
    let off = Proxy::start(vec![origin.upstream()], |config| {
        config.forwarding.x_forwarded_proto = false;
        config.forwarding.x_forwarded_host = false;
    })
    .await;
    fetch(&client(), "GET", &off.url("/small.txt"), &spoofed[1..]).await;
    let seen = origin.last_headers();
    assert!(!seen.contains_key("x-forwarded-proto"));
    assert_eq!(seen["x-forwarded-host"], "evil.test");
}
