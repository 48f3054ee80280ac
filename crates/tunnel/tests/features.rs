//! The tunnel's operational features end to end on loopback: the entropy skip, the CPU
//! budget, the memory cap, codec negotiation with a peer that lacks zstd, TLS 1.3 only, and
//! one compression window per forwarded connection.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zipwire_adapt::{Budget, BudgetSpec};
use zipwire_tunnel::blocks::BlockDecoder;
use zipwire_tunnel::endpoint::Server;
use zipwire_tunnel::frame::{self, Codec, DataHeader, Head, Method};
use zipwire_tunnel::handshake::{self, Hello, ACCEPT_DEFLATE};
use zipwire_tunnel::policy::{Choice, RawReason};
use zipwire_tunnel::relay::Shared;
use zipwire_tunnel::stats::Stats;
use zipwire_tunnel::tls;

use support::*;

async fn start_server(keys: &Keys, target: SocketAddr, shared: Shared) -> (SocketAddr, Arc<Stats>) {
    let server = Server::bind(
        local(),
        target.to_string(),
        keys.server.clone(),
        keys.token.clone(),
        shared,
    )
    .await
    .unwrap();
    let addr = server.local_addr().unwrap();
    let stats = server.stats();
    tokio::spawn(server.run());
    (addr, stats)
}

/// Random lowercase letters: about 4.7 bits per byte, so a block compresses to some 60% on
/// its own, and to almost nothing against a window that already holds the same bytes.
fn letters(n: usize, seed: u32) -> Vec<u8> {
    let mut rng = xorshift(seed);
    (0..n).map(|_| b'a' + (rng() >> 8) as u8 % 26).collect()
}

/// Repetitive text.
fn text(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| b"tunnel text compresses well, "[i % 29] ^ (i / 4099 % 2) as u8)
        .collect()
}

fn raw_reason(stats: &Stats, reason: RawReason) -> u64 {
    stats
        .outgoing()
        .raw_reasons
        .get(&reason)
        .copied()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_go_raw_for_their_entropy_both_ways() {
    let keys = keys();
    let target = echo_target().await;
    let (server, server_stats) = start_server(&keys, target, shared(Choice::Auto)).await;
    let (client, client_stats) = start_client(&keys, server, shared(Choice::Auto)).await;
    let mut app = TcpStream::connect(client).await.unwrap();
    let data = noise(4 << 20, 7);
    round_trip(&mut app, &data).await;
    for (end, stats) in [("client", &client_stats), ("server", &server_stats)] {
        let out = stats.outgoing();
        let entropy = raw_reason(stats, RawReason::Entropy);
        let blocks: u64 = out.methods.values().map(|c| c.blocks).sum();
        // Small pieces may be tried (the sampled entropy needs a few kilobytes), but the
        // bulk goes raw for its entropy, untried.
        assert!(
            entropy * 4 >= blocks * 3 && entropy >= 16,
            "{end}: {entropy} of {blocks} frames raw for entropy:\n{}",
            stats.report()
        );
        assert!(
            out.wire() <= out.raw() + out.raw() / 50,
            "{end}:\n{}",
            stats.report()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_cpu_budget_sends_compressible_traffic_raw() {
    let keys = keys();
    let target = echo_target().await;
    let (server, _) = start_server(&keys, target, shared(Choice::Auto)).await;
    // 0.01% of a core over a second is 100 µs: the first compressed blocks spend it (and,
    // on a machine so loaded that the transfer outlasts the window, one more per second).
    let budget = Budget::new(BudgetSpec {
        max_cpu: Some(0.01),
        ..BudgetSpec::default()
    });
    let (client, stats) = start_client(
        &keys,
        server,
        Shared::new(Choice::Auto, BLOCK, Some(budget)),
    )
    .await;
    let mut app = TcpStream::connect(client).await.unwrap();
    let data = text(4 << 20);
    round_trip(&mut app, &data).await;
    let out = stats.outgoing();
    let capped = raw_reason(&stats, RawReason::CpuCap);
    let blocks: u64 = out.methods.values().map(|c| c.blocks).sum();
    let compressed: u64 = out
        .methods
        .iter()
        .filter(|(m, _)| **m != Method::RAW)
        .map(|(_, c)| c.blocks)
        .sum();
    assert!(
        capped * 2 >= blocks && compressed >= 1 && compressed * 4 <= blocks,
        "{capped} of {blocks} frames raw for the CPU cap, {compressed} compressed:\n{}",
        stats.report()
    );
    // The same traffic without a budget is compressed.
    let (client, stats) = start_client(&keys, server, shared(Choice::Auto)).await;
    let mut app = TcpStream::connect(client).await.unwrap();
    round_trip(&mut app, &data).await;
    assert_eq!(raw_reason(&stats, RawReason::CpuCap), 0);
    assert!(stats.outgoing().wire() * 4 < stats.outgoing().raw());
}

/// Opens a tunnel connection by hand with a hello that accepts `accepts`.
async fn hand_tunnel(
    keys: &Keys,
    server: SocketAddr,
    accepts: u8,
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(server).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(tls::client_config(keys.pin).unwrap());
    let mut stream = connector.connect(tls::server_name(), tcp).await.unwrap();
    let hello = Hello {
        accepts,
        token: keys.token.clone(),
    };
    stream.write_all(&hello.to_bytes().unwrap()).await.unwrap();
    handshake::read_reply(&mut stream).await.unwrap();
    stream
}

/// `data` as raw data frames, then an end frame.
fn raw_frames(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in data.chunks(BLOCK) {
        DataHeader {
            method: Method::RAW,
            raw_len: chunk.len() as u32,
            payload_len: chunk.len() as u32,
        }
        .write(&mut out);
        out.extend_from_slice(chunk);
    }
    frame::write_end(&mut out);
    out
}

/// Reads frames until the end frame; returns the methods of the data frames and the bytes
/// they decode to.
async fn read_frames<R: AsyncRead + Unpin>(r: &mut R) -> (Vec<Method>, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut decoder = BlockDecoder::new();
    let (mut methods, mut data) = (Vec::new(), Vec::new());
    loop {
        let parsed = frame::parse_head(&buf).unwrap();
        let Some((head, used)) = parsed else {
            let n = tokio::time::timeout(Duration::from_secs(30), r.read(&mut chunk))
                .await
                .expect("no frame within 30 s")
                .unwrap();
            assert!(n > 0, "the server ended without an end frame");
            buf.extend_from_slice(&chunk[..n]);
            continue;
        };
        let header = match head {
            Head::End => return (methods, data),
            Head::Data(header) => header,
            other => panic!("unexpected {other:?}"),
        };
        let len = used + header.payload_len as usize;
        while buf.len() < len {
            let n = r.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the server ended mid-frame");
            buf.extend_from_slice(&chunk[..n]);
        }
        decoder.decode(&header, &buf[used..len], &mut data).unwrap();
        methods.push(header.method);
        buf.drain(..len);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_zstd_never_gets_a_zstd_frame() {
    let keys = keys();
    let target = echo_target().await;
    let data = text(2 << 20);
    let zstd = Method::new(Codec::Zstd, 3).unwrap();
    // The adaptive ladder climbs deflate; a fixed zstd level falls back to raw.
    for (choice, compressed) in [(Choice::Auto, true), (Choice::Fixed(zstd), false)] {
        let (server, _) = start_server(&keys, target, shared(choice.clone())).await;
        let stream = hand_tunnel(&keys, server, ACCEPT_DEFLATE).await;
        let (mut r, mut w) = tokio::io::split(stream);
        let frames = raw_frames(&data);
        let writer = tokio::spawn(async move { w.write_all(&frames).await.map(|()| w) });
        let (methods, back) = read_frames(&mut r).await;
        let _w = writer.await.unwrap().unwrap();
        assert!(back == data, "{choice:?}: the echo differs");
        assert!(
            methods.iter().all(|m| m.codec != Codec::Zstd),
            "{choice:?}: {methods:?}"
        );
        let deflate = methods.iter().filter(|m| m.codec != Codec::Raw).count();
        assert_eq!(deflate > 0, compressed, "{choice:?}: {methods:?}");
    }
}

/// Accepts any certificate: the test is about protocol versions, not trust.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A client that speaks only `version`.
fn client_speaking(version: &'static rustls::SupportedProtocolVersion) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[version])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls12_only_client_is_refused() {
    let keys = keys();
    let target = echo_target().await;
    let (server, _) = start_server(&keys, target, shared(Choice::Auto)).await;
    let handshake = |version| async move {
        let connector = tokio_rustls::TlsConnector::from(Arc::new(client_speaking(version)));
        let tcp = TcpStream::connect(server).await.unwrap();
        tokio::time::timeout(
            Duration::from_secs(20),
            connector.connect(tls::server_name(), tcp),
        )
        .await
        .expect("no TLS outcome within 20 s")
    };
    // The same client at TLS 1.3 gets in: what refuses the other is the version alone.
    let tls13 = handshake(&rustls::version::TLS13).await;
    assert!(tls13.is_ok(), "{:?}", tls13.err());
    let tls12 = handshake(&rustls::version::TLS12).await;
    let error = tls12.expect_err("a TLS 1.2 client got in");
    assert!(
        error.to_string().contains("ProtocolVersion"),
        "refused, but not for its version: {error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_two_forwarded_connections_share_a_compression_window() {
    let keys = keys();
    let target = echo_target().await;
    // zstd keeps its window across the blocks of a connection.
    let zstd = Choice::Fixed(Method::new(Codec::Zstd, 3).unwrap());
    let (server, _) = start_server(&keys, target, shared(zstd.clone())).await;
    let (client, stats) = start_client(&keys, server, shared(zstd)).await;
    let wire = || stats.outgoing().wire();
    let piece = letters(96 * 1024, 3);
    let mut first = TcpStream::connect(client).await.unwrap();
    let mut second = TcpStream::connect(client).await.unwrap();
    // The first connection sends the piece twice: the second time its window holds it.
    let before = wire();
    round_trip(&mut first, &piece).await;
    let fresh = wire() - before;
    let before = wire();
    round_trip(&mut first, &piece).await;
    let repeated = wire() - before;
    assert!(
        repeated * 10 < fresh,
        "the window did not help within one connection: {repeated} after {fresh} bytes"
    );
    // The other connection, open all along, sends the same piece: no better than fresh.
    let before = wire();
    round_trip(&mut second, &piece).await;
    let other = wire() - before;
    assert!(
        other * 10 >= fresh * 9,
        "the second connection sent {other} bytes where the first sent {fresh}: it saw the \
         first one's window"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_cap_sends_a_second_zstd_19_stream_through_stateless_deflate_and_is_given_back()
{
    let keys = keys();
    let target = echo_target().await;
    let (server, _) = start_server(&keys, target, shared(Choice::Auto)).await;
    // zstd-19 holds 94 MB of tables: a 150 MB cap has room for one such stream, and the
    // second's share (75 MB) is too small for it. The second compresses with the stateless
    // deflate encoder instead, whose scratch fits in what is left: its blocks must not go
    // raw.
    let zstd19 = Choice::Fixed(Method::new(Codec::Zstd, 19).unwrap());
    let cap = 150 << 20;
    let (client, stats) =
        start_client(&keys, server, shared(zstd19).with_max_memory(Some(cap))).await;
    let data = text(1 << 20);
    let mut first = TcpStream::connect(client).await.unwrap();
    round_trip(&mut first, &data).await;
    let memory = stats.memory().clone();
    let held = memory.in_use();
    assert!(
        (90_000_000..=cap).contains(&held) && memory.compressing() == 1,
        "{memory:?}"
    );
    let mut second = TcpStream::connect(client).await.unwrap();
    round_trip(&mut second, &data).await;
    let blocks = |method: Method| {
        stats
            .outgoing()
            .methods
            .get(&method)
            .map_or(0, |c| c.blocks)
    };
    let (zstd19, deflate1) = (
        Method::new(Codec::Zstd, 19).unwrap(),
        Method::new(Codec::Deflate, 1).unwrap(),
    );
    assert!(
        blocks(zstd19) >= 8 && blocks(deflate1) >= 8,
        "the first stream at zstd-19, the second at deflate-1:\n{}",
        stats.report()
    );
    assert_eq!(raw_reason(&stats, RawReason::MemoryCap), 0);
    assert!(memory.in_use() <= cap, "{memory:?}");
    // Both gone: every byte is given back.
    drop((first, second));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while memory.in_use() > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        (memory.in_use(), memory.compressing()),
        (0, 0),
        "{memory:?}"
    );
    assert!(stats.to_json(Duration::ZERO).contains("\"mem-cap\":"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direction_that_ended_gives_its_decoder_memory_back_at_once() {
    // A target that sends a body and closes: the client's application reads it to its end
    // and keeps its own side open, as a client that sends nothing more but has not closed.
    let listener = tokio::net::TcpListener::bind(local()).await.unwrap();
    let target = listener.local_addr().unwrap();
    let body = text(2 << 20);
    let sent = body.clone();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        stream.write_all(&sent).await.unwrap();
        stream.shutdown().await.unwrap();
    });
    let keys = keys();
    let zstd3 = Choice::Fixed(Method::new(Codec::Zstd, 3).unwrap());
    let (server, _) = start_server(&keys, target, shared(zstd3)).await;
    let (client, stats) = start_client(&keys, server, shared(Choice::Auto)).await;
    let mut app = TcpStream::connect(client).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), app.read_to_end(&mut got))
        .await
        .expect("the body within 30 s")
        .unwrap();
    assert!(got == body);
    assert!(stats
        .incoming()
        .methods
        .keys()
        .any(|m| m.codec == Codec::Zstd));
    // The zstd window is gone while the connection stays open, not held until the
    // application closes.
    let memory = stats.memory().clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while memory.in_use() > 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(memory.in_use(), 0, "{memory:?}");
    drop(app);
}
